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
# # Tier 1 — Retrieval
# How well does top-k search find the chunk that answers each question? Chunk-level metrics equal
# trec_eval on rankings without score ties; `doc_*` metrics first collapse the ranking to source documents
# (see docs/metrics.md, Retrieval). Every mean comes with a bootstrap 95% confidence interval and the number of
# questions behind it. Through a pgvector HNSW index the run first chooses the `ef_search` at which the index
# returns at least `target_recall` of the exact top-k on a seeded sample of the questions (else it searches
# exactly), so that the metrics measure the model rather than the index (docs/large-corpora.md).

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD corpus (own embedded database); "db": the configured database
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
dataset_path: str = ""  # dataset JSON with questions and relevant chunk ids; "": the demo questions
backend: str = "pgvector"  # "pgvector" (search in the database) or "memory" (exact, in-process matrix product)
index_mode: str = "auto"  # pgvector only: "auto": HNSW if an index exists, "exact": full scan, "hnsw"
target_recall: float = 0.95  # through an HNSW index: the smallest ef_search (40 … 1000) whose recall@top_k vs exact search on 200 seeded questions reaches this, else exact search (0: ef_search 40, recall only reported)
ann_time_budget_s: float = 120.0  # seconds the index searches of that choice may take before falling back to exact search
top_k: int = 10  # chunks retrieved per question
consistency_runs: int = 2  # retrievals per question for retrieval_consistency (1: skip)
latency_sample: int = 50  # questions timed one at a time for latency percentiles (pgvector)
max_questions: int = 0  # use only the first N questions (0: all)
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
embedding_models: str = ""  # comma-separated models compared side by side (first: primary); "": embedding_model only
embedding_model_options: str = ""  # JSON per model, e.g. {"endpoint:e5": {"query_prompt": "query: ", "document_prompt": "passage: ", "input_type": "query,document", "dimensions": 384}}; "": RAGNB_EMBEDDING_MODEL_OPTIONS
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
worst_n: int = 15  # questions listed in "worst questions"
output_dir: str = ""  # folder for the metrics JSON and the per-question table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.rag.retrieval import ann_recall_label
from ragnb.reports import charts, report
from ragnb.metrics.stats import summary_frame
from ragnb.store.vectors import fetch_texts
from ragnb.datasets.corpus import open_corpora, open_dataset
from ragnb.tiers.model_comparison import models_table, run_models, verdict_table
from ragnb.tiers.tier1 import COMPARED, run_tier1

corpora = open_corpora(corpus, language, embedding_model, embedding_models, embedding_model_options)
ctx = corpora[0]  # the primary model: its metrics are the report's headline
dataset = open_dataset(dataset_path, corpus, language, max_questions)
texts = fetch_texts(ctx.db, "chunks")


def tier1_of(c):
    """Tier 1 with one model: its own question encoder searching its own chunk vectors."""
    ids, urls, vectors = c.vectors("chunks")
    return run_tier1(dataset, c.encoder, c.retriever(backend, index_mode, (ids, urls, vectors)), top_k=top_k,
                     chunk_urls=dict(zip(ids, urls)), consistency_runs=consistency_runs,
                     latency_sample=latency_sample, n_boot=n_boot, target_recall=target_recall or None,
                     ann_time_budget_s=ann_time_budget_s)


# %%
result, models = run_models(corpora, tier1_of, COMPARED, texts=list(texts.values()), n_boot=n_boot)
report.header("About this run", {**ctx.header_info(), "dataset": dataset.name,
              "questions": len(dataset.items), "backend": result.summary["info"]["backend"], "top_k": top_k,
              **({"models compared": ", ".join(models["models"])} if models else {})})
for note in result.notes:
    print("Note:", note)
report.show_table(summary_frame(result.summary), max_rows=60)
lat = result.summary["latency_ms"]
print(f"Latency ({lat['mode']}, n = {lat['n']}): {report.latency_text(lat['mean'], lat['p50'], lat['p95'], 2)}")
if ann_recall_label(result.summary["info"]):
    print(f"HNSW index at ef_search {result.summary['info'].get('ef_search')}, "
          f"{ann_recall_label(result.summary['info'])} (share of exact top-k that the index also returns)")

# %% [markdown]
# ## Embedding models side by side
# With several `embedding_models`: each model's metrics with 95% CIs and the share of chunks longer than its
# input limit, then a paired test on the same questions (McNemar for hit rates, sign-flip permutation
# otherwise; Holm-adjusted over the compared metrics) naming the better model or "no significant difference".
# `n` is the number of paired questions, `A=0, B=1` and `A=1, B=0` McNemar's discordant pairs; every model's
# per-question values are written to `tier1_retrieval.models_per_item.csv`.

# %%
if models:
    report.show_table(models_table(models, COMPARED))
    report.show_table(verdict_table(models))
else:
    print("One embedding model: list several in embedding_models to compare them on the same questions.")

# %% [markdown]
# ## Ranking quality with 95% confidence intervals (primary model)

# %%
chunk_names = [n for n in ("hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr", "ndcg@5", "ndcg@10") if n in result.summary]
report.show(charts.metric_bars(result.summary, chunk_names, "Chunk-level ranking metrics"))
doc_names = [n for n in result.summary if n.startswith("doc_")]
report.show(charts.metric_bars(result.summary, doc_names, "Document-level metrics (ranking deduplicated by source URL)"))

# %% [markdown]
# ## Hit rate at each cut-off, and whether the similarity score separates good from bad first hits

# %%
report.show(charts.hit_rate_curve(result.hit_rates))
report.show(charts.score_distribution(result.per_item))

# %% [markdown]
# ## Worst questions and what was retrieved instead
# Sorted by the rank of the first relevant chunk (not found = last), then by top-1 similarity.

# %%
worst = result.per_item.sort_values(["first_relevant_rank", "top1_score"], ascending=[False, False], na_position="first")
gold = {it.id: ", ".join(it.grades()) for it in dataset.items}
table = worst.head(worst_n).assign(
    relevant=lambda d: d.index.map(gold),
    top1_text=lambda d: d["retrieved"].str.split().str[0].map(lambda c: (texts.get(c) or "")[:200]),
)[["question", "relevant", "first_relevant_rank", "top1_score", "retrieved", "top1_text"]]
report.show_table(table, max_rows=worst_n, full="tier1_retrieval.per_item.csv")

# %%
result.write(output_dir, "tier1_retrieval", extra=models)
