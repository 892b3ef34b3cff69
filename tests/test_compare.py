"""ragnb.runs.compare: paired tests against hand-computed values and scipy, alignment, run selection, run comparison."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragnb.runs import compare, trends
from ragnb.runs.compare import align, choose_runs, compare_runs, higher_is_better
from ragnb.runs.trends import runs_frame
from ragnb.runs.significance import holm, mcnemar_exact, paired_test, sign_flip_test, verdict, wilcoxon_p

# --------------------------------------------------------------------------------------------
# Synthetic runs with known numbers (also used by test_dashboard.py)
# --------------------------------------------------------------------------------------------

ITEMS_A = [f"q{i:02d}" for i in range(1, 13)]  # q01..q12
ITEMS_B = list(ITEMS_A)  # the same items (runs with different item ids are not comparable)
HIT_A = dict(zip(ITEMS_A, [1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0]))
# A→B changes 1→0 at q01, q03 and 0→1 at q02, q04
HIT_B = dict(zip(ITEMS_B, [0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0]))
MRR_A = {q: round(0.05 * i, 2) for i, q in enumerate(ITEMS_A, start=1)}  # 0.05 … 0.60
MRR_B = {q: round(MRR_A.get(q, 0.3) + 0.25, 2) for q in ITEMS_B}
MRR_B["q05"] = math.nan  # B failed on one item: counted as a NaN pair, not dropped silently
LAT_A = {q: 100.0 + 3 * i for i, q in enumerate(ITEMS_A)}
LAT_B = {q: LAT_A.get(q, 120.0) - 20.0 - i for i, q in enumerate(ITEMS_B)}
JUDGE_A = {"accuracy": {"mean": 0.80, "ci95": [0.75, 0.85], "n": 100, "n_valid": 100, "n_failed": 0}}
JUDGE_B = {"accuracy": {"mean": 0.90, "ci95": [0.86, 0.94], "n": 100, "n_valid": 100, "n_failed": 0}}
RUN_IDS = ("20250101-100000-aaaa", "20250102-100000-bbbb", "20250103-100000-cccc")


def _tier1(ids, hit, mrr, lat) -> tuple[dict, pd.DataFrame]:
    from ragnb.metrics.stats import aggregate

    df = pd.DataFrame({"question": [f"question {q} <b>" for q in ids], "hit_rate@1": [float(hit[q]) for q in ids],
                       "mrr": [mrr[q] for q in ids], "latency_ms": [lat[q] for q in ids],
                       "retrieved": ["c1 c2" for _ in ids]}, index=pd.Index(ids, name="qid"))
    names = ("hit_rate@1", "mrr", "latency_ms")
    metrics = {"tier": "tier_1", **{c: aggregate(df[c].to_numpy(), n_boot=200) for c in names},
               "top_k": 10}
    return metrics, df


def make_outputs(root: Path, n_runs: int = 3) -> Path:
    """``n_runs`` (0–3) synthetic runs in ``root``: run 1 and run 3 have Tier 1 with per-item files and a Tier
    Judge Pipeline block without; run 2 has only Tier 0 (plain numbers, no per-item file)."""
    from ragnb.tiers import payload as report
    from ragnb.runs.record import append_run_record
    from ragnb.runs.build import build_record

    root.mkdir(parents=True, exist_ok=True)
    specs = [
        {"tier_1_metrics": ("tier1_retrieval", *_tier1(ITEMS_A, HIT_A, MRR_A, LAT_A)),
         "tier_judge_pipeline_metrics": ("tier_judge_pipeline", {"tier": "tier_judge_pipeline", **JUDGE_A}, None)},
        {"tier_0_metrics": ("tier0_embeddings",
                            {"tier": "tier_0", "total_samples": 50, "avg_nn_distance": 0.41}, None)},
        {"tier_1_metrics": ("tier1_retrieval", *_tier1(ITEMS_B, HIT_B, MRR_B, LAT_B)),
         "tier_judge_pipeline_metrics": ("tier_judge_pipeline", {"tier": "tier_judge_pipeline", **JUDGE_B}, None)},
    ]
    for run_id, spec in list(zip(RUN_IDS, specs))[:n_runs]:
        run_dir = root / "runs" / run_id
        tiers = {}
        for key, (stem, metrics, per_item) in spec.items():
            report.write_metrics(run_dir, stem, metrics, per_item=per_item)
            tiers[key] = metrics
        reports = [{"name": stem, "stem": stem, "status": "ok", "html": f"{stem}.html"} for stem, *_ in spec.values()]
        record = build_record(run_id, tiers, "synthetic.jsonl", "synthetic", "mini", {"reports": reports}, cwd=root)
        append_run_record(root / "benchmark_runs.json", record)
    return root


def expected_comparison(alpha: float = 0.05) -> dict[tuple[str, str], dict]:
    """Independent computation of the run 3 vs run 1 comparison (plain numpy/scipy/itertools)."""
    paired = [q for q in ITEMS_A if q in ITEMS_B]
    rows: dict[tuple[str, str], dict] = {}
    for name, ra, rb in (("hit_rate@1", HIT_A, HIT_B), ("mrr", MRR_A, MRR_B), ("latency_ms", LAT_A, LAT_B)):
        a = np.array([ra[q] for q in paired], dtype=float)
        b = np.array([rb[q] for q in paired], dtype=float)
        ok = ~np.isnan(a) & ~np.isnan(b)
        d = b[ok] - a[ok]
        row = {"n_pairs": int(ok.sum()), "n_nan_pairs": int((~ok).sum()), "delta": d.mean(),
               "mean_a": a[ok].mean(), "mean_b": b[ok].mean(), "p_wilcoxon": stats.wilcoxon(d).pvalue}
        nz = d[d != 0]
        flips = [abs(sum(s * x for s, x in zip(signs, nz))) for signs in itertools.product((1, -1), repeat=len(nz))]
        row["p_permutation"] = sum(f >= abs(d.sum()) - 1e-9 for f in flips) / len(flips)
        if name == "hit_rate@1":
            n01 = int(((a == 0) & (b == 1)).sum())
            n10 = int(((a == 1) & (b == 0)).sum())
            row["p_value"] = stats.binomtest(n01, n01 + n10, 0.5).pvalue
        else:
            row["p_value"] = row["p_permutation"]
        rows[("tier_1_metrics", name)] = row
    se = math.hypot(0.10 / (2 * 1.959963984540054), 0.08 / (2 * 1.959963984540054))
    rows[("tier_judge_pipeline_metrics", "accuracy")] = {
        "delta": 0.10, "ci_lo": 0.10 - 1.959963984540054 * se, "ci_hi": 0.10 + 1.959963984540054 * se,
        "p_value": 2 * stats.norm.sf(0.10 / se)}
    keys = list(rows)
    ps = [rows[k]["p_value"] for k in keys]
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adj, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):  # Holm, written out
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        adj[i] = running
    for k, p in zip(keys, adj):
        rows[k]["p_holm"] = p
    return rows


# --------------------------------------------------------------------------------------------
# Tests of the statistics
# --------------------------------------------------------------------------------------------


def test_paired_test_small_case_by_hand():
    a = np.array([0.2, 0.5, 0.9, 0.4, 0.7])
    b = np.array([0.3, 0.45, 1.0, 0.6, 0.7])
    res = paired_test(a, b, n_boot=500, seed=3)
    # d = [0.1, -0.05, 0.1, 0.2, 0]: delta = 0.35 / 5
    assert res["delta"] == pytest.approx(0.07)
    assert res["mean_a"] == pytest.approx(0.54) and res["mean_b"] == pytest.approx(0.61)
    assert res["n_pairs"] == 5 and res["n_nan_pairs"] == 0
    # Exact sign flips of the 4 non-zero |d| = {0.1, 0.05, 0.1, 0.2} (total 0.45): flipping a subset F gives
    # S = 0.45 − 2·ΣF; |S| ≥ 0.35 needs ΣF ≤ 0.05 ({}, {0.05}) or ΣF ≥ 0.40 (their complements): 4 of 16.
    assert res["p_permutation"] == pytest.approx(0.25)
    assert res["test"] == "sign-flip permutation (exact)" and res["p_value"] == res["p_permutation"]
    assert res["p_wilcoxon"] == pytest.approx(stats.wilcoxon(b - a, zero_method="wilcox").pvalue)
    from ragnb.metrics.stats import bootstrap_ci

    assert (res["ci_lo"], res["ci_hi"]) == bootstrap_ci(b - a, n_boot=500, seed=3)
    assert res["ci_lo"] <= res["delta"] <= res["ci_hi"]


def test_wilcoxon_exact_by_hand():
    # d = [1, 2, −3, 4, 5]: no ties, W− = 3; subsets of ranks {1..5} with sum ≤ 3: {}, {1}, {2}, {3}, {1,2}
    # → P(W− ≤ 3) = 5/32, two-sided 10/32.
    assert wilcoxon_p(np.array([1.0, 2.0, -3.0, 4.0, 5.0])) == pytest.approx(10 / 32)
    assert wilcoxon_p(np.zeros(4)) == 1.0


def test_sign_flip_exact_matches_brute_force_and_monte_carlo_is_close():
    rng = np.random.default_rng(7)
    d = rng.normal(0.3, 1.0, size=11)
    flips = [abs(np.dot(s, d)) for s in itertools.product((1, -1), repeat=len(d))]
    brute = np.mean([f >= abs(d.sum()) - 1e-12 for f in flips])
    p, exact = sign_flip_test(d)
    assert exact and p == pytest.approx(brute)
    d22 = rng.normal(0.25, 1.0, size=22)
    p_exact, exact = sign_flip_test(d22, exact_max=22)
    p_mc, exact_mc = sign_flip_test(d22, n_perm=20000, seed=1)
    assert exact and not exact_mc
    assert abs(p_mc - p_exact) < 0.015  # Monte-Carlo standard error ≈ 0.0035 here
    assert sign_flip_test(d22, n_perm=20000, seed=1) == (p_mc, False)  # seeded: reproducible
    assert sign_flip_test(np.zeros(30)) == (1.0, True)


def test_mcnemar_by_hand_and_binary_choice():
    a = np.array([1, 1, 0, 0, 1, 0, 1, 0, 0, 0])
    b = np.array([1, 0, 1, 1, 1, 1, 1, 0, 1, 0])
    p, n01, n10 = mcnemar_exact(a, b)
    # discordant: 0→1 at 2, 3, 5, 8 (n01 = 4), 1→0 at 1 (n10 = 1): p = 2·P(Bin(5, ½) ≤ 1) = 2·6/32
    assert (n01, n10) == (4, 1) and p == pytest.approx(12 / 32)
    assert p == pytest.approx(stats.binomtest(4, 5, 0.5).pvalue)
    res = paired_test(a, b)
    assert res["test"] == "McNemar exact (binary)" and res["p_value"] == pytest.approx(12 / 32)
    assert (res["n01"], res["n10"]) == (4, 1)
    # the exact sign-flip test on 0/1 data is the same test
    assert res["p_permutation"] == pytest.approx(12 / 32)
    assert mcnemar_exact(a, a)[0] == 1.0


def test_holm_by_hand():
    # m = 4 valid: sorted 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → max so far 0.06
    adj = holm([0.01, 0.04, 0.03, None, 0.005])
    assert adj[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(adj[3]) and adj[4] == pytest.approx(0.02)
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_paired_test_counts_nan_pairs_and_too_few_pairs():
    res = paired_test([1.0, np.nan, 3.0, 4.0], [2.0, 5.0, np.nan, 4.5])
    assert res["n_pairs"] == 2 and res["n_nan_pairs"] == 2 and res["delta"] == pytest.approx(0.75)
    one = paired_test([1.0, np.nan], [2.0, 3.0])
    assert one["test"].startswith("not tested") and math.isnan(one["p_value"])
    with pytest.raises(ValueError, match="aligned pairs"):
        paired_test([1.0, 2.0], [1.0])


def test_align_reports_items_in_one_run_only():
    a = pd.DataFrame({"item_id": ["q1", "q2", "q3", "q4", "q5"], "m": [1, 2, np.nan, 4, 5.0]})
    b = pd.DataFrame({"item_id": ["q6", "q5", "q4", "q3", "q2"], "m": [6, 5.5, np.nan, 3.5, 2.5]})
    al = align(a, b, ["m"])
    assert (al.n_a, al.n_b, al.n_paired) == (5, 5, 4) and al.only_a == ["q1"] and al.only_b == ["q6"]
    merged = al.merged.set_index("item_id")
    assert merged.loc["q5", "m_b"] == 5.5 and merged.loc["q2", "m_a"] == 2
    res = paired_test(al.merged["m_a"], al.merged["m_b"])
    assert res["n_pairs"] == 2 and res["n_nan_pairs"] == 2  # q3 (NaN in A), q4 (NaN in B)
    # numeric ids in one file and text in the other still pair; repeated ids need a mode column
    al2 = align(pd.DataFrame({"id": [1, 2], "m": [0.1, 0.2]}), pd.DataFrame({"id": ["1", "2"], "m": [0.3, 0.4]}), ["m"])
    assert al2.key == ["id"] and al2.n_paired == 2
    rep = pd.DataFrame({"id": [1, 1], "mode": ["direct", "reasoned"], "m": [0.1, 0.2]})
    assert align(rep, rep, ["m"]).key == ["id", "mode"]
    with pytest.raises(ValueError, match="repeat"):
        align(rep.drop(columns="mode"), rep.drop(columns="mode"), ["m"])
    with pytest.raises(ValueError, match="no item id column"):
        align(pd.DataFrame({"m": [1]}), pd.DataFrame({"m": [1]}), ["m"])


def test_direction_and_verdicts():
    assert higher_is_better("hit_rate@1") and higher_is_better("doc_mrr") and higher_is_better("ndcg@10")
    assert higher_is_better("accuracy", "tier_judge_pipeline_metrics") and higher_is_better("avg_faithfulness")
    assert higher_is_better("latency_ms") is False and higher_is_better("hallucination_rate") is False
    assert higher_is_better("euclidean_distance") is False and higher_is_better("error_rate") is False
    assert higher_is_better("avg_pairwise_distance") is True  # registry beats the word "distance"
    assert higher_is_better("consistency_runs") is None
    assert verdict(0.1, 0.01, 0.05, True) == "B better"
    assert verdict(-5.0, 0.01, 0.05, False) == "B better"  # latency went down
    assert verdict(0.1, 0.01, 0.05, False) == "B worse"
    assert verdict(0.1, 0.2, 0.05, True) == "no significant difference at α = 0.05"
    assert verdict(-0.1, 0.001, 0.05, None) == "B lower (direction unknown)"
    assert verdict(0.1, math.nan, 0.05, True) == "not tested"


def test_metric_levels_and_page_level_versions():
    from ragnb.metrics.registry import level, page_level_version
    from ragnb.metrics.retrieval import relevant_pages

    assert [level(k) for k in ("doc_hit_rate@5", "docrank_ndcg@3", "hit_rate@5", "mrr", "latency_ms", "n_items")] == [
        "page", "page", "chunk", "chunk", None, None]
    assert [page_level_version(k) for k in ("hit_rate@10", "mrr", "ndcg@10", "precision@3", "doc_mrr",
                                            "retrieval_consistency", "latency_ms")] == [
        "doc_hit_rate@10", "doc_mrr", "doc_ndcg@10", "doc_precision@3", None, None, None]
    # the truth doc_* metrics score against: pages of the judged chunks, max grade per page, sorted; "" for none
    qrels = {"q1": {"a#1": 1, "a#2": 2, "b#1": 1, "c#1": 0}, "q2": {}}
    pages = {"a#1": "https://w/a", "a#2": "https://w/a", "b#1": "https://w/b", "c#1": "https://w/c"}
    assert relevant_pages(qrels, pages, ["q1", "q2", "q3"]) == ["https://w/a (grade 2) | https://w/b", "", ""]


# --------------------------------------------------------------------------------------------
# Runs on disk
# --------------------------------------------------------------------------------------------


def test_runs_frame_long_format_and_status(tmp_path):
    out = make_outputs(tmp_path / "out")
    runs, frame = trends.load_runs_frame(out)
    assert [r["id"] for r in runs] == list(RUN_IDS)
    row = frame[(frame.run_id == RUN_IDS[0]) & (frame.metric == "hit_rate@1")].iloc[0]
    assert row.tier_key == "tier_1_metrics" and row.notebook == "tier1_retrieval" and row["order"] == 0
    assert row["mean"] == pytest.approx(np.mean(list(HIT_A.values()))) and row["n"] == 12
    assert row.status == "good"  # 6/12 = 0.5: a value on the lower bound is "good" (docs/metrics.md, Conventions)
    acc = frame[(frame.run_id == RUN_IDS[2]) & (frame.metric == "accuracy")].iloc[0]
    assert acc.status == "good" and (acc.ci_lo, acc.ci_hi) == (0.86, 0.94)  # 0.85 ≤ 0.90 ≤ 0.95
    # plain numbers count only when they are known metrics; settings such as top_k are not
    assert "top_k" not in set(frame.metric) and "total_samples" in set(frame.metric)
    only_mrr = runs_frame(runs, ["mrr", "acc*"])
    assert set(only_mrr.metric) == {"mrr", "accuracy"}
    assert trends.load_runs_frame(tmp_path / "empty")[0] == []


def test_default_run_selection(tmp_path):
    out = make_outputs(tmp_path / "out")
    runs = compare.load_runs(out / "benchmark_runs.json")
    # latest = run 3; run 2 shares no notebook with per-item files, so A = run 1
    assert choose_runs(runs, out) == (RUN_IDS[0], RUN_IDS[2])
    assert choose_runs(runs, out, run_a=RUN_IDS[1]) == (RUN_IDS[1], RUN_IDS[2])
    assert choose_runs(runs, out, run_b=RUN_IDS[1]) == (RUN_IDS[0], RUN_IDS[1])
    assert choose_runs(runs, out, run_a=RUN_IDS[2]) == (RUN_IDS[2], RUN_IDS[1])  # B: latest other than A
    assert choose_runs(runs, out, run_b=RUN_IDS[0]) == (None, RUN_IDS[0])
    assert choose_runs(runs[:1], out) == (None, RUN_IDS[0])
    assert choose_runs([], out) == (None, None)
    # a run without benchmark metrics (e.g. a dashboard-only run) is never the default
    assert choose_runs(runs + [{"id": "20250104-000000-dddd", "timestamp": "2025-01-04T00:00:00+00:00",
                                "other_metrics": {"dashboard": {"runs": 3}}}], out) == (RUN_IDS[0], RUN_IDS[2])
    with pytest.raises(ValueError, match=r"unknown run id 'nope'.*20250101-100000-aaaa.*20250103-100000-cccc"):
        choose_runs(runs, out, run_a="nope")
    with pytest.raises(ValueError, match="two different runs"):
        choose_runs(runs, out, run_a=RUN_IDS[0], run_b=RUN_IDS[0])


def test_compare_runs_matches_independent_computation(tmp_path):
    out = make_outputs(tmp_path / "out")
    runs = compare.load_runs(out / "benchmark_runs.json")
    comp = compare_runs(runs, out, RUN_IDS[0], RUN_IDS[2], alpha=0.05, n_boot=300)
    t = comp.table.set_index(["tier_key", "metric"])
    expected = expected_comparison()
    assert set(t.index) == set(expected)
    for key, exp in expected.items():
        for col, value in exp.items():
            assert t.loc[key, col] == pytest.approx(value, rel=1e-9, abs=1e-12), (key, col)
    assert t.loc[("tier_1_metrics", "hit_rate@1"), "test"] == "McNemar exact (binary)"
    assert t.loc[("tier_1_metrics", "mrr"), "test"] == "sign-flip permutation (exact)"
    assert t.loc[("tier_1_metrics", "mrr"), "n_nan_pairs"] == 1 and t.loc[("tier_1_metrics", "mrr"), "n_b"] == 11
    assert t.loc[("tier_1_metrics", "mrr"), "verdict"] == "B better"
    assert t.loc[("tier_1_metrics", "latency_ms"), "verdict"] == "B better"  # lower latency
    assert t.loc[("tier_1_metrics", "hit_rate@1"), "verdict"] == "no significant difference at α = 0.05"
    acc = t.loc[("tier_judge_pipeline_metrics", "accuracy")]
    assert not acc.paired and "not paired: per-item file missing for run A and run B" in acc.test
    assert acc.verdict == "B better (unpaired)"
    al = comp.alignment.set_index("notebook")
    assert al.loc["tier1_retrieval", "n_paired"] == 12 and al.loc["tier1_retrieval", "only_in_a"] == 0
    assert not al.loc["tier_judge_pipeline", "paired"]
    # synthetic records carry no fingerprints: the comparison runs, but says it could not check the data
    assert comp.comparable is None and comp.reasons == [] and any("could not be checked" in n for n in comp.notes)
    records = comp.records()
    assert all(r["p_value"] is None or 0 <= r["p_value"] <= 1 for r in records)
    filtered = compare_runs(runs, out, RUN_IDS[0], RUN_IDS[2], n_boot=100, metrics=["mrr"])
    assert filtered.table["metric"].tolist() == ["mrr"]
    assert filtered.table["p_holm"].iloc[0] == pytest.approx(filtered.table["p_value"].iloc[0])  # m = 1
    with pytest.raises(ValueError, match="unknown run id 'zzz'"):
        compare_runs(runs, out, "zzz", RUN_IDS[2])
    with pytest.raises(ValueError, match="alpha"):
        compare_runs(runs, out, RUN_IDS[0], RUN_IDS[2], alpha=5)


def test_compare_runs_without_common_metrics(tmp_path):
    out = make_outputs(tmp_path / "out")
    runs = compare.load_runs(out / "benchmark_runs.json")
    comp = compare_runs(runs, out, RUN_IDS[0], RUN_IDS[1])
    assert comp.table.empty and "no metric in common" in comp.notes[-1] and comp.records() == []


def test_resolve_outputs(tmp_path, monkeypatch):
    out = make_outputs(tmp_path / "out", n_runs=1)
    assert compare.resolve_outputs("", out / "runs" / RUN_IDS[0]) == out.resolve()
    assert compare.resolve_outputs(str(tmp_path / "x"), out / "runs" / RUN_IDS[0]) == (tmp_path / "x").resolve()
    monkeypatch.setenv("RAGNB_OUTPUTS", str(tmp_path / "env"))
    assert compare.resolve_outputs("", tmp_path / "elsewhere") == (tmp_path / "env").resolve()
    assert compare.parse_patterns(" hit_rate@*, ,mrr") == ["hit_rate@*", "mrr"]


def test_unchanged_metrics_are_left_out_of_holm(tmp_path):
    """Six items, mrr +0.1 on each (exact sign-flip p = 2/2^6), recall@1 identical in both runs: with recall@1 in
    Holm's family m = 2 and p_holm(mrr) = 2·2/64 = 0.0625 (not significant); it cannot be rejected, so m = 1."""
    from ragnb.tiers import payload as report
    from ragnb.metrics.stats import aggregate
    from ragnb.runs.record import append_run_record
    from ragnb.runs.build import build_record

    out = tmp_path / "out"
    ids = [f"i{k}" for k in range(6)]
    base = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    for run_id, shift in (("20250101-000000-aaaa", 0.0), ("20250102-000000-bbbb", 0.1)):
        df = pd.DataFrame({"mrr": base + shift, "recall@1": [1.0, 0, 1, 0, 1, 0]}, index=pd.Index(ids))
        metrics = {c: aggregate(df[c].to_numpy(), n_boot=50) for c in df.columns}
        report.write_metrics(out / "runs" / run_id, "tier1_retrieval", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(run_id, {"tier_1_metrics": metrics}, None, None,
                                                                     None, cwd=tmp_path))
    runs = compare.load_runs(out / "benchmark_runs.json")
    t = compare_runs(runs, out, "20250101-000000-aaaa", "20250102-000000-bbbb", n_boot=50).table.set_index("metric")
    assert t.loc["recall@1", "n_changed"] == 0 and t.loc["recall@1", "p_holm"] == 1.0
    assert t.loc["mrr", "n_changed"] == 6 and t.loc["mrr", "p_value"] == pytest.approx(2 / 64)
    assert t.loc["mrr", "p_holm"] == pytest.approx(2 / 64) and t.loc["mrr", "verdict"] == "B better"


