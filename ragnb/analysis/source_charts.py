"""Plotly figures of the source analytics and the real-users benchmark: pure functions from results to figures."""

from __future__ import annotations

import textwrap
from urllib.parse import unquote

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

SCORE_COLOURS = {"1": "#cf222e", "2": "#fb8f44", "3": "#d4a72c", "4": "#57ab5a", "5": "#1a7f37", "missing": "#8c959f"}


def wrap_label(text: object, width: int = 24, lines: int = 2) -> str:
    """A long category label (a page URL, a title) on at most ``lines`` lines of ``width`` characters joined by
    ``<br>`` (plotly's line break), with ``…`` when cut: tick labels stay readable instead of running off the
    chart. Put the full text in the hover."""
    parts = textwrap.wrap(str(text), width=width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(parts) > lines:
        parts = parts[:lines]
        parts[-1] = parts[-1][: width - 1] + "…"
    return "<br>".join(parts)


def score_bars(distribution: dict, title: str = "User scores of the selected questions") -> go.Figure:
    keys = [k for k in ("1", "2", "3", "4", "5", "missing") if k in distribution]
    fig = go.Figure(go.Bar(x=keys, y=[distribution[k] for k in keys], marker_color=[SCORE_COLOURS[k] for k in keys],
                           text=[distribution[k] for k in keys], textposition="outside"))
    fig.update_layout(title=title, xaxis_title="score", yaxis_title="questions", height=340)
    return fig


def question_status(counts: dict) -> go.Figure:
    """Selected questions by status: evaluated / no URL / URL not in the corpus."""
    keys = [("evaluated", "evaluated"), ("no_url", "no logged URL"), ("unmatched_url", "URL not in corpus")]
    fig = go.Figure(go.Bar(x=[label for _, label in keys], y=[counts.get(k, 0) for k, _ in keys],
                           marker_color=["#0969da", "#8c959f", "#bf8700"]))
    fig.update_layout(title="Which questions could be scored", yaxis_title="questions", height=320)
    return fig


def lorenz_curve(counts, gini: float) -> go.Figure:
    """Share of all retrievals taken by the least-retrieved x% of chunks; the diagonal = perfectly even."""
    x = np.sort(np.asarray(counts, dtype=float))
    total = x.sum()
    cum = np.concatenate([[0.0], np.cumsum(x) / total]) if total else np.zeros(len(x) + 1)
    share = np.linspace(0, 1, len(x) + 1)
    fig = go.Figure([go.Scatter(x=share, y=cum, mode="lines", name="chunks"),
                     go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line_dash="dash", name="even")])
    fig.update_layout(title=f"Lorenz curve of retrieval counts (Gini = {gini:.3f})", height=380,
                      xaxis_title="share of chunks (least retrieved first)", yaxis_title="share of retrievals")
    return fig


def count_histogram(dist: pd.DataFrame) -> go.Figure:
    fig = go.Figure(go.Bar(x=dist["retrieval_count"], y=dist["chunks"]))
    fig.update_layout(title="How often each chunk was retrieved (0 = never)", xaxis_title="questions retrieving the chunk",
                      yaxis_title="chunks", height=360, bargap=0.05)
    return fig


def unused_by_page_bars(pages: pd.DataFrame, top: int = 25) -> go.Figure:
    df = pages.head(top).reset_index()
    x = [wrap_label(unquote(str(p))) for p in df["page"]]  # URLs would run off the chart; the hover has the full one
    hover = "%{customdata}<br>%{y} chunks<extra></extra>"
    fig = go.Figure([go.Bar(x=x, y=df["chunks"] - df["unused_chunks"], name="retrieved at least once",
                            customdata=df["page"], hovertemplate=hover),
                     go.Bar(x=x, y=df["unused_chunks"], name="never retrieved", customdata=df["page"],
                            hovertemplate=hover)])
    fig.update_layout(barmode="stack", title=f"Chunks per page: used vs. never retrieved (top {len(df)} by unused share)",
                      yaxis_title="chunks", height=420, xaxis_tickangle=-40)
    return fig


