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
# # Chunking — build speed, index size and retrieval quality
# The system metrics (see docs/metrics.md, Build speed and index size) for each chunking strategy of a grid (chunk size
# × overlap, in words): how long building the vector store takes (chunking, embedding, insert, HNSW index), how big it
# is on disk, how many chunks the encoder silently truncates — and what it does to retrieval quality on the same
# questions.
#
# **Relevance rule.** A chunk is relevant to a question iff it comes from the gold paragraph's article, its
# character span overlaps that paragraph, and it contains the reference answer (case and spacing ignored). A
# question none of whose chunks contains the answer (cut by a boundary) scores 0 in that config and is counted.
#
# **Embedding cache.** Texts already embedded with the same model are read from a cache (model, sha1 of the
# text) instead of being encoded again. Build times stay honest: *measured* = encoded in this run; *cache* =
# the time recorded when the texts were first encoded; *mixed* = both.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD articles; "db": the configured chunk table's texts grouped by URL
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
dataset_path: str = ""  # dataset JSON whose chunk_id names each question's gold paragraph; "": the demo questions
chunk_sizes: str = "100,200"  # chunk sizes in words, comma-separated
overlaps: str = "0,40"  # overlaps in words, comma-separated; each must be smaller than every chunk size
max_articles: int = 0  # use only the first N source articles (ordered by URL; 0: all)
max_questions: int = 0  # use only the first N questions (0: all)
top_k: int = 10  # chunks retrieved per question (exact cosine; at least 10 for ndcg@10)
batch_size: int = 32  # texts per encoder batch
hnsw_m: int = 16  # HNSW links per node
hnsw_ef_construction: int = 64  # HNSW candidate list size while building
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
output_dir: str = ""  # folder for the metrics JSON and the per-question table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import report
from ragnb.analysis import chunking
from ragnb.embeddings.models import get_encoder
from ragnb.store.engine import connect
from ragnb.config import url_database_name
from ragnb.datasets.corpus import CORPORA, open_dataset
from ragnb.tiers.result import analysis_result
from ragnb.tiers.tier0 import input_limit_text

configs = chunking.parse_grid(chunk_sizes, overlaps)
if corpus not in CORPORA:
    raise ValueError(f"corpus = {corpus!r}; use 'demo' (bundled XQuAD) or 'db' (the configured database)")
encoder = get_encoder(embedding_model or None)
if corpus == "demo":
    articles = chunking.demo_articles(language)
    label = f"demo: XQuAD {language} (CC BY-SA 4.0)"
else:
    source_db = connect()
    articles = chunking.db_articles(source_db)
    label = f"database {url_database_name(source_db.display_url)}"  # its URL: the provenance
articles = chunking.select_articles(articles, max_articles)
dataset = open_dataset(dataset_path, corpus, language, max_questions)
workspace = connect(database=chunking.WORKSPACE_DATABASE)  # ragnb's own embedded database: never a team's server

result = chunking.run_chunking(workspace, encoder, articles, dataset.items, configs, top_k=top_k,
                               batch_size=batch_size, hnsw_m=hnsw_m, hnsw_ef_construction=hnsw_ef_construction,
                               n_boot=n_boot)
s = result.summary
report.header("About this run", {"corpus": label, "dataset": dataset.name, "embedding_model": encoder.name,
              "workspace database": url_database_name(workspace.display_url), "grid": ", ".join(c.name for c in configs),
              "articles": s["n_articles"], "paragraphs": s["n_paragraphs"], "questions": s["n_questions"],
              "retrieval": s["retrieval"]})
for note in result.notes:
    print("Note:", note)
rate = s["chunk_encode_rate_this_run"]
print(f"Encoded in this run: {s['texts_encoded_this_run']} texts in {s['encode_seconds_this_run']:.1f} s"
      + (f" (chunks: {rate:.1f} per second)." if rate else " — every embedding came from the cache."))

# %% [markdown]
# ## Side by side

# %%
t = result.table
view = t[["chunk_size", "overlap", "n_chunks", "build_s", "embedding_s", "embedding_timing", "n_encoded",
          "n_from_cache", "chunks_per_s", "total_mb", "bytes_per_chunk", "share_truncated", "n_no_relevant_chunk",
          *chunking.METRICS]]
report.show_table(view.round(4))

# %% [markdown]
# ## Quality against build time and size

# %%
report.show(chunking.tradeoff_figure(t, "mrr"))
report.show(chunking.metrics_figure(t))

# %% [markdown]
# ## Build time by stage

# %%
report.show(chunking.build_time_figure(t))
stages = t[["chunking_s", "embedding_s_measured", "n_encoded", "encode_rate_measured", "embedding_s_recorded",
            "n_from_cache", "insert_s", "index_s", "build_s", "build_s_this_run"]]
report.show_table(stages.round(3))

# %% [markdown]
# ## Index size and truncation
# `share_truncated`: the share of chunks longer than the model's input limit, whose rest is never embedded.

# %%
report.notes([input_limit_text(encoder)])
report.show(chunking.size_figure(t))
report.show_table(t[["n_chunks", "table_bytes", "index_bytes", "hnsw_bytes", "total_bytes", "bytes_per_chunk",
                     "share_truncated", "mean_tokens"]].round(3))

# %%
analysis_result(result.per_query, result.summary, result.notes).write(output_dir, "chunking",
                                                                    extra={"dataset": dataset.name})
