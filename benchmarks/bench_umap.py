"""UMAP in a fresh process: does numba's on-disk cache make the second process's first fit fast?

UMAP's first fit in a new Python process compiles umap-learn's and pynndescent's numba functions (about
30 s). pynndescent marks its functions ``cache=True``; umap-learn 0.5 almost none. Two set-ups, each run as
two fresh processes one after the other on the same, initially empty ``NUMBA_CACHE_DIR``:

* ``plain``: ``import umap`` and fit — numba's default behaviour (only ``cache=True`` functions are cached);
* ``ragnb``: ``ragnb.analysis.umap_cache.enable_jit_cache()`` (caching switched on for every umap and
  pynndescent dispatcher) and ``vector_space.project`` (UMAP on an exact cosine kNN graph computed with numpy,
  so pynndescent — whose functions take the distance function as an argument and miss the disk cache in every
  new process — is never called).

Each process times: the import (``import umap`` / ``enable_jit_cache()``), the first 2D fit, a second 2D fit
in the same process (warm: no compilation), and a 3D fit; plus the whole process wall time; and counts the
function signatures numba loaded from its disk cache (hits) or compiled and wrote there (misses). The 2D embeddings
of the two processes of one set-up and size are compared bit for bit (a cached compile must not change the
result).
Data: ``--sizes`` points (default 732 = the demo's 120 chunks + 612 questions, and 5000, where umap switches
from exact neighbours to pynndescent) of 384-d clustered Gaussian vectors (20 centres, seeded); compilation
does not depend on the values. UMAP: cosine, ``random_state=0`` (single-threaded).

Run (from the repository root)::

    .venv/bin/python benchmarks/bench_umap.py                       # ~5–8 min on 2 busy cores
    .venv/bin/python benchmarks/bench_umap.py --sizes 732 --out /tmp/umap_small.json

Results: ``benchmarks/results/umap.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def child(n: int, mode: str) -> dict:
    """One fresh process: import, fit 2D twice, fit 3D; timings and a hash of the first 2D embedding."""
    import numpy as np

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(20, 384))
    X = (centres[rng.integers(0, 20, n)] + 0.5 * rng.normal(size=(n, 384))).astype(np.float32)
    t0 = time.perf_counter()
    if mode == "ragnb":
        sys.path.insert(0, str(HERE.parent))
        from ragnb.analysis.umap_cache import enable_jit_cache
        from ragnb.analysis.vector_space import project

        info = enable_jit_cache()
    else:
        info = {}
    import umap

    t1 = time.perf_counter()

    def fit(dims: int):
        start = time.perf_counter()
        if mode == "ragnb":
            emb, _ = project(X, dims, random_state=0, n_neighbors=15, min_dist=0.1)
        else:
            emb = umap.UMAP(n_components=dims, metric="cosine", random_state=0, n_jobs=1).fit_transform(X)
        return emb, time.perf_counter() - start

    emb, first = fit(2)
    emb_again, second = fit(2)
    _, three = fit(3)
    hits, misses = cache_counts()
    return {"n": n, "mode": mode, "import_s": t1 - t0, "first_fit_2d_s": first, "second_fit_2d_same_process_s": second,
            "fit_3d_s": three, "same_process_identical": bool(np.array_equal(emb, emb_again)),
            "embedding_sha1": hashlib.sha1(np.ascontiguousarray(emb).tobytes()).hexdigest(),
            "functions_made_cacheable": info.get("functions_made_cacheable"),
            "numba_cache_hits": hits, "numba_cache_misses": misses}


def cache_counts() -> tuple[int, int]:
    """Signatures loaded from / compiled and written to numba's disk cache in this process (umap + pynndescent)."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    hits = misses = 0
    seen: set[int] = set()
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in ("umap", "pynndescent"):
            continue
        for obj in vars(module).values():
            if isinstance(obj, Dispatcher) and id(obj) not in seen and not isinstance(obj._cache, NullCache):
                seen.add(id(obj))
                hits += sum(obj.stats.cache_hits.values())
                misses += sum(obj.stats.cache_misses.values())
    return hits, misses


def run_process(n: int, mode: str, cache_dir: Path) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", str(n), mode], env=env, capture_output=True,
                         text=True, check=True)
    wall = time.perf_counter() - start
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}


def cache_size(folder: Path) -> dict:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="732,5000", help="comma-separated numbers of points")
    ap.add_argument("--out", default=str(RESULTS / "umap.json"))
    ap.add_argument("--child", nargs=2, metavar=("N", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1])))
        return

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    import numba
    import pynndescent
    import umap

    report: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg(), "python": sys.version.split()[0],
                                "umap": umap.__version__, "pynndescent": pynndescent.__version__,
                                "numba": numba.__version__},
                    "sizes": sizes, "runs": []}
    for n in sizes:
        for mode in ("plain", "ragnb"):
            hashes = set()
            with tempfile.TemporaryDirectory(prefix=f"numba-{mode}-") as tmp:
                cache = Path(tmp)
                for attempt in ("first process (empty cache)", "second process (same cache)"):
                    r = run_process(n, mode, cache)
                    r["process"] = attempt
                    r["cache_after"] = cache_size(cache)
                    hashes.add(r["embedding_sha1"])
                    report["runs"].append(r)
                    print(json.dumps(r), flush=True)
            report.setdefault("identical_2d_embedding_across_processes", {})[f"{mode} n={n}"] = len(hashes) == 1
    report["machine"]["load_avg_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
