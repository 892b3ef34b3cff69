"""Chunking strategies side by side ("Build Speed" and "Index Size";
see docs/metrics.md, Build speed and index size, plus Tier 1 quality).

For each (chunk size, overlap) of a grid, in words, the source articles are re-chunked with
:func:`ragnb.store.markdown.chunk_text`, embedded, loaded into their own pgvector table
``chunking_s<size>_o<overlap>`` with an HNSW index, and measured:

* **build speed** — seconds per stage (chunking, embedding, insert, index) and chunks per second;
* **index size** — ``pg_table_size``, ``pg_indexes_size`` (HNSW + primary key) and
  ``pg_total_relation_size`` of the table, in bytes, MB (10⁶ bytes) and bytes per chunk;
* **truncation** — the share of chunks longer than the encoder reads (all-MiniLM-L6-v2: 256 tokens);
* **retrieval quality** — hit_rate@1/5, MRR, nDCG@10, recall@5 with bootstrap CIs on the questions.

Relevance rules (a chunking has no gold chunk ids of its own; :data:`ragnb.analysis.chunk_corpus.RULES`):

* **page** — a question from a dataset built from real questions is judged by the page whose url was logged
  with it: every chunk of that page is relevant (the logged answer is the bot's free text, which no chunk
  contains, so answer containment would find nothing);
* **paragraph** — a question with a gold paragraph (demo, synthetic): a chunk is relevant iff it comes from the
  gold paragraph's article, its character span overlaps the gold paragraph's span, and it contains the
  reference answer (case-folded, whitespace collapsed); without a reference answer, span overlap alone
  (counted in ``n_questions_without_answer``);
* **answer** — only when the question has neither a logged page nor a gold paragraph: any chunk containing the
  reference answer.

A question with no relevant chunk in a config (e.g. its answer cut by a chunk boundary) scores 0 on every
metric there, so all configs are compared on the same questions; it is counted in ``n_no_relevant_chunk``
per config, and the notes say how many.

Modules: :mod:`ragnb.analysis.chunk_corpus` (articles, chunks with character spans, the relevance rule) and
:mod:`ragnb.analysis.chunk_build` (one config's table, timings, sizes; embeddings through the one embedding
cache, with the encoding time it recorded, so build time stays honest when vectors come from the cache).
This module: the grid, the source articles, the comparison and its figures.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.analysis.chunk_build import Build, build_config, embed_with_cache
from ragnb.analysis.chunk_corpus import (NO_RELEVANT, RULES, Article, ChunkConfig, Question, gold_questions,
                                        group_articles, qrels_for)
from ragnb.io import comma_list
from ragnb.metrics.retrieval import evaluate
from ragnb.embeddings.models import Encoder
from ragnb.store.engine import Database

WORKSPACE_DATABASE = "ragnb_chunking"  # embedded database the build tables go to (never a team's server)
METRICS = ["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@5"]


# --------------------------------------------------------------------------------------------
# Grid and source articles
# --------------------------------------------------------------------------------------------


def parse_grid(chunk_sizes: str, overlaps: str) -> list[ChunkConfig]:
    """Every (size, overlap) pair of ``"100,200"`` × ``"0,40"``, sizes ≥ 1, overlaps ≥ 0.

    Every overlap must be smaller than every size (the grid is all pairs; a chunk cannot repeat all of its
    predecessor); otherwise ``ValueError`` names the bad pairs.
    """
    sizes = _int_list(chunk_sizes, "chunk_sizes", 1)
    laps = _int_list(overlaps, "overlaps", 0)
    bad = [(s, o) for s in sizes for o in laps if o >= s]
    if bad:
        pairs = ", ".join(f"size {s} / overlap {o}" for s, o in bad)
        raise ValueError(f"overlap must be smaller than chunk size, but the grid has {pairs}; "
                         "drop those overlaps or sizes (every overlap is paired with every size)")
    return [ChunkConfig(s, o) for s in sizes for o in laps]


def _int_list(text: str, field_name: str, minimum: int) -> list[int]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{field_name} = {text!r}; give comma-separated whole numbers of words, e.g. '100,200'")
    out = []
    for part in comma_list(text, field_name):
        if not re.fullmatch(r"\d+", part) or int(part) < minimum:
            raise ValueError(f"{field_name}: {part!r} is not a whole number ≥ {minimum}; "
                             "give comma-separated numbers of words, e.g. '100,200'")
        out.append(int(part))
    return sorted(set(out))


def demo_articles(language: str = "ru") -> list[Article]:
    """The bundled XQuAD paragraphs grouped into their Wikipedia articles."""
    from ragnb.datasets import demo

    return group_articles(demo.chunk_rows(language))


def db_articles(db: Database) -> list[Article]:
    """The configured chunk table's texts grouped by URL (each stored chunk counts as a paragraph)."""
    import sqlalchemy as sa

    from ragnb.store.schema import tables

    t = tables(db.schema).chunk
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.cast(t.c.id, sa.Text), t.c.url, t.c.text)).all()
    if not rows:
        raise ValueError(f"{db.display_url}: the chunk table is empty; load a corpus with `ragnb load chunks FILE`")
    return group_articles([{"id": r[0], "url": r[1], "text": r[2]} for r in rows])