def test_an_old_records_answer_f1_meets_todays_answer_f1_unicode(tmp_path):
    """Before the official SQuAD pair had its own names, Tier 2 wrote the Unicode-aware F1 as ``answer_f1``: a run
    of then and a run of now are compared item by item under today's name (six items, +0.1 each: p = 2/2^6)."""
    from ragnb.tiers import payload as report
    from ragnb.metrics.stats import aggregate
    from ragnb.runs.record import append_run_record
    from ragnb.runs.build import build_record

    out = tmp_path / "out"
    ids = [f"i{k}" for k in range(6)]
    base = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    for run_id, key, shift in (("20250101-000000-aaaa", "answer_f1", 0.0),
                               ("20250102-000000-bbbb", "answer_f1_unicode", 0.1)):
        df = pd.DataFrame({key: base + shift}, index=pd.Index(ids))
        metrics = {"tier": "tier_2", key: aggregate(df[key].to_numpy(), n_boot=50)}
        report.write_metrics(out / "runs" / run_id, "tier2_generation", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(run_id, {"tier_2_metrics": metrics}, None, None,
                                                                     None, cwd=tmp_path))
    runs = compare.load_runs(out / "benchmark_runs.json")
    t = compare_runs(runs, out, "20250101-000000-aaaa", "20250102-000000-bbbb", n_boot=50).table.set_index("metric")
    assert list(t.index) == ["answer_f1_unicode"]
    row = t.loc["answer_f1_unicode"]
    assert row["paired"] and row["n_pairs"] == 6 and row["delta"] == pytest.approx(0.1)
    assert row["p_value"] == pytest.approx(2 / 64) and row["verdict"] == "B better"


