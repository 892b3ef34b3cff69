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
# # Vector space — UMAP projection
# Where do the stored chunk and question vectors lie (see docs/metrics.md, Analytics)? A 2D/3D UMAP picture helps to
# spot outliers, local clusters and empty zones; it complements Tier 0, it does not replace it. Because a projection
# can mislead, the numbers below say how far to trust it: **trustworthiness** (are neighbours in the picture
# neighbours in the full space?), **neighbour preservation** (is a question's nearest chunk in the picture its
# nearest chunk by cosine?), and **outliers** found in the full space, not in the picture. The vectors are the
# stored ones — nothing is re-encoded.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD corpus (own embedded database); "db": the configured database
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
limit: int = 3000  # points projected (deterministic sample keeping the chunk/question shares; 0: all)
include_questions: bool = True  # project the stored question vectors together with the chunks
color_by: str = "source"  # "source" (page of the URL), "topic" (KMeans clusters) or "kind" (chunk or question)
n_topics: int = 10  # KMeans clusters when color_by is "topic"
max_sources: int = 20  # sources with their own colour when color_by is "source" (the rest: "other")
n_neighbors: int = 15  # UMAP neighbourhood size (larger: more global structure)
min_dist: float = 0.1  # UMAP minimum distance between points in the picture
random_state: int = 42  # seed of the sample, KMeans and UMAP (fixed seed: UMAP runs single-threaded)
trust_k: int = 10  # neighbours compared by trustworthiness
outlier_k: int = 5  # neighbours whose mean cosine distance scores a point as an outlier
outlier_quantile: float = 0.99  # points above this quantile of that distance are outliers (0.99: top 1%)
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
output_dir: str = ""  # folder for the metrics JSON and the per-point table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.analysis import umap_cache, vector_space

jit = umap_cache.enable_jit_cache()  # before anything imports umap: compiled code is reused across runs

from ragnb.reports import report
from ragnb.datasets.corpus import open_corpus
from ragnb.tiers.result import analysis_result

ctx = open_corpus(corpus, language, embedding_model)
points = vector_space.load_points(ctx.db, limit=limit, seed=random_state, include_questions=include_questions,
                                  models={w: ctx.model_for(w) for w in ("chunks", "questions")})
result = vector_space.run_vector_space(
    points, color_by=color_by, n_topics=n_topics, max_sources=max_sources, n_neighbors=n_neighbors,
    min_dist=min_dist, random_state=random_state, trust_k=trust_k, outlier_k=outlier_k,
    outlier_quantile=outlier_quantile, n_boot=n_boot)
s = result.summary
report.header("About this run", {**ctx.header_info(), "points": s["n_points"], "chunks": s["n_chunks"],
              "questions": s["n_questions"], "dimensions": s["dims"], "color_by": color_by,
              "umap": f"cosine, n_neighbors {n_neighbors}, min_dist {min_dist}, random_state {random_state}"})
for note in result.notes:
    print("Note:", note)

# %% [markdown]
# ## 2D projection
# Hover a point for its text. Circles are chunks, diamonds questions; black rings mark full-space outliers.

# %%
report.show(vector_space.scatter(result.per_item, color_by, 2))

# %% [markdown]
# ## 3D projection (drag to rotate)

# %%
report.show(vector_space.scatter(result.per_item, color_by, 3))

# %% [markdown]
# ## How far to trust the picture
# Trustworthiness is 1.0 when every point's nearest neighbours in the picture are also its neighbours in the
# full space (about 0.9 and above: local structure is faithful). Neighbour preservation compares each
# question's nearest chunk in the 2D picture with its nearest chunk by cosine (chance level: 1 / chunks).

# %%
import pandas as pd

np_ = s["neighbour_preservation"]
np5 = s["neighbour_preservation@5"]
checks = pd.DataFrame([
    {"check": f"trustworthiness 2D (k = {trust_k})", "value": s["trustworthiness"]},
    {"check": f"trustworthiness 3D (k = {trust_k})", "value": s["trustworthiness_3d"]},
    {"check": "neighbour preservation: nearest chunk in 2D = nearest chunk by cosine", "value": np_["mean"],
     "ci95": np_["ci95"], "questions": np_["n"]},
    {"check": "… full-space nearest chunk among the 5 nearest in 2D", "value": np5["mean"], "ci95": np5["ci95"],
     "questions": np5["n"]},
    {"check": "chance level of neighbour preservation (1 / chunks)", "value": s["neighbour_preservation_chance"]},
    {"check": f"outliers (kNN distance above the {outlier_quantile:.0%} quantile)", "value": s["n_outliers"]},
])
report.show_table(checks)
print(f"UMAP fit: {report.plain(s['fit_seconds'])} s (a process's first fit includes numba compilation; "
      f"compiled code cached in {jit['cache_dir']}).")

# %% [markdown]
# ## Outliers
# Points farthest from their nearest neighbours in the full space: texts unlike anything else in the corpus
# (boilerplate, another language, broken extraction) or questions about something the corpus does not hold.

# %%
out = result.per_item[result.per_item["outlier"]].sort_values("knn_distance", ascending=False)
report.show_table(out[["kind", "source", "knn_distance", "text"]], max_rows=30)

# %% [markdown]
# ## Questions whose picture misleads
# Questions whose nearest chunk in 2D is not their nearest chunk by cosine — do not read retrieval off the picture.

# %%
q = result.per_item[result.per_item["kind"] == "question"]
moved = q[q["nearest_chunk_preserved"] == 0]
report.show_table(moved[["text", "nearest_chunk_full", "nearest_chunk_projected"]].rename(
    columns={"text": "question"}), max_rows=15)

# %%
analysis_result(result.per_item, result.summary, result.notes, encoder=ctx.encoder).write(output_dir, "vector_space")
