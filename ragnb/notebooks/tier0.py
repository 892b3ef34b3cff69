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
# # Tier 0 — Embedding geometry
# Intrinsic properties of the vector space (see docs/metrics.md, Embedding geometry): how close neighbours are, how
# spread out the vectors are around their centroid, how many dimensions carry 95% of the variance, and how many texts
# the model silently truncated. No labels needed.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD corpus (own embedded database); "db": the configured database
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
sample_size: int = 2000  # vectors analysed (deterministic random sample; 0: all)
k: int = 5  # nearest neighbours per vector
distance: str = "euclidean"  # "euclidean" or "cosine" (1 minus cosine similarity)
include_questions: bool = True  # also analyse the stored question vectors
seed: int = 0  # sampling seed
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
output_dir: str = ""  # folder for the metrics JSON and the per-vector table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import charts, report
from ragnb.metrics.stats import summary_frame
from ragnb.store.vectors import fetch_texts, fetch_vectors
from ragnb.datasets.corpus import open_corpus
from ragnb.tiers.tier0 import run_tier0

ctx = open_corpus(corpus, language, embedding_model)
ids, _, vectors = fetch_vectors(ctx.db, "chunks")
texts = fetch_texts(ctx.db, "chunks")
chunks = run_tier0(ids, vectors, [texts[i] for i in ids], ctx.encoder, k=k, distance=distance,
                   sample_size=sample_size, seed=seed)
report.header("About this run", {**ctx.header_info(), "vectors": len(ids), "k": k, "distance": distance})
report.show_table(summary_frame(chunks.summary), max_rows=40)

# %% [markdown]
# ## Truncation: text the model never saw
# all-MiniLM-L6-v2 reads at most 256 tokens; anything longer is cut before embedding.

# %%
trunc = chunks.summary.get("truncation", {})
print(f"{trunc.get('n_truncated', 0)} of {trunc.get('n', 0)} chunks exceed {ctx.encoder.max_seq_length} tokens "
      f"({trunc.get('share_truncated', 0):.0%}); mean length {trunc.get('mean_tokens', float('nan')):.0f} tokens.")
report.show(charts.histogram(chunks.per_item["tokens"], "Chunk length in model tokens", "tokens"))

# %% [markdown]
# ## Neighbourhoods, spread and effective dimensionality

# %%
report.show(charts.histogram(chunks.per_item["nn_distance_mean"], f"Mean distance to the {k} nearest neighbours", "distance"))
report.show(charts.histogram(chunks.per_item["spread"], "Distance to the centroid", "distance"))
report.show(charts.explained_variance(chunks.explained_variance))

# %%
questions = None
if include_questions:
    q_ids, _, q_vectors = fetch_vectors(ctx.db, "questions")
    if len(q_ids) > k:
        questions = run_tier0(q_ids, q_vectors, k=k, distance=distance, sample_size=sample_size, seed=seed)
        print("Question vectors:")
        report.show_table(summary_frame(questions.summary), max_rows=40)
    else:
        print(f"Only {len(q_ids)} embedded questions: question geometry skipped (needs more than k = {k}).")

# %%
chunks.write(output_dir, "tier0_embeddings", extra={"questions": questions.summary if questions else None})