def select_articles(articles: list[Article], max_articles: int = 0) -> list[Article]:
    """The first ``max_articles`` articles (ordered by URL; 0: all) — a smaller, still whole-article corpus."""
    if max_articles < 0:
        raise ValueError(f"max_articles = {max_articles}; use 0 for all articles or a positive number")
    return articles[:max_articles] if max_articles else articles


# --------------------------------------------------------------------------------------------
# Quality and the whole comparison
# --------------------------------------------------------------------------------------------


def evaluate_build(build: Build, questions: list[Question], question_vectors: np.ndarray, top_k: int = 10,
                   n_boot: int = 1000) -> tuple[pd.DataFrame, dict]:
    """Exact cosine top-k over the config's vectors (in memory, so quality differences come from the chunking,
    not from the approximate index) scored with :func:`ragnb.metrics.retrieval.evaluate`."""
    from ragnb.rag.retrieval import MemoryRetriever

    if top_k < 10:
        raise ValueError(f"top_k = {top_k}; ndcg@10 needs at least 10 retrieved chunks")
    retriever = MemoryRetriever([c.id for c in build.chunks], build.vectors, [c.url for c in build.chunks],
                                copy=True)  # the build keeps its vectors as encoded
    result = retriever.search(question_vectors, min(top_k, len(build.chunks)))
    run = result.as_run([q.id for q in questions])
    qrels = qrels_for(build.chunks, questions)
    per_query, summary = evaluate(run, qrels, METRICS, n_boot=n_boot)
    per_query["n_relevant_chunks"] = [0 if NO_RELEVANT in qrels[q] else len(qrels[q]) for q in per_query.index]
    summary["n_no_relevant_chunk"] = int((per_query["n_relevant_chunks"] == 0).sum())
    return per_query, summary


@dataclass
class ChunkingResult:
    table: pd.DataFrame  # one row per config: sizes, timings, truncation, metric means
    per_query: pd.DataFrame  # one row per (config, question), index "<config>/<question id>"
    summary: dict
    notes: list[str] = field(default_factory=list)



def _config_entry(cfg: ChunkConfig, build: Build, metrics: dict) -> tuple[dict, dict]:
    """(the config's row of the comparison table, its entry in ``summary["configs"]``)."""
    entry = {"chunk_size": cfg.chunk_size, "overlap": cfg.overlap, "table": cfg.table, "n_chunks": len(build.chunks),
             "timings": build.timings, "size": build.size, "truncation": build.truncation, **metrics}
    size, trunc = build.size, build.truncation or {}  # no truncation stats: the model cuts nothing countable
    row = {"config": cfg.name, "chunk_size": cfg.chunk_size, "overlap": cfg.overlap,
           "n_chunks": len(build.chunks), **{k: v for k, v in build.timings.items()},
           "table_bytes": size["table_bytes"], "index_bytes": size["index_bytes"], "hnsw_bytes": size["hnsw_bytes"],
           "total_bytes": size["total_bytes"], "total_mb": size["total_mb"], "bytes_per_chunk": size["bytes_per_chunk"],
           "share_truncated": trunc.get("share_truncated", math.nan), "mean_tokens": trunc.get("mean_tokens", math.nan),
           "n_no_relevant_chunk": metrics["n_no_relevant_chunk"],
           **{name: metrics[name]["mean"] for name in METRICS},
           **{f"{name}_ci95": metrics[name]["ci95"] for name in METRICS}}
    return row, entry


