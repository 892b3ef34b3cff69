"""The chunking comparison's corpus: source articles with paragraph spans, their chunks with character spans,
and the relevance rule that judges those chunks against each question's gold paragraph (see
:mod:`ragnb.analysis.chunking`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragnb.io import natural_key
from ragnb.store.markdown import chunk_text

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
    url: str | None  # the article judged against (None: rule "answer", any article)
    start: int
    end: int
    rule: str = "paragraph"  # "paragraph" (gold span + answer), "page" (logged page), "answer" (answer text anywhere)


RULES = {
    "page": "every chunk of the page whose url was logged with the question (datasets from real questions)",
    "paragraph": "same article, overlapping the gold paragraph's span, containing the answer text",
    "answer": "any chunk containing the reference answer text (no logged page, no gold paragraph)",
}


def judged_by_page(item) -> bool:
    """A question whose relevance is its logged page (``ragnb dataset from-real-questions``): the logged answer
    is the bot's free text, which no chunk contains, so answer containment cannot judge it."""
    return (item.model_extra or {}).get("relevance_unit") == "page" or item.source == "question_log"


def gold_questions(items, articles: list[Article]) -> tuple[list[Question], list[str]]:
    """Dataset items → questions with the rule that judges them, plus the ids of items that cannot be judged.

    * page-level items (:func:`judged_by_page`) with a logged url → rule "page" (the article whose url names the
      same page, :func:`ragnb.urls.page_id`); a page not among the articles cannot be judged;
    * other items whose gold paragraph (``chunk_id``, else the first relevant chunk id) is in the articles →
      rule "paragraph";
    * a reference answer without a logged url or gold paragraph → rule "answer"; else it cannot be judged (a
      gold paragraph outside the articles: the dataset was built on another corpus).
    """
    from ragnb.urls import page_id

    where = {p.id: (a.url, p.start, p.end) for a in articles for p in a.paragraphs}
    pages = {page_id(a.url): a for a in articles}
    questions, unmapped = [], []
    for it in items:
        gold = it.chunk_id or next(iter(it.grades()), None)
        has_answer = bool(it.ground_truth_answer and it.ground_truth_answer.strip())
        if judged_by_page(it) and it.confluence_url:
            art = pages.get(page_id(it.confluence_url))
            if art is None:
                unmapped.append(it.id)
            else:
                questions.append(Question(it.id, it.question, it.ground_truth_answer, art.url, 0, len(art.text),
                                          "page"))
        elif not judged_by_page(it) and gold in where:
            url, start, end = where[gold]
            questions.append(Question(it.id, it.question, it.ground_truth_answer, url, start, end))
        elif has_answer and not it.confluence_url and (judged_by_page(it) or gold is None):
            questions.append(Question(it.id, it.question, it.ground_truth_answer, None, 0, 0, "answer"))
        else:
            unmapped.append(it.id)
    return questions, unmapped


def _relevant(q: Question, by_url: dict[str, list[Chunk]], every: list[Chunk]) -> list[str]:
    if q.rule == "page":
        return [c.id for c in by_url.get(q.url, [])]
    if q.rule == "answer":
        needle = _norm(q.answer or "")
        return [c.id for c in every if needle and needle in _norm(c.text)]
    return relevant_chunk_ids(by_url.get(q.url, []), q.url, q.start, q.end, q.answer)


def qrels_for(build_chunks: list[Chunk], questions: list[Question]) -> dict[str, dict[str, int]]:
    """{question: {relevant chunk: 1}} by the question's rule (:data:`RULES`); no relevant chunk → the
    placeholder :data:`NO_RELEVANT` (never retrieved, so every metric is 0 for that question)."""
    by_url: dict[str, list[Chunk]] = {}
    for c in build_chunks:
        by_url.setdefault(c.url, []).append(c)
    return {q.id: {cid: 1 for cid in _relevant(q, by_url, build_chunks)} or {NO_RELEVANT: 1} for q in questions}
