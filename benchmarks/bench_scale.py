"""Scale: a synthetic corpus of 10k / 100k (/ 1M) chunks through ragnb — load, embed, HNSW index, Tier 1 search —
each stage beside its floor, time and peak memory, in the same run.

Corpus (seeded, cached in ``--work``): ``N`` chunks in one JSONL file as ``ragnb load chunks`` takes it
(``id = <space>/page-<p>#<k>``, ``confluence_url`` of the page, 1–12 chunks a page), each text a heading line and
whole sentences drawn from the bundled XQuAD-ru paragraphs (real Russian and English prose) up to a length drawn
from N(180, 45) words, clipped to 40–400 — about the 200-word chunks of a wiki. Vectors (384-d, float32, unit
length): a Gaussian mixture on the sphere, ``max(16, N / 400)`` centres with Dirichlet-skewed sizes and
per-cluster spreads (cosine to the centre 0.55–0.85). Questions: a random chunk's vector plus noise, normalised
(cosine ≈ 0.8 to their chunk).

Stages and floors — each peer in a fresh child process (peak RSS = VmHWM after the data is read, ``peak_above``
= peak − RSS when the clock starts); client CPU = ``time.process_time()``, server CPU = the embedded server's
processes (psutil), wall = ``perf_counter``:

* load: ``load_file`` (what ``ragnb load chunks`` runs) vs ``json.loads`` + a text COPY of (id, url, text)
  (``bench_load.floor``), each into the emptied chunk table;
* embed, every text cached: ``embed_table`` with a ragnb encoder whose disk cache holds every chunk's vector
  (``bench_store_vectors.disk_cached``, filled in a fresh cache folder before the clock starts; its model is never
  called) — the normal path: ragnb reads ids + the digests stored with the rows (``ragnb_text_key``, computed
  when the rows were loaded) and looks them up in the cache; every client CPU second counts, and the ratio is on
  client + server CPU — vs a bare binary COPY of the same vectors through pgvector's psycopg
  adapter (``bench_store_vectors.floor_copy``); the stored vectors are checked bit for bit afterwards (not timed);
* embed, real encoder on the CPU (once, ``--encode-texts`` of the chunks): ragnb's SentenceTransformerEncoder
  (cache on, empty) vs raw sentence-transformers, same bundled all-MiniLM-L6-v2, batch 32;
* HNSW build (m 16, ef_construction 64): ``create_hnsw_index`` (maintenance_work_mem sized to the graph, parallel
  workers) vs the build before (maintenance_work_mem 1 GB, the server's 2 workers);
* Tier 1 search, top 10, ``--questions`` (1k and 10k): ``MemoryRetriever`` vs a bare numpy matmul + argpartition
  (``bench_memory_search._floor``, batch 256), and — where an HNSW index exists — Tier 1's path through it: the
  ``ef_search`` chosen for recall@10 ≥ 0.95 on 200 seeded questions (``ragnb.rag.ann_tune``, or exact search when
  none reaches it), then every question at it (64 a round trip); its recall@10 against memory exact on every
  question; the choice's and the search's wall / client / server CPU apart. ``--ef-construction`` for the build.

Load and embed run ``--rounds`` times each (peers alternating, each round a fresh child); the round with the
median client CPU is reported, with every round's figures beside it.

Run (from the repository root; 100k takes ~15 min on 2 cores, 1M ~1 h and 8 GB of disk in ``--work``)::

    RAGNB_HOME=/tmp/ragnb_scale .venv/bin/python benchmarks/bench_scale.py --sizes 10000,100000
    RAGNB_HOME=/tmp/ragnb_scale .venv/bin/python benchmarks/bench_scale.py --sizes 1000000 \\
        --stages load,embed,search --out benchmarks/results/scale_1m.json     # 1M without the index build

Results: ``benchmarks/results/scale.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_memory_search import _floor as numpy_top_k, _reset_peak, _status  # noqa: E402
from bench_retrieval import RESULTS, machine_info  # noqa: E402

DIM, K, SPACES = 384, 10, ("ops", "hr", "dev", "sales", "support", "security")
MB = 2 ** 20
STAGES = ("load", "embed", "encode", "index", "search")


# ----------------------------------------------------------------------------------------------- the corpus


def sentences() -> list[str]:
    """Every sentence of the bundled XQuAD-ru paragraphs."""
    out: list[str] = []
    with gzip.open(ROOT / "ragnb" / "data" / "xquad_ru" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            out += [s for s in re.split(r"(?<=[.!?])\s+", json.loads(line).get("text", "")) if s.strip()]
    return out


def write_texts(path: Path, n: int, seed: int) -> dict:
    """``n`` chunks as JSONL (see the module docstring); returns sizes."""
    rng = np.random.default_rng(seed)
    sents = sentences()
    lengths = np.array([len(s.split()) for s in sents])
    targets = np.clip(rng.normal(180, 45, n), 40, 400).astype(int)
    pages = np.repeat(np.arange(n), rng.integers(1, 13, n))[:n]  # page of each chunk, 1–12 chunks a page
    words = 0
    with path.open("w", encoding="utf-8") as out:
        k = 0
        for i in range(n):
            k = k + 1 if i and pages[i] == pages[i - 1] else 0
            space, page = SPACES[pages[i] % len(SPACES)], int(pages[i])
            picked, size = [f"Page {page}, section {k + 1}."], 0
            for j in rng.integers(0, len(sents), 64):
                picked.append(sents[j])
                size += lengths[j]
                if size >= targets[i]:
                    break
            words += size
            out.write(json.dumps({"id": f"{space}/page-{page}#{k}", "text": " ".join(picked),
                                  "confluence_url": f"https://wiki.example.com/{space}/page-{page}"},
                                 ensure_ascii=False) + "\n")
    return {"rows": n, "bytes": path.stat().st_size, "words_mean": words / n}


def make_vectors(n: int, n_questions: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chunk vectors, question vectors, each question's chunk): the mixture of the module docstring."""
    rng = np.random.default_rng(seed + 1)
    k = max(16, n // 400)
    centres = rng.standard_normal((k, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    spread = rng.uniform(0.6, 1.5, k).astype(np.float32)  # |noise| / |centre|: cosine to centre 0.55–0.86
    cluster = rng.choice(k, size=n, p=rng.dirichlet(np.full(k, 0.5)))
    vecs = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 65536):
        c = cluster[start:start + 65536]
        noise = rng.standard_normal((len(c), DIM), dtype=np.float32) * (spread[c] / np.sqrt(DIM))[:, None]
        block = centres[c] + noise
        vecs[start:start + len(c)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    source = rng.integers(0, n, n_questions)
    q = vecs[source] + rng.standard_normal((n_questions, DIM), dtype=np.float32) * np.float32(0.75 / np.sqrt(DIM))
    return vecs, q / np.linalg.norm(q, axis=1, keepdims=True), source


def corpus(work: Path, n: int, n_questions: int, seed: int = 0) -> Path:
    """The folder of ``n`` chunks' files, written once: chunks.jsonl, ids.json, vectors.npy, questions.npy."""
    for done in sorted(work.glob(f"n{n}_q*_s{seed}/done")):  # one written with more questions serves as well
        if int(done.parent.name.split("_q")[1].split("_")[0]) >= n_questions:
            return done.parent
    folder = work / f"n{n}_q{n_questions}_s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    meta = write_texts(folder / "chunks.jsonl", n, seed)
    ids = [json.loads(line)["id"] for line in (folder / "chunks.jsonl").open(encoding="utf-8")]
    vecs, questions, source = make_vectors(n, n_questions, seed)
    (folder / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
    np.save(folder / "vectors.npy", vecs)
    np.save(folder / "questions.npy", questions)
    (folder / "done").write_text(json.dumps({**meta, "questions": n_questions, "source": source[:5].tolist()}))
    return folder


# -------------------------------------------------------------------------------------------- child processes


def _db(n: int) -> Any:
    from ragnb.store.engine import connect

    return connect(database=f"bench_scale_{n}")


def _empty_chunks(db: Any) -> Any:
    import sqlalchemy as sa

    from ragnb.store.schema import ensure_schema
    from ragnb.store.models import quoted_table

    t = ensure_schema(db)
    with db.engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {quoted_table(db, t.chunk)}"))
        conn.execute(sa.delete(t.meta))
    return t


def _texts(folder: Path) -> list[str]:
    return [json.loads(line)["text"] for line in (folder / "chunks.jsonl").open(encoding="utf-8")]


def child(peer: str, folder: Path, n: int, n_q: int) -> dict:
    """Set up ``peer`` (not timed), then time it: client CPU, server CPU, wall, peak RSS."""
    from bench_store_vectors import server_cpu

    run, extra = _setup(peer, folder, n, n_q)
    if peer.split(":")[0] in ("embed_floor", "embed_ragnb"):
        _quiet_server(n)
    base = _status("VmRSS")
    exact_peak = _reset_peak()
    s0, c0, w0 = server_cpu(), time.process_time(), time.perf_counter()
    out = run() or {}
    wall, cpu, server = time.perf_counter() - w0, time.process_time() - c0, server_cpu() - s0
    peak = _status("VmHWM") if exact_peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if "check" in extra:  # after the clock: what the peer stored is what it was given
        extra["check"]()
    return {"peer": peer, "n": n, "client_cpu_s": round(cpu, 3), "server_cpu_s": round(server, 3),
            "wall_s": round(wall, 3), "base_mb": round(base / MB, 1), "peak_mb": round(peak / MB, 1),
            "peak_above_mb": round((peak - base) / MB, 1), "peak_exact": exact_peak, **out}


def _quiet_server(n: int, limit_s: float = 300.0) -> None:
    """A checkpoint, then no autovacuum worker running, before the clock starts (not timed): the server's CPU of
    a peer then holds its own work, not the previous peer's dirty pages and the vacuum of the rows it wrote (at 1M
    the floor's server CPU spread 5.8–11.0 s over three rounds of the same COPY without this)."""
    import sqlalchemy as sa

    db = _db(n)
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("CHECKPOINT"))
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")).scalar_one():
            time.sleep(0.5)
    db.engine.dispose()


def _setup(peer: str, folder: Path, n: int, n_q: int) -> tuple[Callable[[], dict | None], dict]:
    """The timed callable of ``peer`` and what it holds (set up here, outside the clock)."""
    stage = peer.split(":")[0]
    if stage in ("load_floor", "load_ragnb"):
        from bench_load import floor

        from ragnb.store.loaders import load_file

        db = _db(n)
        t = _empty_chunks(db)
        path = folder / "chunks.jsonl"
        return ((lambda: {"rows": floor(db, path, t.chunk, "text")}) if stage == "load_floor"
                else (lambda: load_file(db, "chunks", path).as_dict())), {}
    if stage in ("embed_floor", "embed_ragnb"):
        return _setup_embed(stage, folder, n)
    if stage in ("encode_raw", "encode_ragnb"):
        return _setup_encode(stage, folder, n_q)
    if stage in ("index_before", "index_tuned"):
        return _setup_index(stage, n)
    return _setup_search(stage, folder, n, n_q)


def _setup_embed(stage: str, folder: Path, n: int) -> tuple[Callable[[], dict | None], dict]:
    import sqlalchemy as sa
    from bench_store_vectors import _floor_once, reset

    db = _db(n)
    ids, vecs = json.loads((folder / "ids.json").read_text()), np.load(folder / "vectors.npy")
    if stage == "embed_floor":
        import psycopg
        from pgvector.psycopg import register_vector

        with db.engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS bench_floor"))
            conn.execute(sa.text(f"CREATE TABLE bench_floor (id text, emb vector({DIM}))"))
        conn = psycopg.connect(db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False))
        register_vector(conn)
        return (lambda: _floor_once(conn, ids, vecs)), {}
    from bench_store_vectors import check_stored, disk_cached

    from ragnb.store.vectors import embed_table

    reset(db)
    cache = folder / "embedding_cache"  # a fresh disk cache, filled with every chunk's vector before the clock
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["RAGNB_EMBEDDING_CACHE"] = str(cache)
    encoder = disk_cached(_texts(folder), vecs)

    def ragnb() -> dict:
        stats = embed_table(db, "chunks", encoder, progress=False)
        return {"processed": stats.processed, "encoder": "disk cache, every text cached"}

    return ragnb, {"check": lambda: check_stored(db, ids, vecs)}


def _setup_encode(stage: str, folder: Path, n_texts: int) -> tuple[Callable[[], dict | None], dict]:
    import bench_gpu_encode as gpu

    texts = _texts(folder)[:n_texts]
    source = gpu.default_model()
    if stage == "encode_raw":
        from sentence_transformers import SentenceTransformer

        raw = SentenceTransformer(str(source), device="cpu")
        raw.encode(texts[:32], batch_size=32)
        return (lambda: {"texts": len(raw.encode(texts, batch_size=32))}), {}
    from ragnb.embeddings.sentence_transformers import SentenceTransformerEncoder

    os.environ["RAGNB_EMBEDDING_CACHE"] = tempfile.mkdtemp(prefix="ragnb_scale_cache_")
    encoder = SentenceTransformerEncoder("all-MiniLM-L6-v2", source, device="cpu")
    encoder.encode_uncached(texts[:32], batch_size=32)
    return (lambda: {"texts": len(encoder.encode_documents(texts, batch_size=32))}), {}


def _setup_index(stage: str, n: int) -> tuple[Callable[[], dict | None], dict]:
    from ragnb.rag.index_build import build_index, build_settings
    from ragnb.rag.index_build import _index_target, create_hnsw_index, drop_hnsw_indexes

    db = _db(n)
    drop_hnsw_indexes(db)
    if stage == "index_tuned":
        settings = build_settings(n, DIM, 16)
        efc = int(os.environ.get("BENCH_SCALE_EF_CONSTRUCTION", "64"))  # --ef-construction, through the child
        return (lambda: {"index": create_hnsw_index(db, ef_construction=efc), "ef_construction": efc, **settings}), {}
    loc, _, _, name = _index_target(db, None)
    sql = (f"CREATE INDEX {name} ON {loc.sql_table} USING hnsw ({loc.emb_col} vector_cosine_ops) "
           "WITH (m = 16, ef_construction = 64)")
    settings = {"maintenance_work_mem": "1GB"}  # before: one constant, the server's default workers

    def before() -> dict:
        build_index(db.engine, sql, n, settings, "build")
        return {"index": name, **settings}

    return before, {}


def _setup_search(stage: str, folder: Path, n: int, n_q: int) -> tuple[Callable[[], dict | None], dict]:
    ids = json.loads((folder / "ids.json").read_text())
    queries = np.load(folder / "questions.npy")[:n_q]
    tops = folder / f"top_{stage}_{n_q}.json"
    if stage == "search_hnsw":
        return _setup_hnsw(folder, n, queries, tops)
    vecs = np.load(folder / "vectors.npy")
    if stage == "search_floor":
        from ragnb.rag.retrieval import _normalise_rows_in_place

        def floor() -> None:
            _normalise_rows_in_place(vecs, np.arange(len(vecs)))  # the floor, too, is given raw vectors
            tops.write_text(json.dumps([[ids[i] for i in row] for row in numpy_top_k(vecs, queries, K, 256)]))

        return floor, {}
    from ragnb.rag.retrieval import MemoryRetriever

    def memory() -> dict:
        mem = MemoryRetriever(ids, vecs)
        tops.write_text(json.dumps(mem.search(queries, K).ids))
        return {"batch": mem.batch_rows()}

    return memory, {}


def _setup_hnsw(folder: Path, n: int, queries: np.ndarray, tops: Path) -> tuple[Callable[[], dict | None], dict]:
    """Tier 1's path through the index: the ef_search chosen for the target recall on 200 seeded questions
    (``choose_ef_search``, ragnb's defaults), then every question at that setting, 64 a round trip (or exact
    search where no setting reaches the target); the two parts' wall, client and server CPU in the fields."""
    from bench_store_vectors import server_cpu

    from ragnb.rag.ann_tune import checked_recall, choose_ef_search
    from ragnb.rag.retrieval import PgVectorRetriever
    from ragnb.rag.index_build import hnsw_indexes

    db = _db(n)
    if not hnsw_indexes(db):
        return (lambda: {"skipped": "no HNSW index"}), {}
    ann = PgVectorRetriever(db, mode="hnsw")

    def clocks() -> tuple[float, float, float]:
        return time.perf_counter(), time.process_time(), server_cpu()

    def hnsw() -> dict:
        t0 = clocks()
        choice = choose_ef_search(ann, queries, K)
        t1 = clocks()
        res = choice.retriever.search(queries, K, batch_size=64)
        t2 = clocks()
        tops.write_text(json.dumps(res.ids))
        part = {f"{name}_{what}_s": round(b - a, 3) for name, (x, y) in (("choose", (t0, t1)), ("search", (t1, t2)))
                for what, a, b in zip(("wall", "client_cpu", "server_cpu"), x, y)}
        return {**choice.info, **(checked_recall(choice, res, K) if choice.ef_search else {}), **part,
                "backend": res.backend}

    return hnsw, {}


# ---------------------------------------------------------------------------------------------- the parent


def run_child(peer: str, folder: Path, n: int, n_q: int) -> dict:
    cmd = [sys.executable, __file__, "--child", peer, "--folder", str(folder), "--n", str(n), "--q", str(n_q)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{peer} at N={n} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"N={n} {peer}{f' q={n_q}' if peer.startswith('search') else ''}: wall {out['wall_s']:.1f} s, client "
          f"{out['client_cpu_s']:.1f} s CPU, server {out['server_cpu_s']:.1f} s, peak {out['peak_mb']:.0f} MB "
          f"(+{out['peak_above_mb']:.0f}); child {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return out


def median_round(rounds: list[dict]) -> dict:
    """The round with the median client CPU, with every round's client CPU and wall beside it."""
    mid = sorted(rounds, key=lambda r: r["client_cpu_s"])[(len(rounds) - 1) // 2]
    return {**mid, "rounds": len(rounds), "rounds_client_cpu_s": [r["client_cpu_s"] for r in rounds],
            "rounds_wall_s": [r["wall_s"] for r in rounds]}


def recall(folder: Path, approx: str, exact: str, n_q: int) -> float:
    a, e = (json.loads((folder / f"top_{s}_{n_q}.json").read_text()) for s in (approx, exact))
    return float(np.mean([len(set(x) & set(y)) / len(y) for x, y in zip(a, e)]))


def run_size(args: argparse.Namespace, n: int) -> dict:
    folder = corpus(args.work, n, max(args.questions))
    out: dict = {"n": n, "corpus": json.loads((folder / "done").read_text())}
    pairs = {"load": ("load_floor", "load_ragnb"), "embed": ("embed_floor", "embed_ragnb"),
             "index": ("index_before", "index_tuned")}
    for stage in ("load", "embed", "index"):
        if stage in args.stages:
            peers = [peer for peer in pairs[stage] if peer not in args.skip]
            runs: dict[str, list[dict]] = {peer: [] for peer in peers}
            for _ in range(1 if stage == "index" else args.rounds):  # peers alternate: drift hits both alike
                for peer in peers:
                    runs[peer].append(run_child(peer, folder, n, 0))
            out[stage] = {peer: median_round(r) for peer, r in runs.items()}
    if "search" in args.stages:
        for n_q in args.questions:
            peers = ("search_floor", "search_memory", "search_hnsw")  # HNSW where an index exists
            res = {peer: run_child(peer, folder, n, n_q) for peer in peers if peer not in args.skip}
            if res.get("search_hnsw", {}).get("skipped"):
                del res["search_hnsw"]
            if "search_floor" in res and "search_memory" in res:
                res["memory_equals_floor"] = recall(folder, "search_memory", "search_floor", n_q)
            if "search_hnsw" in res and (folder / f"top_search_memory_{n_q}.json").exists():
                res["hnsw_recall@10_all_questions"] = recall(folder, "search_hnsw", "search_memory", n_q)
            out[f"search_{n_q}"] = res
    return out


def _row(n: int, stage: str, mine: dict, base: dict, note: str = "", basis: str = "client") -> str:
    """One table row; the CPU ratio on ``basis``: the client's CPU, the server's, or both."""
    def fig(r: dict) -> str:
        return (f"{r['wall_s']:.1f} s / {r['client_cpu_s']:.2f} s / {r['server_cpu_s']:.1f} s / "
                f"+{r['peak_above_mb']:.0f} MB")

    def cpu(r: dict) -> float:
        return {"client": r["client_cpu_s"], "server": r["server_cpu_s"]}.get(basis, r["client_cpu_s"] + r["server_cpu_s"])

    ratio = f"{cpu(mine) / cpu(base):.2f}× ({basis})" if cpu(base) > 0 else "n/a"
    return (f"| {f'{n:,}' if n else '—'} | {stage} | {fig(mine)} | {fig(base)} | {ratio} | "
            f"{mine['wall_s'] / base['wall_s']:.2f}× | {note} |")


def _tuned_row(n: int, q: int, h: dict, mem: dict, all_recall: float | None) -> str:
    """Tier 1 through HNSW at the target recall, beside memory exact: the setting chosen (each one tried), the
    recall on the sample with its CI and on every question, the search's figures and the choice's cost."""
    tried = ", ".join(f"{s['ef_search']}: {s['recall']:.3f}" for s in h["ann_steps"])
    if h.get("ef_search"):
        lo, hi = h["ann_recall_ci95"]
        got = (f"**ef_search {h['ef_search']}**: recall@10 {h['ann_recall@10_vs_exact']:.3f} ({lo:.3f}–{hi:.3f}), "
               f"n={h['ann_recall_n']}")
    else:
        got = f"**exact** ({h['ann_fallback']})"
    search = f"{h['search_wall_s']:.1f} s / {h['search_client_cpu_s'] + h['search_server_cpu_s']:.1f} s"
    exact = f"{mem['wall_s']:.1f} s / {mem['client_cpu_s'] + mem['server_cpu_s']:.1f} s"
    ratio = (h["search_client_cpu_s"] + h["search_server_cpu_s"]) / (mem["client_cpu_s"] + mem["server_cpu_s"])
    choose = f"{h['choose_wall_s']:.1f} s / {h['choose_client_cpu_s'] + h['choose_server_cpu_s']:.1f} s"
    every = f"{all_recall:.4f}" if all_recall is not None else "–"
    return f"| {n:,} | {q:,} | {got} | {every} | {search} | {exact} | {ratio:.2f}× | {choose} | {tried} |"


def markdown(results: dict) -> str:
    """BENCHMARKS.md's table: per size and stage, ragnb's figures beside its floor's, and the ratios."""
    lines = ["| N | stage | ragnb: wall / client CPU / server CPU / peak above start | floor: the same | "
             "CPU ratio | wall ratio | notes |", "|---:|---|---|---|---:|---:|---|"]
    tuned: list[str] = []
    for size in results["sizes"]:
        n = size["n"]
        for stage, (mine, base) in (("load", ("load_ragnb", "load_floor")),
                                    ("embed, every text cached", ("embed_ragnb", "embed_floor")),
                                    ("HNSW build: tuned vs before", ("index_tuned", "index_before"))):
            key = stage.split(",")[0].split(" ")[0].lower().replace("hnsw", "index")
            if mine in size.get(key, {}) and base in size[key]:
                m, b = size[key][mine], size[key][base]
                note = (f"{m.get('maintenance_work_mem')}, {m.get('max_parallel_maintenance_workers')} workers vs "
                        f"{b.get('maintenance_work_mem')}, server default" if key == "index" else "")
                basis = {"index": "server", "embed": "client + server"}.get(key, "client")
                lines.append(_row(n, stage, m, b, note, basis))
        for name, res in size.items():
            if not name.startswith("search_"):
                continue
            q = int(name.split("_")[1])
            if "search_memory" not in res:
                continue
            if "search_floor" in res:
                lines.append(_row(n, f"Tier 1 search, {q:,} questions: memory exact vs numpy", res["search_memory"],
                                  res["search_floor"], f"same top 10: {res['memory_equals_floor']:.4f}"))
            if "search_hnsw" in res and "ann_steps" in res["search_hnsw"]:
                tuned.append(_tuned_row(n, q, res["search_hnsw"], res["search_memory"],
                                        res.get("hnsw_recall@10_all_questions")))
            elif "search_hnsw" in res:  # a result file from before the target recall: ef_search 40
                h = res["search_hnsw"]
                lines.append(_row(n, f"Tier 1 search, {q:,} questions: HNSW (ef_search 40) vs memory exact", h,
                                  res["search_memory"], f"search {h.get('search_wall_s', h['wall_s']):.1f} s; recall@10 vs exact "
                                  f"{res['hnsw_recall@10_all_questions']:.4f} (all); ragnb's check "
                                  f"{h['ann_recall@10_vs_exact']:.3f}, n={h['ann_recall_n']}, "
                                  f"{h['ann_recall_check_s']:.1f} s", "client + server"))
    if "encode_cpu" in results:
        e = results["encode_cpu"]
        lines.append(_row(0, f"encode {e['encode_ragnb']['texts']} chunks, CPU: ragnb vs raw sentence-transformers",
                          e["encode_ragnb"], e["encode_raw"],
                          f"{e['encode_ragnb']['texts'] / e['encode_ragnb']['wall_s']:.1f} vs "
                          f"{e['encode_raw']['texts'] / e['encode_raw']['wall_s']:.1f} texts/s"))
    if tuned:
        lines += ["", "| N | questions | chosen (recall@10 vs exact on the sample, 95% CI) | recall@10, all questions | "
                  "search: wall / client + server CPU | memory exact: the same | CPU ratio | choosing: wall / CPU | "
                  "recall by ef_search (sample) |", "|---:|---:|---|---:|---|---|---:|---|---|", *tuned]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="chunks, comma-separated (1000000 for 1M)")
    ap.add_argument("--questions", default="1000,10000", help="Tier 1 question counts, comma-separated")
    ap.add_argument("--stages", default=",".join(STAGES), help=f"any of {','.join(STAGES)}")
    ap.add_argument("--skip", default="", help="peers not to run, e.g. index_before,search_floor (a 1M index "
                    "build before tuning takes long)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each load and embed peer (median reported)")
    ap.add_argument("--ef-construction", type=int, default=64, help="the tuned HNSW build's ef_construction (m 16)")
    ap.add_argument("--encode-texts", type=int, default=256, help="chunks encoded by the real model (CPU)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragnb_scale")
    ap.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    ap.add_argument("--table", nargs="+", type=Path, default=None, help="print the markdown table of result files")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--q", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.folder, args.n, args.q)))
        return
    if args.table:
        for path in args.table:
            print(markdown(json.loads(path.read_text(encoding="utf-8"))))
        return
    args.stages, args.skip = set(args.stages.split(",")), set(args.skip.split(","))
    os.environ["BENCH_SCALE_EF_CONSTRUCTION"] = str(args.ef_construction)
    from ragnb.store.engine import connect

    connect().dispose()  # the embedded server runs before the first child (its CPU is measured)
    args.questions = [int(x) for x in args.questions.split(",")]
    results: dict = {"machine": machine_info(), "dim": DIM, "k": K, "sizes": []}
    if "encode" in args.stages:
        folder = corpus(args.work, 10_000, max(args.questions))
        results["encode_cpu"] = {p: run_child(p, folder, 10_000, args.encode_texts)
                                 for p in ("encode_raw", "encode_ragnb")}
    for n in (int(x) for x in args.sizes.split(",")):
        results["sizes"].append(run_size(args, n))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"-> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
