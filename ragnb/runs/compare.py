"""Compare benchmark runs: metric trends over runs, and run A vs. run B item by item.

Two runs are compared notebook by notebook. When both runs left a per-item file
(``<outputs>/runs/<run_id>/<stem>.per_item.parquet`` or ``.csv``) with an item id column, each metric is
compared on the items both runs scored (a *paired* comparison: the item-to-item variation cancels out,
so small real changes become visible). Otherwise the two aggregates are compared (*unpaired*).

Paired comparison of one metric, over the pairs where both values are valid (not NaN):

* ``delta = mean(b_i − a_i)`` (= mean_b − mean_a over those pairs), with a percentile-bootstrap 95% CI
  (pairs resampled, seeded: :func:`ragnb.metrics.stats.bootstrap_ci` of the differences).
* Binary metrics (every value 0 or 1, e.g. ``hit_rate@1``): McNemar's exact test — under H0 the
  discordant pairs split 50/50, so with n01 = #(a=0, b=1) and n10 = #(a=1, b=0),
  ``p = min(1, 2 · P[Binomial(n01 + n10, ½) ≤ min(n01, n10)])``.
* Other metrics: the paired sign-flip permutation test of the mean difference — under H0 each difference
  is as likely to have either sign, so ``p = P[|Σ s_i d_i| ≥ |Σ d_i|]`` over random signs s_i = ±1; exact
  (all 2^m sign patterns of the m non-zero differences) when m ≤ 20, else Monte-Carlo with a fixed seed,
  ``p = (1 + #{|S*| ≥ |S_obs|}) / (n_perm + 1)``. The Wilcoxon signed-rank test (scipy,
  ``zero_method="wilcox"``: zero differences carry no sign and are dropped, the classic treatment) is
  reported next to it; the permutation test is the primary one because it tests the same mean
  difference that ``delta`` and its CI describe.

With several metrics, Holm's step-down adjustment controls the family-wise error over every tested metric
of the comparison: sorted p_(1) ≤ … ≤ p_(m), ``p_holm_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))``.
A paired metric that did not change on any item (every difference 0) has p = 1 under every test and can
never be rejected, so it is left out of m (Tarone 1990: a hypothesis whose smallest attainable p-value
exceeds the level costs nothing) — otherwise the many unchanged cut-offs of a retrieval run would dilute
the one that changed. Verdicts use the Holm-adjusted p-value and the metric's direction (higher or lower
is better).

Unpaired fallback: ``delta = mean_b − mean_a``; each run's bootstrap CI gives a standard error
``se = (hi − lo) / (2 · 1.96)``, so ``delta ± 1.96 · √(se_a² + se_b²)`` and a two-sided z-test
(a normal approximation, said so in the ``test`` column).
"""

from __future__ import annotations

import fnmatch
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ragnb.metrics.stats import bootstrap_ci
from ragnb.runs.runner import POST_RECORD, RUNS_FILE, TIER_KEY
from ragnb.runs.record import (
    THRESHOLDS, TIER_KEYS, TIER_LABELS, block_status, canonical_metric, iter_aggregates, load_runs, metric_value,
)

ID_COLUMNS = ("item_id", "id")  # per-item key column, in order of preference
EXTRA_KEYS = ("mode",)  # tier_judge has one row per (mode, item)
EXACT_MAX = 20  # exact sign-flip enumeration up to 2^20 sign patterns
Z95 = 1.959963984540054


# --------------------------------------------------------------------------------------------
# Metric direction
# --------------------------------------------------------------------------------------------

_LOWER_WORDS = ("latency", "duration", "error", "hallucination", "failure", "failed", "noise_sensitivity",
                "brier", "calibration_error", "ece", "mean_abs_diff", "cost")
_HIGHER_WORDS = ("accuracy", "kappa", "auc", "f1", "precision", "recall", "consistency", "agreement", "hit_rate",
                 "mrr", "ndcg", "score", "faithfulness", "relevance", "relevancy", "similarity", "bleu", "rouge",
                 "coverage", "utilization", "share_within_delta", "specificity")
_SETTING = re.compile(r"(_runs$|_size$|^n_|_count$|^top_k$|^k$|^seed$)")
_registry_loaded = False


