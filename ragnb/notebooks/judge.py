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
# # Tier Judge — can the judge be trusted?
# docs/metrics.md, Tier Judge and Judge Pipeline: every answer's faithfulness is judged twice per judge mode (direct,
# reasoned); the second pass bypasses the LLM cache, so it is a real repeat. `consistency_score` is the share of items
# whose two scores differ by at most δ, `error_rate` the share of judgements without a valid verdict, plus the judge's
# latency and its mean score. Beyond the original definition, the scores are calibrated against **human labels** (the
# bundled BEGIN set by default): ROC-AUC, the best threshold, and accuracy, balanced accuracy, precision,
# recall, F1 and Cohen's κ at the show threshold — each with a bootstrap 95% confidence interval.

# %% tags=["parameters"]
dataset_path: str = ""  # judge-pipeline JSON/JSONL (question, answer, context, ground_truth_show); "": bundled BEGIN dev set
max_items: int = 0  # 0: all items; N: a fixed random sample of N (bundled BEGIN) or the first N (own file)
begin_generic: str = "no_show"  # bundled BEGIN only: "no_show" counts generic responses as not grounded, "drop" leaves them out
judge_models: str = ""  # judge model ids, comma-separated; "": the offline fallback (embedding similarity)
judge_aggregate: str = "mean"  # how several judge models combine: "mean", "median" or "majority"
modes: str = "direct,reasoned"  # judge modes, comma-separated; the first one gives the headline numbers
explanation_language: str = "en"  # language of the judge prompt and its explanations: "en" or "ru"
delta: float = 0.5  # two scores of one item agree when they differ by at most delta
show_threshold: float = 0.0  # a score ≥ this counts as grounded; 0 means automatic (0.5 for an LLM judge, the fallback's calibrated cut offline)
concurrency: int = 8  # items judged at once (LLM requests in flight)
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
embedding_model: str = ""  # encoder of the offline fallback; "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
prices: dict = {}  # model id mapped to {"input_per_1m": USD, "output_per_1m": USD} for the cost table
llm_max_retries: int = -1  # retries of a failing LLM request; -1: RAGNB_LLM_MAX_RETRIES, else 6
llm_max_wait_s: float = 0  # longest an LLM call may take with its retries, in s; 0: RAGNB_LLM_MAX_WAIT_S, else 60
resume: bool = True  # reuse the per-item results already logged in output_dir (False: judge everything again)
worst_n: int = 10  # items listed under "largest disagreements with the human labels"
output_dir: str = ""  # folder for the metrics JSON, the per-item table and the item log; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import report
from ragnb.embeddings.models import get_encoder
from ragnb.tiers import judging
from ragnb.llm.setup import open_llm

llm = open_llm(prices, max_concurrency=concurrency, max_retries=llm_max_retries, max_wait_s=llm_max_wait_s)
choice = judging.choose_judge(llm, judge_models)
dataset = judging.open_judge_dataset(dataset_path, max_items, begin_generic)
encoder = get_encoder(embedding_model or None) if choice.client is None else None

# %%
result = judging.run_tier_judge(
    dataset, choice.client, choice.models, aggregate=judge_aggregate, modes=judging.parse_list(modes),
    language=explanation_language, delta=delta, show_threshold=show_threshold, encoder=encoder,
    concurrency=concurrency, n_boot=n_boot, log_path=judging.item_log_path(output_dir, "tier_judge", resume))
result.add_notes(choice.notes)
summary = result.summary
primary = summary["primary_mode"]
show_threshold = summary["info"]["show_threshold"]  # 0 resolved to the automatic threshold
report.header("About this run", {
    **choice.header_info(), "dataset": dataset.name, "items": len(dataset.items),
    "human_show_rate": round(dataset.positive_rate(), 3), "not_scored (no context)": summary["n_not_scored"],
    "modes": ", ".join(summary["info"]["modes"]),
    "delta": delta, "show_threshold": show_threshold, "embedding_model": encoder.name if encoder else "not used"})
for note in result.notes:
    print("Note:", note)
report.show_table(judging.judge_table(summary), max_rows=80)

# %% [markdown]
# ## Do the scores separate what humans call grounded from the rest?
# The threshold found by Youden's J is chosen on these same items, so the numbers at it are optimistic;
# the metrics at `show_threshold` above are not.

# %%
rows = result.per_item[result.per_item["mode"] == primary]
cal = summary["by_mode"][primary]["calibration"]
curves = {m: (g["ground_truth_show"], g["score_1"]) for m, g in result.per_item.groupby("mode", sort=False)}
report.show(judging.score_by_label_figure(rows, threshold=show_threshold, title=f"Judge score by human label ({primary})"))
report.show(judging.roc_figure(curves, threshold=show_threshold))
report.show(judging.confusion_figure(cal["at_threshold"]["confusion"],
                                     f"score ≥ {show_threshold:g} vs. human label ({primary})"))
print(judging.best_threshold_line(cal["best_threshold"], primary))

# %% [markdown]
# ## Repeatability: first vs. second judgement of each item
# Points on the diagonal were scored the same twice; points outside the dashed band differ by more than δ.

# %%
report.show(judging.consistency_figure(result.per_item, delta))
for mode, block in summary["by_mode"].items():
    err = block["errors"]
    print(f"{mode}: {err['n_failed']} of {err['n']} judgements failed, {err['n_reasked']} needed a re-ask; "
          f"latency {report.latency_text(block['latency']['mean_ms'], p95=block['latency']['p95_ms'])} "
          f"({block['latency']['n_calls']} calls, {block['latency']['n_cached_excluded']} cache hits excluded).")
if "mode_agreement" in summary:
    for pair, agr in summary["mode_agreement"].items():
        print(f"{pair}: {agr['share_within_delta']['mean']:.3f} of the items within delta, "
              f"mean |difference| {agr['mean_abs_diff']:.3f}")

# %% [markdown]
# ## Largest disagreements with the human labels

# %%
judged = rows[rows["outcome"] != judging.NOT_SCORED]  # items without a context: counted above, not disagreements
gap = (judged["score_1"] - judged["ground_truth_show"].astype(float)).abs()
worst = judged.assign(gap=gap).sort_values("gap", ascending=False, na_position="first")
report.show_table(worst.head(worst_n)[["id", "label", "ground_truth_show", "score_1", "score_2", "method",
                                       "explanation_1", "question", "answer"]], max_rows=worst_n,
                  full="tier_judge.per_item.csv")

# %%
result.write(output_dir, "tier_judge", extra={"llm_usage": llm.usage()})
