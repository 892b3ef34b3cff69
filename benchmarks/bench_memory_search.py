"""Peak memory and time of the in-memory exact search (``MemoryRetriever``) at 100k and 1M chunks.

Each configuration runs in a fresh Python process, so one's allocations never hide another's peak:

* ``new``   — ``MemoryRetriever(ids, vectors)`` + ``search`` (the matrix normalised in place, the batch sized from
  ``--memory-mb``, one similarity buffer);
* ``old``   — the previous implementation (``tests/memory_search_reference.py``: two copies of the matrix, batches
  of 256 with a negated copy of each block and 256 × N int64 indices);
* ``floor`` — bare numpy on the same (already normalised) matrix: per batch ``q @ M.T``, ``argpartition`` of the
  block along its rows, the k best sorted; at batch 256 (as the issue measured it) and at ``new``'s batch.

The child builds the data first — N × d float32 clustered vectors (2,000 centres, noise 0.5 per dimension, in slices
so no big temporary), ids ``c0000000``…, ``--queries`` perturbed copies of random chunks — and records its resident
size (``VmRSS``). It then resets the kernel's peak counter (``/proc/self/clear_refs`` = 5) and runs the
configuration; ``VmHWM`` afterwards is its peak. "Above data" = peak − the resident size with the data loaded;
"matrix" = N × d × 4 bytes. Where the peak counter cannot be reset, ``ru_maxrss`` is used (then the data's own
build temporaries may count; the JSON says which).

Results: ``benchmarks/results/memory_search.json``; the top-k ids of ``new`` and ``old`` are compared query by
query. Run from the repository root::

    .venv/bin/python benchmarks/bench_memory_search.py                         # 100k and 1M (≈ 9 GB at peak)
    .venv/bin/python benchmarks/bench_memory_search.py --sizes 100000 --out /tmp/mem.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))  # the previous implementation lives with the tests

MB = 2 ** 20


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def make_data(n: int, dim: int, n_queries: int, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((2000, dim), dtype=np.float32)
    vecs = np.empty((n, dim), dtype=np.float32)
    step = 32768
    for start in range(0, n, step):
        rows = min(step, n - start)
        vecs[start:start + rows] = centres[rng.integers(0, len(centres), rows)]
        vecs[start:start + rows] += 0.5 * rng.standard_normal((rows, dim), dtype=np.float32)
    queries = vecs[rng.integers(0, n, n_queries)] + 0.3 * rng.standard_normal((n_queries, dim), dtype=np.float32)
    return [f"c{i:07d}" for i in range(n)], vecs, queries


def _floor(vecs: np.ndarray, queries: np.ndarray, k: int, batch: int) -> list[list[int]]:
    from ragnb.rag.retrieval import _normalise

    q = _normalise(queries)
    out = []
    for start in range(0, len(q), batch):
        sims = q[start:start + batch] @ vecs.T
        part = np.argpartition(sims, len(vecs) - k, axis=1)[:, len(vecs) - k:]
        best = np.take_along_axis(sims, part, axis=1)
        out.extend(np.take_along_axis(part, np.argsort(-best, axis=1, kind="stable"), axis=1).tolist())
    return out


def child(method: str, n: int, dim: int, n_queries: int, k: int, memory_mb: int, batch: int) -> dict:
    from memory_search_reference import OldMemoryRetriever
    from ragnb.rag.retrieval import MemoryRetriever, _normalise_rows_in_place

    ids, vecs, queries = make_data(n, dim, n_queries)
    loaded = _status("VmRSS")
    exact_peak = _reset_peak()
    t0 = time.perf_counter()
    build_s, top = 0.0, None
    if method == "new":
        mem = MemoryRetriever(ids, vecs, memory_mb=memory_mb)
        build_s = time.perf_counter() - t0
        batch = mem.batch_rows()
        top = mem.search(queries, k).ids
    elif method == "old":
        old = OldMemoryRetriever(ids, vecs)
        build_s = time.perf_counter() - t0
        top = old.search(queries, k)[0]
        batch = 256
    else:
        _normalise_rows_in_place(vecs, np.arange(len(vecs)))  # the floor is given a normalised matrix
        build_s = time.perf_counter() - t0
        top = [[ids[i] for i in row] for row in _floor(vecs, queries, k, batch)]
    total_s = time.perf_counter() - t0
    peak = _status("VmHWM") if exact_peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"method": method, "n": n, "dim": dim, "queries": n_queries, "k": k, "batch": batch,
            "memory_mb": memory_mb if method == "new" else None, "matrix_mb": round(vecs.nbytes / MB, 1),
            "loaded_mb": round(loaded / MB, 1), "peak_mb": round(peak / MB, 1),
            "above_data_mb": round((peak - loaded) / MB, 1), "peak_reset": exact_peak,
            "build_s": round(build_s, 3), "search_s": round(total_s - build_s, 3), "total_s": round(total_s, 3),
            "top": top}


def run_child(args: argparse.Namespace, method: str, n: int, batch: int = 256) -> dict:
    cmd = [sys.executable, __file__, "--child", method, "--n", str(n), "--dim", str(args.dim),
           "--queries", str(args.queries), "--k", str(args.k), "--memory-mb", str(args.memory_mb),
           "--batch", str(batch)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{method} at N={n} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000", help="corpus sizes, comma-separated")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--memory-mb", type=int, default=512, help="the new search's budget (RAGNB_SEARCH_MEMORY_MB)")
    ap.add_argument("--batch", type=int, default=256, help="(child) the floor's batch")
    ap.add_argument("--n", type=int, help="(child) corpus size")
    ap.add_argument("--child", choices=("new", "old", "floor"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(HERE / "results" / "memory_search.json"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.dim, args.queries, args.k, args.memory_mb, args.batch)))
        return
    results, load_before = [], os.getloadavg()
    for n in (int(s) for s in args.sizes.split(",")):
        new = run_child(args, "new", n)
        old = run_child(args, "old", n)
        floors = [run_child(args, "floor", n, b) for b in sorted({256, new["batch"]})]
        same = sum(a == b for a, b in zip(new.pop("top"), old.pop("top")))
        for f in floors:
            f.pop("top")
        for r in (new, old, *floors):
            print(f"N={n:>9,} {r['method']:>5} batch {r['batch']:>3}: matrix {r['matrix_mb']:7.1f} MB, peak "
                  f"{r['peak_mb']:8.1f} MB (+{r['above_data_mb']:7.1f} above the data), build {r['build_s']:6.2f} s, "
                  f"search {r['search_s']:6.2f} s")
        print(f"N={n:>9,} identical top-{args.k} (new vs old): {same} of {args.queries}")
        results.append({"n": n, "identical_queries": same, "runs": [new, old, *floors]})
    Path(args.out).write_text(json.dumps({"machine": {"python": platform.python_version(), "numpy": np.__version__,
                                                      "cpus": os.cpu_count(), "node": platform.machine(),
                                                      "load_average_before": load_before,
                                                      "load_average_after": os.getloadavg()},
                                          "results": results}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