def _registry() -> dict:
    """The metric registry with every metric module imported (registration happens at import)."""
    global _registry_loaded
    from ragnb.metrics import registry

    if not _registry_loaded:
        import importlib

        for module in ("metrics.retrieval", "metrics.text", "metrics.fallback", "metrics.embedding",
                       "llm.judges.ragas", "llm.judges.nvidia"):
            importlib.import_module(f"ragnb.{module}")
        _registry_loaded = True
    return registry.REGISTRY


def higher_is_better(metric: str, tier_key: str | None = None) -> bool | None:
    """Whether a larger value of ``metric`` is better: the metric registry first (``hit_rate@1`` →
    hit_rate, ``doc_mrr`` → mrr, ``avg_faithfulness`` → faithfulness), then name words (latency, error,
    hallucination → lower is better; accuracy, recall, consistency → higher). None when unknown."""
    name = canonical_metric(metric, tier_key)
    if name in THRESHOLDS:
        return True
    base = re.sub(r"\[.*\]$", "", name).split("@", 1)[0]  # per-model columns such as faithfulness[gpt-x]
    reg = _registry()
    for candidate in (base, re.sub(r"^(doc_|avg_|mean_)", "", base)):
        if candidate in reg:
            return reg[candidate].higher_is_better
    words = base.lower()
    if _SETTING.search(words):  # consistency_runs, sample_size, n_items: settings and counts, not metrics
        return None
    if words.endswith("_ms") or words.endswith("_s") or any(w in words for w in _LOWER_WORDS):
        return False
    if any(w in words for w in _HIGHER_WORDS):
        return True
    return None


def _is_metric(name: str, value: Any) -> bool:
    # Aggregates ({mean, ...}) are metrics; a plain number only when its name is a known metric
    # (settings such as consistency_runs are plain numbers too).
    if isinstance(value, dict):
        return metric_value(value) is not None
    return metric_value(value) is not None and higher_is_better(name) is not None


def _ci(value: Any) -> tuple[float, float]:
    ci = value.get("ci95") if isinstance(value, dict) else None
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        lo, hi = metric_value(ci[0]), metric_value(ci[1])
        if lo is not None and hi is not None:
            return lo, hi
    return math.nan, math.nan


def matches(metric: str, patterns: Iterable[str] | None) -> bool:
    """True if ``patterns`` is empty/None or one of them (shell-style: ``hit_rate@*``) matches ``metric``."""
    pats = [p for p in (patterns or []) if p]
    return not pats or any(fnmatch.fnmatchcase(metric, p) for p in pats)


def parse_patterns(text: str) -> list[str]:
    """``"hit_rate@*, mrr"`` → ``["hit_rate@*", "mrr"]`` (the notebook's ``metrics`` parameter)."""
    if not isinstance(text, str):
        raise ValueError(f"metrics must be a comma-separated text such as 'hit_rate@*,mrr', got {text!r}")
    return [p.strip() for p in text.split(",") if p.strip()]


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


def _stem_of(tier_key: str) -> str | None:
    return {v: k for k, v in TIER_KEY.items()}.get(tier_key)


def blocks_of(record: dict) -> dict[str, tuple[str | None, dict]]:
    """``tier_key → (notebook stem or None, block)`` for every metric block of a run record; blocks of
    notebooks without a schema tier (``other_metrics``) use the stem as key."""
    out: dict[str, tuple[str | None, dict]] = {}
    for key in TIER_KEYS:
        block = record.get(key)
        if isinstance(block, dict):
            out[key] = (_stem_of(key), block)
    for stem, block in sorted((record.get("other_metrics") or {}).items()):
        if isinstance(block, dict) and stem not in POST_RECORD:  # the dashboard's own JSON is no benchmark
            out[stem] = (stem, block)
    return out


def metric_entries(block: dict) -> dict[str, Any]:
    """The metrics of a block: aggregates, and plain numbers with a known metric name."""
    return {name: value for name, value in iter_aggregates(block) if _is_metric(name, value)}