# --------------------------------------------------------------------------------------------
# Like with like: dataset, corpus and item ids
# --------------------------------------------------------------------------------------------

DS_RU = {"name": "demo-ru", "n_items": 6, "sha256": "a" * 32}
DS_EN = {"name": "demo-en", "n_items": 6, "sha256": "b" * 32}
CORPUS_200 = {"database": "postgresql://x/db200", "n_chunks": 40, "n_embedded": 40, "chunks_md5": "c" * 32,
              "model": "all-MiniLM-L6-v2", "dim": 384}
CORPUS_60 = {**CORPUS_200, "database": "postgresql://x/db60", "n_chunks": 130, "n_embedded": 130,
             "chunks_md5": "d" * 32}


def _two_runs(tmp_path, prov_a, prov_b, ids_b=None, params_b=None, model_b="mini"):
    """Two Tier 1 runs whose mrr differs by +0.3 on every item (a clear 'B better' if they were comparable)."""
    from ragnb.tiers import payload as report
    from ragnb.metrics.stats import aggregate
    from ragnb.runs.record import append_run_record
    from ragnb.runs.build import build_record

    out = tmp_path / "out"
    ids_a = [f"i{k}" for k in range(8)]
    runs = (("20250101-000000-aaaa", ids_a, 0.0, prov_a, {"tier1_retrieval": {"top_k": 10, "output_dir": "x"}}, "mini"),
            ("20250102-000000-bbbb", ids_b or ids_a, 0.3, prov_b,
             params_b or {"tier1_retrieval": {"top_k": 10, "output_dir": "y"}}, model_b))
    for run_id, ids, shift, prov, params, model in runs:
        df = pd.DataFrame({"mrr": np.linspace(0.1, 0.6, len(ids)) + shift}, index=pd.Index(ids))
        metrics = {"mrr": aggregate(df["mrr"].to_numpy(), n_boot=50), **({"provenance": prov} if prov else {})}
        report.write_metrics(out / "runs" / run_id, "tier1_retrieval", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(
            run_id, {"tier_1_metrics": metrics}, None, None, model, {"params": params}, cwd=tmp_path))
    runs = compare.load_runs(out / "benchmark_runs.json")
    return compare_runs(runs, out, "20250101-000000-aaaa", "20250102-000000-bbbb", n_boot=50)


