"""Benchmark: ragnb retrieval metrics vs pytrec_eval on the same run, qrels and metric set.

    .venv/bin/python benchmarks/bench_retrieval_metrics.py [--queries N] [--docs D] [--repeats R]

Default: 100,000 queries × 100 ranked docs with string ids (``doc-123456``), 1–5 relevant docs per
query with grades 1..3 (plus a judged non-relevant doc), most of them retrieved somewhere in the list.

Each side is timed end to end in the same process, median of R repeats:
    pytrec_eval         RelevanceEvaluator(qrels, measures) + .evaluate(run) + the mean of every measure
    ragnb (ranked)      evaluate(run_as_lists, qrels, metrics, n_boot=1000)   — mean + bootstrap CI
    ragnb (scores)      evaluate(run_as_score_dicts, qrels, metrics, n_boot=1000)
    ragnb per_query     per_query(...) alone (no aggregation), both forms
    ragnb aggregate     stats.aggregate(...) alone on the 14 per-query columns (what evaluate adds)
pytrec_eval is given its natural input {qid: {doc: score}}; ragnb is timed on both run forms.
The per-query values of both ragnb forms are checked against pytrec_eval (max |diff| ≤ 1e-12).
Results go to benchmarks/results/retrieval_metrics.json.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import pytrec_eval
from ragnb.metrics.retrieval import evaluate, per_query
from ragnb.metrics.stats import aggregate

# ragnb metric name → pytrec_eval per-query measure key
MAPPING = {
    "hit_rate@1": "success_1", "hit_rate@5": "success_5", "hit_rate@10": "success_10",
    "mrr": "recip_rank",
    "recall@1": "recall_1", "recall@3": "recall_3", "recall@5": "recall_5", "recall@10": "recall_10",
    "precision@1": "P_1", "precision@3": "P_3", "precision@5": "P_5", "precision@10": "P_10",
    "ndcg@5": "ndcg_cut_5", "ndcg@10": "ndcg_cut_10",
}  # fmt: skip
METRICS = list(MAPPING)
MEASURES = {"success.1,5,10", "recip_rank", "recall.1,3,5,10", "P.1,3,5,10", "ndcg_cut.5,10"}
N_BOOT = 1000
RESULTS = Path(__file__).resolve().parent / "results" / "retrieval_metrics.json"


def make_data(n_queries: int, n_docs: int, corpus_size: int, seed: int = 0):
    """Ranked lists, the same run as {doc: score} dicts (distinct, descending scores), graded qrels."""
    rng = np.random.default_rng(seed)
    corpus = [f"doc-{i:06d}" for i in range(corpus_size)]
    qids = [f"q-{i:06d}" for i in range(n_queries)]
    # Distinct docs per query: a random start and stride into the corpus (stride coprime-ish, < corpus/n_docs).
    start = rng.integers(0, corpus_size, n_queries)
    stride = rng.integers(1, corpus_size // n_docs, n_queries)
    idx = (start[:, None] + stride[:, None] * np.arange(n_docs)) % corpus_size
    # Dense-retriever-like scores: float32 similarities, descending. trec_eval compares scores as
    # float32 and breaks ties by doc id (descending); a few queries have such ties, and their ranked
    # list is written in that order, so both run forms hold the same ranking.
    scores = np.sort(rng.random((n_queries, n_docs), dtype=np.float32), axis=1)[:, ::-1]
    tied = np.flatnonzero((scores[:, 1:] == scores[:, :-1]).any(axis=1))
    lists, dicts, qrels = {}, {}, {}
    n_rel = rng.integers(1, 6, n_queries)
    for i, q in enumerate(qids):
        docs = [corpus[j] for j in idx[i].tolist()]
        dicts[q] = dict(zip(docs, scores[i].tolist()))
        lists[q] = docs
        judged = {}
        # Relevant docs: mostly somewhere in the list (often near the top), sometimes not retrieved.
        # qrels ids are their own string objects, as when read from a file (equal, not identical).
        for _ in range(int(n_rel[i])):
            if rng.random() < 0.8:
                j = int(idx[i, min(int(rng.geometric(0.15)) - 1, n_docs - 1)])
            else:
                j = int(rng.integers(0, corpus_size))
            judged[f"doc-{j:06d}"] = int(rng.integers(1, 4))
        judged.setdefault(f"doc-{int(idx[i, rng.integers(0, n_docs)]):06d}", 0)  # a judged non-relevant doc
        qrels[q] = judged
    for i in tied.tolist():
        q = qids[i]
        lists[q] = [d for _, d in sorted(zip(scores[i].tolist(), lists[q]), reverse=True)]
    return lists, dicts, qrels


def timed_rounds(contenders: dict, repeats: int) -> tuple[dict, dict]:
    """Time every contender once per round, rounds repeated ``repeats`` times, so that the load
    from other processes falls on all of them alike. Returns (seconds per contender, last outputs)."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    outputs: dict = {}
    for r in range(repeats):
        for name, fn in contenders.items():
            outputs[name] = None
            gc.collect()
            t0 = time.perf_counter()
            outputs[name] = fn()
            times[name].append(time.perf_counter() - t0)
        print(f"round {r + 1}/{repeats}: " + ", ".join(f"{ts[-1]:.2f}" for ts in times.values()) + " s", flush=True)
    return times, outputs


