# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # RAG metric suite
# Ragas-style (see docs/metrics.md, Ragas-style suite) and NVIDIA-style (see docs/metrics.md, NVIDIA-style metrics)
# metrics over a dataset of question, retrieved contexts, response and reference — with an LLM judge when an endpoint is
# configured — plus the offline faithfulness fallback (see docs/metrics.md, Faithfulness), hallucination rate, context
# utilization and the comparison with the reference, which always run. Every mean comes with a 95% confidence interval
# and its counts.

# %% tags=["parameters"]
dataset_path: str = ""  # JSON array or JSONL of samples (question, retrieved_contexts, response, reference); "": built from the demo
corpus: str = "demo"  # demo only: where the demo samples are retrieved from ("demo" or "db")
language: str = "ru"  # demo only: "ru" or "en"
top_k: int = 3  # demo only: contexts retrieved per question for the built samples
generation_model: str = ""  # demo only: LLM model id that writes the answers; "": RAGNB_GENERATION_MODEL, else extractive answers
max_items: int = 50  # score only the first N samples (0: all)
metrics: str = "faithfulness,context_precision,context_recall,context_entity_recall,noise_sensitivity,response_relevancy,nv_context_relevance,nv_response_groundedness,nv_answer_accuracy"  # LLM metrics (comma-separated)
judge_models: str = ""  # comma-separated judge model ids; "": RAGNB_JUDGE_MODELS, else the LLM metrics are skipped
judge_aggregate: str = "mean"  # how several judge models combine: mean, median or majority
explanation_language: str = "en"  # language of prompts and explanations: "en" or "ru"
concurrency: int = 8  # samples scored at once per metric
prices: dict = {}  # model id mapped to {input_per_1m, output_per_1m} in USD, for the cost columns
llm_max_retries: int = -1  # retries of a failing LLM request; -1: RAGNB_LLM_MAX_RETRIES, else 6
llm_max_wait_s: float = 0  # longest an LLM call may take with its retries, in s; 0: RAGNB_LLM_MAX_WAIT_S, else 60
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
worst_n: int = 10  # samples listed under "least faithful"
output_dir: str = ""  # folder for the metrics JSON, the per-item table and the resumable item logs; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project

# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

import os

import pandas as pd
from pathlib import Path

from ragnb.io import comma_list

from ragnb.reports import report
from ragnb.rag.embeddings import get_encoder
from ragnb.metrics.stats import summary_frame
from ragnb.llm.setup import open_llm
from ragnb.tiers.rag_suite import answer_model, load_rag_dataset, run_rag_suite, samples_from_system, top_rows

encoder = get_encoder(embedding_model or None)
llm = open_llm(prices, concurrency, max_retries=llm_max_retries, max_wait_s=llm_max_wait_s)
models = comma_list(judge_models or os.environ.get("RAGNB_JUDGE_MODELS", ""), "judge_models")
extractive_note = None
if dataset_path:
    samples = load_rag_dataset(dataset_path)
    source = dataset_path
else:
    from ragnb.rag.retrieval import MemoryRetriever
    from ragnb.store.vectors import fetch_texts
    from ragnb.rag.system import BaselineSystem
    from ragnb.datasets.corpus import open_corpus, open_dataset

    ctx = open_corpus(corpus, language, embedding_model)
    ids, urls, vecs = ctx.vectors("chunks")
    answer_by, extractive_note = answer_model(llm.client, generation_model)
    system = BaselineSystem(ctx.encoder, MemoryRetriever(ids, vecs, urls, model=ctx.model), fetch_texts(ctx.db, "chunks"),
                            dict(zip(ids, urls)), client=llm.client, model=answer_by, language=language)
    items = open_dataset("", corpus, language, max_items).items
    samples = samples_from_system(items, system, top_k)
    source = (f"demo ({corpus}, {language}): baseline top-{top_k} retrieval + {system.answer_method} answers"
              + (f" by {answer_by}" if answer_by else ""))
if max_items:
    samples = samples[:max_items]

# %%
result = run_rag_suite(samples, encoder, client=llm.client, metrics=comma_list(metrics, "metrics"),
                       models=models, aggregate_how=judge_aggregate, language=explanation_language,
                       log_dir=Path(output_dir), concurrency=concurrency, n_boot=n_boot)
if extractive_note:
    result.add_notes([extractive_note])
if not dataset_path and len(samples) < min(len(items), max_items or len(items)):
    result.add_notes([f"{len(items) - len(samples)} demo question(s) got no answer from the system (an error or a "
                      "truncated LLM answer) and are not among the samples."])
report.header("About this run", {**llm.header_info(), "dataset": source, "samples": len(samples),
              "judge_models": ", ".join(models) or "none", "embedding_model": encoder.name})
for note in result.notes:
    print("Note:", note)
report.show_table(summary_frame(result.summary), max_rows=60)
print("How each score was produced:", report.plain(result.summary["methods"]))
# The offline faithfulness method: the one that agrees best with human labels (docs/metrics.md, Faithfulness).
report.show_table(pd.DataFrame(result.summary["fallback_agreement"]), max_rows=10)

# %% [markdown]
# ## Score distributions

# %%
import plotly.express as px

score_cols = [c for c in result.per_item.columns if c in result.summary and c not in ("euclidean_distance", "bleu")]
long = result.per_item[score_cols].melt(var_name="metric", value_name="score").dropna()
report.show(px.box(long, x="metric", y="score", points="all", title="Per-sample scores (0–1)"))

# %% [markdown]
# ## Least faithful samples
# Sorted by the faithfulness score (LLM when judged, else the offline fallback).

# %%
column = "faithfulness" if "faithfulness" in result.per_item else "fallback_faithfulness"
report.show_table(top_rows(result.per_item, samples, column, worst_n), max_rows=worst_n, full="rag_metrics.per_item.csv")

# %%
result.write(output_dir, "rag_metrics", extra={"dataset_file": dataset_path or None, "llm_usage": llm.usage()})
