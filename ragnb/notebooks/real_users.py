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
# # Real-users benchmark
# Retrieval on real questions from the production question log (see docs/metrics.md, Real users). The ground truth is a
# proxy: the page whose URL was logged with the question (`confluence_url`). A chunk is relevant when its URL names
# the same page (page id after normalising scheme, `www.`, trailing slash, anchors and Confluence
# `pageId=` / `/pages/<id>/` forms). Chunk-level metrics score the chunk ranking against *all* chunks of that
# page; `doc_*` metrics score the ranking of pages (chunks mapped to their page, repeats dropped) — the
# natural level here, since the label is a page. Questions are searched with their **stored** embeddings.
# Questions without a logged URL, and questions whose URL matches no chunk of the corpus, are excluded from
# the metrics and counted. By default every logged question is used, whatever its user score, and the metrics are
# broken down by score: a score filter would hide exactly the questions users were unhappy with.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD corpus and question log (own embedded database); "db": the configured database
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
min_score: int = 0  # 0: all logged questions (default: failures stay visible); 1-5: only scores at least this
limit: int = 0  # use only the first N selected questions, ordered by id (0: all)
top_k: int = 10  # chunks retrieved per question
backend: str = "memory"  # "memory" (exact, in-process) or "pgvector" (search in the database)
index_mode: str = "auto"  # pgvector only: "auto", "exact" or "hnsw"
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
embedding_models: str = ""  # comma-separated models compared side by side (first: primary); "": embedding_model only
embedding_model_options: str = ""  # JSON per model, e.g. {"endpoint:e5": {"query_prompt": "query: ", "document_prompt": "passage: ", "input_type": "query,document", "dimensions": 384}}; "": RAGNB_EMBEDDING_MODEL_OPTIONS
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
worst_n: int = 15  # questions listed in the tables of missed and excluded questions
output_dir: str = ""  # folder for the metrics JSON and the per-question table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import charts, report
from ragnb.analysis import source_charts
from ragnb.analysis.inputs import count_unembedded, load_log, open_chunks
from ragnb.datasets.corpus import open_corpora
from ragnb.datasets.demo import simulated_scores
from ragnb.store.vectors import fetch_texts
from ragnb.tiers.model_comparison import models_table, run_models, verdict_table
from ragnb.tiers.real_users import COMPARED, EVALUATED, by_score_table, metrics_table, run_real_users

corpora = open_corpora(corpus, language, embedding_model, embedding_models, embedding_model_options)
ctx = corpora[0]  # the primary model: its metrics are the report's headline
not_embedded = count_unembedded(ctx, min_score)
simulated = simulated_scores(ctx.db)  # the stored log is the bundled demo's (its rows say so, not a parameter)


def real_users_of(c):
    """The benchmark with one model: its stored question vectors searching its own chunk vectors."""
    log, vectors = load_log(c, min_score=min_score, limit=limit)
    chunks = open_chunks(c, backend, index_mode)
    return run_real_users(log, vectors, chunks.retriever, chunks.urls, top_k=top_k, n_boot=n_boot)


# %%
result, models = run_models(corpora, real_users_of, COMPARED, texts=list(fetch_texts(ctx.db, "chunks").values()),
                            n_boot=n_boot)
q = result.summary["questions"]
report.header("Real-users benchmark", {
    **ctx.header_info(), **({"models compared": ", ".join(models["models"])} if models else {}),
    "questions": f"{q['selected']} selected ({f'score ≥ {min_score}' if min_score else 'all scores'}"
                 f"{f', first {limit}' if limit else ''})",
    "evaluated": q["evaluated"], "backend": result.summary["info"]["backend"], "top_k": top_k,
    "ground_truth": "logged URL matched by page id (proxy label)",
    "user_scores": "SIMULATED (bundled demo log)" if simulated else "from the question log",
})
report.notes(
    (["The bundled demo question log has simulated user scores and about 8% of rows without a URL (see "
      "ragnb/datasets/demo.py); its questions, URLs and retrieval results are real, and the score filter acts on "
      "the simulated ratings."] if simulated else [])
    + result.notes
    + ([f"{not_embedded} logged questions passing the score filter have no embedding and were not analysed "
        "(run `ragnb embed --questions`)."] if not_embedded else []))
report.show_table(metrics_table(result.summary), max_rows=60)

# %% [markdown]
# ## Embedding models side by side
# With several `embedding_models`: each model's metrics with 95% CIs and truncation share, then a paired test
# on the same logged questions (Holm-adjusted over the compared metrics) naming the better model, with the counts
# behind each test; every model's per-question values are written to `real_users.models_per_item.csv`.

# %%
if models:
    report.show_table(models_table(models, COMPARED))
    report.show_table(verdict_table(models))
else:
    print("One embedding model: list several in embedding_models to compare them on the same questions.")

# %% [markdown]
# ## Which questions could be scored, and their user scores

# %%
report.show(source_charts.question_status(q))
report.show(source_charts.score_bars(result.summary["score_distribution"]))

# %% [markdown]
# ## Ranking quality with 95% confidence intervals
# Page level first (the label is a page), then chunk level against all chunks of the logged page.

# %%
doc_names = [n for n in ("doc_hit_rate@1", "doc_hit_rate@3", "doc_hit_rate@5", "doc_hit_rate@10", "doc_mrr",
                         "doc_ndcg@10") if n in result.summary]
report.show(charts.metric_bars(result.summary, doc_names, "Page-level metrics (ranking deduplicated by page)"))
chunk_names = [n for n in ("hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr", "ndcg@5", "ndcg@10") if n in result.summary]
report.show(charts.metric_bars(result.summary, chunk_names, "Chunk-level metrics (every chunk of the logged page is relevant)"))
evaluated = result.per_item[result.per_item["status"] == EVALUATED]
if result.hit_rates is not None:
    report.show(charts.hit_rate_curve(result.hit_rates))

# %% [markdown]
# ## Metrics by user score
# Do low-rated answers go with retrieval misses? Per user score: the questions with that score, how many could be
# evaluated, and the mean with its bootstrap 95% CI ("—": no evaluated question with that score).

# %%
by_score = result.summary["metrics_by_score"]
report.show_table(by_score_table(by_score))
scored = {f"score {r['score']} (n={r['n']})": {"mean": r["doc_hit_rate@5"], "ci95": r["doc_hit_rate@5_ci95"]}
          for r in by_score if r["n"] and "doc_hit_rate@5" in r}
if scored:
    report.show(charts.metric_bars(scored, list(scored), "Page found in the top 5 (doc_hit_rate@5), by user score"))

# %% [markdown]
# ## Missed questions: the logged page is not in the top k
# Most confident misses (highest top-1 similarity) first.

# %%
missed = evaluated[evaluated["first_relevant_doc_rank"].isna()].sort_values("top1_score", ascending=False)
print(f"{len(missed)} of {len(evaluated)} evaluated questions miss their logged page in the top {top_k}.")
report.show_table(missed[["question", "url", "score", "top1_score", "top1_page"]], max_rows=worst_n,
                  full="real_users.per_item.csv")
excluded = result.per_item[result.per_item["status"] != EVALUATED]
if len(excluded):
    print(f"{len(excluded)} excluded questions (no logged URL, or a URL that no chunk of the corpus has):")
    report.show_table(excluded[["question", "url", "status"]], max_rows=worst_n)

# %%
result.write(output_dir, "real_users", extra={
    "min_score": min_score, "limit": limit, "questions_without_embedding": not_embedded,
    "scores_simulated": simulated, "embedding_model": ctx.encoder.name,
    "encoder": ctx.encoder.describe(), **models})
