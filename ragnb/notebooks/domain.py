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
# # Real-user domain analysis
# What do real users ask about, how satisfied are they per topic, and where does the knowledge base have
# nothing close to the question? The logged questions (stored embeddings) are clustered into topics by the same
# function as the topic-coverage report (KMeans on language-centred vectors, the number of topics chosen by
# silhouette up to `n_topics`; each topic labelled with its top terms and the pages its questions cite, and checked
# against those pages by NMI and ARI beside permuted topics). A log with no topical structure (silhouette < 0.05 and
# page agreement at chance) is said to have none, and its per-topic score charts are not drawn. Per topic: user
# scores 1–5, the mean score with a bootstrap 95% CI, the share of scores ≤ 2, and the share of *knowledge-gap
# candidates*. A question is a candidate when the log gives a reason: a user score ≤ 2, no cited page, a cited page
# that is not in the corpus, or a top-1 cosine similarity below a threshold. The threshold is model-specific, so by
# default it is calibrated on the log: the `gap_quantile` quantile of the top-1 similarities of the questions whose
# cited page was retrieved (uncalibrated, over all questions, when fewer than 10 have one); `gap_threshold` sets an
# absolute cosine level instead. A short follow-up turn ("And which client?") of a turn the user scored ≥ 4 is not
# flagged on similarity alone. Each candidate lists the signals that flagged it.

# %% tags=["parameters"]
corpus: str = "demo"  # "demo": bundled XQuAD corpus and question log (own embedded database); "db": the configured database
language: str = "ru"  # demo only: "ru" (original) or "en" (the parallel English text)
min_score: int = 0  # keep questions with a user score of at least this (0: all, which the score analysis needs)
max_questions: int = 0  # use only the first N logged questions, ordered by id (0: all)
n_topics: int = 8  # most topics (rule "silhouette") or exactly this many ("fixed"); 2 to the number of questions
n_topics_rule: str = "silhouette"  # "silhouette": choose 2…n_topics topics by silhouette; "fixed": exactly n_topics
top_k: int = 5  # chunks retrieved per question (the page-hit rate per topic uses this cut-off)
gap_threshold: float = 0.0  # absolute top-1 cosine below which a question is a knowledge gap; 0: use gap_quantile
gap_quantile: float = 0.1  # gap threshold: this quantile of the top-1 similarities of questions whose cited page was retrieved
centre_languages: bool = True  # subtract each language's mean vector before KMeans (False: plain KMeans)
n_terms: int = 5  # top terms (c-TF-IDF) that label each topic
pages_dir: str = ""  # the wiki folder the corpus was loaded from: topics name their pages by front-matter title or first heading; "": by URL
pages_url_template: str = ""  # the --url-template the folder was loaded with ("": front-matter url, else the relative path)
backend: str = "memory"  # "memory" (exact, in-process) or "pgvector" (search in the database)
index_mode: str = "auto"  # pgvector only: "auto", "exact" or "hnsw"
seed: int = 0  # KMeans random_state and bootstrap seed
n_init: int = 10  # KMeans restarts (the best of n_init runs is kept)
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
max_listed: int = 50  # knowledge-gap questions listed in the metrics JSON and the table
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
output_dir: str = ""  # folder for the metrics JSON and the per-question table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import report
from ragnb.analysis import source_charts
from ragnb.analysis.domain import domain_analysis, page_hits, signal_table, topic_table
from ragnb.analysis.topics import clustering_note, language_centred
from ragnb.analysis.topic_pages import page_agreement_note, selection_note, wiki_titles
from ragnb.analysis.inputs import count_unembedded, load_log, open_chunks
from ragnb.datasets.corpus import open_corpus
from ragnb.datasets.demo import simulated_scores
from ragnb.store.questions import question_log_label
from ragnb.tiers.result import analysis_result

ctx = open_corpus(corpus, language, embedding_model)
log, vectors = load_log(ctx, min_score=min_score, limit=max_questions)
not_embedded = count_unembedded(ctx, min_score)
simulated = simulated_scores(ctx.db)  # the stored log is the bundled demo's (its rows say so, not a parameter)
chunks = open_chunks(ctx, backend, index_mode)
retrieval = chunks.retriever.search(vectors, top_k)
hits = page_hits(retrieval.ids, log["url"].tolist(), chunks.urls, top_k)
per_question, summary = domain_analysis(
    list(log.index), log["question"].tolist(), vectors, log["score"].tolist(),
    [s[0] if len(s) else float("nan") for s in retrieval.scores], n_topics=n_topics, hits=hits,
    gap_threshold=gap_threshold or None, gap_quantile=gap_quantile, seed=seed, n_init=n_init, n_boot=n_boot,
    max_listed=max_listed, log=log, chunk_urls=chunks.urls, centre_languages=centre_languages, n_terms=n_terms,
    n_topics_rule=n_topics_rule, titles=wiki_titles(pages_dir, pages_url_template))
