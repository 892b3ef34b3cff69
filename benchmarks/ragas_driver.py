"""Runs ragas' Faithfulness over the benchmark samples against an OpenAI-compatible endpoint; prints JSON.

Meant for a separate virtual environment that has ragas (bench_llm_faults.py starts it as a subprocess):

    /tmp/ragasenv/bin/python benchmarks/ragas_driver.py --base-url http://127.0.0.1:PORT/v1 --samples 20
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # no usage telemetry: nothing leaves the machine


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--samples", type=int, default=20)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")

    from langchain_openai import ChatOpenAI
    from ragas import EvaluationDataset, evaluate
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness

    llm = LangchainLLMWrapper(ChatOpenAI(model="bench-judge", base_url=args.base_url, api_key="sk-bench",
                                         temperature=0))
    rows = [{"user_input": f"Question {i}?", "response": f"Fact A{i}. Fact B{i}.",
             "retrieved_contexts": [f"Context stating fact A{i}."]} for i in range(args.samples)]
    # Warm-up (imports, HTTP client) outside the timing, as the ragnb side gets; its requests carry no sample
    # number, so the benchmark does not count them.
    evaluate(EvaluationDataset.from_list([{"user_input": "Warm-up?", "response": "Warm-up. Warm-up again.",
                                           "retrieved_contexts": ["Warm-up context."]}]),
             metrics=[Faithfulness()], llm=llm, show_progress=False, raise_exceptions=False)
    t0 = time.perf_counter()
    result = evaluate(EvaluationDataset.from_list(rows), metrics=[Faithfulness()], llm=llm, show_progress=False,
                      raise_exceptions=False)
    seconds = time.perf_counter() - t0
    scores = [None if s is None or (isinstance(s, float) and math.isnan(s)) else float(s)
              for s in result.to_pandas()["faithfulness"].tolist()]
    import ragas

    print(json.dumps({"seconds": seconds, "scores": scores, "ragas_version": ragas.__version__}))


if __name__ == "__main__":
    main()
