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
# # Chunk utilization
# Which share of the knowledge base ever reaches a top-k result (see docs/metrics.md, Analytics)?
# `utilization_rate = used_chunks / total_chunks`, where total = chunks with an embedding and used = chunks in
# the top k of at least one question. A low rate can mean unreachable or junk chunks — or a question set that
# covers only some topics; a very high rate together with poor retrieval quality can mean a noisy index.
# Extras: how often each chunk is retrieved, the Gini coefficient of those counts (0 = even, near 1 = a few
# chunks take every retrieval) and the never-retrieved chunks per page.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD corpus (own embedded database); "db": the configured database
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
source: str = "auto"  # questions: "dataset", "log" (question log, stored embeddings) or "auto" (dataset for the demo or a dataset_path, else log)
dataset_path: str = ""  # dataset JSON for source "dataset"; "": the demo questions
min_score: int = 0  # source "log" only: keep questions with a user score of at least this (0: all)
max_questions: int = 0  # use only the first N questions (0: all)
top_k: int = 5  # chunks retrieved per question
backend: str = "memory"  # "memory" (exact, in-process) or "pgvector" (search in the database)
index_mode: str = "auto"  # pgvector only: "auto", "exact" or "hnsw"
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
list_n: int = 20  # rows shown in the tables of most-retrieved and never-retrieved chunks
output_dir: str = ""  # folder for the metrics JSON and the per-chunk table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import report
from ragnb.analysis import source_charts
from ragnb.analysis.inputs import load_questions, open_chunks
from ragnb.analysis.utilization import chunk_utilization, count_distribution, unused_by_page
from ragnb.store.vectors import fetch_texts
from ragnb.datasets.corpus import open_corpus
from ragnb.datasets.demo import simulated_scores
from ragnb.tiers.result import analysis_result

ctx = open_corpus(corpus, language, embedding_model)
questions = load_questions(ctx, source, corpus, language, dataset_path, min_score, max_questions)
chunks = open_chunks(ctx, backend, index_mode)
retrieval = chunks.retriever.search(questions.vectors, top_k)
per_chunk, summary = chunk_utilization(chunks.ids, retrieval.ids, chunks.urls, top_k=top_k)

# %%
report.header("Chunk utilization", {**ctx.header_info(), "questions": questions.described,
                                    "backend": retrieval.backend, "top_k": top_k})
if questions.source == "log" and simulated_scores(ctx.db):  # the stored log is the bundled demo's
    report.notes(["The bundled demo question log has simulated user scores; min_score filters on them."])
print(f"{summary['used_chunks']} of {summary['total_chunks']} chunks appear in a top {top_k} at least once: "
      f"utilization_rate = {summary['utilization_rate']:.3f}; {summary['unused_chunks']} are never retrieved. "
      f"Gini of retrieval counts = {summary['gini']:.3f}.")
if retrieval.backend == "pgvector-hnsw":
    print("Note: HNSW search is approximate; a chunk the index never returns may still be found by exact search.")

# %% [markdown]
# ## How retrievals are spread over the chunks

# %%
report.show(source_charts.count_histogram(count_distribution(per_chunk)))
report.show(source_charts.lorenz_curve(per_chunk["retrieval_count"], summary["gini"]))

# %% [markdown]
# ## Most-retrieved chunks
# `query_share` = share of the questions whose top k contains the chunk. A chunk retrieved for a large share of
# unrelated questions is often a hub (generic text, boilerplate) that crowds out better matches.

# %%
texts = fetch_texts(ctx.db, "chunks")
preview = per_chunk.assign(text=per_chunk.index.map(lambda c: (texts.get(c) or "")[:200]))
report.show_table(preview.sort_values(["retrieval_count", "top1_count"], ascending=False)
                  [["url", "retrieval_count", "query_share", "top1_count", "best_rank", "text"]], max_rows=list_n)

# %% [markdown]
# ## Never-retrieved chunks, and which pages they belong to

# %%
pages = unused_by_page(per_chunk)
report.show(source_charts.unused_by_page_bars(pages))
report.show_table(pages, max_rows=list_n)
report.show_table(preview[~preview["used"]][["url", "text"]], max_rows=list_n)

# %%
analysis_result(per_chunk, summary, analysis="chunk_utilization", questions=questions, retrieval=retrieval,
                encoder=ctx.encoder).write(output_dir, "utilization", extra={
    "pages_with_unused_chunks": int((pages["unused_chunks"] > 0).sum()),
    "pages_never_retrieved": int((pages["unused_share"] == 1).sum())})
