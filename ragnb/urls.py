"""Source URLs as relevance labels (see docs/metrics.md, Real users; docs/datasets.md): normalise, then match by page
id.

A logged ``confluence_url`` and a chunk's URL often differ in form only (``http`` vs ``https``, a
trailing slash, a ``#section`` anchor, ``viewpage.action?pageId=…`` vs ``/pages/<id>/Title``). Two URLs
name the same page when their :func:`page_id` is equal.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

_PAGES_SEGMENT = re.compile(r"/pages/(\d+)(?:/|$)")
PAGE_URL_SCHEMES = ("http", "https")
# Never a page address: these run code or embed content when a report renders the url as a link.
UNSAFE_URL_SCHEMES = frozenset({"javascript", "vbscript", "data"})


def url_scheme(url: str) -> str:
    """The url's scheme, lower-cased, read as a browser reads it ("" for a relative path or a url that does not
    parse)."""
    try:
        return urlsplit(url.strip()).scheme.lower()
    except ValueError:  # e.g. an unbalanced "[" in the host
        return ""


def check_url(url: str, where: str) -> str:
    """``url`` if it can name a page: an http(s) URL, or one without a scheme (a relative path such as
    ``ops/vpn.md``, or ``wiki.example.com/vpn``). Any other scheme (``javascript:``, ``data:``, ``file:``,
    ``mailto:`` …) is a ValueError starting with ``where`` (e.g. ``"log.csv:4: field 'url'"``): reports turn URLs
    into links, and such a link runs code or opens a local file when clicked. The scheme is read as a browser
    reads it (urlsplit drops tabs, newlines and leading control characters), so ``java\tscript:`` is refused too."""
    scheme = url_scheme(url)
    if scheme and scheme not in PAGE_URL_SCHEMES:
        raise ValueError(f"{where} = {url[:80]!r} is a '{scheme}:' URL; a page URL must start with http:// or "
                         "https://, or be a path relative to the corpus such as ops/vpn.md (a host with a port "
                         "needs its scheme too: https://host:8080/…); fix it at its source")
    return url


def normalize_url(url: str | None) -> str | None:
    """``None``/blank → ``None``; otherwise ``host/path?query`` lower-cased host, no scheme, no ``www.``,
    no fragment, percent-decoded path without trailing slash. ``"HTTPS://Wiki.X/a/b/#s"`` → ``"wiki.x/a/b"``."""
    if not isinstance(url, str):  # None, or NaN from a pandas column with missing values
        return None
    text = url.strip()
    if not text:
        return None
    parts = urlsplit(text if "//" in text else "//" + text)
    host = parts.netloc.lower().removeprefix("www.")
    path = unquote(parts.path).rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{host}{path}{query}" or None


def page_id(url: str | None) -> str | None:
    """The page a URL points at: Confluence ``pageId=<n>`` or ``/pages/<n>/…`` → ``"<n>"``; any other URL →
    its :func:`normalize_url` form without the query string. ``None`` for a missing URL."""
    norm = normalize_url(url)
    if norm is None:
        return None
    parts = urlsplit("//" + norm)
    ids = parse_qs(parts.query).get("pageId") or parse_qs(parts.query).get("pageid")
    if ids and ids[0].strip():
        return ids[0].strip()
    m = _PAGES_SEGMENT.search(parts.path)
    if m:
        return m.group(1)
    return f"{parts.netloc}{parts.path}" or None


URL_FIX = ("make the chunk URLs real page URLs: reload the wiki folder with `ragnb load chunks DIR --url-template "
           "'https://wiki.example.com/{path}'` (placeholders {path}, {relpath}, {stem}, {name}, {title}, {id}) or "
           "put `url:` in each page's front matter; for a file, name its URL column with --map url=COLUMN. URLs are "
           "compared after normalisation (scheme, www., trailing slash, #anchor, percent-encoding and Confluence "
           "pageId forms are ignored; ragnb/urls.py)")


def url_match(logged: list[str | None], chunk_urls: list[str | None]) -> dict:
    """How many logged URLs name a page that some chunk URL names (by :func:`page_id`): ``{"logged": rows with a
    URL, "matched": …, "example_logged": an unmatched logged URL, "example_chunk": a chunk URL}``."""
    pages = {page_id(u) for u in chunk_urls} - {None}
    with_url = [u for u in logged if page_id(u) is not None]
    unmatched = [u for u in with_url if page_id(u) not in pages]
    example_chunk = next((u for u in chunk_urls if page_id(u) is not None), None)
    return {"logged": len(with_url), "matched": len(with_url) - len(unmatched),
            "example_logged": unmatched[0] if unmatched else None, "example_chunk": example_chunk,
            "suggested_template": suggest_template(unmatched[:50], chunk_urls)}


_PAGE_SUFFIX = re.compile(r"\.(md|markdown|txt)$", re.IGNORECASE)


def suggest_template(logged: list[str], chunk_urls: list[str | None]) -> str | None:
    """A ``--url-template`` that would turn the chunks' relative paths into the logged URLs: the first logged
    URL whose path ends with a chunk's path without its suffix gives the address before it
    (``https://wiki.example.com/ru/ops/vpn`` + chunk ``ru/ops/vpn.md`` → ``https://wiki.example.com/{path}``)."""
    rel = sorted({_PAGE_SUFFIX.sub("", u).strip("/") for u in chunk_urls if isinstance(u, str) and "//" not in u
                  and u.strip("/ ")}, key=lambda r: (-len(r), r))  # the longest path first: the tightest prefix
    for url in logged:
        parts = urlsplit(url.strip())
        path = unquote(parts.path).rstrip("/")
        for r in rel:
            if path.endswith("/" + r):
                prefix = path[: len(path) - len(r)]
                return f"{parts.scheme or 'https'}://{parts.netloc}{prefix}{{path}}"
    return None


def url_match_warning(m: dict) -> str | None:
    """The warning for a :func:`url_match` result with unmatched logged URLs (None when all match or none is
    logged): how many matched, one example of each side, and the fix."""
    if not m["logged"] or m["matched"] == m["logged"]:
        return None
    if m["example_chunk"] is None:
        return (f"{m['matched']} of {m['logged']} logged question URLs match a chunk URL: no chunk has a URL "
                f"(e.g. logged {m['example_logged']!r}); {URL_FIX}")
    guess = (f" The logged URLs look like the chunk paths under --url-template '{m['suggested_template']}'."
             if m.get("suggested_template") else "")
    return (f"{m['matched']} of {m['logged']} logged question URLs match a chunk URL; e.g. logged "
            f"{m['example_logged']!r} (page {page_id(m['example_logged'])!r}) vs chunk {m['example_chunk']!r} "
            f"(page {page_id(m['example_chunk'])!r}). Questions whose URL matches no chunk have no relevant chunk "
            f"and are left out of the real-user metrics.{guess} If these should match, {URL_FIX}")
