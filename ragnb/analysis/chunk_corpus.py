"""The chunking comparison's corpus: source articles with paragraph spans, their chunks with character spans,
and the relevance rule that judges those chunks against each question's gold paragraph (see
:mod:`ragnb.analysis.chunking`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragnb.store.loaders import chunk_text

NO_RELEVANT = "<no relevant chunk>"  # qrels placeholder: never retrieved, so the question scores 0
PARAGRAPH_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class ChunkConfig:
    chunk_size: int  # words per chunk
    overlap: int  # words shared by consecutive chunks

    @property
    def name(self) -> str:
        return f"s{self.chunk_size}_o{self.overlap}"

    @property
    def table(self) -> str:
        return f"chunking_{self.name}"



@dataclass(frozen=True)
class Paragraph:
    id: str
    start: int  # character span [start, end) in the article text
    end: int


@dataclass
class Article:
    url: str
    text: str
    paragraphs: list[Paragraph]


@dataclass(frozen=True)
class Chunk:
    id: str
    url: str
    text: str
    start: int  # character span [start, end) of its words in the article text
    end: int


def natural_key(text: str) -> tuple:
    """Sort key that orders "p2" before "p10"."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


def build_article(url: str, paragraphs: list[tuple[str, str]]) -> Article:
    """Join ``(paragraph id, text)`` pairs, in the order given, with a blank line; record each one's span."""
    parts, spans, pos = [], [], 0
    for i, (pid, text) in enumerate(paragraphs):
        if i:
            parts.append(PARAGRAPH_SEPARATOR)
            pos += len(PARAGRAPH_SEPARATOR)
        parts.append(text)
        spans.append(Paragraph(pid, pos, pos + len(text)))
        pos += len(text)
    return Article(url, "".join(parts), spans)


def group_articles(rows: list[dict]) -> list[Article]:
    """Rows ``{id, url, text}`` → one article per URL, paragraphs in natural id order; a row without a URL is
    an article of its own (its neighbours are unknown). Articles are ordered by URL."""
    by_url: dict[str, list[dict]] = {}
    for row in rows:
        if not isinstance(row.get("text"), str) or not row["text"].strip():
            continue
        key = row.get("url") or f"(no url: {row['id']})"
        by_url.setdefault(key, []).append(row)
    return [build_article(url, [(r["id"], r["text"]) for r in sorted(group, key=lambda r: natural_key(str(r["id"])))])
            for url, group in sorted(by_url.items())]



def chunk_article(article: Article, cfg: ChunkConfig, prefix: str) -> list[Chunk]:
    """``chunk_text(article.text, size, overlap)`` with each chunk's character span in the article.

    chunk_text splits on whitespace and re-joins words with one space; chunk n holds words
    [n·(size − overlap), n·(size − overlap) + size). The span runs from its first word's first character to its
    last word's last character. Each chunk's text is checked against those words.
    """
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", article.text)]
    pieces = chunk_text(article.text, cfg.chunk_size, cfg.overlap)
    step = cfg.chunk_size - cfg.overlap
    out = []
    for n, piece in enumerate(pieces):
        first, last = n * step, min(n * step + cfg.chunk_size, len(words)) - 1
        expected = " ".join(article.text[s:e] for s, e in words[first:last + 1])
        if piece != expected:  # chunk_text and this word split disagree: offsets would be wrong
            raise RuntimeError(f"chunk {n} of {article.url}: chunk_text's words differ from the offset map")
        out.append(Chunk(f"{prefix}c{n:04d}", article.url, piece, words[first][0], words[last][1]))
    return out


def chunk_corpus(articles: list[Article], cfg: ChunkConfig) -> list[Chunk]:
    return [c for i, a in enumerate(articles) for c in chunk_article(a, cfg, f"{cfg.name}-a{i:05d}-")]


# --------------------------------------------------------------------------------------------
# Relevance
# --------------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def relevant_chunk_ids(chunks: list[Chunk], url: str, start: int, end: int, answer: str | None) -> list[str]:
    """Ids of the chunks relevant to a question whose gold paragraph spans [start, end) of article ``url``:
    same article, overlapping span (chunk.start < end and start < chunk.end), and — when ``answer`` is not
    blank — the chunk's text contains the answer (both case-folded, whitespace collapsed)."""
    needle = _norm(answer) if answer and answer.strip() else None
    return [c.id for c in chunks
            if c.url == url and c.start < end and start < c.end and (needle is None or needle in _norm(c.text))]


@dataclass
class Question:
    id: str
    text: str
    answer: str | None
    url: str
    start: int
    end: int


def gold_questions(items, articles: list[Article]) -> tuple[list[Question], list[str]]:
    """Dataset items → questions with their gold paragraph's article and span, plus the ids of items whose gold
    paragraph (``chunk_id``, else the first relevant chunk id) is not in the articles (they cannot be judged)."""
    where = {p.id: (a.url, p.start, p.end) for a in articles for p in a.paragraphs}
    questions, unmapped = [], []
    for it in items:
        gold = it.chunk_id or next(iter(it.grades()), None)
        if gold not in where:
            unmapped.append(it.id)
            continue
        url, start, end = where[gold]
        questions.append(Question(it.id, it.question, it.ground_truth_answer, url, start, end))
    return questions, unmapped


def qrels_for(build_chunks: list[Chunk], questions: list[Question]) -> dict[str, dict[str, int]]:
    """{question: {relevant chunk: 1}} by :func:`relevant_chunk_ids`; no relevant chunk → the placeholder
    :data:`NO_RELEVANT` (never retrieved, so every metric is 0 for that question)."""
    by_url: dict[str, list[Chunk]] = {}
    for c in build_chunks:
        by_url.setdefault(c.url, []).append(c)
    out = {}
    for q in questions:
        ids = relevant_chunk_ids(by_url.get(q.url, []), q.url, q.start, q.end, q.answer)
        out[q.id] = {cid: 1 for cid in ids} or {NO_RELEVANT: 1}
    return out

