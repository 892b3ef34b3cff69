"""The executive summary's change line: against the latest earlier run on the same data, significant changes only."""

import numpy as np
import pandas as pd

from ragnb.metrics.stats import aggregate
from ragnb.runs.record import append_run_record, load_runs
from ragnb.runs.build import build_record
from ragnb.runs.summary import change_line, is_metric, run_summary
from ragnb.tiers import payload

PROV_RU = {"datasets": [{"name": "ru", "n_items": 8, "sha256": "a" * 32}],
           "corpora": [{"database": "pg://x/db", "n_chunks": 40, "n_embedded": 40, "chunks_md5": "c" * 32}]}
PROV_EN = {**PROV_RU, "datasets": [{"name": "en", "n_items": 8, "sha256": "b" * 32}]}
IDS = [f"i{k}" for k in range(8)]


def _run(out, run_id, shift, prov, append=True):
    df = pd.DataFrame({"mrr": np.linspace(0.1, 0.6, 8) + shift}, index=pd.Index(IDS))
    metrics = {"mrr": aggregate(df["mrr"].to_numpy(), n_boot=50), "provenance": prov}
    payload.write_metrics(out / "runs" / run_id, "tier1_retrieval", metrics, per_item=df)
    record = build_record(run_id, {"tier_1_metrics": metrics}, None, None, "mini", {}, cwd=out)
    if append:
        append_run_record(out / "benchmark_runs.json", record)
    return record


def test_change_names_significant_changes_against_the_last_run_on_the_same_data(tmp_path):
    _run(tmp_path, "20250101-000000-aaaa", 0.0, PROV_RU)
    _run(tmp_path, "20250102-000000-bbbb", 0.2, PROV_EN)  # later, but other data: not the baseline
    better = _run(tmp_path, "20250103-000000-cccc", 0.3, PROV_RU, append=False)
    line = change_line(better, load_runs(tmp_path / "benchmark_runs.json"), tmp_path)
    # mrr rises by 0.3 on each of 8 paired items: exact sign-flip p = 2/2^8 < 0.05
    assert line == ("Change against run 20250101-000000-aaaa (same data, significant at α = 0.05, Holm-adjusted): "
                    "better: mrr 0.350 → 0.650 (Tier 1 (retrieval)).")
    same = _run(tmp_path, "20250104-000000-dddd", 0.0, PROV_RU, append=False)
    line = change_line(same, load_runs(tmp_path / "benchmark_runs.json"), tmp_path)
    # the baseline is the latest earlier run on the same data (cccc is not in the history: aaaa)
    assert line == ("Change against run 20250101-000000-aaaa (same data): no significant change in 1 tested metric "
                    "(Holm-adjusted, α = 0.05).")
    other = _run(tmp_path, "20250105-000000-eeee", 0.0, {**PROV_RU, "datasets": []}, append=False)
    assert "no earlier run on the same data" in change_line(other, load_runs(tmp_path / "benchmark_runs.json"), tmp_path)
    text = run_summary(better, tmp_path)
    assert len(text.splitlines()) <= 8 and "better: mrr" in text


def test_settings_echoed_into_metrics_are_not_metrics():
    assert is_metric("mrr") and is_metric("hit_rate@10") and is_metric("total_samples")
    assert not is_metric("tau") and not is_metric("trust_k") and not is_metric("limit")
    assert not is_metric("my_setting", {"tier1_retrieval": {"my_setting": 3}})
