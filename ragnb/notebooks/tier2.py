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
# # Tier 2 — Generation on a fixed context
# How good are the answers when retrieval is taken out of the picture? Every question is answered from the
# dataset's own context passage (`chunk_text`), then scored: faithfulness to that context (LLM judge, or
# the embedding fallback (see docs/metrics.md, Faithfulness) — the method is recorded per answer), answer relevance and
# correctness (LLM judge only), ROUGE/BLEU and embedding similarity to the reference answer, and the stability of
# repeated answers. Every mean comes with a bootstrap 95% confidence interval and the number of questions behind it.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": the bundled XQuAD questions with their paragraphs; "db": give dataset_path
language: str = "ru"  # language of the texts, "ru" or "en" (demo: which version; also the answer prompt)
dataset_path: str = ""  # dataset JSON with question, ground_truth_answer and chunk_text; "": the demo questions
max_questions: int = 0  # use only the first N questions (0: all)
system: str = "baseline"  # system that answers: "baseline", "package.module:attribute" or "http:FILE.yaml"
generation_model: str = ""  # baseline only: LLM model id that writes the answers; "": extractive answers
judge_models: str = ""  # comma-separated LLM judge model ids; "": no LLM judge (offline fallback)
judge_aggregate: str = "mean"  # how several judge models combine: "mean", "median" or "majority"
judge_mode: str = "direct"  # "direct" (score only) or "reasoned" (reasoning first, then the score)
explanation_language: str = "en"  # language of the judge prompts and explanations: "en" or "ru"
consistency_runs: int = 2  # answers per question for exact-match and semantic consistency (1: skip)
concurrency: int = 4  # questions in progress at the same time
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
prices: dict = {}  # USD per 1M tokens, per model id: {input_per_1m, output_per_1m}; unpriced models cost n/a
llm_max_retries: int = -1  # retries of a failing LLM request; -1: RAGNB_LLM_MAX_RETRIES, else 6
llm_max_wait_s: float = 0  # longest an LLM call may take with its retries, in s; 0: RAGNB_LLM_MAX_WAIT_S, else 60
worst_n: int = 10  # answers listed in "worst answers"
human_labels: str = ""  # comma-separated filled label sheets (`ragnb dataset label-plan` on this notebook's per-item table) for some items of a judged metric: judge-only, human-only and PPI++ estimates side by side (docs/ppi.md); "": none
output_dir: str = ""  # folder for the metrics JSON, the per-item table and the resumable item log; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

import pandas as pd
import plotly.express as px

from ragnb.reports import charts, report
from ragnb.embeddings.models import get_encoder
from ragnb.metrics.stats import summary_frame
from ragnb.rag.system import load_system
from ragnb.datasets.corpus import open_dataset
from ragnb.llm.setup import open_llm
from ragnb.tiers.generation import make_judge, run_tier2, worst_items

encoder = get_encoder(embedding_model or None)
dataset = open_dataset(dataset_path, corpus, language, max_questions)
llm = open_llm(prices, max_retries=llm_max_retries, max_wait_s=llm_max_wait_s)
judge, judge_notes = make_judge(llm.client, judge_models, judge_aggregate, judge_mode, explanation_language)
sut = load_system(system, encoder=encoder, retriever=None, texts={}, client=llm.client, model=generation_model,
                  language=language)

# %%
result = run_tier2(dataset, sut, encoder, judge=judge, consistency_runs=consistency_runs, language=language,
                   concurrency=concurrency, n_boot=n_boot, log_path=f"{output_dir}/tier2_generation.items.jsonl")
result.add_notes(judge_notes)
info = result.info
report.header("About this run", {
    "dataset": dataset.name, "embedding_model": encoder.name, "judge_backend": info["judge_backend"],
    "llm_endpoint": llm.endpoint or "none (offline)", "questions": len(dataset.items), "system": info["system"],
    "answer_method": info["answer_method"], "generation_model": info["generation_model"] or "none",
    "judge_models": ", ".join(info["judge_models"]) or "none", "consistency_runs": consistency_runs})
for note in result.notes:
    print("Note:", note)
print("Methods per metric:", report.plain(info["methods"]))
report.show_table(summary_frame(result.summary), max_rows=60)
lat = result.summary["latency_answer_ms"]
print(f"Answer latency (n = {lat['n']}): {report.latency_text(lat['mean'], lat['p50'], lat['p95'])}")

# %% [markdown]
# ## Scores with 95% confidence intervals, and their distribution over questions
# 0–1 metrics only; answer correctness (1–5) and BLEU (0–100) have their own histograms below.
# Exact match and token F1 twice: `answer_*_unicode` normalise Unicode punctuation (« » —), ё → е and case (the
# meaningful reading of Russian answers); `squad_exact_match` / `squad_f1` are SQuAD v1.1's official script, the
# numbers comparable with published SQuAD-style scores (× 100) — on Russian text they count «Москва» ≠ Москва.

# %%
unit = [n for n in (result.faithfulness_key, "hallucination_rate", "context_utilization", "answer_relevance", "rouge1",
                    "rouge2", "rougel", "answer_exact_match_unicode", "answer_f1_unicode",
                    "answer_recall_unicode", "squad_exact_match", "squad_f1", "semantic_similarity",
                    "response_exact_match_rate", "response_semantic_consistency") if n in result.summary]
report.show(charts.metric_bars(result.summary, unit, "Tier 2 metrics (mean and 95% CI)"))
long = result.per_item.melt(id_vars="id", value_vars=unit, var_name="metric", value_name="score").dropna()
report.show(px.box(long, x="metric", y="score", points="all", title="Per-question scores", height=420))
if "answer_correctness" in result.per_item:
    report.show(charts.histogram(result.per_item["answer_correctness"], "Answer correctness (LLM judge, 1–5)",
                                 "answer_correctness", nbins=5))
report.show(charts.histogram(result.per_item["bleu"], "Sentence BLEU per answer (0–100)", "bleu"))

# %% [markdown]
# ## Faithfulness by the method that produced it
# "llm": the judge's score; "word_overlap" / "embedding": the offline fallback (see docs/metrics.md, Faithfulness;
# no judge, or the judge failed on that answer). A fallback score is an overlap or similarity, not an LLM judgement.
# The fallback's method and cut were chosen on tuning data; the table below is its agreement with human labels on
# held-out answer-grounding data, the kind these scores are (ROC-AUC, accuracy at the cut, κ with 95% CIs, and a
# verdict); other kinds of data are not quoted here.

# %%
faith = result.faithfulness_key  # judge_faithfulness (LLM judge) or fallback_faithfulness (offline)
report.show_table(pd.DataFrame(info["fallback_agreement"]), max_rows=10)
report.show(px.histogram(result.per_item.dropna(subset=[faith]), x=faith, color=f"{faith}_method", nbins=20, barmode="overlay", opacity=0.75,
                         title="Faithfulness per answer, by method", height=380))

# %% [markdown]
# ## Worst answers
# Sorted by answer correctness when an LLM judged it, otherwise by faithfulness; failed items first.

# %%
key = "answer_correctness" if "answer_correctness" in result.per_item else result.faithfulness_key
report.show_table(worst_items(result.per_item, key, worst_n), max_rows=worst_n, full="tier2_generation.per_item.csv")

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
result.write(output_dir, "tier2_generation", extra={"llm_usage": llm.usage()})
