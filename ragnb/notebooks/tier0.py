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
embedding_models: str = ""  # comma-separated models compared side by side (first: primary); "": embedding_model only
embedding_model_options: str = ""  # JSON per model, e.g. {"endpoint:e5": {"query_prompt": "query: ", "document_prompt": "passage: ", "input_type": "query,document", "dimensions": 384}}; "": RAGNB_EMBEDDING_MODEL_OPTIONS
output_dir: str = ""  # folder for the metrics JSON and the per-vector table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import charts, report
from ragnb.metrics.stats import summary_frame
from ragnb.store.vectors import fetch_texts, fetch_vectors
from ragnb.datasets.corpus import open_corpora
from ragnb.tiers.model_comparison import models_table, run_models, verdict_table
from ragnb.tiers.tier0 import COMPARED, SUMMARY_SHOWN, run_tier0, truncation_note

corpora = open_corpora(corpus, language, embedding_model, embedding_models, embedding_model_options)
ctx = corpora[0]  # the primary model: its geometry is the report's headline
texts = fetch_texts(ctx.db, "chunks")


def tier0_of(c):
    """Tier 0 with one model: the geometry of its own stored chunk vectors."""
    c_ids, _, c_vectors = c.vectors("chunks")
    return run_tier0(c_ids, c_vectors, [texts[i] for i in c_ids], c.encoder, k=k, distance=distance,
                     sample_size=sample_size, seed=seed)


chunks, models = run_models(corpora, tier0_of, COMPARED, texts=list(texts.values()), item_key="id")
report.header("About this run", {**ctx.header_info(), "vectors": chunks.summary["info"]["n_total"], "k": k,
                                 "distance": distance,
                                 **({"models compared": ", ".join(models["models"])} if models else {})})
report.show_table(summary_frame(chunks.summary), max_rows=40)

# %% [markdown]
# ## Embedding models side by side
# With several `embedding_models`: each model's geometry and the share of chunks longer than its input limit,
# then the per-chunk differences with paired tests. Distances of two models are on their own scales, so no
# winner is named here; which model *retrieves* better is Tier 1's paired verdict. Every model's per-chunk values
# are written to `tier0_embeddings.models_per_item.csv`.

# %%
if models:
    report.show_table(models_table(models, SUMMARY_SHOWN))
    report.show_table(verdict_table(models))
else:
    print("One embedding model: list several in embedding_models to compare them.")

# %% [markdown]
# ## Truncation: text the model never saw
# A model with an input limit cuts longer text before embedding; the note below is about the model of this run.

# %%
trunc = chunks.summary.get("truncation")
report.notes([truncation_note(ctx.encoder, trunc)])
if trunc:
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
    q_ids, _, q_vectors = fetch_vectors(ctx.db, "questions", model=ctx.model_for("questions"))
    if len(q_ids) > k:
        questions = run_tier0(q_ids, q_vectors, k=k, distance=distance, sample_size=sample_size, seed=seed)
        print("Question vectors:")
        report.show_table(summary_frame(questions.summary), max_rows=40)
    else:
        print(f"Only {len(q_ids)} embedded questions: question geometry skipped (needs more than k = {k}).")

# %%
chunks.write(output_dir, "tier0_embeddings", extra={"questions": questions.summary if questions else None, **models})
