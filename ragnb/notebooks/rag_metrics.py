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
# and its counts. Without a samples file, the system under test answers the questions, as in Tier 3: those of a dataset
# file (`questions_path`), the demo's, or with `corpus = "db"` the database's question log (references: the logged
# answers).

# %% tags=["parameters"]
dataset_path: str = ""  # JSON array or JSONL of samples (question, retrieved_contexts, response, reference), scored as they are; "": questions answered by the system under test
corpus: str = "demo"  # without dataset_path: "demo" (bundled XQuAD questions and corpus) or "db" (the configured database: its question log, answered over its chunks)
questions_path: str = ""  # without dataset_path: a dataset JSON written by `ragnb dataset …` whose questions the system answers; "": the corpus's questions (demo, or the database's question log)
language: str = "ru"  # demo: which version ("ru" or "en"); also the language of the baseline's LLM answers
system: str = "baseline"  # without dataset_path, the system under test that retrieves and answers: "baseline", "package.module:attribute" or "http:FILE.yaml"
top_k: int = 3  # without dataset_path: contexts the system retrieves per question
generation_model: str = ""  # baseline only: LLM model id that writes the answers; "": RAGNB_GENERATION_MODEL, else extractive answers
max_items: int = 50  # score only the first N samples or questions (0: all)
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
human_labels: str = ""  # comma-separated filled label sheets (`ragnb dataset label-plan` on this notebook's per-item table) for some items of a judged metric: judge-only, human-only and PPI++ estimates side by side (docs/ppi.md); "": none
output_dir: str = ""  # folder for the metrics JSON, the per-item table and the resumable item logs; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project

# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

import os

import pandas as pd
from pathlib import Path

from ragnb.io import comma_list

from ragnb.reports import report
from ragnb.embeddings.models import get_encoder
from ragnb.metrics.stats import summary_frame
from ragnb.llm.setup import open_llm
from ragnb.tiers.rag_suite import answer_model, load_rag_dataset, run_rag_suite, samples_from_system, top_rows

llm = open_llm(prices, concurrency, max_retries=llm_max_retries, max_wait_s=llm_max_wait_s)
models = comma_list(judge_models or os.environ.get("RAGNB_JUDGE_MODELS", ""), "judge_models")
extractive_note, sample_notes = None, []
if dataset_path:
    samples = load_rag_dataset(dataset_path)
    source = dataset_path
    encoder = get_encoder(embedding_model or None)
else:  # questions answered by the system under test, as Tier 3 runs it
    from ragnb.rag.retrieval import PgVectorRetriever
    from ragnb.store.vectors import fetch_texts
    from ragnb.rag.system import load_system
    from ragnb.datasets.corpus import open_corpus, open_questions

    ctx = open_corpus(corpus, language, embedding_model)
    encoder = ctx.encoder
    questions = open_questions(questions_path, corpus, ctx.db, language, max_items)  # a file's, the demo's or the log's
    answer_by, extractive_note = answer_model(llm.client, generation_model) if system == "baseline" else ("", None)
    baseline = {}
    if system == "baseline":  # ragnb's reference RAG over the corpus database
        baseline = {"retriever": PgVectorRetriever(ctx.db, mode="auto", dim=ctx.encoder.dim, model=ctx.model),
                    "texts": fetch_texts(ctx.db, "chunks")}
    sut = load_system(system, encoder=ctx.encoder, client=llm.client, model=answer_by, language=language, **baseline)
    samples, sample_notes = samples_from_system(questions, sut, top_k)
    how = f"{sut.answer_method} answers" if system == "baseline" else "its answers"
    source = (f"{ctx.label}, {questions.name} ({len(questions.items)} questions): {system}'s top-{top_k} contexts and "
              f"{how}" + (f" by {answer_by}" if answer_by else ""))
if max_items:
    samples = samples[:max_items]

# %%
result = run_rag_suite(samples, encoder, client=llm.client, metrics=comma_list(metrics, "metrics"),
                       models=models, aggregate_how=judge_aggregate, language=explanation_language,
                       log_dir=Path(output_dir), concurrency=concurrency, n_boot=n_boot)
result.add_notes([n for n in (extractive_note, *sample_notes) if n])
report.header("About this run", {**llm.header_info(), "dataset": source, "samples": len(samples),
              "system": "not run (samples from the file)" if dataset_path else system,
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

# %% [markdown]
# ## Judge-only, human-only and PPI estimates
# With `human_labels` (filled sheets of `ragnb dataset label-plan`): the judge's mean over every item, the mean of the
# human labels, and the prediction-powered (PPI++) estimate that corrects the judge with the labels, side by side
# with their 95% CIs, n, N, λ and the labels the estimate is worth — and which one to quote (docs/ppi.md).

# %%
from ragnb.reports.estimates import show_estimates
from ragnb.tiers.human_labels import add_human_labels

show_estimates(add_human_labels(result, human_labels))

# %%
result.write(output_dir, "rag_metrics", extra={"dataset_file": dataset_path or None, "llm_usage": llm.usage()})
