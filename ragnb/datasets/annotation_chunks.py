"""What a review does to an item's relevant chunks and fixed context (``import-annotation``).

* a corrected ``confluence_url`` → ``relevant_chunk_ids`` = the embedded chunks on the corrected page (URLs
  compared by :func:`ragnb.urls.page_id`, as ``from-real-questions`` does), and the fixed context
  (``chunk_text``, ``context_chunk_ids``, ``chunk_id``) = those chunks in reading order;
* ``is_chunk_ok`` false → the item's ``chunk_id`` leaves the relevant chunks and the context; the other
  chunks of a multi-chunk context stay, and ``chunk_text`` is rebuilt from them;
* ``is_chunk_ok`` and ``is_confluence_url_ok`` both false → every relevant chunk on that page (the page of
  the exported url and of the rejected chunk) leaves;
* an edited ``relevant_chunk_ids`` is used as given (it wins over a corrected url).

Knowing which chunks are on a page needs the corpus (:class:`ChunkLookup`, opened only when a review needs it).
A reviewer's edits are checked first (:func:`check_edits`): a chunk id the reviewer added must be one the file
exported (another item's) or an embedded chunk of the corpus, and a corrected url must be an http(s) address
or have the form of the corpus's own urls (a relative wiki path such as ``ops/vpn.md`` must name one of its
pages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from ragnb.datasets.annotation_csv import Place
from ragnb.datasets.real_questions import CONTEXT_SEPARATOR, _chunks_by_page
from ragnb.datasets.schema import DatasetItem
from ragnb.urls import UNSAFE_URL_SCHEMES, page_id, url_scheme
from ragnb.io import natural_key


@dataclass
class ChunkLookup:
    """The embedded chunks of a corpus: id → url, and their texts on demand."""

    urls: dict[str, str | None]
    text_of: Callable[[list[str]], dict[str, str]]
    name: str = "the corpus"  # for messages: the database it was read from
    _pages: dict[str, list[str]] | None = field(default=None, repr=False)

    @classmethod
    def from_db(cls, db: Any) -> "ChunkLookup":
        from ragnb.datasets.build import chunk_texts, embedded_chunk_urls

        from ragnb.store.schema import table_exists, tables

        urls = embedded_chunk_urls(db) if table_exists(db, tables(db.schema).chunk) else {}
        if not urls:
            raise ValueError(f"{db.display_url}: no embedded chunks; the review corrects urls or rejects pages, which "
                             "needs the corpus — load and embed it (`ragnb load chunks`, `ragnb embed --chunks`) or "
                             "pick it with --corpus")
        return cls(urls, lambda ids: {k: v[1] for k, v in chunk_texts(db, ids).items()}, db.display_url)

    def _page_map(self) -> dict[str, list[str]]:
        if self._pages is None:
            self._pages = _chunks_by_page(self.urls)
        return self._pages

    def page_chunks(self, url: str | None) -> list[str]:
        """The chunks on ``url``'s page in reading order (natural id order)."""
        return list(self._page_map().get(page_id(url), [])) if url else []

    def page_of(self, chunk_id: str | None) -> str | None:
        return page_id(self.urls.get(chunk_id)) if chunk_id else None

    def has_page(self, url: str) -> bool:
        return page_id(url) in self._page_map()

    def example_id(self) -> str | None:
        """The corpus's first chunk id (natural order), to show what its ids look like."""
        return min(self.urls, key=natural_key, default=None)

    def example_url(self, scheme: str | None = None) -> str | None:
        """The url of the first chunk (natural id order) that has one (with ``scheme`` when given)."""
        return next((self.urls[c] for c in sorted(self.urls, key=natural_key)
                     if self.urls[c] and (scheme is None or url_scheme(self.urls[c]) == scheme)), None)


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


def _check_url(url: str, place: Place, chunks: LazyLookup) -> None:
    """A corrected url is an http(s) address with a host, or has the corpus's own form: its scheme (``file:``
    only where the corpus's urls are ``file:``), or for a relative path, one of its pages."""
    text = url.strip()
    fix = "paste the page's address from the browser (https://…)"
    try:
        parts = urlsplit(text)
        page_id(text)
    except ValueError as exc:  # e.g. an unbalanced "[" in the host
        raise ValueError(f"{place.of('confluence_url')}: {url!r} is not a valid url ({exc}); {fix}") from None
    scheme = parts.scheme.lower()
    if any(c.isspace() for c in text) and scheme in ("http", "https"):
        raise ValueError(f"{place.of('confluence_url')}: {url!r} has a space or line break; {fix}")
    if scheme in ("http", "https"):
        if not parts.netloc:
            raise ValueError(f"{place.of('confluence_url')}: {url!r} has no host; {fix}")
        return
    if scheme in UNSAFE_URL_SCHEMES:
        raise ValueError(f"{place.of('confluence_url')}: {url!r} is a {scheme}: url, not a page address; {fix}, "
                         "or restore the exported url")
    lookup = chunks.get(str(place), f"checking the corrected confluence_url {url!r}")
    if scheme and lookup.example_url(scheme) is not None:
        return
    if not scheme and lookup.has_page(text):
        return
    example = lookup.example_url()
    kind = (f"a {scheme}: url, a scheme the corpus's urls do not have" if scheme
            else "not an http(s) url and names no page of the corpus")
    raise ValueError(f"{place.of('confluence_url')}: {url!r} is {kind} (the urls of {lookup.name} look like "
                     f"{example!r}); {fix}, or write a page path of the corpus")


def exported_ids(baseline: dict[str, dict]) -> set[str]:
    """Every chunk id the file's baseline holds (relevant ids and chunk ids of all items, as exported)."""
    return {c for b in baseline.values() for c in [*(b.get("relevant_chunk_ids") or []), b.get("chunk_id")]
            if isinstance(c, str) and c}


def check_edits(it: DatasetItem, base: dict, fixed: dict[str, bool], known: set[str], place: Place,
                chunks: LazyLookup) -> None:
    """Refuse a reviewer's edit that points nowhere: a chunk id added to ``relevant_chunk_ids`` or written as
    ``chunk_id`` that neither the file exported (``known``, e.g. another item's chunk) nor the corpus has, and
    a corrected url that is no page address. ``base``: the item's exported values; ``fixed``: which of
    relevant_chunk_ids / confluence_url were edited."""
    if fixed["confluence_url"]:
        _check_url(it.confluence_url or "", place, chunks)
    added: list[tuple[str, str]] = []
    if fixed["relevant_chunk_ids"]:
        added += [("relevant_chunk_ids", c) for c in it.relevant_chunk_ids if c not in known]
    if it.chunk_id and "chunk_id" in base and it.chunk_id != base["chunk_id"] and it.chunk_id not in known:
        added.append(("chunk_id", it.chunk_id))
    if not added:
        return
    lookup = chunks.get(str(place), f"checking the chunk id {added[0][1]!r} you wrote")
    for name, cid in added:
        if cid not in lookup.urls:
            raise ValueError(f"{place.of(name)}: chunk id {cid!r} is neither in the file's exported ids nor an "
                             f"embedded chunk of {lookup.name} (its ids look like {lookup.example_id()!r}); correct "
                             f"the id (the exported ones are in baseline_{name}), or load and embed that chunk first")
