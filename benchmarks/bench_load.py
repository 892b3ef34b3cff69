"""Loading chunks: ``ragnb load chunks FILE`` (``load_file``) vs its floor, ``json.loads`` + a bare COPY.

Data: ``--rows`` (default 50,000) generated chunks in one JSONL file, each
``{"id": "wiki/<space>/page-<n>#<k>", "confluence_url": "https://wiki.example.com/pages/viewpage.action?pageId=<n>",
"text": …}``. Texts are windows of ``--words`` (default 200, ±25%) consecutive words of the bundled XQuAD-ru
corpus (``ragnb/data/xquad_ru``: real Russian and English paragraphs, with their punctuation and quotes), cut
into paragraphs by newlines; every 50th text also holds a tab, a backslash and double quotes, which both JSON
and COPY's text format escape. Seeded (``--seed``): the same file every run.

Peers, timed in the same process, on the same file and the same chunk table (emptied before each timed run,
not timed):

* floor: read the file, ``json.loads`` each line, COPY (id, url, text) into the chunk table with psycopg's
  ``write_row``, commit — no validation, no duplicate check; text format (the ratios' base) and binary
  (``floor_binary``: no escaping of tabs, newlines and backslashes, the lengths sent instead);
* ragnb: ``load_file(db, "chunks", FILE)`` — every row validated, ids checked against the stored ones,
  COPY into a temporary staging table and one merge, one transaction (what ``ragnb load chunks`` runs after
  connecting);
* ragnb reload: the same call again on the filled table (every row already stored: all skipped);
* old (``--old-commit``, default the last commit before the COPY path): ``load_file`` of that commit's
  ``ragnb/store/loaders.py`` (``git show``, imported beside the current package), fresh and reload.

Client CPU is ``time.process_time()`` of this process (the server's work is not in it); wall is
``time.perf_counter()``. Figures are medians over ``--repeats`` rounds; the order of the peers rotates between
rounds. Target: ragnb fresh ≤ 2 × the floor's client CPU. The database is ``bench_load`` on ragnb's embedded
server.

Run (from the repository root)::

    RAGNB_HOME=/tmp/ragnb_bench .venv/bin/python benchmarks/bench_load.py            # 50,000 rows, 3 rounds
    RAGNB_HOME=/tmp/ragnb_bench .venv/bin/python benchmarks/bench_load.py --rows 5000 --repeats 1 \\
        --out /tmp/load_small.json                                                   # quick check

Results: ``benchmarks/results/load.json``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_retrieval import RESULTS, machine_info  # noqa: E402

OLD_COMMIT = "9e1e426"  # the INSERT … VALUES … ON CONFLICT … RETURNING loader, before the COPY path
SPACES = ("ops", "hr", "dev", "sales", "support", "security")


def word_pool() -> list[str]:
    """Every word of the bundled XQuAD-ru paragraphs, in order (Russian and English)."""
    words: list[str] = []
    with gzip.open(ROOT / "ragnb" / "data" / "xquad_ru" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            words += str(rec.get("text", "")).split()
    return words


def generate(path: Path, n: int, words: int, seed: int) -> dict:
    """Write ``n`` chunks as JSONL to ``path``; return the sizes."""
    rng = random.Random(seed)
    pool = word_pool()
    lengths = []
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            page, k = divmod(i, 8)
            size = rng.randint(int(words * 0.75), int(words * 1.25))
            start = rng.randrange(0, len(pool) - size)
            piece = pool[start:start + size]
            for j in range(60, len(piece), 60):  # paragraphs
                piece[j] = "\n\n" + piece[j]
            text = " ".join(piece)
            if i % 50 == 0:
                text += '\tcolumn\tC:\\wiki\\export "quoted"'
            lengths.append(len(text))
            rec = {"id": f"wiki/{SPACES[page % len(SPACES)]}/page-{page}#{k}",
                   "confluence_url": f"https://wiki.example.com/pages/viewpage.action?pageId={100000 + page}",
                   "text": text}
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return {"rows": n, "bytes": path.stat().st_size, "chars_median": statistics.median(lengths),
            "words_target": words}


def old_loaders(commit: str) -> Any:
    """``ragnb/store/loaders.py`` as it was at ``commit``, imported as a module of its own."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:ragnb/store/loaders.py"],
                            capture_output=True, text=True, check=True).stdout
    path = Path(f"/tmp/ragnb_old_loaders_{commit}.py")
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"ragnb_old_loaders_{commit}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def floor(db: Any, path: Path, table: Any, fmt: str) -> int:
    """json.loads every line and COPY (id, url, text) into the chunk table: no checks at all."""
    from ragnb.store.copy import column_list, table_identifier
    from psycopg import sql

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    stmt = sql.SQL("COPY {} ({}) FROM STDIN{}").format(table_identifier(table), column_list(table, ["id", "url", "text"]),
                                                       sql.SQL(" (FORMAT BINARY)" if fmt == "binary" else ""))
    with db.engine.begin() as conn, conn.connection.driver_connection.cursor() as cur:
        with cur.copy(stmt) as copy:
            if fmt == "binary":
                copy.set_types(["text", "text", "text"])
            for r in rows:
                copy.write_row((r["id"], r["confluence_url"], r["text"]))
    return len(rows)


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--words", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--old-commit", default=OLD_COMMIT, help="'' to skip the old loader")
    ap.add_argument("--database", default="bench_load", help="database on the embedded server")
    ap.add_argument("--out", type=Path, default=RESULTS / "load.json")
    args = ap.parse_args(argv)
    import sqlalchemy as sa

    from ragnb.store import loaders
    from ragnb.store.copy import table_identifier
    from ragnb.store.engine import connect
    from ragnb.store.schema import ensure_schema

    data = Path(f"/tmp/ragnb_bench_load_{args.rows}_{args.words}_{args.seed}.jsonl")
    sizes = generate(data, args.rows, args.words, args.seed)
    print(f"{sizes['rows']:,} rows, {sizes['bytes'] / 1e6:.1f} MB, median {sizes['chars_median']:.0f} characters",
          flush=True)
    db = connect(write=True, database=args.database)
    table = ensure_schema(db).chunk
    old = old_loaders(args.old_commit) if args.old_commit else None

    def empty() -> None:
        with db.engine.begin() as conn:
            conn.execute(sa.text(f"TRUNCATE {table_identifier(table).as_string(None)}"))

    def count() -> int:
        with db.engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()

    peers: dict[str, Callable[[], dict]] = {}

    def fresh_and_reload(name: str, module: Any) -> None:
        def run() -> dict:
            empty()
            c1, w1, s1 = timed(lambda: module.load_file(db, "chunks", data))
            c2, w2, s2 = timed(lambda: module.load_file(db, "chunks", data))
            assert (s1.inserted, s2.inserted, s2.already_present) == (args.rows, 0, args.rows), (s1, s2)
            assert count() == args.rows
            return {f"{name}": (c1, w1), f"{name}_reload": (c2, w2)}
        peers[name] = run

    def run_floor() -> dict:
        out = {}
        for fmt, key in (("text", "floor"), ("binary", "floor_binary")):
            empty()
            c, w, n = timed(lambda: floor(db, data, table, fmt))
            assert n == args.rows and count() == args.rows
            out[key] = (c, w)
        return out

    peers["floor"] = run_floor
    fresh_and_reload("ragnb", loaders)
    if old is not None:
        fresh_and_reload("old", old)
    raw: dict[str, list[tuple[float, float]]] = {}
    names = list(peers)
    for rnd in range(args.repeats):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            for key, value in peers[name]().items():
                raw.setdefault(key, []).append(value)
                print(f"round {rnd + 1} {key:13s} cpu {value[0]:6.2f} s  wall {value[1]:6.2f} s", flush=True)
    med = {k: {"cpu_s": round(statistics.median(c for c, _ in v), 3),
               "wall_s": round(statistics.median(w for _, w in v), 3)} for k, v in raw.items()}
    base = med["floor"]
    for k, v in med.items():
        v["cpu_x_floor"] = round(v["cpu_s"] / base["cpu_s"], 2)
        v["wall_x_floor"] = round(v["wall_s"] / base["wall_s"], 2)
        v["rows_per_cpu_s"] = round(args.rows / v["cpu_s"])
    result = {"benchmark": "load", "machine": machine_info(),
              "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "data": sizes, "raw": raw, "median": med,
              "target_met": med["ragnb"]["cpu_x_floor"] <= 2.0}
    for k, v in med.items():
        print(f"{k:13s} cpu {v['cpu_s']:6.2f} s ({v['cpu_x_floor']:5.2f}× floor)  "
              f"wall {v['wall_s']:6.2f} s ({v['wall_x_floor']:5.2f}× floor)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    db.dispose()
    return result


if __name__ == "__main__":
    main()