def test_same_dataset_and_corpus_are_comparable(tmp_path):
    prov = {"datasets": [DS_RU], "corpora": [CORPUS_200]}
    comp = _two_runs(tmp_path, prov, {**prov, "corpora": [{**CORPUS_200, "database": "postgresql://other-port/db"}]})
    row = comp.table.set_index("metric").loc["mrr"]
    assert comp.comparable is True and comp.reasons == [] and row.comparable == True  # noqa: E712
    assert row.verdict == "B better" and row.p_value == pytest.approx(2 / 2 ** 8)  # exact sign-flip, 8 items
    # the database URL is listed as a difference, but the same chunks in another database are still comparable
    assert comp.differences["kind"].tolist() == ["database"]


def test_runs_that_differ_only_in_the_embedding_model_are_compared(tmp_path):
    # Choosing an embedding model is the comparison: same questions, same chunks, other vectors.
    prov_a = {"datasets": [DS_RU], "corpora": [CORPUS_200]}
    prov_b = {"datasets": [DS_RU], "corpora": [{**CORPUS_200, "model": "multilingual-e5-small"}]}
    comp = _two_runs(tmp_path, prov_a, prov_b, model_b="multilingual-e5-small")
    row = comp.table.set_index("metric").loc["mrr"]
    assert comp.comparable is True and row.verdict == "B better"
    d = comp.differences.set_index("name")
    assert (d.loc["embedding_model", "run A"], d.loc["embedding_model", "run B"]) == ("mini", "multilingual-e5-small")


