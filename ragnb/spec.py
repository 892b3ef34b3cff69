"""The tiers and analyses of ragnb, declared once: what runs, where its metrics land, how they are graded.

Every reader — the runner (which notebooks, in which order, which run after the record), the run record
(tier blocks, thresholds, executive summary), the index page, the dashboard, the comparison and the
``ragnb run`` command — reads :data:`TIERS`. Adding a tier means adding one :class:`TierSpec` here (and its
notebook in ``ragnb/notebooks/``).

Thresholds are those of docs/metrics.md, Thresholds: ``(excellent_above, attention_below)``; a value equal
to either bound is "good". A threshold belongs to a metric, so it grades that metric in every block where it
appears (Real users report ``hit_rate@1`` too); it is declared once, in the tier the metric comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# The value of a block's ``judge_backend`` when no LLM endpoint was configured and the offline fallback
# (embedding similarity → word overlap) stood in for the LLM judge.
OFFLINE_BACKEND = "offline-fallback"


@dataclass(frozen=True)
class TierSpec:
    """One tier or analysis notebook.

    ``name``: short name (``ragnb run tier1``) and notebook file ``ragnb/notebooks/<name>.ipynb`` (:attr:`notebook`);
    ``stem``: stem of what a run writes for it (``<stem>.ipynb`` executed, ``<stem>.html``, ``<stem>.metrics.json``),
    kept from the long notebook names so that older run folders and records stay readable; ``record_key``: its block in a schema-2.0 run record (``tier_1_metrics``), None for
    notebooks whose metrics land in the record's ``other_metrics`` under their stem (records, summaries and
    pages then name them by stem); ``label``: name of a record block in summaries and pages. ``thresholds``: ``{metric: (excellent_above, attention_below)}``; ``llm_judged``: those of
    them that grade an LLM judge's verdicts, so they are not graded when the block's ``judge_backend`` is the
    offline fallback (a deterministic judge agrees with itself; extractive answers copy their context).
    ``headline``: metrics the executive summary names when the block has no graded metric (else its first
    three). ``aliases``: short metric keys inside the block → canonical metric name. ``renamed``: keys of old
    records → today's key, or ``(key when an LLM judged, key when the offline fallback judged)``. ``post_record``: runs after the
    run's record is written, because it reads ``benchmark_runs.json`` (the dashboard); its metrics are not
    this run's benchmark metrics. ``warm_up``: a module whose ``warm_in_background()`` the runner calls when a
    run includes the notebook — it compiles ahead, at the lowest CPU priority, what the notebook would otherwise
    compile while it runs (:mod:`ragnb.runs.warmup`).
    """

    name: str
    stem: str
    record_key: str | None
    label: str
    thresholds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    llm_judged: tuple[str, ...] = ()
    headline: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    renamed: Mapping[str, str | tuple[str, str]] = field(default_factory=dict)
    post_record: bool = False
    warm_up: str | None = None

    @property
    def notebook(self) -> str:
        """File name of its notebook in ``ragnb/notebooks/`` (``tier1.ipynb``: papermill's usage as written)."""
        return f"{self.name}.ipynb"


_RANKING = (0.8, 0.5)  # docs/metrics.md, Thresholds: excellent > 0.8, good 0.5–0.8, attention < 0.5
_JUDGE_FAITHFULNESS = {"judge_faithfulness": (0.9, 0.7)}
# Before faithfulness had three names, Tier 2/3 wrote the judge's score — or, offline, the fallback's — as
# "faithfulness" (docs/metrics.md, Faithfulness).
_OLD_FAITHFULNESS = {"faithfulness": ("judge_faithfulness", "fallback_faithfulness")}
# Before the official SQuAD v1.1 pair had its own names, the Unicode-aware answer metrics were written without
# the suffix, though documented as SQuAD's (docs/metrics.md, Text and answer metrics).
_OLD_ANSWER = {"answer_exact_match": "answer_exact_match_unicode", "answer_f1": "answer_f1_unicode",
               "answer_recall": "answer_recall_unicode"}
_GENERATION_HEADLINE = ("judge_faithfulness", "fallback_faithfulness", "hallucination_rate", "context_utilization")

# In run order (``ragnb demo`` runs them all; the dashboard last, as it reads the run record).
TIERS: tuple[TierSpec, ...] = (
    TierSpec("tier0", "tier0_embeddings", "tier_0_metrics", "Tier 0 (embeddings)",
             headline=("total_samples", "avg_nn_distance", "std_nn_distance")),
    TierSpec("tier1", "tier1_retrieval", "tier_1_metrics", "Tier 1 (retrieval)",
             thresholds={"hit_rate@1": _RANKING, "mrr": _RANKING, "ndcg@10": _RANKING},
             headline=("hit_rate@1", "mrr", "ndcg@10")),
    TierSpec("tier2", "tier2_generation", "tier_2_metrics", "Tier 2 (generation)",
             thresholds=_JUDGE_FAITHFULNESS, llm_judged=("judge_faithfulness",), headline=_GENERATION_HEADLINE,
             renamed={**_OLD_FAITHFULNESS, **_OLD_ANSWER}),
    TierSpec("tier3", "tier3_e2e", "tier_3_metrics", "Tier 3 (end-to-end)",
             thresholds={**_JUDGE_FAITHFULNESS, "e2e_score": (0.8, 0.6)},
             llm_judged=("judge_faithfulness", "e2e_score"), headline=_GENERATION_HEADLINE,
             renamed={**_OLD_FAITHFULNESS, **_OLD_ANSWER}),
    TierSpec("judge", "tier_judge", "tier_judge_metrics", "Tier Judge",
             thresholds={"judge_consistency": (0.95, 0.85)}, llm_judged=("judge_consistency",),
             headline=("consistency_score", "error_rate", "avg_latency_ms"),
             aliases={"consistency": "judge_consistency", "consistency_score": "judge_consistency"}),
    TierSpec("judge_pipeline", "tier_judge_pipeline", "tier_judge_pipeline_metrics", "Tier Judge Pipeline",
             thresholds={"judge_pipeline_accuracy": (0.95, 0.85)}, headline=("accuracy",),
             aliases={"accuracy": "judge_pipeline_accuracy"}),
    TierSpec("rag_metrics", "rag_metrics", None, "RAG metrics", renamed=_OLD_ANSWER,
             # the suite's "noise_sensitivity" is ragas' default mode (ragnb/tiers/rag_suite.py, _llm_metric)
             aliases={"noise_sensitivity": "noise_sensitivity_relevant"}),
    TierSpec("ux", "tier_ux", "tier_ux_metrics", "Tier UX",
             headline=("cache_hit_rate", "cache_hit_precision", "context_preservation")),
    TierSpec("real_users", "real_users", "real_user_metrics", "Real users"),
    TierSpec("utilization", "utilization", "utilization_metrics", "Chunk utilization",
             headline=("total_chunks", "used_chunks", "unused_chunks")),
    TierSpec("topics", "topic_coverage", "topic_coverage_metrics", "Topic coverage",
             headline=("n_topics", "total_questions", "avg_chunks_per_topic")),
    TierSpec("domain", "domain_analysis", "domain_analysis_metrics", "Domain analysis",
             headline=("n_topics", "total_questions", "mean_score")),
    TierSpec("vector_space", "vector_space", None, "Vector space", warm_up="ragnb.analysis.umap_warmup"),
    TierSpec("chunking", "chunking", None, "Chunking"),
    TierSpec("dashboard", "dashboard", None, "Dashboard", post_record=True),
)


def _index(attr: str) -> dict[str, TierSpec]:
    out: dict[str, TierSpec] = {}
    for spec in TIERS:
        value = getattr(spec, attr)
        if value is None:
            continue
        if value in out:
            raise ValueError(f"ragnb.spec.TIERS: two tiers have {attr} {value!r}; each must be unique")
        out[value] = spec
    return out


_BY_NAME = _index("name")
_BY_STEM = _index("stem")
_BY_RECORD_KEY = _index("record_key")


def _union(attr: str) -> dict:
    out: dict = {}
    for spec in TIERS:
        for metric, bounds in getattr(spec, attr).items():
            if out.setdefault(metric, bounds) != bounds:
                raise ValueError(f"ragnb.spec.TIERS: {attr} of {metric!r} declared twice with different values")
    return out


# Derived views (never edit these: edit TIERS).
NOTEBOOKS: dict[str, str] = {s.name: s.stem for s in TIERS}  # short name → stem, run order
TIER_KEY: dict[str, str] = {s.stem: s.record_key for s in TIERS if s.record_key}  # stem → record key
TIER_KEYS: tuple[str, ...] = tuple(TIER_KEY.values())  # record keys in schema order
THRESHOLDS: dict[str, tuple[float, float]] = _union("thresholds")
LLM_JUDGED: frozenset[str] = frozenset(m for s in TIERS for m in s.llm_judged)


def by_name(name: str) -> TierSpec | None:
    """The tier with short name ``name`` (``"tier1"``), or None."""
    return _BY_NAME.get(name)


def by_stem(stem: str) -> TierSpec | None:
    """The tier whose output stem is ``stem`` (``"tier1_retrieval"``), or None."""
    return _BY_STEM.get(stem)


def by_record_key(key: str | None) -> TierSpec | None:
    """The tier whose run-record block is ``key`` (``"tier_1_metrics"``), or None."""
    return _BY_RECORD_KEY.get(key or "")


def label_of(key: str) -> str:
    """The label of a record key (``"Tier 1 (retrieval)"``); other keys (stems of ``other_metrics``) as given."""
    spec = by_record_key(key)
    return spec.label if spec else key


def is_offline(block: Any) -> bool:
    """Whether the offline fallback stood in for the LLM judge of this block."""
    return isinstance(block, dict) and block.get("judge_backend") == OFFLINE_BACKEND


def current_key(name: str, record_key: str | None = None, block: Any = None) -> str:
    """The key a metric of an old record has today: in Tier 2/3 blocks the old ``faithfulness`` is
    ``judge_faithfulness``, or ``fallback_faithfulness`` when the block says the offline fallback judged; the
    old ``answer_f1`` is ``answer_f1_unicode`` (so are ``answer_exact_match``, ``answer_recall``); other keys are
    returned as given. ``record_key``: the block's key in the record, or the stem of an ``other_metrics`` entry."""
    spec = by_record_key(record_key) or by_stem(record_key or "")
    if spec is None or name not in spec.renamed:
        return name
    new = spec.renamed[name]
    if isinstance(new, str):
        return new
    judged, fallback = new
    return fallback if is_offline(block) else judged


def canonical_metric(name: str, record_key: str | None = None, block: Any = None) -> str:
    """The canonical name of metric key ``name`` inside the block ``record_key`` (``accuracy`` in the Judge
    Pipeline block is ``judge_pipeline_accuracy``), after :func:`current_key`. ``block`` (the block itself)
    tells an old record's faithfulness apart; without it an LLM judge is assumed."""
    name = current_key(name, record_key, block)
    spec = by_record_key(record_key) or by_stem(record_key or "")  # a block without a record key: its stem
    return spec.aliases.get(name, name) if spec else name


def thresholds_of(name: str, record_key: str | None = None, block: Any = None) -> tuple[float, float] | None:
    """``(excellent_above, attention_below)`` that grades ``name`` in this block, or None when it is not graded
    there (no threshold, or an LLM-judge threshold in a block judged by the offline fallback)."""
    canonical = canonical_metric(name, record_key, block)
    if canonical in LLM_JUDGED and is_offline(block):
        return None
    return THRESHOLDS.get(canonical)


# --------------------------------------------------------------------------- the grade rule

STATUSES = ("attention", "good", "excellent")  # worst first


@dataclass(frozen=True)
class Grade:
    """A metric's grade: ``status`` "excellent" / "good" / "attention", or None (not graded); ``reason`` says
    why it is not graded, or why it is "attention" although its value lies in a better band ("" otherwise)."""

    status: str | None
    reason: str = ""
    # the step that decided against the band: "says_nothing", "baselines", "uninformative", "judge_unvalidated" or ""
    rule: str = ""


def grade_of(bounds: tuple[float, float] | None, value: Any) -> Grade:
    """The grade rule — the one place the run record, the executive summary and the reports read
    (docs/metrics.md, Thresholds and Baselines):

    1. no threshold or no value → not graded; an aggregate of the offline judge that is near chance on held-out
       data of its kind (``offline_trust``: :func:`ragnb.metrics.fallback_trust.offline_trust`) → not graded, with why;
       an aggregate whose judge the same run's Tier Judge found at chance on the team's labels (``judge_trust``:
       :func:`ragnb.runs.judge_trust.mark_record`) → not graded, with why ("judge unvalidated: …");
    2. an aggregate that says nothing here (constant, or fewer than 10 valid items:
       :func:`ragnb.metrics.stats.degenerate_reason`) → not graded, with that reason;
    3. the band: value > ``excellent_above`` → excellent, < ``attention_below`` → attention, else good
       (a value equal to a bound is good);
    4. an aggregate that carries ``baselines`` (an accuracy: :mod:`ragnb.metrics.baselines`) is good or excellent
       only if it beats them with its CI; otherwise it is attention with their reason (undecided, without a CI:
       not graded).
    """
    from ragnb.metrics.stats import degenerate_reason, metric_value

    v = metric_value(value)
    trust = value.get("offline_trust") if isinstance(value, dict) else None
    if isinstance(trust, dict) and trust.get("informative") is False:
        return Grade(None, f"offline judge near chance on held-out {str(trust.get('kind', '')).replace('_', ' ')} "
                           f"data: {trust.get('reason') or 'not measured'}", "uninformative")
    judge = value.get("judge_trust") if isinstance(value, dict) else None
    if isinstance(judge, dict) and judge.get("validated") is False:
        return Grade(None, str(judge.get("reason") or "judge unvalidated on your labels (Tier Judge)"),
                     "judge_unvalidated")
    if bounds is None or v is None:
        return Grade(None)
    reason = degenerate_reason(value)
    if reason:
        return Grade(None, reason, "says_nothing")
    excellent_above, attention_below = bounds
    status = "excellent" if v > excellent_above else "attention" if v < attention_below else "good"
    baselines = value.get("baselines") if isinstance(value, dict) else None
    if status != "attention" and isinstance(baselines, dict):
        beats = baselines.get("beats")
        if beats is None:
            return Grade(None, str(baselines.get("reason") or "not compared with its trivial baselines"), "baselines")
        if not beats:
            return Grade("attention", str(baselines.get("reason")), "baselines")
    return Grade(status)
