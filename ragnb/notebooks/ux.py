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
# # Tier UX — cache reuse and dialogue continuity
# Two "soft" aspects of how users experience the system (see docs/metrics.md, Tier UX), measured on embeddings only:
#
# - **cache_hit_rate**: share of questions whose most similar question among those users rated 5 has cosine
#   similarity **above** τ (equal to τ is not a hit) — how often a cached answer could be reused;
# - **cache_hit_precision**: the share of those hits that would serve the right answer, by the strictest oracle the
#   log has: the same answer where both questions' answers are known, else the same cited page;
# - **context_preservation**: mean cosine similarity of consecutive questions in a session, averaged within
#   each session, then over sessions; **multi_turn_consistency** is the same number (the original definition defines it
#   so).
#
# Similarity thresholds depend on the embedding model (multilingual-e5 puts almost any two questions of one wiki
# above 0.8, all-MiniLM-L6-v2 rarely), so τ is calibrated on the cited pages for a target precision, and breaks
# are checked against them too: a turn that cites another page than the previous turn is a real topic change.
# Where the flags cannot beat always answering "no break", there is no break rate; without cited pages the break
# threshold is reported as uncalibrated and unvalidated, beside the model's similarity distribution.
#
# Every mean comes with a bootstrap 95% confidence interval (over questions, hits, resp. sessions) and the counts
# behind it; undefined values (an empty cache) are counted as failed, never dropped; a one-turn session has no
# continuity to measure and is counted as not applicable.

# %% tags=["parameters"]
corpus: str = "demo"  # cache part: "demo" (bundled XQuAD questions and log, simulated scores) or "db" (configured database)
language: str = "ru"  # demo corpus only: "ru" (original) or "en" (the parallel English text)
sessions: str = "demo"  # "demo": bundled ruTiE (ru) and TREC CAsT (en) sessions; "db": sessions of the configured log
dataset_path: str = ""  # questions checked against the cache; "": demo questions, or (db) every logged question
max_questions: int = 0  # check only the first N questions against the cache (0: all)
cache_score: int = 5  # user score that puts a logged question into the cache
tau: float = 0.0  # cache hit when the best cosine similarity is strictly above τ in (0, 1]; 0: calibrated (see target_precision)
target_precision: float = 0.9  # τ 0: the smallest τ whose hits cite their match's page this often, else the model's default
break_threshold: float = 0.0  # a turn breaks context below this similarity to the previous turn; 0: chosen on the cited pages (else the 90% quantile of turns of different sessions, unvalidated)
max_sessions: int = 0  # analyse only the first N sessions, by time of their first turn (0: all)
embedding_model: str = ""  # "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
worst_n: int = 25  # questions listed in the table of context breaks
output_dir: str = ""  # folder for the metrics JSON and the per-turn table; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import report
from ragnb.tiers.ux import load_inputs, run_tier_ux
from ragnb.tiers.ux_figures import (break_signal_chart, cache_similarity_histogram, similarity_by_flag_chart,
                                    similarity_chart, summary_rows, tau_curve_chart)

inputs = load_inputs(corpus, language, sessions, embedding_model, dataset_path, max_questions, max_sessions,
                     cache_score)
result = run_tier_ux(inputs.queries, inputs.query_vectors, inputs.cache, inputs.cache_vectors, inputs.sessions,
                     inputs.annotations, tau=tau or None, break_threshold=break_threshold or None, n_boot=n_boot,
                     target_precision=target_precision, embedding_model=inputs.embedding_model)
result.add_notes(inputs.notes)
summary = result.summary
report.header("Tier UX — about this run", {
    **inputs.info, "tau": f"{summary['tau']:.4g} ({summary['tau_source']})",
    "break_threshold": (f"{summary['break_threshold']:.4g}" if summary["break_threshold"] is not None else "none")
                       + f" ({summary['break_threshold_source']})",
    "questions_checked": len(result.per_query), "sessions_analysed": len(result.per_session),
})
for note in result.notes:
    print("Note:", note)
report.show_table(summary_rows(result.summary), max_rows=40)

