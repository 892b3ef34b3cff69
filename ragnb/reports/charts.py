"""Plotly figure builders for the reports: pure functions from results to figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def histogram(values, title: str, x_label: str, nbins: int = 40) -> go.Figure:
    fig = px.histogram(pd.DataFrame({x_label: np.asarray(values, dtype=float)}), x=x_label, nbins=nbins, title=title)
    fig.update_layout(bargap=0.05, height=360)
    return fig


def explained_variance(cumulative: np.ndarray, threshold: float = 0.95) -> go.Figure:
    n = np.arange(1, len(cumulative) + 1)
    fig = go.Figure(go.Scatter(x=n, y=cumulative, mode="lines", name="cumulative variance"))
    fig.add_hline(y=threshold, line_dash="dash", annotation_text=f"{threshold:.0%}")
    fig.update_layout(title="Cumulative explained variance by principal component", xaxis_title="components",
                      yaxis_title="share of variance", height=360)
    return fig


def hit_rate_curve(curve: pd.DataFrame) -> go.Figure:
    """Hit rate against k from :func:`ragnb.metrics.retrieval.cutoff_curve` (a tier result's ``hit_rates``): the
    ``hit_rate`` column (chunk level) and, when present, ``doc_hit_rate`` (document level) — the table's values at
    its cut-offs, over the same questions (those with a ground truth: ``n_valid``)."""
    names = {"hit_rate": "chunk", "doc_hit_rate": "document"}
    fig = go.Figure([go.Scatter(x=curve["k"], y=curve[col], mode="lines+markers", name=label)
                     for col, label in names.items() if col in curve])
    n = int(curve["n_valid"].iloc[0]) if "n_valid" in curve and len(curve) else None
    fig.update_layout(title="Hit rate @k" + (f" (n = {n} questions with a ground truth)" if n is not None else ""),
                      xaxis_title="k", yaxis_title="share of questions with a relevant hit", yaxis_range=[0, 1.02],
                      height=380)
    return fig


def metric_bars(summary: dict, names: list[str], title: str) -> go.Figure:
    """Means with their bootstrap 95% CI as error bars."""
    rows = [(n, summary[n]["mean"], *summary[n]["ci95"]) for n in names if n in summary]
    df = pd.DataFrame(rows, columns=["metric", "mean", "lo", "hi"])
    fig = go.Figure(go.Bar(
        x=df["metric"], y=df["mean"],
        error_y=dict(type="data", symmetric=False, array=df["hi"] - df["mean"], arrayminus=df["mean"] - df["lo"]),
    ))
    fig.update_layout(title=title, yaxis_range=[0, 1.05], height=380)
    return fig


def score_distribution(per_query: pd.DataFrame) -> go.Figure:
    """Top-1 similarity for questions whose first hit is relevant vs. not: does the score separate them?"""
    df = per_query.assign(top1_relevant=np.where(per_query["first_relevant_rank"] == 1, "relevant", "not relevant"))
    fig = px.histogram(df, x="top1_score", color="top1_relevant", barmode="overlay", nbins=40, opacity=0.7,
                       title="Top-1 cosine similarity: relevant vs. not relevant first hit")
    fig.update_layout(height=380)
    return fig
