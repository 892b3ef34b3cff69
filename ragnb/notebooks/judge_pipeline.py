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
# # Tier Judge Pipeline — the production show/no-show judge
# docs/metrics.md, Tier Judge and Judge Pipeline: the judge that decides whether an answer is shown to the user, scored
# against human `ground_truth_show` labels — accuracy, precision, recall and F1 for "show", the confusion counts and the
# judge's latency. The judge is the system under test's own `judge(question, answer)` when it has one;
# otherwise ragnb's baseline: show when the answer's faithfulness to its context reaches `show_threshold`.
# Every rate comes with a bootstrap 95% confidence interval; items without a verdict are counted, not scored.

# %% tags=["parameters"]
dataset_path: str = ""  # judge-pipeline JSON/JSONL (question, answer, ground_truth_show, optional context); "": bundled BEGIN dev set
max_items: int = 0  # 0: all items; N: a fixed random sample of N (bundled BEGIN) or the first N (own file)
begin_generic: str = "no_show"  # bundled BEGIN only: "no_show" counts generic responses as not to be shown, "drop" leaves them out
system: str = "baseline"  # "baseline" (faithfulness threshold), "package.module:attribute" or "http:FILE.yaml" with a judge
judge_models: str = ""  # baseline only: judge model ids, comma-separated; "": the offline fallback (embedding similarity)
judge_aggregate: str = "mean"  # baseline only: how several judge models combine: "mean", "median" or "majority"
judge_mode: str = "direct"  # baseline only: "direct" or "reasoned"
explanation_language: str = "en"  # baseline only: language of the judge prompt and its explanations, "en" or "ru"
show_threshold: float = 0.0  # baseline only: show when faithfulness ≥ this; 0 means automatic (0.5 for an LLM judge, the fallback's calibrated cut offline)
concurrency: int = 8  # items judged at once
n_boot: int = 1000  # bootstrap resamples for the 95% confidence intervals
embedding_model: str = ""  # encoder of the offline fallback; "": RAGNB_EMBEDDING_MODEL or the bundled all-MiniLM-L6-v2
prices: dict = {}  # model id mapped to {"input_per_1m": USD, "output_per_1m": USD} for the cost table
llm_max_retries: int = -1  # retries of a failing LLM request; -1: RAGNB_LLM_MAX_RETRIES, else 6
llm_max_wait_s: float = 0  # longest an LLM call may take with its retries, in s; 0: RAGNB_LLM_MAX_WAIT_S, else 60
resume: bool = True  # reuse the per-item results already logged in output_dir (False: judge everything again)
worst_n: int = 10  # wrong verdicts listed per kind (false show, false no-show)
output_dir: str = ""  # folder for the metrics JSON, the per-item table and the item log; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.reports import charts, report
from ragnb.embeddings.models import get_encoder
from ragnb.tiers import judging
from ragnb.llm.setup import open_llm

llm = open_llm(prices, max_concurrency=concurrency, max_retries=llm_max_retries, max_wait_s=llm_max_wait_s)
sut, system_label = judging.resolve_judge_system(system)
choice = judging.choose_judge(llm, judge_models if sut is None else "")
dataset = judging.open_judge_dataset(dataset_path, max_items, begin_generic)
encoder = get_encoder(embedding_model or None) if sut is None and choice.client is None else None

# %%
result = judging.run_tier_judge_pipeline(
    dataset, sut if sut is not None else "baseline", client=choice.client, models=choice.models,
    aggregate=judge_aggregate, mode=judge_mode, language=explanation_language, show_threshold=show_threshold,
    encoder=encoder, concurrency=concurrency, n_boot=n_boot,
    log_path=judging.item_log_path(output_dir, "tier_judge_pipeline", resume))
if sut is None:
    result.add_notes(choice.notes)
summary = result.summary
backend = result.meta["judge_backend"]
show_threshold = summary["info"]["show_threshold"] or 0.5  # 0 resolved to the automatic threshold (None: a system's own judge)
info = {"judge_backend": backend, "judge": summary["judge"]}
if sut is None:
    info.update({k: v for k, v in choice.header_info().items() if k != "judge_backend"})
report.header("About this run", {**info, "dataset": dataset.name, "items": len(dataset.items),
              "human_show_rate": round(dataset.positive_rate(), 3), "not_scored (no context)": summary["n_not_scored"],
              "embedding_model": encoder.name if encoder else "not used"})
for note in result.notes:
    print("Note:", note)
print(judging.grade_line(summary))
report.show_table(judging.pipeline_table(summary), max_rows=40)

# %% [markdown]
# ## Verdicts against the human labels

# %%
report.show(judging.confusion_figure(summary, "Production judge vs. human ground_truth_show"))
if sut is None:
    report.show(judging.score_by_label_figure(result.per_item, "score", show_threshold, "Faithfulness by human label"))
    report.show(judging.roc_figure({"faithfulness": (result.per_item["ground_truth_show"], result.per_item["score"])},
                                   threshold=show_threshold))
    print(judging.best_threshold_line(summary["score_calibration"]["best_threshold"]))

# %% [markdown]
# ## Latency per judged item

# %%
lat = result.per_item["latency_ms"].dropna()
if len(lat):
    report.show(charts.histogram(lat, "Judge latency per item", "ms"))
print(f"{report.latency_text(summary['avg_latency_ms'], summary['p50_latency_ms'], summary['p95_latency_ms'])}; "
      f"{summary['info']['latency']}")

# %% [markdown]
# ## Wrong verdicts
# False show: the judge would show an answer humans would not. False no-show: a good answer withheld. Items without a
# context are listed apart: the baseline judge cannot score them, so they are in no metric.

# %%
cols = ["id", "label", "score", "method", "error", "question", "answer"]
for outcome, title in (("FP", "False show"), ("FN", "False no-show"), ("failed", "No verdict"),
                       (judging.NOT_SCORED, "Not scored (no context)")):
    part = result.per_item[result.per_item["outcome"] == outcome]
    if len(part):
        print(f"{title}: {len(part)} items")
        order = part["score"].sort_values(ascending=(outcome == "FN")).index if sut is None else part.index
        report.show_table(part.loc[order].head(worst_n)[cols], max_rows=worst_n,
                          full="tier_judge_pipeline.per_item.csv")

# %%
result.write(output_dir, "tier_judge_pipeline", extra={"llm_usage": llm.usage()})