def _no_relevant_notes(table: pd.DataFrame, n_questions: int) -> list[str]:
    """One note per config where some questions have no relevant chunk (they score 0 there)."""
    return [f"{cfg}: {int(n)} of {n_questions} question(s) have no relevant chunk and score 0 on every metric "
            "(check that the dataset was built on this corpus)"
            for cfg, n in table["n_no_relevant_chunk"].items() if n]


def _summary(articles: list[Article], questions: list[Question], unmapped: list[str], encoder: Encoder,
             table: pd.DataFrame, q_embed, per_config: dict, top_k: int, hnsw: dict) -> dict:
    encoded = int(table["n_encoded"].sum()) + q_embed.n_encoded
    seconds = float(table["embedding_s_measured"].sum()) + q_embed.seconds_measured
    chunk_encoded, chunk_seconds = int(table["n_encoded"].sum()), float(table["embedding_s_measured"].sum())
    return {
        "analysis": "chunking",
        "n_articles": len(articles), "n_paragraphs": sum(len(a.paragraphs) for a in articles),
        "n_questions": len(questions), "n_questions_unmapped": len(unmapped),
        "n_questions_without_answer": sum(1 for q in questions if not (q.answer and q.answer.strip())),
        "relevance_rules": {rule: RULES[rule] for rule in sorted({q.rule for q in questions})},
        "n_questions_by_rule": {rule: sum(q.rule == rule for q in questions) for rule in RULES
                                if any(q.rule == rule for q in questions)},
        "embedding_model": encoder.name, "max_seq_length": encoder.max_seq_length,
        "retrieval": f"exact cosine top-{top_k} in memory", "metrics": METRICS,
        "hnsw": hnsw,
        "texts_encoded_this_run": encoded,
        "encode_seconds_this_run": seconds,
        "chunk_encode_rate_this_run": chunk_encoded / chunk_seconds if chunk_encoded and chunk_seconds > 0 else None,
        "questions_embedding": q_embed.as_dict(),
        "configs": per_config,
    }


def run_chunking(db: Database, encoder: Encoder, articles: list[Article], items, configs: list[ChunkConfig], *,
                 top_k: int = 10, batch_size: int = 32, hnsw_m: int = 16, hnsw_ef_construction: int = 64,
                 maintenance_work_mem: str = "1GB", n_boot: int = 1000) -> ChunkingResult:
    """Build every config into ``db`` (a workspace database ragnb owns) and compare them on ``items``."""
    if not configs:
        raise ValueError("no chunking configs; give chunk_sizes and overlaps")
    if not db.writable:
        raise ValueError(f"{db.display_url} is read-only; the chunking comparison writes its tables — use the embedded "
                         f"workspace database {WORKSPACE_DATABASE!r}")
    questions, unmapped = gold_questions(items, articles)
    if not questions:
        raise ValueError("no question can be judged: neither its logged page nor its gold paragraph (chunk_id) is "
                         "among the source texts, and it has no reference answer; use a dataset built on this corpus")
    notes = []
    if unmapped:
        notes.append(f"{len(unmapped)} question(s) have a logged page or gold paragraph outside the source articles "
                     f"(or nothing to judge them by) and are left out (first: {unmapped[0]!r}).")
    q_vectors, q_embed = embed_with_cache(encoder, [q.text for q in questions], batch_size)

    rows, frames, per_config = [], [], {}
    for cfg in configs:
        build = build_config(db, encoder, articles, cfg, batch_size, hnsw_m, hnsw_ef_construction, maintenance_work_mem)
        per_query, metrics = evaluate_build(build, questions, q_vectors, top_k, n_boot)
        frames.append(per_query.assign(config=cfg.name).reset_index())
        row, per_config[cfg.name] = _config_entry(cfg, build, metrics)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("config")
    notes += _no_relevant_notes(table, len(questions))
    hnsw = {"m": hnsw_m, "ef_construction": hnsw_ef_construction, "maintenance_work_mem": maintenance_work_mem}
    summary = _summary(articles, questions, unmapped, encoder, table, q_embed, per_config, top_k, hnsw)
    per_query = pd.concat(frames, ignore_index=True)
    per_query.index = pd.Index(per_query["config"] + "/" + per_query["query_id"].astype(str), name="item_id")
    return ChunkingResult(table, per_query, summary, notes)


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------