def run_pytrec(qrels, run):
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, MEASURES)
    res = evaluator.evaluate(run)
    means = {m: statistics.fmean(r[m] for r in res.values()) for m in MAPPING.values()}
    return res, means


def max_abs_diff(frame, res) -> float:
    worst = 0.0
    qids = list(frame.index)
    if set(qids) != set(res):
        raise SystemExit(f"query sets differ: ragnb {len(qids)} vs pytrec_eval {len(res)}")
    for name, measure in MAPPING.items():
        ref = np.array([res[q][measure] for q in qids])
        worst = max(worst, float(np.max(np.abs(frame[name].to_numpy() - ref))))
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--docs", type=int, default=100, help="ranked docs per query")
    ap.add_argument("--corpus", type=int, default=1_000_000, help="distinct doc ids to draw from")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    lists, dicts, qrels = make_data(args.queries, args.docs, max(args.corpus, 2 * args.docs))
    print(f"data: {args.queries:,} queries × {args.docs} docs, "
          f"{sum(map(len, qrels.values())):,} judgments ({time.perf_counter() - t0:.1f} s to generate)")

    PY, EL, ES, PL, PS, AG = ("pytrec_eval (construct + evaluate + means)", "ragnb evaluate, ranked lists",
                              "ragnb evaluate, score dicts", "ragnb per_query, ranked lists",
                              "ragnb per_query, score dicts", "ragnb aggregate only (mean + bootstrap CI)")
    frame0, _ = per_query(dicts, qrels, METRICS)
    columns = [frame0[c].to_numpy() for c in frame0.columns]
    times, out = timed_rounds({
        PY: lambda: run_pytrec(qrels, dicts),
        EL: lambda: evaluate(lists, qrels, METRICS, n_boot=N_BOOT),
        ES: lambda: evaluate(dicts, qrels, METRICS, n_boot=N_BOOT),
        PL: lambda: per_query(lists, qrels, METRICS),
        PS: lambda: per_query(dicts, qrels, METRICS),
        AG: lambda: [aggregate(v, n_boot=N_BOOT) for v in columns],
    }, args.repeats)
    load_after = os.getloadavg()
    rows = {name: (statistics.median(ts), ts) for name, ts in times.items()}
    t_py, t_rl, t_rs, t_pl, t_ps, t_ag = (rows[n][0] for n in (PY, EL, ES, PL, PS, AG))
    res, py_means = out[PY]
    frame_l, summ_l = out[EL]
    frame_s, summ_s = out[ES]
    if not (out[PL][0].equals(frame_l) and out[PS][0].equals(frame_s)):
        raise SystemExit("per_query and evaluate disagree")

    diff_l, diff_s = max_abs_diff(frame_l, res), max_abs_diff(frame_s, res)
    mean_diff = max(abs(summ[m]["mean"] - py_means[p]) for summ in (summ_l, summ_s) for m, p in MAPPING.items())
    ok = max(diff_l, diff_s) <= 1e-12

    n_pairs = args.queries * args.docs
    print(f"load average (1 min) before/after: {load_before[0]:.2f}/{load_after[0]:.2f} on {os.cpu_count()} cpus")
    print(f"\n{'':45s} {'median s':>9s} {'ranked docs/s':>14s} {'pytrec/this':>12s}")
    for name, (t, _) in rows.items():
        print(f"{name:45s} {t:9.3f} {n_pairs / t:14,.0f} {t_py / t:11.2f}×")
    slow = sorted(((float(np.unique(v).size), n) for v, n in zip(columns, frame0.columns)), reverse=True)[:2]
    print(f"evaluate = per_query + aggregate ({t_ag:.2f} s for {len(METRICS)} metrics, most of it the index bootstrap "
          f"of the continuous ones: {', '.join(f'{n} ({u:,.0f} distinct values)' for u, n in slow)})")
    print(f"\nmax |ragnb − pytrec_eval| per query: ranked lists {diff_l:.3g}, score dicts {diff_s:.3g}; "
          f"of the means {mean_diff:.3g} → {'IDENTICAL' if ok else 'MISMATCH'}")

    report = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "pandas": importlib.metadata.version("pandas"),
            "pytrec_eval": importlib.metadata.version("pytrec-eval-terrier"),
            "load_average_1_5_15min": {"before": load_before, "after": load_after},
        },
        "sizes": {"queries": args.queries, "docs_per_query": args.docs, "corpus_ids": args.corpus,
                  "judgments": sum(map(len, qrels.values())), "repeats": args.repeats, "n_boot": N_BOOT},
        "metrics": MAPPING,
        "median_seconds": {name: t for name, (t, _) in rows.items()},
        "all_seconds": {name: ts for name, (_, ts) in rows.items()},
        "ratio_pytrec_over_ragnb": {
            "evaluate_ranked_lists": t_py / t_rl,
            "evaluate_score_dicts": t_py / t_rs,
            "per_query_ranked_lists": t_py / t_pl,
            "per_query_score_dicts": t_py / t_ps,
            "aggregate_only": t_py / t_ag,
        },
        "aggregate_only_seconds": t_ag,
        "max_abs_diff_per_query": {"ranked_lists": diff_l, "score_dicts": diff_s},
        "max_abs_diff_means": mean_diff,
        "identical": ok,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
