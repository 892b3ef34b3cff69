"""A folder of Markdown/text pages as chunks: YAML front matter and URL templates (``ragnb load chunks DIR``).

A page may start with YAML front matter between two ``---`` lines::

    ---
    url: https://wiki.example.com/display/OPS/VPN
    title: VPN access
    id: ops-vpn
    ---

Three keys are used: ``url`` (the page's URL, stored on every chunk of the page; it wins over
``--url-template``), ``title`` (the ``{title}`` placeholder) and ``id`` (the chunks' ids become ``<id>#<n>``
instead of ``<relative path>#<n>``). Other keys (``tags``, ``author`` …) are read and ignored: the chunk
table has no column for them. The front matter is never part of a chunk's text.

The chunk url of a page without a front-matter ``url`` comes from the URL template, whose placeholders are
:data:`PLACEHOLDERS`; without a template it is the relative path (``ops/vpn.md``), as before.

Refused, naming the file: a front-matter ``url`` (or a template) whose scheme is not http(s) (``javascript:``
… — :func:`ragnb.datasets.urls.check_url`); a key repeated in the front matter; a template that gives two pages
the same URL (one without a placeholder, or ``{stem}`` for two ``vpn.md``): they would be one page to every
URL-based metric. A page without text (an empty file, front matter only) is skipped with a warning; a folder
in which no page has text is an error.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Iterator, NamedTuple
from urllib.parse import quote

import yaml

from ragnb.datasets.urls import check_url
from ragnb.io import load_yaml, read_text
from ragnb.store.loaders import check_id_length, chunk_text

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
FRONT_MATTER_KEYS = ("url", "title", "id")
# Placeholder → what it is, for the help text and the error on an unknown placeholder.
PLACEHOLDERS = {
    "path": "relative path without the suffix, e.g. ops/vpn",
    "relpath": "relative path with the suffix, e.g. ops/vpn.md",
    "stem": "file name without the suffix, e.g. vpn",
    "name": "file name with the suffix, e.g. vpn.md",
    "title": "front-matter title, else the first '# ' heading, else the stem",
    "id": "front-matter id, else the relative path without the suffix",
}
_FENCE = re.compile(r"^---[ \t]*$")
_CLOSE = re.compile(r"^(---|\.\.\.)[ \t]*$")
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def check_url_template(template: str | None) -> str | None:
    """``template`` if every ``{placeholder}`` in it is known; ValueError listing the known ones otherwise."""
    if template is None:
        return None
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"--url-template {template!r}: {exc}; write placeholders as {{path}}, literal braces "
                         "as {{ and }}") from None
    unknown = [n for n in names if n not in PLACEHOLDERS]
    if unknown or not template.strip():
        known = ", ".join(f"{{{k}}} ({v})" for k, v in PLACEHOLDERS.items())
        raise ValueError(f"--url-template {template!r}: unknown placeholder(s) {unknown}; use {known}")
    return check_url(template, "--url-template")


def has_placeholder(template: str) -> bool:
    return any(f is not None for _, f, _, _ in string.Formatter().parse(template))


def split_front_matter(text: str, path: Path) -> tuple[dict, str]:
    """(front matter, body) of a page. No leading ``---`` line: ({}, text). Invalid YAML, an unclosed block or
    a block that is not a mapping: ValueError naming the file and line."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or not _FENCE.match(lines[0].rstrip("\r\n")):
        return {}, text.lstrip("\ufeff")
    end = next((i for i in range(1, len(lines)) if _CLOSE.match(lines[i].rstrip("\r\n"))), None)
    if end is None:
        raise ValueError(f"{path}:1: front matter opened with '---' is never closed; add a '---' line after it "
                         "(or remove the first line if it is not front matter)")
    try:
        meta = load_yaml("".join(lines[1:end]), path, first_line=2)  # after the opening '---'; keys once
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 2  # +1: 0-based, +1: the opening '---'
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context_mark", None)
        if context is not None and context.line + 2 != line:  # e.g. an unclosed [ found only at the end
            problem += f"; {exc.context} at line {context.line + 2}"
        raise ValueError(f"{path}:{line}: front matter is not valid YAML ({problem}); fix the line (quote values "
                         "that contain ': ' or start with special characters)") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ValueError(f"{path}:2: front matter must be 'key: value' lines (url, title, id), got a "
                         f"{type(meta).__name__}")
    for key in FRONT_MATTER_KEYS:
        value = meta.get(key)
        if value is not None and (isinstance(value, (bool, list, dict)) or not str(value).strip()):
            raise ValueError(f"{path}: front matter '{key}' = {value!r} must be one line of text")
    return meta, "".join(lines[end + 1:])


def page_url(rel: Path, meta: dict, body: str, template: str | None) -> str:
    """The chunk url of a page: front-matter ``url``, else ``template`` filled in, else the relative path."""
    if meta.get("url") is not None:
        return str(meta["url"]).strip()  # checked by read_page, which knows the file
    if template is None:
        return rel.as_posix()
    path = rel.with_suffix("").as_posix()
    values = {"path": path, "relpath": rel.as_posix(), "stem": rel.stem, "name": rel.name,
              "title": page_heading(rel, meta, body),
              "id": str(meta["id"]).strip() if meta.get("id") is not None else path}
    # Percent-encoded so that spaces and Cyrillic make a valid URL; matching decodes both sides again.
    return template.format(**{k: quote(v, safe="/") for k, v in values.items()})