STAGES = ("chunking_s", "embedding_s", "insert_s", "index_s")


def build_time_figure(table: pd.DataFrame):
    """Stacked build seconds per config and stage; the embedding bar says whether it was measured now or
    recorded when the texts were first encoded (cache)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for stage in STAGES:
        text = table["embedding_timing"] if stage == "embedding_s" else None
        fig.add_trace(go.Bar(x=table.index, y=table[stage], name=stage.removesuffix("_s"), text=text,
                             textposition="inside" if text is not None else None))
    fig.update_layout(barmode="stack", title="Build time per config (embedding: measured now / from cache / mixed)",
                      yaxis_title="seconds", height=400)
    return fig


def size_figure(table: pd.DataFrame):
    """Table (heap + TOAST) and index bytes per config, in MB, with bytes per chunk in the hover."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for col, name in (("table_bytes", "table"), ("index_bytes", "indexes (HNSW + primary key)")):
        fig.add_trace(go.Bar(x=table.index, y=table[col] / 1e6, name=name,
                             customdata=np.stack([table["n_chunks"], table["bytes_per_chunk"]], axis=1),
                             hovertemplate="%{y:.3f} MB<br>%{customdata[0]} chunks, %{customdata[1]:.0f} bytes/chunk"))
    fig.update_layout(barmode="stack", title="Index size per config (pg_total_relation_size)", yaxis_title="MB",
                      height=400)
    return fig


def tradeoff_figure(table: pd.DataFrame, metric: str = "mrr"):
    """Quality (``metric`` with its 95% CI) against build seconds; marker area ∝ total size."""
    import plotly.graph_objects as go

    lo = table[f"{metric}_ci95"].map(lambda c: c[0])
    hi = table[f"{metric}_ci95"].map(lambda c: c[1])
    size = 12 + 28 * np.sqrt(table["total_bytes"] / table["total_bytes"].max())
    fig = go.Figure(go.Scatter(
        x=table["build_s"], y=table[metric], mode="markers+text", text=table.index, textposition="top center",
        marker=dict(size=size, opacity=0.7),
        error_y=dict(type="data", symmetric=False, array=hi - table[metric], arrayminus=table[metric] - lo),
        customdata=np.stack([table["total_mb"], table["n_chunks"]], axis=1),
        hovertemplate="%{text}<br>" + metric + " %{y:.3f}<br>build %{x:.1f} s<br>%{customdata[0]:.2f} MB, "
                      "%{customdata[1]} chunks<extra></extra>"))
    fig.update_layout(title=f"{metric} vs build time (marker size: index size)", xaxis_title="build seconds",
                      yaxis_title=metric, height=440)
    return fig


def metrics_figure(table: pd.DataFrame):
    """Every quality metric per config with its 95% CI."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for cfg, row in table.iterrows():
        means = [row[m] for m in METRICS]
        fig.add_trace(go.Bar(x=METRICS, y=means, name=cfg, error_y=dict(
            type="data", symmetric=False, array=[row[f"{m}_ci95"][1] - row[m] for m in METRICS],
            arrayminus=[row[m] - row[f"{m}_ci95"][0] for m in METRICS])))
    fig.update_layout(barmode="group", title="Retrieval quality per config (95% CI)", yaxis_range=[0, 1.05], height=420)
    return fig