# %% [markdown]
# ## Cache reuse: best match of each question in the score-5 cache
# Where the log dates its questions (`created_at`), the cache of a question holds only the score-5 questions asked
# strictly before it — as a real cache would; a question asked at the same instant, or undated, is not before it.
# A question never matches itself: a cache entry is left out of a question's maximum when it has the question's
# id, the id of the log row the dataset item was built from (`question_answer_id`, set by
# `ragnb dataset from-real-questions`), or the same text after normalisation (Unicode NFKC, case, whitespace,
# punctuation at the ends). The counts of such exclusions, per reason, are printed below and written to the
# metrics JSON (`cache.self_matches_excluded`).

# %%
cache = summary["cache"]
print(f"{cache.get('n_hits', 0)} of {cache.get('n_queries', 0)} questions have a cached question with similarity "
      f"> τ = {summary['tau']:.4g} (cache: {cache.get('n_cache', 0)} questions; median best similarity "
      f"{cache.get('max_similarity_p50', float('nan')):.3f}, 95th percentile {cache.get('max_similarity_p95', float('nan')):.3f}).")
excluded = cache.get("self_matches_excluded", {})
print(f"Self-matches left out: {cache.get('n_self_in_cache', 0)} question(s) found themselves in the cache — "
      f"{excluded.get('same_id', 0)} by id, {excluded.get('same_source_id', 0)} by the log id the item was built "
      f"from, {excluded.get('same_text', 0)} by identical normalised text.")
if result.per_query["max_similarity"].notna().any():
    report.show(cache_similarity_histogram(result.per_query, summary["tau"], inputs.embedding_model))
    hits = result.per_query[result.per_query["hit"] == 1].sort_values("max_similarity", ascending=False)
    report.show_table(hits[["question", "best_cache_question", "max_similarity", "match"]].round(3), max_rows=15)

# %% [markdown]
# ## Calibrating τ on the pages the questions cite
# Where the log holds the page each question cites, a hit is right when the question and its match cite the same
# page. The chart shows, for every τ at which something changes (the observed best-match similarities), the share
# of hits citing the same page (precision; hits where either side cites no page are left out and counted) and the
# hit rate; the table below it holds exactly the chart's points. The calibrated τ is the smallest τ whose precision
# on this log reaches `target_precision` — chosen on the same log, so optimistic for new questions. It is therefore
# also calibrated on a random half of the users and measured on the other half (20 seeded splits): the verdict
# reads that out-of-sample precision.

# %%
if not result.tau_curve.empty:
    cal = summary["tau_calibration"]
    report.show(tau_curve_chart(result.tau_curve, summary["tau"], cal["tau"], target_precision))
    report.show_table(result.tau_curve, max_rows=15)
    verdict, ins = summary["tau_verdict"], summary["tau_verdict"]["in_sample"]
    print(f"precision at τ = {summary['tau']:.4g}: out of sample {verdict['precision']:.3f} "
          f"[{verdict['ci95'][0]:.3f}, {verdict['ci95'][1]:.3f}] beside in-sample {ins['mean']:.3f} "
          f"[{ins['ci95'][0]:.3f}, {ins['ci95'][1]:.3f}] ({verdict['basis']}); reaches {target_precision:g}: "
          f"{verdict['reaches_target']}.")
else:
    print("No question and its best cached match both cite a page: τ cannot be calibrated here (see the notes).")

# %% [markdown]
# ## Dialogue continuity: similarity between consecutive questions
# A thin line per session and, thick and black, the mean over a source's sessions at each turn position. The
# selector shows all sessions, one source, or one session; hover a point for the two questions. The dashed
# line is the break threshold, where the breaks are cut on this similarity and there is a break rate.

# %%
# the threshold line only where the breaks are cut on the questions' similarity (not on the answers')
question_cut = summary["break_threshold"] if summary["break_signal"] == "question" else None
if len(result.per_item):
    report.show(similarity_chart(result.per_item, question_cut))
    report.show(similarity_by_flag_chart(result.per_item, question_cut))
    multi = result.per_session[result.per_session["n_turns"] > 1]
    print(f"{len(result.per_session) - len(multi)} one-turn session(s) are not applicable (no consecutive pair) "
          "and not listed.")
    report.show_table(multi.sort_values("context_preservation").round(3), max_rows=15)

