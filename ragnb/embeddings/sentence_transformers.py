"""Sentence-transformers backend (offline): a model directory — the bundled all-MiniLM-L6-v2, any local path,
or a name already in the local Hugging Face cache.

Prompts: the model's own (``config_sentence_transformers.json`` → ``prompts``: ``"query"`` for queries,
``"document"``/``"passage"``/``"corpus"`` for documents, as sentence-transformers' ``encode_query`` /
``encode_document`` pick them), unless ``query_prompt`` / ``document_prompt`` override them.

Everything but the vectors is read from the model's files without importing torch: dimension (last Dense
module's ``out_features``, else the pooling config's ``word_embedding_dimension``, else ``hidden_size``),
input limit (``sentence_bert_config.json``), prompts; the fingerprint hashes the directory (content of files
under 1 MB, name and size of larger ones, i.e. the weights), and the precision when it is not float32.

Device: the best one present (CUDA, then Apple MPS, else the CPU) or ``RAGNB_EMBEDDING_DEVICE``; precision:
``RAGNB_EMBEDDING_DTYPE`` (:mod:`ragnb.embeddings.devices`). Both are resolved when the model loads.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ragnb import config
from ragnb.embeddings.base import CachedEncoder, digest
from ragnb.embeddings.devices import batch_size_for, check_dtype, resolve_device, torch_devices

# Offline before transformers / huggingface_hub are imported anywhere.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_SMALL_FILE = 1 << 20
_DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def directory_content_id(folder: Path) -> str:
    """sha256 over the model directory: relative path + content of files < 1 MB, relative path + size of
    larger ones (weights: hashing 90 MB on every start would cost more than the warm run it guards)."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        rel = path.relative_to(folder).as_posix()
        if rel.startswith(".") or rel.endswith(".md"):
            continue  # git metadata and model cards do not change vectors
        size = path.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if size < _SMALL_FILE:
            h.update(path.read_bytes())
    return h.hexdigest()


def model_facts(folder: Path) -> dict[str, Any]:
    """Dimension, input limit and prompts of a sentence-transformers directory, read from its config files."""
    modules = _read_json(folder / "modules.json")
    modules = modules if isinstance(modules, list) else []
    dim = None
    for mod in modules:
        cfg = _read_json(folder / mod.get("path", "") / "config.json") if mod.get("path") else {}
        if mod.get("type", "").endswith("Dense") and cfg.get("out_features"):
            dim = int(cfg["out_features"])
        elif mod.get("type", "").endswith("Pooling") and cfg.get("word_embedding_dimension") and dim is None:
            dim = int(cfg["word_embedding_dimension"])
    if dim is None:
        dim = _read_json(folder / "config.json").get("hidden_size")
    st_cfg = _read_json(folder / "config_sentence_transformers.json")
    prompts = st_cfg.get("prompts") or {}
    default = st_cfg.get("default_prompt_name")
    query = prompts.get("query", prompts.get(default) if default else None)
    document = next((prompts[n] for n in _DOCUMENT_PROMPT_NAMES if n in prompts),
                    prompts.get(default) if default else None)
    limit = _read_json(folder / "sentence_bert_config.json").get("max_seq_length")
    return {"dim": int(dim) if dim else None, "max_seq_length": int(limit) if limit else None,
            "query_prompt": query or None, "document_prompt": document or None,
            "normalize": any(m.get("type", "").endswith("Normalize") for m in modules)}


