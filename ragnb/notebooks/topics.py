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
# # Topic coverage
# docs/metrics.md, Analytics: the questions are clustered into topics (KMeans over their unit-normalised
# embeddings, fixed `random_state`; with `n_topics_rule` "silhouette" every count from 2 to `n_topics` is tried and the
# fewest topics within 0.005 of the best silhouette kept, "fixed" uses exactly `n_topics`); for every topic the
# top-k retrievals of its questions are pooled and the distinct chunks and source pages counted. With `centre_languages`, each language's mean vector (Cyrillic vs Latin
# script) is subtracted before KMeans, so a bilingual log splits by subject rather than by language; each topic is
# labelled with its top terms (c-TF-IDF over its questions; stop-words and numbers never label a topic) and its top
# pages — the pages its questions cite (a log's `url`) or, without a log, retrieve first. The topics are checked
# against those pages: NMI and ARI with a bootstrap CI beside the same figure for randomly permuted topics. A log
# whose topics neither separate (silhouette < 0.05) nor follow the pages better than chance is said to have no
# topical structure, and its per-topic charts are not drawn. A topic with many questions but few distinct chunks
# leans on a narrow slice of the knowledge base; a topic served by a few URLs only reuses a narrow set of sources.
# A topic is flagged *low coverage* when it is at least as large as the median topic and reaches fewer than
# `low_coverage_factor` × the median number of distinct chunks per question.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD corpus (own embedded database); "db": the configured database
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
source: str = "auto"  # questions: "dataset", "log" (question log, stored embeddings) or "auto" (dataset for the demo or a dataset_path, else log)
dataset_path: str = ""  # dataset JSON for source "dataset"; "": the demo questions
min_score: int = 0  # source "log" only: keep questions with a user score of at least this (0: all)
max_questions: int = 0  # use only the first N questions (0: all)
n_topics: int = 10  # most topics (rule "silhouette") or exactly this many ("fixed"); 2 to the number of questions
n_topics_rule: str = "silhouette"  # "silhouette": choose 2…n_topics topics by silhouette; "fixed": exactly n_topics
top_k: int = 5  # chunks retrieved per question
backend: str = "memory"  # "memory" (exact, in-process) or "pgvector" (search in the database)
index_mode: str = "auto"  # pgvector only: "auto", "exact" or "hnsw"
seed: int = 0  # KMeans random_state
n_init: int = 10  # KMeans restarts (the best of n_init runs is kept)
n_representatives: int = 3  # questions closest to each topic centroid, shown as its examples
low_coverage_factor: float = 0.5  # flag large topics below this share of the median distinct chunks per question
centre_languages: bool = True  # subtract each language's mean vector before KMeans (False: plain KMeans)
n_terms: int = 5  # top terms (c-TF-IDF) that label each topic
pages_dir: str = ""  # the wiki folder the corpus was loaded from: topics name their pages by front-matter title or first heading; "": by URL
pages_url_template: str = ""  # the --url-template the folder was loaded with ("": front-matter url, else the relative path)
n_boot: int = 1000  # bootstrap resamples for the CIs of the page agreement (NMI, ARI)
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
output_dir: str = ""  # folder for the metrics JSON and the per-question table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import report
from ragnb.analysis import source_charts
from ragnb.analysis.inputs import load_questions, open_chunks
from ragnb.analysis.topics import clustering_note, language_centred, topic_coverage, topics_frame
from ragnb.analysis.topic_pages import page_agreement_note, selection_note, wiki_titles
from ragnb.datasets.corpus import open_corpus
from ragnb.datasets.demo import simulated_scores
from ragnb.tiers.result import analysis_result

ctx = open_corpus(corpus, language, embedding_model)
questions = load_questions(ctx, source, corpus, language, dataset_path, min_score, max_questions)
chunks = open_chunks(ctx, backend, index_mode)
retrieval = chunks.retriever.search(questions.vectors, top_k)
per_question, summary = topic_coverage(questions.ids, questions.texts, questions.vectors, retrieval.ids, chunks.urls,
                                       n_topics=n_topics, seed=seed, n_init=n_init,
                                       n_representatives=n_representatives, low_coverage_factor=low_coverage_factor,
                                       centre_languages=centre_languages, n_terms=n_terms,
                                       question_urls=None if questions.log is None else questions.log["url"].tolist(),
                                       n_topics_rule=n_topics_rule, n_boot=n_boot,
                                       titles=wiki_titles(pages_dir, pages_url_template))
topics = topics_frame(summary)
structured = summary["topical_structure"]["has_structure"]

# %%
report.header("Topic coverage", {**ctx.header_info(), "questions": questions.described,
                                 "n_topics": f"{summary['n_topics']} ({n_topics_rule}, at most {n_topics})"
                                 if n_topics_rule == "silhouette" else n_topics,
                                 "backend": retrieval.backend, "top_k": top_k})
report.notes(([summary["topical_structure"]["note"]] if not structured else [])
             + (["The bundled demo question log has simulated user scores; min_score filters on them."]
                if questions.source == "log" and simulated_scores(ctx.db) else []))  # the stored log is the demo's
print(f"{summary['total_questions']} questions in {summary['n_topics']} topics; on average a topic reaches "
      f"{summary['avg_chunks_per_topic']:.1f} distinct chunks and {summary['avg_urls_per_topic']:.1f} pages. "
      f"Silhouette (cosine) = {summary['silhouette']:.3f} (−1…1; near 0 = overlapping topics).")
print(clustering_note(summary["clustering"]))
print(selection_note(summary["topic_selection"]))
print(page_agreement_note(summary["page_agreement"]))
print(summary["topical_structure"]["note"])
flagged = summary["low_coverage_topics"]
print(f"Low-coverage topics: {flagged if flagged else 'none'}")
report.show_table(topics, max_rows=max(n_topics, 1), max_chars=400)

# %% [markdown]
# ## Questions, distinct chunks and pages per topic
# Drawn only when the topics have structure: without it, differences between topics are differences between
# arbitrary groups of questions.

# %%
if structured:
    report.show(source_charts.topic_bars(topics))
    report.show(source_charts.topic_scatter(topics))
else:
    print("Per-topic charts not drawn: " + summary["topical_structure"]["note"])
# the map shows the space KMeans clustered: on a bilingual log the raw vectors' first component is the language
map_vectors = language_centred(questions.vectors, per_question["language"]) if centre_languages else questions.vectors
report.show(source_charts.topic_map(map_vectors, per_question["topic_id"], questions.texts,
                                    space=summary["clustering"]["algorithm"].removeprefix("KMeans on ")))

# %%
analysis_result(per_question, summary, analysis="topic_coverage", questions=questions, retrieval=retrieval,
                encoder=ctx.encoder).write(output_dir, "topic_coverage")
