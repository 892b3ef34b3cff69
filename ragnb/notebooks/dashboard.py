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
# # Benchmark dashboard
# Every run recorded in `benchmark_runs.json`: the latest run's status, each metric over the runs with its 95%
# confidence interval against the status thresholds (docs/metrics.md, Conventions), and run B compared with run A item
# by item — paired differences with bootstrap CIs, McNemar's exact test for 0/1 metrics, a sign-flip permutation test
# otherwise (Wilcoxon alongside), Holm-adjusted over all metrics. Two runs are compared only when they scored the same
# questions (dataset content fingerprint) against the same chunks (corpus fingerprint) with the same item ids;
# otherwise the comparison says "not comparable", gives the reasons and names no winner.

# %% tags=["parameters"]
outputs: str = ""  # folder with benchmark_runs.json; "": this run's outputs folder, else RAGNB_OUTPUTS or ./outputs
run_a: str = ""  # baseline run id; "": the latest earlier run sharing per-item files with run B (same data first)
run_b: str = ""  # run id to judge against run A; "": the latest run
alpha: float = 0.05  # significance level for the verdicts (Holm-adjusted over all compared metrics)
n_boot: int = 1000  # bootstrap resamples for the 95% CI of each paired difference
n_perm: int = 10000  # random sign patterns of the permutation test when exact enumeration is too large
metrics: str = ""  # comma-separated metric names or patterns such as hit_rate@*,mrr ("": all metrics)
output_dir: str = ""  # folder for the dashboard's metrics JSON; "": $RAGNB_OUTPUTS/latest, else outputs/latest of the project


# %%
from ragnb.config import notebook_output_dir

output_dir = str(notebook_output_dir(output_dir))  # the one rule for the default folder (ragnb.config)

from ragnb.runs import compare, dashboard, trends
from ragnb.reports import report
from ragnb.tiers.result import TierResult

outputs_path = compare.resolve_outputs(outputs, output_dir)
patterns = compare.parse_patterns(metrics)
runs, frame = trends.load_runs_frame(outputs_path, patterns)
latest = compare.latest_run(runs)
report.header("About this dashboard", {"outputs": outputs_path, "runs": len(runs),
                                       "latest run": latest["id"] if latest else "—", "metrics": metrics or "all"})
if not runs:
    print(f"No runs are recorded in {outputs_path / compare.RUNS_FILE} yet. Run `ragnb demo` or `ragnb run tier1` "
          "first; this dashboard then shows their metrics over time and compares the latest two runs.")

# %% [markdown]
# ## Latest run

# %%
if latest:
    dashboard.show_status(latest)
    report.show_table(dashboard.runs_table(runs), max_rows=50)
else:
    print("No run yet.")

# %% [markdown]
# ## Metrics over runs
# One chart per tier; the dropdown picks the metric. One line per dataset + corpus: runs on other questions or
# other chunks are never joined into one line. Failed runs and runs without metric values are listed below the
# charts, not drawn. Error bars are each run's bootstrap 95% CI. Metrics with
# the status thresholds (see docs/metrics.md, Conventions; HitRate@1, MRR, NDCG@10, Faithfulness, E2E score, judge
# accuracy and consistency) are drawn over coloured bands: red = needs attention, blue = good, green = excellent.

# %%
figures = dashboard.trend_figures(frame)
for fig in figures:
    report.show(fig)
if not figures:
    print("No metrics recorded yet" + (f" matching {metrics!r}." if metrics else "."))
for line in dashboard.not_drawn(runs, frame):
    print("Not drawn:", line)

# %% [markdown]
# ## Run B vs. run A
# First the check that the two runs measured the same thing: same dataset content, same corpus (chunk ids and
# texts, embedding model) and same item ids, per notebook. If not, the comparison is "not comparable": the reasons
# are listed, the means are shown side by side for reference, and no test or verdict is given. The table below it
# lists every parameter, model, dataset and database that differs between the two runs.
# For comparable runs: paired on the items both runs scored when both left per-item files; otherwise the two
# aggregates are compared (unpaired, marked so). Δ = B − A; a verdict says "B better" or "B worse" only when the
# Holm-adjusted p-value is below α, taking into account whether higher or lower is better for the metric.

# %%
a_id, b_id = compare.choose_runs(runs, outputs_path, run_a, run_b)
comparison = None
if a_id and b_id:
    comparison = compare.compare_runs(runs, outputs_path, a_id, b_id, alpha=alpha, n_boot=n_boot, metrics=patterns,
                                      n_perm=n_perm)
    dashboard.show_comparison(comparison)
elif b_id:
    print(f"Comparison: two runs are needed; only run {b_id} is available" +
          (" (no earlier run)." if len(runs) > 1 else ". Run the benchmark again to compare."))
else:
    print("Comparison: two runs are needed; none is recorded yet.")

# %%
if comparison is not None:
    dashboard.display_picker(dashboard.comparison_picker(runs, outputs_path, a_id, b_id, alpha=alpha,
                                                         n_boot=n_boot, metrics=patterns))

# %%
TierResult(None, {
    "runs": len(runs), "run_a": a_id, "run_b": b_id,
    "settings": {"alpha": alpha, "n_boot": n_boot, "n_perm": n_perm, "metrics": metrics, "outputs": str(outputs_path)},
    "comparison": comparison.records() if comparison is not None else [],
    **(comparison.verdict_block() if comparison is not None else {"comparable": None, "reasons": [], "differences": []}),
    "not_drawn": dashboard.not_drawn(runs, frame),
}, comparison.notes if comparison is not None else []).write(output_dir, "dashboard")
