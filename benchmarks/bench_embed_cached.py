"""Embed with every text cached, side by side: wall, client CPU and server CPU of ``embed_table`` vs a bare binary COPY
(and, optionally, the same ``embed_table`` of an older checkout), medians of ``--rounds`` alternating rounds.

Each peer is ``bench_scale.py``'s own child (``embed_floor``, ``embed_ragnb``: a fresh process, the chunk table's
vectors reset and the disk cache filled before the clock), run on the chunks that ``bench_scale.py --stages load``
(or any earlier load of the same corpus) left in database ``bench_scale_<N>``. ``--before DIR``: a checkout of an
older ragnb (e.g. ``git archive <commit> | tar -x -C DIR``) whose ``embed_ragnb`` runs as a third peer on the
same table — how BENCHMARKS §14 measured the stored digests against the server hashing every text.

Run (from the repository root, after a load of the same corpus)::

    RAGNB_HOME=/tmp/ragnb_scale .venv/bin/python benchmarks/bench_embed_cached.py --n 30000 --rounds 3 \\
        --before /tmp/ragnb_before --out benchmarks/results/scale_embed_stored_key_30k.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
METRICS = ("wall_s", "client_cpu_s", "server_cpu_s")


def run(tree: Path, child: str, folder: Path, n: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(tree / "benchmarks" / "bench_scale.py"), "--child", child, "--folder",
                           str(folder), "--n", str(n), "--q", "0"], capture_output=True, text=True, env=env, cwd=tree,
                          check=False)
    if done.returncode:
        raise SystemExit(f"{child} ({tree}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(rounds: list[dict]) -> dict:
    """Each metric's median over the rounds (and total CPU's), with every round beside them."""
    out = {k: statistics.median(r[k] for r in rounds) for k in METRICS}
    out["total_cpu_s"] = statistics.median(r["client_cpu_s"] + r["server_cpu_s"] for r in rounds)
    out["rounds"] = [{k: r[k] for k in METRICS} for r in rounds]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, required=True, help="chunks (the corpus of bench_scale.py --sizes N)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, help="an older checkout to run as a third peer")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragnb_scale")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    folder = next(iter(sorted(args.work.glob(f"n{args.n}_q*_s0"))), None)
    if folder is None:
        raise SystemExit(f"no corpus of {args.n} chunks in {args.work}: run bench_scale.py --sizes {args.n} "
                         "--stages load first")
    peers = {"floor": (HERE.parent, "embed_floor"), "ragnb": (HERE.parent, "embed_ragnb")}
    if args.before:
        peers["before"] = (args.before.resolve(), "embed_ragnb")
    runs: dict[str, list[dict]] = {p: [] for p in peers}
    for r in range(args.rounds):  # peers alternate: drift on a shared machine hits each alike
        for peer, (tree, child) in peers.items():
            runs[peer].append(run(tree, child, folder, args.n))
            print(f"N={args.n} round {r} {peer}: " + ", ".join(f"{k} {runs[peer][-1][k]}" for k in METRICS),
                  file=sys.stderr, flush=True)
    result = {"n": args.n, "rounds": args.rounds, "peers": {p: summary(rs) for p, rs in runs.items()}}
    floor = result["peers"]["floor"]
    for peer, s in result["peers"].items():
        s["total_cpu_ratio"] = round(s["total_cpu_s"] / floor["total_cpu_s"], 2)
        s["wall_ratio"] = round(s["wall_s"] / floor["wall_s"], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({p: {k: v for k, v in s.items() if k != "rounds"} for p, s in result["peers"].items()}, indent=1))


if __name__ == "__main__":
    main()