table = topic_table(summary)
structured = summary["topical_structure"]["has_structure"]

# %%
gap = summary["gap"]
report.header("Real-user domain analysis", {
    **ctx.header_info(), "questions": question_log_label(ctx.db, summary["total_questions"], min_score),
    "n_topics": f"{summary['n_topics']} ({n_topics_rule}, at most {n_topics})" if n_topics_rule == "silhouette"
    else n_topics, "backend": retrieval.backend, "top_k": top_k,
    "similarity_threshold": f"{gap['threshold']:.3f} ({gap['method']}{', q = ' + str(gap['quantile']) if gap['quantile'] else ''})",
    "user_scores": "SIMULATED (bundled demo log)" if simulated else "from the question log",
})
report.notes(
    ([summary["topical_structure"]["note"]] if not structured else [])
    + (["The bundled demo log's user scores are simulated (a fixed random draw, see ragnb/datasets/demo.py), so score "
      "differences between topics are noise here; its questions, topics, similarities and gaps are real."]
     if simulated else [])
    + ([f"{not_embedded} logged questions have no embedding and were not analysed (run `ragnb embed --questions`)."]
       if not_embedded else []))
ms = summary["mean_score"]
signals = summary["gap_signals"]
print(f"Mean user score {ms['mean']:.2f} (95% CI {ms['ci95'][0]:.2f}–{ms['ci95'][1]:.2f}, {ms['n_valid']} scored of "
      f"{ms['n']}); share of scores ≤ 2: {summary['low_score_share']:.3f}. Knowledge-gap candidates: "
      f"{signals['any']['n_flagged']} of {signals['any']['n']} questions flagged by at least one signal.")
print(clustering_note(summary["clustering"]))
print(selection_note(summary["topic_selection"]))
print(page_agreement_note(summary["page_agreement"]))
print(summary["topical_structure"]["note"])
report.show_table(table, max_rows=max(n_topics, 1), max_chars=400)

# %% [markdown]
# ## User scores per topic
# The per-topic charts are drawn only when the topics have structure; otherwise they would compare arbitrary groups.

# %%
report.show(source_charts.score_bars(summary["score_distribution"], "User scores of the analysed questions"))
if structured:
    report.show(source_charts.scores_by_topic_bars(table))
    report.show(source_charts.mean_score_bars(table))
else:
    print("Per-topic score charts not drawn: " + summary["topical_structure"]["note"])

# %% [markdown]
# ## Knowledge gaps
# Candidates for missing or badly written content, and the signal(s) that flagged each. The similarity threshold
# depends on the embedding model: the histogram shows this model's top-1 similarities beside it.

# %%
print(f"Similarity threshold: {gap['description']}. Follow-up turns of a well-answered turn not flagged on "
      f"similarity alone: {signals['follow_ups_not_flagged']}.")
report.show_table(signal_table(summary), max_rows=10, max_chars=400)
report.show(source_charts.similarity_histogram(per_question["top1_score"], gap["threshold"]))
map_vectors = language_centred(vectors, per_question["language"]) if centre_languages else vectors
report.show(source_charts.topic_map(map_vectors, per_question["topic_id"], log["question"].tolist(),
                                    space=summary["clustering"]["algorithm"].removeprefix("KMeans on ")))
gaps = per_question[per_question["is_gap"]].sort_values(["n_signals", "top1_score"], ascending=[False, True])
report.show_table(gaps[["question", "signals", "topic_id", "score", "top1_score", "page_hit"]],
                  max_rows=max(max_listed, 1), full="domain_analysis.per_item.csv")

# %%
analysis_result(per_question, summary, analysis="domain_analysis", retrieval=retrieval,
                encoder=ctx.encoder).write(output_dir, "domain_analysis", extra={
    "min_score": min_score, "top_k": top_k, "questions_without_embedding": not_embedded,
    "scores_simulated": simulated})