@pytest.mark.parametrize("case", ["dataset", "corpus", "one_sided", "item_ids"])
def test_different_data_is_not_comparable_and_names_no_winner(tmp_path, case):
    prov_a = {"datasets": [DS_RU], "corpora": [CORPUS_200]}
    prov_b, ids_b = dict(prov_a), None
    if case == "dataset":
        prov_b = {**prov_a, "datasets": [DS_EN]}
    elif case == "corpus":
        prov_b = {**prov_a, "corpora": [CORPUS_60]}
    elif case == "one_sided":
        prov_b = None
    else:
        ids_b = [f"i{k}" for k in range(1, 9)]  # i0 only in A, i8 only in B
    comp = _two_runs(tmp_path, prov_a, prov_b, ids_b=ids_b)
    row = comp.table.set_index("metric").loc["mrr"]
    assert comp.comparable is False and row.comparable == False  # noqa: E712
    assert row.verdict == "not comparable" and "not comparable" in row.test
    for col in ("p_value", "p_holm", "ci_lo", "ci_hi", "p_wilcoxon", "p_permutation"):
        assert pd.isna(row[col]), col  # no p-value, no CI of Δ: nothing that reads as a winner
    assert row.mean_b - row.mean_a == pytest.approx(row.delta)  # the means stay readable
    expected = {"dataset": "different datasets", "corpus": "different corpora",
                "one_sided": "recorded no dataset/corpus fingerprint", "item_ids": "different item ids"}[case]
    assert len(comp.reasons) == 1 and expected in comp.reasons[0]
    block = comp.verdict_block()
    assert block["comparable"] is False and block["reasons"] == comp.reasons
    if case == "corpus":
        assert "130 chunks" in comp.reasons[0] and "40 chunks" in comp.reasons[0]
    if case == "item_ids":
        assert "1 only in run A (i0)" in comp.reasons[0] and "1 only in run B (i8)" in comp.reasons[0]


