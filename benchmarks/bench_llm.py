"""LLM-judged faithfulness over many samples: concurrency vs sequential, and the cached re-run.

A local OpenAI-compatible server (the test suite's scripted server, real HTTP on 127.0.0.1) answers every
request after an injected latency (default 50 ms), like a fast hosted model. ragnb's ragas-style faithfulness
(2 calls per sample: statements, then verdicts by id) is run over N samples

  * sequentially (client max_concurrency 1, one sample at a time) on a subset, and
  * at the default concurrency on all N samples, then
  * again on all N with the disk cache warm (zero HTTP requests expected).

Throughput = samples per second; the ratio is concurrent / sequential. Writes results/llm.json.

    .venv/bin/python benchmarks/bench_llm.py [--samples 1000] [--sequential-samples 100] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the scripted server lives with the tests

from llm_server import FakeLLMServer, completion  # noqa: E402

from ragnb.llm import LLMClient, LLMSettings  # noqa: E402
from ragnb.judges import evaluate_dataset  # noqa: E402

CALLS_PER_SAMPLE = {  # per judge model, without re-asks (K contexts, N generated questions); ragas ≥ 0.2
    "faithfulness": ("2", "2"), "context_precision": ("1", "K"), "context_recall": ("1", "1"),
    "context_entity_recall": ("2", "2"), "noise_sensitivity": ("4", "2K+3"), "response_relevancy": ("1", "N"),
}


def make_samples(n: int) -> list[dict]:
    return [{"id": str(i), "user_input": f"Question {i}?", "response": f"Fact A{i}. Fact B{i}.",
             "retrieved_contexts": [f"Context stating fact A{i}."]} for i in range(n)]


def handler(latency_s: float):
    def reply(body: dict):
        prompt = body["messages"][0]["content"]
        if prompt.splitlines()[0].startswith("# Statement extraction"):
            content = {"statements": ["Statement one.", "Statement two."]}
        else:
            content = {"verdicts": [{"id": 1, "reason": "stated", "verdict": 1},
                                    {"id": 2, "reason": "not stated", "verdict": 0}]}
        return completion(json.dumps(content), delay_s=latency_s)
    return reply


def timed(samples, client, concurrency) -> tuple[float, dict]:
    t0 = time.perf_counter()
    _, summary = evaluate_dataset("faithfulness", samples, client, {"models": ["bench-judge"]},
                                  concurrency=concurrency, n_boot=100)
    return time.perf_counter() - t0, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--sequential-samples", type=int, default=100)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--out", default=str(HERE / "results" / "llm.json"))
    args = ap.parse_args()

    server = FakeLLMServer().start()
    server.set_handler(handler(args.latency_ms / 1000))
    cache_dir = Path(tempfile.mkdtemp(prefix="ragnb-bench-llm-"))
    try:
        seq_client = LLMClient(LLMSettings(base_url=server.base_url, api_key="sk-bench", cache_dir=None,
                                           max_concurrency=1))
        t_seq, s_seq = timed(make_samples(args.sequential_samples), seq_client, 1)

        settings = LLMSettings(base_url=server.base_url, api_key="sk-bench", cache_dir=cache_dir)
        default_concurrency = settings.max_concurrency
        before = len(server.requests)
        t_conc, s_conc = timed(make_samples(args.samples), LLMClient(settings), default_concurrency)
        cold_requests = len(server.requests) - before
        before = len(server.requests)
        t_cached, s_cached = timed(make_samples(args.samples), LLMClient(settings), default_concurrency)
        cached_requests = len(server.requests) - before
    finally:
        server.stop()

    seq_tput, conc_tput = args.sequential_samples / t_seq, args.samples / t_conc
    out = {
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "load_average": list(os.getloadavg())},
        "latency_ms_injected": args.latency_ms,
        "faithfulness_mean_expected_0.5": [s_seq["faithfulness"]["mean"], s_conc["faithfulness"]["mean"],
                                           s_cached["faithfulness"]["mean"]],
        "sequential": {"samples": args.sequential_samples, "seconds": round(t_seq, 3),
                       "samples_per_s": round(seq_tput, 2)},
        "concurrent": {"samples": args.samples, "concurrency": default_concurrency, "seconds": round(t_conc, 3),
                       "samples_per_s": round(conc_tput, 2), "http_requests": cold_requests},
        "ratio_concurrent_over_sequential": round(conc_tput / seq_tput, 2),
        "cached_rerun": {"samples": args.samples, "seconds": round(t_cached, 3), "http_requests": cached_requests},
        "calls_per_sample_ragnb_vs_ragas": CALLS_PER_SAMPLE,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
