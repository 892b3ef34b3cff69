"""What a review does to an item's relevant chunks and fixed context (``import-annotation``).

* a corrected ``confluence_url`` → ``relevant_chunk_ids`` = the embedded chunks on the corrected page (URLs
  compared by :func:`ragnb.datasets.urls.page_id`, as ``from-real-questions`` does), and the fixed context
  (``chunk_text``, ``context_chunk_ids``, ``chunk_id``) = those chunks in reading order;
* ``is_chunk_ok`` false → the item's ``chunk_id`` leaves the relevant chunks and the context; the other
  chunks of a multi-chunk context stay, and ``chunk_text`` is rebuilt from them;
* ``is_chunk_ok`` and ``is_confluence_url_ok`` both false → every relevant chunk on that page (the page of
  the exported url and of the rejected chunk) leaves;
* an edited ``relevant_chunk_ids`` is used as given (it wins over a corrected url).

Knowing which chunks are on a page needs the corpus (:class:`ChunkLookup`, opened only when a review needs it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ragnb.datasets.real_questions import CONTEXT_SEPARATOR, _chunks_by_page
from ragnb.datasets.schema import DatasetItem
from ragnb.datasets.urls import page_id


@dataclass
class ChunkLookup:
    """The embedded chunks of a corpus: id → url, and their texts on demand."""

    urls: dict[str, str | None]
    text_of: Callable[[list[str]], dict[str, str]]
    _pages: dict[str, list[str]] | None = field(default=None, repr=False)

    @classmethod
    def from_db(cls, db: Any) -> "ChunkLookup":
        from ragnb.datasets.build import chunk_texts, embedded_chunk_urls

        urls = embedded_chunk_urls(db)
        if not urls:
            raise ValueError(f"{db.display_url}: no embedded chunks; the review corrects urls or rejects pages, which "
                             "needs the corpus — load and embed it (`ragnb load chunks`, `ragnb embed --chunks`) or "
                             "pick it with --corpus")
        return cls(urls, lambda ids: {k: v[1] for k, v in chunk_texts(db, ids).items()})

    def page_chunks(self, url: str | None) -> list[str]:
        """The chunks on ``url``'s page in reading order (natural id order)."""
        if self._pages is None:
            self._pages = _chunks_by_page(self.urls)
        return list(self._pages.get(page_id(url), [])) if url else []

    def page_of(self, chunk_id: str | None) -> str | None:
        return page_id(self.urls.get(chunk_id)) if chunk_id else None


class LazyLookup:
    """Opens the corpus the first time a review needs it (most reviews never do)."""

    def __init__(self, factory: Callable[[], ChunkLookup] | None):
        self._factory, self._lookup = factory, None

    def get(self, where: str, why: str) -> ChunkLookup:
        if self._lookup is None:
            if self._factory is None:
                raise ValueError(f"{where}: {why} needs the corpus's chunks; pass the database that holds them "
                                 "(`ragnb dataset import-annotation --corpus db|demo`)")
            self._lookup = self._factory()
        return self._lookup


def _context_text(it: DatasetItem, ctx: list[str], keep: list[str], chunks: LazyLookup, where: str) -> str:
    """The fixed context of ``keep``: cut from the exported ``chunk_text`` when it splits into one part per
    context chunk, else read from the corpus."""
    parts = (it.chunk_text or "").split(CONTEXT_SEPARATOR)
    if len(parts) == len(ctx):
        return CONTEXT_SEPARATOR.join(parts[ctx.index(c)] for c in keep)
    texts = chunks.get(where, "rebuilding the context without the rejected chunk").text_of(keep)
    return CONTEXT_SEPARATOR.join(texts[c] for c in keep if c in texts)


def _narrow_context(it: DatasetItem, data: dict, new: list[str], chunks: LazyLookup, where: str,
                    adjusted: list[str]) -> None:
    """Keep only relevant chunks in the fixed context; a context chunk that stays relevant keeps its text."""
    ctx = (it.model_extra or {}).get("context_chunk_ids")
    if isinstance(ctx, list) and ctx:
        keep = [c for c in ctx if c in new]
        if keep == ctx:
            return
        data["context_chunk_ids"] = keep
        data["chunk_id"] = keep[0] if keep else (new[0] if new else None)
        if keep:
            data["chunk_text"] = _context_text(it, ctx, keep, chunks, where)
            adjusted.append("context_reduced")
        elif data.pop("chunk_text", None) is not None:
            adjusted.append("chunk_text_cleared")
    elif data.get("chunk_id") not in new:
        # The item's chunk is no longer one of its relevant chunks: its text must not serve as context.
        data["chunk_id"] = new[0] if new else None
        if data.pop("chunk_text", None) is not None:
            adjusted.append("chunk_text_cleared")


def _page_context(data: dict, new: list[str], lookup: ChunkLookup) -> None:
    data["context_chunk_ids"] = list(new)
    data["chunk_id"] = new[0] if new else None
    texts = lookup.text_of(new) if new else {}
    if new:
        data["chunk_text"] = CONTEXT_SEPARATOR.join(texts[c] for c in new if c in texts)
    else:
        data.pop("chunk_text", None)


def review_chunks(it: DatasetItem, rv: dict, ids: list[str], fixed: dict[str, bool], base: dict | None,
                  chunks: LazyLookup, where: str, data: dict, adjusted: list[str], reasons: list[str]) -> None:
    """Apply the chunk and url review of one item to ``data`` (the item's fields); ``ids``: its exported relevant
    chunks; ``fixed``: which of relevant_chunk_ids / confluence_url the reviewer corrected."""
    rejected = {it.chunk_id} if rv["is_chunk_ok"] is False and it.chunk_id else set()
    if fixed["relevant_chunk_ids"]:
        new = list(it.relevant_chunk_ids)
    elif fixed["confluence_url"]:
        lookup = chunks.get(where, f"the corrected confluence_url {it.confluence_url!r}")
        new = [c for c in lookup.page_chunks(it.confluence_url) if c not in rejected]
        data["relevant_chunk_ids"], data["relevance"] = new, None
        adjusted.append("relevant_recomputed" if new else "corrected_url_not_in_corpus")
        _page_context(data, new, lookup)
        return
    elif rejected:
        gone = set(rejected)
        if rv["is_confluence_url_ok"] is False:
            lookup = chunks.get(where, "rejecting a chunk together with its url")
            pages = {lookup.page_of(it.chunk_id), page_id((base or {}).get("confluence_url", it.confluence_url))}
            gone |= {c for c in ids if lookup.page_of(c) in pages - {None}}
        new = [c for c in ids if c not in gone]
        if new != ids:
            adjusted.append("page_removed" if rv["is_confluence_url_ok"] is False else "chunk_removed")
        data["relevant_chunk_ids"] = new
        if isinstance(data.get("relevance"), dict):
            data["relevance"] = {c: g for c, g in data["relevance"].items() if c in new} or None
        if not new:
            reasons.append("chunk_rejected")
    else:
        return
    _narrow_context(it, data, new, chunks, where, adjusted)
