"""Source URLs as relevance labels (see docs/metrics.md, Real users; README, Datasets): normalise, then match by page
id.

A logged ``confluence_url`` and a chunk's URL often differ in form only (``http`` vs ``https``, a
trailing slash, a ``#section`` anchor, ``viewpage.action?pageId=…`` vs ``/pages/<id>/Title``). Two URLs
name the same page when their :func:`page_id` is equal.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

_PAGES_SEGMENT = re.compile(r"/pages/(\d+)(?:/|$)")


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


def same_page(a: str | None, b: str | None) -> bool:
    """True when both URLs are present and name the same page."""
    pa, pb = page_id(a), page_id(b)
    return pa is not None and pa == pb
