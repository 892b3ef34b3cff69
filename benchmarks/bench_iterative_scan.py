"""Is pgvector's iterative index scan a recall setting for an unfiltered top-k? Recall@10 against exact search of
the 200 seeded questions (``recall_sample``) on a corpus that ``bench_scale.py`` loaded and indexed, at
``hnsw.ef_search`` alone and with ``hnsw.iterative_scan = relaxed_order`` asked for ``L`` candidates (the index
scan's LIMIT; the outer query keeps the 10 nearest of them), and the wall time of each (same run).

    RAGNB_HOME=/tmp/ragnb_scale python benchmarks/bench_iterative_scan.py --n 100000 --work /tmp/ragnb_scale/work

Results: ``benchmarks/results/iterative_scan.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragnb.rag.retrieval import exact_top_k, recall_per_query, recall_sample  # noqa: E402
from ragnb.store.engine import connect  # noqa: E402
from ragnb.store.models import locate  # noqa: E402
from ragnb.store.vectors import vector_literal  # noqa: E402

SETTINGS = ((40, None), (40, 320), (160, None), (160, 320), (160, 640), (320, None), (100, 1000), (1000, None))


def measure(db, sample: np.ndarray, truth: list[list[str]], ef: int, candidates: int | None) -> dict:
    loc = locate(db, "chunks", None)
    inner = (f"SELECT {loc.id_col} AS id, {loc.emb_col} <=> q.v AS d FROM {loc.sql_table} "
             f"ORDER BY {loc.emb_col} <=> q.v LIMIT {candidates or 10}")
    sql = (f"SELECT q.i, c.id FROM unnest(CAST(%(v)s AS vector[])) WITH ORDINALITY AS q(v, i) CROSS JOIN LATERAL "
           f"(SELECT id, d FROM ({inner}) w ORDER BY d LIMIT 10) c ORDER BY q.i")
    raw = db.engine.raw_connection().driver_connection
    ids: list[list[str]] = [[] for _ in sample]
    with raw.cursor() as cur:
        cur.execute(f"SET LOCAL hnsw.ef_search = {ef}")
        if candidates:
            cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cur.execute(f"SET LOCAL hnsw.max_scan_tuples = {max(20000, 4 * candidates)}")
        t0 = time.perf_counter()
        for start in range(0, len(sample), 64):
            cur.execute(sql, {"v": [vector_literal(v) for v in sample[start:start + 64]]})
            for i, cid in cur.fetchall():
                ids[start + i - 1].append(cid)
        wall = time.perf_counter() - t0
    raw.rollback()
    return {"ef_search": ef, "iterative_candidates": candidates,
            "recall@10": round(float(recall_per_query(ids, truth, 10).mean()), 4), "wall_s": round(wall, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--work", type=Path, required=True, help="bench_scale.py's --work folder")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "iterative_scan.json")
    args = ap.parse_args()
    folder = sorted(args.work.glob(f"n{args.n}_q*"))[0]
    db = connect(database=f"bench_scale_{args.n}")
    questions = np.load(folder / "questions.npy")[:1000]
    sample = questions[recall_sample(len(questions))]
    truth = exact_top_k(db, sample, 10)
    rows = [measure(db, sample, truth, ef, c) for ef, c in SETTINGS]
    for row in rows:
        print(row, file=sys.stderr)
    args.out.write_text(json.dumps({"n": args.n, "questions": len(sample), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