def page_heading(rel: Path, meta: dict, body: str) -> str:
    """A page's title: front-matter ``title``, else its first '# ' heading, else the file's stem."""
    if meta.get("title") is not None:
        return str(meta["title"]).strip()
    heading = _HEADING.search(body)
    return heading.group(1).strip() if heading else rel.stem


def folder_titles(folder: str | Path, url_template: str | None = None) -> dict[str, str]:
    """url → title of every page under ``folder``, the url as ``ragnb load chunks`` gives it with the same
    ``url_template`` (:func:`page_url`) and the title by :func:`page_heading` — for reports that name pages."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder of Markdown/text pages; give the folder the wiki was loaded from")
    template = check_url_template(url_template or None)
    titles = {}
    for f in page_files(folder):
        rel = f.relative_to(folder)
        meta, body = split_front_matter(read_text(f, "text file"), f)
        titles[page_url(rel, meta, body, template)] = page_heading(rel, meta, body)
    return titles


def page_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES and p.is_file())
    if not files:
        raise ValueError(f"{folder}: no .md, .markdown or .txt files found")
    return files


class Page(NamedTuple):
    """One page of a folder: its chunk id prefix, url and body text; ``templated``: the url came from the URL
    template; ``front_matter``: the file starts with front matter."""

    prefix: str
    url: str
    body: str
    templated: bool
    front_matter: bool


def read_page(folder: Path, f: Path, template: str | None) -> Page:
    """The :class:`Page` of file ``f``; a front-matter url that is not http(s) or relative is a ValueError."""
    rel = f.relative_to(folder)
    text = read_text(f, "text file")
    meta, body = split_front_matter(text, f)
    prefix = str(meta["id"]).strip() if meta.get("id") is not None else rel.as_posix()
    url = page_url(rel, meta, body, template)
    if meta.get("url") is not None:
        check_url(url, f"{f}: front matter 'url'")
    return Page(prefix, url, body, template is not None and meta.get("url") is None,
                len(body) < len(text.lstrip("\ufeff")))


class FolderRows:
    """The chunks of every .md/.txt file under ``folder``, made a page at a time as they are iterated (a load COPYs
    them a batch at a time: memory holds a page and a batch, not the wiki): id = ``<page id>#n`` (page id =
    front-matter ``id``, else the relative path), url = front-matter ``url``, else ``url_template`` filled in,
    else the relative path (see the module docstring). A page without text (an empty file, front matter only) is
    skipped with a line in ``warnings``; a folder without any text, or a template that gives two pages one URL,
    is an error — raised when it is found, before anything is committed. ``rows``: how many were yielded."""

    def __init__(self, folder: Path, chunk_size: int = 200, overlap: int = 40, url_template: str | None = None,
                 warnings: list[str] | None = None) -> None:
        self.folder, self.chunk_size, self.overlap = folder, chunk_size, overlap
        self.template = check_url_template(url_template)
        self.warnings = warnings if warnings is not None else []
        self.pages: dict[str, tuple[int, Path]] = {}  # page id → (its place in the folder's order, file)
        self.rows = 0

    def __iter__(self) -> Iterator[dict]:
        templated: dict[str, Path] = {}
        empty = []
        files = page_files(self.folder)
        for f in files:
            page = read_page(self.folder, f, self.template)
            if page.prefix in self.pages:
                raise ValueError(f"{f}: front matter 'id' = {page.prefix!r} is also the id of "
                                 f"{self.pages[page.prefix][1]}; page ids must be unique")
            self.pages[page.prefix] = (len(self.pages), f)
            pieces = chunk_text(page.body, self.chunk_size, self.overlap)
            if not pieces:
                empty.append(f"{f}: {'only front matter, no text' if page.front_matter else 'empty file'}")
                continue
            if page.templated:
                _check_distinct_url(templated, page.url, f, self.template)
            for n, piece in enumerate(pieces):
                check_id_length(f"{page.prefix}#{n}", f"{f} chunk {n}")
                self.rows += 1
                yield {"id": f"{page.prefix}#{n}", "url": page.url, "text": piece, "_where": f"{f} chunk {n}"}
        if not self.rows:
            raise ValueError(f"{self.folder}: none of its {len(files)} page file(s) has any text (e.g. {empty[0]}); "
                             "nothing to load — check that the files were exported with their content")
        self.warnings += [f"{e}; skipped" for e in empty]

    def locate(self, ids: set) -> list[tuple[str, str]]:
        """(where, id) of the chunks with these ids, in the folder's order: a chunk id is ``<page id>#<n>``."""
        found = []
        for i in ids:
            prefix, _, n = i.rpartition("#")
            place, f = self.pages[prefix]
            found.append(((place, int(n)), (f"{f} chunk {n}", i)))
        return [named for _, named in sorted(found)]


def _check_distinct_url(seen: dict[str, Path], url: str, f: Path, template: str) -> None:
    """Two pages given one URL by the template would be one page to every URL-based metric: an error."""
    if url in seen:
        why = ("it has no placeholder, so every page gets the same URL" if not has_placeholder(template)
               else "its placeholders do not tell these pages apart")
        raise ValueError(f"{f}: --url-template {template!r} gives this page the URL {url!r}, as it does "
                         f"{seen[url]}: {why}. Pages sharing a URL are one page to every URL-based metric; use a "
                         "placeholder that differs per page, e.g. {path}, or put url: in the pages' front matter")
    seen[url] = f
