"""The whole demo, warm: kernels started by the runner with the imports ahead vs started by papermill.

``ragnb demo`` runs 16 notebooks (a Tier 1 reference run, then 15 in one run). Warm — a second run on the same
``RAGNB_HOME``, nothing left to embed — most of its time is fixed cost per notebook: a kernel, the modules the
notebook imports, its own cells, the HTML export. Two set-ups, alternated on the same home so that load on the
machine hits both alike:

* ``ragnb``: the default — the next notebook's kernel is started while one runs and imports what that notebook
  imported the last time it ran (:mod:`ragnb.runs.kernel_imports`), finished kernels stop in the background;
* ``papermill``: ``RAGNB_KERNEL_PRESTART=0`` — papermill starts each kernel when its notebook begins and waits
  for it to shut down (nbclient's default), as every notebook runner does.

Each repetition runs ``.venv/bin/ragnb demo`` as a subprocess and records its wall time and the CPU time of it
and its children (``resource.getrusage``). One warm-up demo runs first (it also records the imports).

Run (from the repository root)::

    .venv/bin/python benchmarks/bench_demo.py                 # ~8 min: 1 warm-up + 3 repetitions × 2 set-ups
    .venv/bin/python benchmarks/bench_demo.py --repeats 1 --out /tmp/demo_small.json

Results: ``benchmarks/results/demo.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
SETUPS = {"ragnb": {}, "papermill": {"RAGNB_KERNEL_PRESTART": "0"}}


def run_demo(env: dict[str, str]) -> dict:
    """One ``ragnb demo``: wall seconds, CPU seconds of it and its children, exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "ragnb"), "demo"], env=env, cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"ragnb demo failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="repetitions of each set-up (alternated)")
    parser.add_argument("--home", default="", help="RAGNB_HOME to use (default: a new temporary folder; the "
                                                   "first demo then embeds everything, which is not timed)")
    parser.add_argument("--out", default=str(RESULTS / "demo.json"))
    args = parser.parse_args()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="ragnb-bench-demo-"))
    outputs = Path(tempfile.mkdtemp(prefix="ragnb-bench-demo-out-"))
    base = {**os.environ, "RAGNB_HOME": str(home), "RAGNB_OUTPUTS": str(outputs), "HF_HUB_OFFLINE": "1"}
    print(f"RAGNB_HOME={home}: warm-up demo (embeds what is missing, records the imports)", flush=True)
    warm_up = run_demo(base)
    runs: dict[str, list[dict]] = {name: [] for name in SETUPS}
    for i in range(args.repeats):
        for name, extra in SETUPS.items():
            runs[name].append(run_demo({**base, **extra}))
            print(f"[{i + 1}/{args.repeats}] {name}: {runs[name][-1]}", flush=True)
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s")}
               for name, rs in runs.items()}
    result = {
        "benchmark": "warm ragnb demo: kernels started ahead with their notebook's imports vs papermill's",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0],
                    "load_average_after": os.getloadavg()},
        "warm_up_run": warm_up, "runs": runs, "medians": medians,
        "ratio_wall_papermill_over_ragnb": round(medians["papermill"]["wall_s"] / medians["ragnb"]["wall_s"], 3),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(medians, indent=2), f"\nratio (papermill / ragnb, wall): {result['ratio_wall_papermill_over_ragnb']}")
    subprocess.run([str(ROOT / ".venv" / "bin" / "ragnb"), "db", "down"], env=base, cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