# %% [markdown]
# ## Are the breaks right? Checked against the cited pages
# Where the log cites a page per turn, a turn that cites another page than the previous turn is a real topic
# change, and a turn on the same page is a follow-up (often elliptical: "And how long is it valid?"). The break
# signal is the cosine of the questions, or of the logged answers where they separate page changes better (an
# elliptical question names nothing of its topic; its answer does). The threshold is the cut that agrees most often
# with the pages, chosen on this log (so optimistic for new turns). A break rate is given only where the two kinds
# of pairs are separable (ROC-AUC's 95% CI above 0.5) and the flags beat always answering "no break" (paired
# bootstrap); otherwise it says nothing here.

# %%
check = summary["break_validation"]
if check and check.get("at_threshold"):
    at = check["at_threshold"]
    for signal, auc in check["signals"].items():
        print(f"{signal}: ROC-AUC for page changes {auc['mean']:.3f} (95% CI {auc['ci95'][0]:.3f}–{auc['ci95'][1]:.3f})")
    print(f"Signal used: {summary['break_signal']}. {check['n_pairs']} pairs judged by the cited pages, "
          f"{check['n_page_changes']} page changes. At similarity < {check['threshold']:.4g}: agreement "
          f"{at['accuracy']['mean']:.3f} vs {check['majority_baseline']:.3f} for always 'no break'; precision "
          f"{at['precision']['mean']:.3f}, recall {at['recall']['mean']:.3f} of breaks.")
    print("Verdict:", "validated" if check["separable"] else f"no break rate — {check['reason']}")
    report.show(break_signal_chart(result.per_item, summary["break_threshold"], summary["break_signal"]))
else:
    print("The turns cite no pages: the break threshold cannot be checked here "
          f"({summary['break_threshold_source']}).")

# %% [markdown]
# ## Questions that broke context
# Turns less similar to the previous question than the break threshold, least similar first. For TREC CAsT,
# `needs_context` is the human signal (the annotators had to rewrite the turn to make it self-contained):
# a low similarity with `needs_context = True` is an elliptical follow-up ("What about its symptoms?") that
# embeddings do not link to its context — exactly the turns a system must resolve from the dialogue.

# %%
for source, block in result.summary["per_source"].items():
    det = block.get("needs_context_detection")
    if det:
        auc, at = det["roc_auc"], det["at_break_threshold"]
        cut = (f"at similarity < {summary['break_threshold']:.3g}: precision {at['precision']['mean']:.3f}, "
               f"recall {at['recall']['mean']:.3f}. " if at else "")
        print(f"{source}: does low similarity find the turns that needed context? ROC-AUC of (1 − similarity) vs the "
              f"human flag = {auc['mean']:.3f} (95% CI {auc['ci95'][0]:.3f}–{auc['ci95'][1]:.3f}, {det['n_pairs']} turns); "
              f"{cut}Mean similarity: needs context {det['mean_similarity_needs_context']:.3f}, "
              f"self-contained {det['mean_similarity_self_contained']:.3f}.")
columns = [c for c in ("session_id", "turn", "source", "previous_question", "question", "similarity", "needs_context",
                       "manual_rewrite") if c in result.per_item.columns]
columns += [c for c in ("break_similarity", "page_change") if c in result.per_item.columns]
if len(result.per_item) and summary["break_threshold"] is not None:
    print(f"{len(result.breaks)} of {int(result.per_item['similarity'].notna().sum())} consecutive pairs are below "
          f"{summary['break_threshold']:.3g} ({summary['break_signal']} signal).")
    report.show_table(result.breaks[columns].round({"similarity": 3, "break_similarity": 3}).reset_index(drop=True),
                      max_rows=worst_n)
elif len(result.per_item):
    print(f"No turn is listed: {summary['break_threshold_source']}.")

# %%
result.write(output_dir, "tier_ux", extra={
    "corpus": corpus, "sessions_source": sessions, "cache_score": cache_score,
    "embedding_model": inputs.embedding_model, "simulated_scores": corpus == "demo"})