def topic_names(table: pd.DataFrame, n_terms: int = 3) -> list[str]:
    """"topic 0 (VPN): vpn, access, client" — each topic with its most cited page's title, when its table has
    ``top_pages`` ("VPN (5), Password (1)"), and its first top terms (the joined ``top_terms``)."""
    if "top_terms" not in table:
        return [f"topic {t}" for t in table.index]
    pages = table["top_pages"] if "top_pages" in table else [""] * len(table)
    out = []
    for t, terms, page in zip(table.index, table["top_terms"], pages):
        # "VPN access (5), Two-factor auth (2)" → "VPN access": the title without its count
        head = f"topic {t} ({str(page).split(', ')[0].rsplit(' (', 1)[0]})" if page else f"topic {t}"
        out.append(f"{head}: {', '.join(str(terms).split(', ')[:n_terms])}" if terms else head)
    return out


def topic_bars(topics: pd.DataFrame) -> go.Figure:
    """Per topic: questions, distinct chunks and distinct pages reached by their top-k."""
    x = topic_names(topics)
    fig = go.Figure([go.Bar(x=x, y=topics["question_count"], name="questions"),
                     go.Bar(x=x, y=topics["unique_chunks"], name="unique chunks"),
                     go.Bar(x=x, y=topics["unique_urls"], name="unique urls")])
    fig.update_layout(barmode="group", title="Topic coverage", height=400)
    return fig


def topic_scatter(topics: pd.DataFrame) -> go.Figure:
    df = topics.reset_index().assign(flag=lambda d: np.where(d["low_coverage"], "low coverage", "ok"))
    fig = px.scatter(df, x="question_count", y="unique_chunks", color="flag", hover_data=["topic_id", "unique_urls"],
                     text="topic_id", title="Questions vs. distinct chunks per topic",
                     color_discrete_map={"low coverage": "#cf222e", "ok": "#0969da"})
    fig.update_traces(textposition="top center")
    fig.update_layout(height=400)
    return fig


def topic_map(vectors: np.ndarray, labels, hover: list[str], space: str = "unit vectors") -> go.Figure:
    """Questions on their first two principal components (unit-normalised vectors), coloured by topic; ``space``
    names what was clustered (pass the language-centred vectors when the topics were made from them)."""
    x = np.asarray(vectors, dtype=float)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    x = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    xy = x @ vt[:2].T
    df = pd.DataFrame({"pc1": xy[:, 0], "pc2": xy[:, 1], "topic": [f"topic {t}" for t in labels],
                       "question": [h[:120] for h in hover]})
    fig = px.scatter(df, x="pc1", y="pc2", color="topic", hover_data=["question"], opacity=0.75,
                     title=f"Questions by topic (first two principal components of the {space})")
    fig.update_layout(height=480)
    return fig


def scores_by_topic_bars(table: pd.DataFrame) -> go.Figure:
    """Stacked user-score counts per topic."""
    x = topic_names(table)
    cols = [c for c in ("score_1", "score_2", "score_3", "score_4", "score_5", "score_missing") if c in table]
    fig = go.Figure([go.Bar(x=x, y=table[c], name=c.replace("score_", ""), marker_color=SCORE_COLOURS[c.replace("score_", "")])
                     for c in cols])
    fig.update_layout(barmode="stack", title="User scores per topic", yaxis_title="questions", height=400)
    return fig


def mean_score_bars(table: pd.DataFrame) -> go.Figure:
    """Mean user score per topic with its bootstrap 95% CI."""
    x = topic_names(table)
    fig = go.Figure(go.Bar(x=x, y=table["mean_score"], error_y=dict(
        type="data", symmetric=False, array=table["ci95_high"] - table["mean_score"],
        arrayminus=table["mean_score"] - table["ci95_low"])))
    fig.update_layout(title="Mean user score per topic (95% CI)", yaxis_range=[0, 5.3], height=380)
    return fig


def similarity_histogram(top1: np.ndarray, threshold: float) -> go.Figure:
    fig = px.histogram(pd.DataFrame({"top-1 cosine similarity": np.asarray(top1, dtype=float)}),
                       x="top-1 cosine similarity", nbins=40, title="Best retrieval similarity per question")
    if np.isfinite(threshold):
        fig.add_vline(x=threshold, line_dash="dash", line_color="#cf222e", annotation_text="gap threshold")
    fig.update_layout(height=360, bargap=0.05)
    return fig