class SentenceTransformerEncoder(CachedEncoder):
    """A sentence-transformers model with its recorded name, dimension and input limit, loaded on first miss."""

    backend = "sentence-transformers"

    def __init__(self, name: str, source: str | Path, *, query_prompt: str | None = None,
                 document_prompt: str | None = None, device: str | None = None, dtype: str | None = None) -> None:
        """``device`` / ``dtype``: as ``RAGNB_EMBEDDING_DEVICE`` / ``RAGNB_EMBEDDING_DTYPE`` take them (None: those
        variables)."""
        super().__init__()
        self._sources = (config.EMBEDDING_DEVICE_ENV if device is None else "device",
                         config.EMBEDDING_DTYPE_ENV if dtype is None else "dtype")
        self.requested_device = config.embedding_device() if device is None else config.parse_device(device, "device")
        self.dtype = config.embedding_dtype() if dtype is None else config.parse_dtype(dtype, "dtype")
        if self.requested_device == "cpu":  # refused now, before anything waits for a model to load
            check_dtype(self.dtype, "cpu", self._sources[1])
        self.name = name
        self.source = Path(source)
        if not (self.source / "modules.json").exists() and not (self.source / "config.json").exists():
            raise ValueError(f"embedding model {name!r}: {self.source} is not a sentence-transformers model "
                             "directory (no modules.json / config.json); pass a local model folder, "
                             "'all-MiniLM-L6-v2' or 'multilingual-e5-small'")
        facts = model_facts(self.source)
        self._dim = facts["dim"]
        self._max_seq_length = facts["max_seq_length"]
        self.prompts = {"query": query_prompt if query_prompt is not None else facts["query_prompt"],
                        "document": document_prompt if document_prompt is not None else facts["document_prompt"]}
        self._overrides = {"query": query_prompt, "document": document_prompt}
        self.fingerprint = digest({"backend": self.backend, "model": directory_content_id(self.source),
                                   "query_prompt": self.prompts["query"] or "",
                                   "document_prompt": self.prompts["document"] or "",
                                   "normalize": facts["normalize"],
                                   # float32 adds nothing: fingerprints (and caches) from before it stay valid
                                   **({"dtype": self.dtype} if self.dtype != "float32" else {})})
        self._model: Any = None

    # -- lazily loaded ------------------------------------------------------------------------------

    @property
    def model(self) -> Any:
        """The SentenceTransformer (imports torch on first access)."""
        if self._model is None:
            device = resolve_device(self.requested_device, *torch_devices(), source=self._sources[0])
            check_dtype(self.dtype, device, self._sources[1])
            import torch
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            # transformers draws a "Loading weights" progress bar on stderr, which would land in every report
            hf_logging.disable_progress_bar()
            try:
                self._model = SentenceTransformer(str(self.source), device=device,
                                                  model_kwargs={"dtype": getattr(torch, self.dtype)})
            except OSError as exc:
                raise ValueError(f"embedding model {self.name!r} cannot be loaded from {self.source}: {exc}") from exc
            except RuntimeError as exc:  # torch: this device cannot hold the model (memory, an unsupported dtype)
                raise ValueError(f"embedding model {self.name!r} cannot be loaded on {device} in {self.dtype}: {exc}; "
                                 f"try another {self._sources[0]} or {self._sources[1]}") from exc
            self.device = device
            get_dim = getattr(self._model, "get_embedding_dimension", None) or \
                self._model.get_sentence_embedding_dimension
            loaded = int(get_dim())
            if self._dim is not None and loaded != self._dim:
                raise ValueError(f"embedding model {self.name!r}: config files say {self._dim} dimensions, "
                                 f"the loaded model makes {loaded}; check the model folder {self.source}")
            self._dim = loaded
            self._max_seq_length = int(self._model.max_seq_length)
        return self._model

    @property
    def dim(self) -> int:
        return self._dim if self._dim is not None else int(self.model.get_sentence_embedding_dimension())

    @property
    def max_seq_length(self) -> int:
        return self._max_seq_length if self._max_seq_length is not None else int(self.model.max_seq_length)

    @property
    def max_input_tokens(self) -> int | None:  # type: ignore[override]
        return self.max_seq_length

    def default_batch_size(self) -> int:
        """32 texts per batch on the CPU, 256 on a GPU (loads the model to learn its device)."""
        self.model  # noqa: B018 — the device is known once the model is loaded
        return batch_size_for(self.device or "cpu")

    def _encode_role(self, texts: list[str], role: str, batch_size: int, progress: bool) -> np.ndarray:
        model = self.model
        encode = model.encode_query if role == "query" else model.encode_document
        # Without an override, sentence-transformers picks the model's own prompt for the role.
        out = encode(texts, prompt=self._overrides[role], batch_size=batch_size, show_progress_bar=progress,
                     convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)

    def token_counts(self, texts: list[str]) -> np.ndarray:
        """Tokens per text before truncation (special tokens included), to report silent truncation. Before the
        model is loaded, the folder's ``tokenizer.json`` counts them (the same fast tokenizer, without importing
        torch — a report that only counts tokens loads no model)."""
        if self._model is None and (self.source / "tokenizer.json").exists():
            from tokenizers import Tokenizer

            fast = Tokenizer.from_file(str(self.source / "tokenizer.json"))
            fast.no_truncation()
            fast.no_padding()
            return np.array([len(e.ids) for e in fast.encode_batch(list(texts), add_special_tokens=True)],
                            dtype=np.int64)
        tok = self.model.tokenizer
        # verbose=False: counting long texts is the point, the "longer than maximum" warning is noise.
        enc = tok(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return np.array([len(ids) for ids in enc], dtype=np.int64)
