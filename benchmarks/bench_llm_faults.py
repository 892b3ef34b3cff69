"""ragnb's ragas-style faithfulness vs ragas' Faithfulness on the same samples, against the same local server:
wall time and HTTP requests per sample at 100 ms and 1 s latency, and a fault matrix (rows lost, rows wrong,
wall time, requests) over provider faults.

The server is the test suite's scripted OpenAI-compatible server (real HTTP on 127.0.0.1). Every sample has two
statements, one supported: the right score is 0.5 for both libraries, so a row is *wrong* when it has another
score and *lost* when it has none (NaN / failed). ragas runs in its own virtual environment (it is not a ragnb
dependency) as a subprocess, ``benchmarks/ragas_driver.py``; both use their default retry settings.

    python3 -m venv /tmp/ragasenv && /tmp/ragasenv/bin/pip install ragas "langchain-community<0.4"
    .venv/bin/python benchmarks/bench_llm_faults.py [--ragas-python /tmp/ragasenv/bin/python] [--samples 20]

Writes results/llm_faults.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the scripted server lives with the tests

from llm_server import FakeLLMServer, Reply, completion, completion_body, error_in_200, error_reply  # noqa: E402

from ragnb.llm import LLMClient, LLMSettings  # noqa: E402
from ragnb.judges import evaluate_dataset  # noqa: E402

SAMPLE = re.compile(r"[Ff]act A(\d+)")
RIGHT = 0.5
# fault → which samples it hits ("all" or every 5th) and how often ("first": the first request of each
# (sample, step), later ones are fine; "always": every request)
FAULTS = {
    "none": ("all", "never"),
    "think_draft": ("all", "always"),  # <think>draft verdicts (all supported)</think> final verdicts
    "reasoning_field": ("all", "always"),  # the draft in a separate `reasoning` field
    "code_fence": ("all", "always"),
    "truncated_first": ("all", "first"),  # finish_reason=length with half the JSON
    "error_in_200_first": ("all", "first"),
    "refusal_first": ("all", "first"),
    "http_503_first": ("all", "first"),
    "http_503_persistent_20pct": ("every5", "always"),
}


def step_of(text: str) -> str:
    if text.startswith("# Statement extraction") or "analyze the complexity of each sentence" in text:
        return "statements"
    return "verdicts"


def contents(engine: str, step: str, draft: bool = False) -> dict:
    """The right reply (or, ``draft``, the reasoning's wrong draft: every statement supported)."""
    if step == "statements":
        return {"statements": ["Statement one.", "Statement two."]}
    v2 = 1 if draft else 0
    if engine == "ragas":
        return {"statements": [{"statement": "Statement one.", "reason": "stated", "verdict": 1},
                               {"statement": "Statement two.", "reason": "x", "verdict": v2}]}
    return {"verdicts": [{"id": 1, "reason": "stated", "verdict": 1}, {"id": 2, "reason": "x", "verdict": v2}]}


class Scripted:
    """The server's handler: the fault of the current run, per-(sample, step) request counts."""

    def __init__(self) -> None:
        self.fault, self.latency_s = "none", 0.1
        self.warm = False
        self.seen: dict[tuple, int] = defaultdict(int)
        self.lock = threading.Lock()

    def reset(self, fault: str, latency_s: float) -> None:
        self.fault, self.latency_s = fault, latency_s
        self.seen.clear()

    def __call__(self, body: dict) -> Reply:
        text = "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
        engine = "ragnb" if "# Statement extraction" in text or '"id"' in text else "ragas"
        step = step_of(body["messages"][0]["content"] if engine == "ragnb" else text)
        m = SAMPLE.search(text)
        sample = int(m.group(1)) if m else -1
        with self.lock:
            n = self.seen[(sample, step)]
            self.seen[(sample, step)] += 1
        who, when = FAULTS[self.fault]
        hit = (who == "all" or sample % 5 == 0) and (when == "always" or (when == "first" and n == 0))
        good = json.dumps(contents(engine, step))
        d = self.latency_s
        if not hit:
            return completion(good, delay_s=d)
        if self.fault == "think_draft":
            draft = json.dumps(contents(engine, step, draft=True))
            return completion(f"<think>\nDraft: {draft}\nLet me check again.\n</think>\n{good}", delay_s=d)
        if self.fault == "reasoning_field":
            return completion(good, reasoning=f"Draft: {json.dumps(contents(engine, step, draft=True))}", delay_s=d)
        if self.fault == "code_fence":
            return completion(f"Here is the result:\n```json\n{good}\n```", delay_s=d)
        if self.fault == "truncated_first":
            return completion(good[: len(good) // 2], finish_reason="length", delay_s=d)
        if self.fault == "error_in_200_first":
            return Reply(200, error_in_200().body, delay_s=d)
        if self.fault == "refusal_first":
            return Reply(200, completion_body(None, refusal="I can't help with that."), delay_s=d)
        return error_reply(503, "Service Unavailable", type_="server_error", delay_s=d)


def run_ragnb(base_url: str, n: int, warm_up: bool = False) -> dict:
    samples = [{"id": str(i), "user_input": f"Question {i}?", "response": f"Fact A{i}. Fact B{i}.",
                "retrieved_contexts": [f"Context stating fact A{i}."]} for i in range(n)]
    if warm_up:  # imports, TLS context, HTTP pool outside the timing; no sample number, so not counted
        samples = [{"id": "w", "user_input": "Warm-up?", "response": "Warm-up. Warm-up again.",
                    "retrieved_contexts": ["Warm-up context."]}]
    client = LLMClient(LLMSettings(base_url=base_url, api_key="sk-bench", cache_dir=None))
    t0 = time.perf_counter()
    frame, _ = evaluate_dataset("faithfulness", samples, client, {"models": ["bench-judge"]},
                                concurrency=16, n_boot=10)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "scores": [None if math.isnan(s) else float(s) for s in frame["score"]]}


def run_ragas(python: str, base_url: str, n: int, limit_s: float) -> dict:
    cmd = [python, str(HERE / "ragas_driver.py"), "--base-url", base_url, "--samples", str(n)]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, env={**os.environ,
                             "RAGAS_DO_NOT_TRACK": "true"})
    except subprocess.TimeoutExpired:
        return {"seconds": time.perf_counter() - t0, "scores": None, "stopped_after_s": limit_s}
    if out.returncode != 0:
        return {"seconds": time.perf_counter() - t0, "scores": None, "error": out.stderr[-500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def row_counts(result: dict, n: int) -> dict:
    scores = result.get("scores")
    if scores is None:
        return {"rows_lost": n, "rows_wrong": 0}
    return {"rows_lost": sum(s is None for s in scores),
            "rows_wrong": sum(s is not None and abs(s - RIGHT) > 1e-9 for s in scores)}


def measure(server: FakeLLMServer, script: Scripted, engine: str, fault: str, latency_s: float, n: int,
            ragas_python: str | None, limit_s: float) -> dict:
    script.reset(fault, latency_s)
    if engine == "ragnb" and not script.warm:
        run_ragnb(server.base_url, 1, warm_up=True)
        script.warm = True
    before = len(server.requests)
    if engine == "ragnb":
        result = run_ragnb(server.base_url, n)
    else:
        result = run_ragas(ragas_python, server.base_url, n, limit_s)
        if result.get("stopped_after_s"):
            time.sleep(1.0)  # let the killed process's sockets close before counting
    requests = sum(SAMPLE.search(r.raw.decode("utf-8", "replace")) is not None for r in server.requests[before:])
    row = {"engine": engine, "fault": fault, "latency_ms": round(latency_s * 1000), "samples": n,
           "seconds": round(result["seconds"], 2), "requests_per_sample": round(requests / n, 2),
           **row_counts(result, n)}
    for extra in ("stopped_after_s", "error", "ragas_version"):
        if result.get(extra):
            row[extra] = result[extra]
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--speed-samples", type=int, default=40)
    ap.add_argument("--ragas-python", default="/tmp/ragasenv/bin/python")
    ap.add_argument("--ragas-limit-s", type=float, default=300.0, help="stop a ragas run after this long")
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--out", default=str(HERE / "results" / "llm_faults.json"))
    args = ap.parse_args()
    engines = ["ragnb"] + (["ragas"] if args.ragas_python and Path(args.ragas_python).exists() else [])

    script = Scripted()
    server = FakeLLMServer().start()
    server.set_handler(script)
    speed, faults = [], []
    try:
        for latency in (0.1, 1.0):
            for engine in engines:
                speed.append(measure(server, script, engine, "none", latency, args.speed_samples,
                                     args.ragas_python, args.ragas_limit_s))
        for fault in args.faults.split(","):
            for engine in engines:
                faults.append(measure(server, script, engine, fault, 0.1, args.samples, args.ragas_python,
                                      args.ragas_limit_s))
    finally:
        server.stop()
    out = {"machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                       "load_average": list(os.getloadavg())},
           "engines": engines, "speed": speed, "faults": faults}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