def sort_runs(runs: list[dict]) -> list[dict]:
    """Runs by start time (``timestamp``), file order breaking ties and standing in for a missing time."""
    stamps = pd.to_datetime([r.get("timestamp") for r in runs], utc=True, errors="coerce", format="ISO8601")
    last = pd.Timestamp.min.tz_localize("UTC")
    keyed = []
    for i, (run, ts) in enumerate(zip(runs, stamps)):
        last = ts if not pd.isna(ts) else last
        keyed.append((last, i, run))
    return [run for *_, run in sorted(keyed, key=lambda t: (t[0], t[1]))]


def latest_run(runs: list[dict]) -> dict | None:
    """The newest run with benchmark metrics (else the newest run; None without runs)."""
    ordered = sort_runs(runs)
    usable = [r for r in ordered if blocks_of(r)]
    return (usable or ordered or [None])[-1]


def runs_frame(runs: list[dict], metrics: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per (run, tier block, metric): ``run_id, timestamp, order, tier_key, tier_label, notebook,
    metric, mean, ci_lo, ci_hi, n, n_failed, status, overall_status``; runs in time order (``order`` 0, 1, …).
    ``status`` follows the seed §11.2 thresholds (None where a metric has none). ``metrics``: optional
    shell-style name patterns."""
    rows = []
    for order, run in enumerate(sort_runs(runs)):
        for key, (stem, block) in blocks_of(run).items():
            for name, value in metric_entries(block).items():
                if not matches(name, metrics):
                    continue
                lo, hi = _ci(value)
                rows.append({
                    "run_id": str(run.get("id")), "timestamp": run.get("timestamp"), "order": order,
                    "tier_key": key, "tier_label": TIER_LABELS.get(key, key), "notebook": stem, "metric": name,
                    "mean": metric_value(value), "ci_lo": lo, "ci_hi": hi,
                    "n": value.get("n") if isinstance(value, dict) else None,
                    "n_failed": value.get("n_failed") if isinstance(value, dict) else None,
                    "status": block_status(name, value, key, block),
                    "overall_status": run.get("overall_status"),
                })
    cols = ["run_id", "timestamp", "order", "tier_key", "tier_label", "notebook", "metric", "mean", "ci_lo",
            "ci_hi", "n", "n_failed", "status", "overall_status"]
    frame = pd.DataFrame(rows, columns=cols)
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True, errors="coerce", format="ISO8601")
    for col in ("n", "n_failed"):
        frame[col] = frame[col].astype("Int64")
    return frame


def load_runs_frame(outputs: str | Path, metrics: Iterable[str] | None = None) -> tuple[list[dict], pd.DataFrame]:
    """``(runs in time order, runs_frame)`` from ``<outputs>/benchmark_runs.json`` (both empty if absent)."""
    runs = sort_runs(load_runs(Path(outputs) / RUNS_FILE))
    return runs, runs_frame(runs, metrics)


# --------------------------------------------------------------------------------------------
# Per-item files
# --------------------------------------------------------------------------------------------


def per_item_path(outputs: str | Path, run_id: str, stem: str, record: dict | None = None) -> Path | None:
    """``<outputs>/runs/<run_id>/<stem>.per_item.parquet`` (exact floats) or ``.csv``; for a multi-model
    sweep (``record["model_runs"]``), whose top-level blocks are the first combination's, that combination's
    folder. None if no file exists."""
    run_dir = Path(outputs) / "runs" / str(run_id)
    folders = [run_dir]
    model_runs = (record or {}).get("model_runs") or []
    if model_runs and isinstance(model_runs[0], dict) and model_runs[0].get("folder"):
        folders.append(run_dir / str(model_runs[0]["folder"]))
    for folder in folders:
        for suffix in (".per_item.parquet", ".per_item.csv"):
            path = folder / f"{stem}{suffix}"
            if path.is_file():
                return path
    return None


def read_per_item(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if path.suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except (ImportError, OSError, ValueError):  # unreadable parquet: the CSV twin has the same rows
            csv = path.with_suffix(".csv")
            if not csv.is_file():
                raise
            path = csv
    return pd.read_csv(path, float_precision="round_trip", low_memory=False)


def paired_stems(outputs: str | Path, a: dict, b: dict) -> list[str]:
    """Notebooks whose metrics are in both records and whose per-item files exist for both runs."""
    stems_a = {stem for stem, _ in blocks_of(a).values() if stem}
    stems_b = {stem for stem, _ in blocks_of(b).values() if stem}
    return sorted(s for s in stems_a & stems_b
                  if per_item_path(outputs, a["id"], s, a) and per_item_path(outputs, b["id"], s, b))


def _key_columns(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[str] | None, str]:
    id_col = next((c for c in ID_COLUMNS if c in a.columns and c in b.columns), None)
    if id_col is None:
        return None, f"no item id column ({' or '.join(ID_COLUMNS)}) in both per-item files"
    key = [id_col]
    for extra in EXTRA_KEYS:
        if not (a.duplicated(key).any() or b.duplicated(key).any()):
            break
        if extra in a.columns and extra in b.columns:
            key.append(extra)
    if a.duplicated(key).any() or b.duplicated(key).any():
        return None, f"item ids ({', '.join(key)}) repeat within a per-item file, so items cannot be paired"
    return key, ""


@dataclass
class Alignment:
    """Items of two per-item tables matched on their id (inner join)."""

    key: list[str]
    merged: pd.DataFrame  # key columns + "<col>_a", "<col>_b" for the compared columns
    n_a: int
    n_b: int
    only_a: list[str]
    only_b: list[str]

    @property
    def n_paired(self) -> int:
        return len(self.merged)


def align(a: pd.DataFrame, b: pd.DataFrame, columns: list[str]) -> Alignment:
    """Pair the rows of ``a`` and ``b`` on the item id (``item_id``, else ``id``; plus ``mode`` when ids
    repeat per mode). Items in only one table are listed, not dropped silently. Raises ValueError when the
    tables have no usable key."""
    key, why = _key_columns(a, b)
    if key is None:
        raise ValueError(why)
    ka = a[key].astype(str)
    kb = b[key].astype(str)
    left = pd.concat([ka, a[columns].add_suffix("_a")], axis=1)
    right = pd.concat([kb, b[columns].add_suffix("_b")], axis=1)
    merged = left.merge(right, on=key, how="inner", validate="one_to_one")
    ids_a = set(map(tuple, ka.to_numpy()))
    ids_b = set(map(tuple, kb.to_numpy()))
    fmt = (lambda t: t[0]) if len(key) == 1 else (lambda t: "/".join(t))
    return Alignment(key, merged, len(a), len(b), sorted(fmt(t) for t in ids_a - ids_b),
                     sorted(fmt(t) for t in ids_b - ids_a))


def _floats(series: pd.Series) -> np.ndarray:
    """A numeric or boolean column as float64 with NaN for missing values (nullable dtypes included)."""
    return pd.to_numeric(series, errors="coerce").astype("Float64").to_numpy(dtype=float, na_value=np.nan)


def _numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def _signed_sums(x: np.ndarray) -> np.ndarray:
    """Σ s_i x_i for all 2^len(x) sign patterns s ∈ {−1, +1}^len(x)."""
    k = len(x)
    bits = (np.arange(2 ** k)[:, None] >> np.arange(k)[None, :]) & 1
    return (1 - 2 * bits) @ x


def sign_flip_test(d: np.ndarray, n_perm: int = 10000, seed: int = 0, exact_max: int = EXACT_MAX) -> tuple[float, bool]:
    """Two-sided paired sign-flip permutation test of mean(d) = 0: ``(p, exact)``.

    Zero differences do not change under a sign flip, so only the m non-zero ones are permuted. m ≤
    ``exact_max``: all 2^m patterns are enumerated (two halves summed against each other, so 2^20 costs one
    1024 × 1024 array). Otherwise ``n_perm`` random patterns from ``seed``; p = (1 + #extreme)/(n_perm + 1)
    so that a Monte-Carlo p is never 0.
    """
    d = np.asarray(d, dtype=float)
    if np.isnan(d).any():
        raise ValueError("sign_flip_test: differences contain NaN; drop incomplete pairs first")
    x = np.abs(d[d != 0])
    m = len(x)
    if m == 0:
        return 1.0, True
    observed = abs(d.sum())
    tol = 1e-9 * (1.0 + x.sum())  # equal sums computed in another order must count as "as extreme"
    if m <= exact_max:
        half = m // 2
        low, high = _signed_sums(x[:half]), _signed_sums(x[half:])
        total = np.abs(high[:, None] + low[None, :])
        return float(np.count_nonzero(total >= observed - tol) / total.size), True
    if n_perm < 1:
        raise ValueError(f"n_perm must be ≥ 1, got {n_perm}")
    rng = np.random.default_rng(seed)
    extreme, done = 0, 0
    step = max(1, 2_000_000 // m)
    while done < n_perm:
        rows = min(step, n_perm - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(rows, m))
        extreme += int(np.count_nonzero(np.abs(signs @ x) >= observed - tol))
        done += rows
    return (1 + extreme) / (n_perm + 1), False


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> tuple[float, int, int]:
    """McNemar's exact test for paired 0/1 outcomes: ``(p, n01, n10)`` with n01 = #(a=0, b=1),
    n10 = #(a=1, b=0); p = two-sided binomial test of n01 out of n01 + n10 at ½ (1.0 without discordant pairs)."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n01 = int(np.count_nonzero((a == 0) & (b == 1)))
    n10 = int(np.count_nonzero((a == 1) & (b == 0)))
    if n01 + n10 == 0:
        return 1.0, n01, n10
    return float(binomtest(n01, n01 + n10, 0.5).pvalue), n01, n10


def wilcoxon_p(d: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p (scipy, ``zero_method="wilcox"``); 1.0 when every difference is 0."""
    from scipy.stats import wilcoxon

    d = np.asarray(d, dtype=float)
    if not np.any(d != 0):
        return 1.0
    with warnings.catch_warnings():  # small-sample / ties notes from scipy are expected here
        warnings.simplefilter("ignore")
        return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def holm(pvalues: Iterable[float | None]) -> list[float]:
    """Holm step-down adjusted p-values; None/NaN entries stay NaN and do not count in m."""
    p = np.array([math.nan if v is None else float(v) for v in pvalues], dtype=float)
    out = np.full(p.shape, math.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = len(idx)
    if m == 0:
        return out.tolist()
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def is_binary(*arrays: np.ndarray) -> bool:
    values = np.concatenate([np.asarray(x, dtype=float).ravel() for x in arrays])
    return values.size > 0 and bool(np.all((values == 0) | (values == 1)))


def paired_test(a: Any, b: Any, n_boot: int = 1000, seed: int = 0, n_perm: int = 10000) -> dict:
    """Paired comparison of per-item values ``a`` and ``b`` (same items, same order; NaN = no value).

    Returns ``n_pairs`` (both valid), ``n_nan_pairs``, ``mean_a``, ``mean_b`` (over the valid pairs),
    ``n_changed`` (pairs with b ≠ a), ``delta``, ``ci_lo``, ``ci_hi``, ``test``, ``p_value`` (the chosen
    test), ``p_wilcoxon``, ``p_permutation``, and for binary data ``n01``/``n10``. See the module docstring for the formulas.
    """
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_test: a has {a.size} values and b {b.size}; pass the aligned pairs")
    ok = ~(np.isnan(a) | np.isnan(b))
    av, bv = a[ok], b[ok]
    d = bv - av
    out: dict[str, Any] = {
        "n_pairs": int(ok.sum()), "n_nan_pairs": int((~ok).sum()), "n_changed": int(np.count_nonzero(d)),
        "mean_a": float(av.mean()) if av.size else math.nan, "mean_b": float(bv.mean()) if bv.size else math.nan,
        "delta": float(d.mean()) if d.size else math.nan, "ci_lo": math.nan, "ci_hi": math.nan,
        "test": None, "p_value": math.nan, "p_wilcoxon": math.nan, "p_permutation": math.nan,
    }
    if d.size < 2:
        out["test"] = "not tested (fewer than 2 complete pairs)"
        return out
    out["ci_lo"], out["ci_hi"] = bootstrap_ci(d, n_boot=n_boot, seed=seed)
    p_perm, exact = sign_flip_test(d, n_perm=n_perm, seed=seed)
    out["p_permutation"] = p_perm
    out["p_wilcoxon"] = wilcoxon_p(d)
    if is_binary(av, bv):
        out["p_value"], out["n01"], out["n10"] = mcnemar_exact(av, bv)
        out["test"] = "McNemar exact (binary)"
    else:
        out["p_value"] = p_perm
        out["test"] = "sign-flip permutation (" + ("exact" if exact else f"Monte-Carlo, {n_perm} draws") + ")"
    return out


def unpaired_test(agg_a: Any, agg_b: Any) -> dict:
    """Difference of two aggregates: delta = mean_b − mean_a, CI and two-sided z-test from the standard
    errors implied by each run's 95% CI (normal approximation). No CI → delta only."""
    from scipy.stats import norm

    ma, mb = metric_value(agg_a), metric_value(agg_b)
    out: dict[str, Any] = {
        "mean_a": ma if ma is not None else math.nan, "mean_b": mb if mb is not None else math.nan,
        "delta": (mb - ma) if ma is not None and mb is not None else math.nan,
        "ci_lo": math.nan, "ci_hi": math.nan, "p_value": math.nan, "p_wilcoxon": math.nan,
        "p_permutation": math.nan,
        "n_a": agg_a.get("n_valid", agg_a.get("n")) if isinstance(agg_a, dict) else None,
        "n_b": agg_b.get("n_valid", agg_b.get("n")) if isinstance(agg_b, dict) else None,
    }
    (la, ha), (lb, hb) = _ci(agg_a), _ci(agg_b)
    if math.isnan(out["delta"]) or any(math.isnan(v) for v in (la, ha, lb, hb)):
        out["test"] = "not tested (no 95% CI in the record)"
        return out
    se = math.hypot((ha - la) / (2 * Z95), (hb - lb) / (2 * Z95))
    out["ci_lo"], out["ci_hi"] = out["delta"] - Z95 * se, out["delta"] + Z95 * se
    if se > 0:
        out["p_value"] = float(2 * norm.sf(abs(out["delta"]) / se))
    elif out["delta"] == 0:
        out["p_value"] = 1.0
    out["test"] = "unpaired z from the two 95% CIs (approximate)"
    return out


def verdict(delta: float, p: float, alpha: float, better_high: bool | None) -> str:
    """``"B better"`` / ``"B worse"`` (or ``"B higher"`` / ``"B lower"`` when the direction is unknown) when
    ``p < alpha``; else ``"no significant difference at α = <alpha>"``; ``"not tested"`` without a p-value."""
    if p is None or math.isnan(p) or delta is None or math.isnan(delta):
        return "not tested"
    if p >= alpha or delta == 0:
        return f"no significant difference at α = {alpha:g}"
    if better_high is None:
        return "B higher (direction unknown)" if delta > 0 else "B lower (direction unknown)"
    return "B better" if (delta > 0) == better_high else "B worse"


# --------------------------------------------------------------------------------------------
# Choosing and comparing runs
# --------------------------------------------------------------------------------------------


def _find(runs: list[dict], run_id: str) -> dict:
    for run in runs:
        if str(run.get("id")) == run_id:
            return run
    ids = [str(r.get("id")) for r in runs]
    raise ValueError(f"unknown run id {run_id!r}; runs in benchmark_runs.json: {', '.join(ids) or '(none)'}")


def choose_runs(
    runs: list[dict], outputs: str | Path, run_a: str = "", run_b: str = "",
) -> tuple[str | None, str | None]:
    """The pair to compare: ``run_b`` or the latest run; ``run_a`` or the most recent run before B that
    shares a notebook with per-item files in both runs (a paired comparison), else the most recent earlier
    run sharing any notebook, else the run just before B. Defaults consider only runs with benchmark
    metrics. ``(None, None)`` without such runs, ``(None, B)`` without an earlier one. Unknown ids or
    ``run_a == run_b`` → ValueError (the message lists the ids)."""
    ordered = sort_runs(runs)
    if run_a:
        _find(ordered, run_a)
    if run_b:
        _find(ordered, run_b)
    if run_a and run_b and run_a == run_b:
        raise ValueError(f"run_a and run_b are both {run_a!r}; choose two different runs")
    # Defaults skip records without benchmark metrics (a failed run, a dashboard-only run).
    usable = [r for r in ordered if blocks_of(r)]
    if not run_b:
        others = [r for r in usable if str(r.get("id")) != run_a]
        if not others:
            return run_a or None, None
        run_b = str(others[-1]["id"])
    if run_a:
        return run_a, run_b
    b = _find(ordered, run_b)
    earlier = list(reversed([r for r in ordered[: ordered.index(b)] if blocks_of(r)]))
    if not earlier:
        return None, run_b
    for candidate in earlier:
        if paired_stems(outputs, candidate, b):
            return str(candidate["id"]), run_b
    shared = set(blocks_of(b))
    for candidate in earlier:
        if shared & set(blocks_of(candidate)):
            return str(candidate["id"]), run_b
    return str(earlier[0]["id"]), run_b


COMPARISON_COLUMNS = [
    "tier_key", "notebook", "metric", "paired", "test", "n_a", "n_b", "n_pairs", "n_nan_pairs", "n_changed", "mean_a", "mean_b",
    "delta", "ci_lo", "ci_hi", "p_value", "p_holm", "p_wilcoxon", "p_permutation", "higher_is_better", "verdict",
]


@dataclass
class Comparison:
    """Run A vs. run B: one row per (tier block, metric) in ``table``; ``alignment`` has one row per
    notebook (paired or not, items in each run, items paired, items in only one run and why)."""

    run_a: str
    run_b: str
    alpha: float
    table: pd.DataFrame
    alignment: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    def records(self) -> list[dict]:
        """The table as JSON-ready dicts (NaN → None)."""
        from ragnb.io import to_jsonable

        return to_jsonable(self.table.astype(object).where(self.table.notna(), None).to_dict(orient="records"))


def compare_runs(
    runs: list[dict], outputs: str | Path, run_a: str, run_b: str, alpha: float = 0.05, n_boot: int = 1000,
    metrics: Iterable[str] | None = None, seed: int = 0, n_perm: int = 10000,
) -> Comparison:
    """Compare every metric that both runs recorded, per notebook: paired on the per-item files when both
    exist and share an item id column, otherwise from the aggregates. See the module docstring."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be ≥ 1, got {n_boot}")
    if run_a == run_b:
        raise ValueError(f"run_a and run_b are both {run_a!r}; choose two different runs")
    a, b = _find(runs, run_a), _find(runs, run_b)
    blocks_a, blocks_b = blocks_of(a), blocks_of(b)
    outputs = Path(outputs)
    rows: list[dict] = []
    align_rows: list[dict] = []
    notes: list[str] = []
    for key in [k for k in blocks_a if k in blocks_b]:
        stem, block_a = blocks_a[key]
        _, block_b = blocks_b[key]
        ent_a, ent_b = metric_entries(block_a), metric_entries(block_b)
        names = [n for n in ent_a if n in ent_b and matches(n, metrics)]
        one_sided = sorted(n for n in set(ent_a) ^ set(ent_b) if matches(n, metrics))
        if one_sided:
            notes.append(f"{TIER_LABELS.get(key, key)}: only one run has {', '.join(one_sided)} (not compared).")
        if not names:
            continue
        alignment, why = None, ""
        path_a = per_item_path(outputs, run_a, stem, a) if stem else None
        path_b = per_item_path(outputs, run_b, stem, b) if stem else None
        columns: list[str] = []
        fa = fb = None
        if path_a is None or path_b is None:
            why = "per-item file missing for " + " and ".join(
                r for r, p in (("run A", path_a), ("run B", path_b)) if p is None)
        else:
            try:
                fa, fb = read_per_item(path_a), read_per_item(path_b)
                columns = [n for n in names if n in fa.columns and n in fb.columns
                           and _numeric(fa[n]) and _numeric(fb[n])]
                if columns:
                    alignment = align(fa, fb, columns)
                else:
                    why = "no per-item column"
            except (ValueError, OSError, ImportError) as exc:
                why = str(exc)
        align_rows.append({
            "tier_key": key, "notebook": stem, "paired": alignment is not None,
            "key": ", ".join(alignment.key) if alignment else None,
            "n_a": alignment.n_a if alignment else None, "n_b": alignment.n_b if alignment else None,
            "n_paired": alignment.n_paired if alignment else None,
            "only_in_a": len(alignment.only_a) if alignment else None,
            "only_in_b": len(alignment.only_b) if alignment else None,
            "note": why or None,
        })
        if alignment is not None:
            for side, ids in (("A", alignment.only_a), ("B", alignment.only_b)):
                if ids:
                    shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
                    notes.append(f"{stem}: {len(ids)} item(s) only in run {side} are left out of the paired "
                                 f"comparison ({shown}).")
        for name in names:
            row: dict[str, Any] = {"tier_key": key, "notebook": stem, "metric": name,
                                   "higher_is_better": higher_is_better(name, key)}
            if alignment is not None and name in columns:
                res = paired_test(_floats(alignment.merged[f"{name}_a"]), _floats(alignment.merged[f"{name}_b"]),
                                  n_boot=n_boot, seed=seed, n_perm=n_perm)
                # n_a / n_b: valid values in each run's whole per-item file (paired or not)
                row.update(res, paired=True, n_a=int(fa[name].notna().sum()), n_b=int(fb[name].notna().sum()))
            else:
                res = unpaired_test(ent_a[name], ent_b[name])
                reason = why or "no per-item column"
                row.update(res, paired=False, n_pairs=None, n_nan_pairs=None, n_changed=None)
                row["test"] = f"{res['test']}; not paired: {reason}"
            rows.append(row)
    table = pd.DataFrame(rows)
    for col in COMPARISON_COLUMNS:
        if col not in table:
            table[col] = None
    table = table[COMPARISON_COLUMNS + [c for c in table.columns if c not in COMPARISON_COLUMNS]]
    if len(table):
        for col in ("n_a", "n_b", "n_pairs", "n_nan_pairs", "n_changed", "n01", "n10"):
            if col in table:
                table[col] = pd.to_numeric(table[col], errors="coerce").astype("Int64")
        p = table["p_value"].astype(float)
        unchanged = (table["n_changed"] == 0).fillna(False).to_numpy(dtype=bool)
        table["p_holm"] = holm(p.where(~unchanged))  # unchanged metrics cannot be rejected: not in m
        table.loc[unchanged, "p_holm"] = 1.0
        table["verdict"] = [
            verdict(d, p, alpha, h) + ("" if paired else " (unpaired)") if not (p is None or math.isnan(p))
            else "not tested"
            for d, p, h, paired in zip(table["delta"].astype(float), table["p_holm"].astype(float),
                                       table["higher_is_better"], table["paired"])
        ]
        table["paired"] = table["paired"].astype(bool)
    else:
        notes.append("The two runs have no metric in common" + (" matching the metrics filter." if metrics else "."))
    alignment_frame = pd.DataFrame(align_rows, columns=["tier_key", "notebook", "paired", "key", "n_a", "n_b",
                                                        "n_paired", "only_in_a", "only_in_b", "note"])
    for col in ("n_a", "n_b", "n_paired", "only_in_a", "only_in_b"):
        alignment_frame[col] = pd.to_numeric(alignment_frame[col], errors="coerce").astype("Int64")
    return Comparison(run_a, run_b, alpha, table, alignment_frame, notes)


def resolve_outputs(outputs: str, output_dir: str | Path | None = None) -> Path:
    """The outputs folder to read: ``outputs`` if given; else the one holding ``output_dir`` when that is a
    runner-made run folder (``<outputs>/runs/<run_id>``, so the dashboard of a run sees that run's
    history); else ``ragnb.config.outputs_dir()``."""
    from ragnb import config

    if outputs:
        return Path(outputs).resolve()
    if output_dir:
        run_dir = Path(output_dir).resolve()
        if run_dir.parent.name == "runs" and (run_dir.parent.parent / RUNS_FILE).is_file():
            return run_dir.parent.parent
    return config.outputs_dir()