def test_differences_list_every_parameter_model_dataset_and_database(tmp_path):
    prov_a = {"datasets": [DS_RU], "corpora": [CORPUS_200]}
    prov_b = {"datasets": [DS_EN], "corpora": [CORPUS_60]}
    comp = _two_runs(tmp_path, prov_a, prov_b, params_b={"tier1_retrieval": {"top_k": 5, "backend": "memory",
                                                                             "output_dir": "y"}}, model_b="e5")
    d = comp.differences.set_index("name")
    assert set(d.index) == {"embedding_model", "tier1_retrieval.top_k", "tier1_retrieval.backend",
                            "tier1_retrieval: dataset", "tier1_retrieval: corpus"}  # output_dir differs always
    assert (d.loc["tier1_retrieval.top_k", "run A"], d.loc["tier1_retrieval.top_k", "run B"]) == ("10", "5")
    assert d.loc["tier1_retrieval.backend", "run A"] == "—"
    assert "demo-ru" in d.loc["tier1_retrieval: dataset", "run A"] and "demo-en" in d.loc["tier1_retrieval: dataset", "run B"]
    assert d.loc["embedding_model", "kind"] == "model" and d.loc["tier1_retrieval: corpus", "kind"] == "database"


def test_default_baseline_is_the_latest_run_on_the_same_data(tmp_path):
    """ru, en (a demo's reference run), ru: run B = the last ru run; A = the first ru run, not the later en run."""
    from ragnb.tiers import payload as report
    from ragnb.metrics.stats import aggregate
    from ragnb.runs.record import append_run_record
    from ragnb.runs.build import build_record

    out = tmp_path / "out"
    ru = {"datasets": [DS_RU], "corpora": [CORPUS_200]}
    en = {"datasets": [DS_EN], "corpora": [{**CORPUS_200, "chunks_md5": "e" * 32}]}
    ids = ("20250101-000000-aaaa", "20250102-000000-bbbb", "20250103-000000-cccc")
    for run_id, prov in zip(ids, (ru, en, ru)):
        df = pd.DataFrame({"mrr": [0.1, 0.5, 1.0]}, index=pd.Index(["i0", "i1", "i2"]))
        metrics = {"mrr": aggregate(df["mrr"].to_numpy(), n_boot=20), "provenance": prov}
        report.write_metrics(out / "runs" / run_id, "tier1_retrieval", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(run_id, {"tier_1_metrics": metrics}, None, None,
                                                                     None, cwd=tmp_path))
    runs = compare.load_runs(out / "benchmark_runs.json")
    assert choose_runs(runs, out) == (ids[0], ids[2])
    assert choose_runs(runs, out, run_b=ids[1]) == (ids[0], ids[1])  # nothing on the same data: the latest paired
    assert compare.same_data(runs[0], runs[2]) and not compare.same_data(runs[1], runs[2])
