"""Human labels for some items of a judged metric in a tier's report (ragnb.tiers.human_labels), the run record and
``ragnb compare``: a real Tier 2 run (extractive answers, an LLM judge over HTTP), a label sheet written by
``ragnb dataset label-plan`` and filled as a reviewer would, the PPI block checked against ``ppi_mean`` on the
same per-item table (itself checked against ppi-python in tests/metrics/test_ppi.py)."""

from __future__ import annotations

import copy
import csv
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from llm_server import completion
from ragnb.cli.main import build_cli
from ragnb.io import read_per_item
from ragnb.datasets.schema import Dataset, DatasetItem
from ragnb.llm import LLMClient, LLMSettings
from ragnb.judges import JudgeConfig
from ragnb.judges.scores import Judge
from ragnb.metrics.ppi import classical_mean, judge_mean, ppi_mean
from ragnb.rag.retrieval import MemoryRetriever
from ragnb.rag.system import BaselineSystem
from ragnb.tiers.generation import run_tier2
from ragnb.reports.estimates import show_estimates
from ragnb.tiers.human_labels import add_human_labels

K = 16
CHUNKS = {f"c{k}": f"Report {k} was filed in room {100 + k}. It lists {k} open defects." for k in range(K)}
ITEMS = [DatasetItem(id=f"q{k:02d}", question=f"Where was report {k} filed?", chunk_id=f"c{k}",
                     chunk_text=CHUNKS[f"c{k}"], ground_truth_answer=f"In room {100 + k}.") for k in range(K)]
# The judge's faithfulness per report: two judges, the second one lenient (+0.3 where it can); k = 5 fails.
STRICT = {k: round(0.2 + 0.05 * (k % 9), 2) for k in range(K)}
LENIENT = {k: min(1.0, s + 0.3) for k, s in STRICT.items()}
HUMAN = {f"q{k:02d}": float(STRICT[k] >= 0.4) if k % 4 else 1.0 for k in range(K)}  # the reviewers' verdicts


def _handler(table):
    def handle(req):
        content = "\n".join(m["content"] for m in req["messages"])
        k = int(re.search(r"report (\d+)", content).group(1))
        if k == 5:
            return completion("I cannot tell.")
        return completion(json.dumps({"score": table[k], "explanation": "f"}))
    return handle


@pytest.fixture(scope="module")
def system(encoder):
    ids = list(CHUNKS)
    return BaselineSystem(encoder, MemoryRetriever(ids, encoder.encode([CHUNKS[i] for i in ids])), CHUNKS,
                          max_sentences=1)


def _run(llm_server, system, encoder, table):
    llm_server.set_handler(_handler(table))
    client = LLMClient(LLMSettings(base_url=llm_server.base_url, api_key="sk-test", cache_dir=None, max_retries=0,
                                   reask_budget=0))
    judge = Judge(client, JudgeConfig(models=["judge"], language="en"))
    return run_tier2(Dataset(name="reports", items=ITEMS), system, encoder, judge=judge,
                     judge_metrics=("faithfulness",), consistency_runs=1, language="en", n_boot=200)


def _cli(*args: str):
    return CliRunner().invoke(build_cli(), list(args), catch_exceptions=False)


def _plan_and_fill(per_item_path, out, budget=8):
    r = _cli("dataset", "label-plan", "--scores", str(per_item_path), "--score", "judge_faithfulness",
             "--budget", str(budget), "--output", str(out))
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(open(out, encoding="utf-8-sig", newline="")))
    assert rows[0][6] == "metric" and {r[6] for r in rows[1:]} == {"judge_faithfulness"}
    for r in rows[1:]:
        r[1] = "yes" if HUMAN[r[0]] else "no"
    with open(out, "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f).writerows(rows)
    return [r[0] for r in rows[1:]]


@pytest.fixture(scope="module")
def labelled_runs(llm_server_module, system, encoder, tmp_path_factory):
    """Two Tier 2 runs of the same answers (A: the strict judge, B: the lenient one), each with the same 8 labels."""
    root = tmp_path_factory.mktemp("ppi-runs")
    results = {}
    for run_id, table in (("20250101-000000-aaaa", STRICT), ("20250102-000000-bbbb", LENIENT)):
        res = _run(llm_server_module, system, encoder, table)
        results[run_id] = (res, copy.deepcopy(res.summary), res.per_item.copy())
    first = results["20250101-000000-aaaa"][0]
    plain = root / "plain"
    first.write(plain, "tier2_generation")
    sheet = root / "labels.csv"
    ids = _plan_and_fill(plain / "tier2_generation.per_item.csv", sheet)
    return root, results, sheet, ids


@pytest.fixture(scope="module")
def llm_server_module():
    from llm_server import FakeLLMServer

    with FakeLLMServer() as server:
        yield server


def test_tier2_ppi_block_equals_ppi_mean_on_the_per_item_table(labelled_runs, tmp_path, capsys):
    root, results, sheet, ids = labelled_runs
    res, before, _ = results["20250101-000000-aaaa"]
    res = copy.copy(res)
    res.summary, res.per_item, res.notes = copy.deepcopy(before), res.per_item.copy(), list(res.notes)
    found = add_human_labels(res, str(sheet))
    assert [f.metric for f in found] == ["judge_faithfulness"]
    out = tmp_path / "run"
    res.write(out, "tier2_generation")
    metrics = json.loads((out / "tier2_generation.metrics.json").read_text(encoding="utf-8"))
    keys = list(metrics)
    assert keys[keys.index("judge_faithfulness") + 1] == "judge_faithfulness_ppi"
    block = metrics["judge_faithfulness_ppi"]

    # independently: the per-item table's judge scores, the labels the reviewer wrote on the sheet's items
    per_item = read_per_item(out / "tier2_generation.per_item.csv")
    s = per_item["judge_faithfulness"].to_numpy(dtype=float)
    assert np.isnan(s[5]) and per_item["judge_faithfulness_method"][5] == "failed"
    lab = per_item["id"].isin(ids).to_numpy()
    y = [HUMAN[i] for i in per_item["id"][lab]]
    expect = ppi_mean(s, s[lab], y, binary=True)
    assert block["method"] == "ppi++" and (block["n"], block["N"], block["n_failed"]) == (8, K, 1)
    for key, value in (("estimate", expect.estimate), ("ci_low", expect.ci[0]), ("ci_high", expect.ci[1]),
                       ("lambda", expect.lam), ("n_eff", expect.effective_n)):
        assert block[key] == pytest.approx(value, rel=1e-12), key
    human = classical_mean(y, binary=True)  # 0/1 labels: Wilson's interval
    assert block["human_only"]["estimate"] == pytest.approx(np.mean(y))
    assert block["human_only"]["ci_high"] == pytest.approx(human.ci[1])
    assert block["judge_only"]["estimate"] == pytest.approx(np.nanmean(s)) == pytest.approx(judge_mean(s).estimate)
    assert block["judge_only"]["estimate"] == pytest.approx(metrics["judge_faithfulness"]["mean"])
    assert block["quote"] == "ppi++" and "valid whatever the judge's bias" in block["quote_reason"]
    assert block["label_sheets"] == [str(sheet)] and block["labelled"] == 8
    # the labels are in the per-item table, empty elsewhere; a note says which estimate to quote
    labels = per_item["judge_faithfulness_human_label"]
    assert labels[lab].tolist() == y and labels[~lab].isna().all()
    assert any(n.startswith("judge_faithfulness: quote ppi++") for n in metrics["notes"])
    show_estimates(found)
    shown = capsys.readouterr().out
    assert "judge_only" in shown and "classical" in shown and "quote ppi++" in shown

    # without labels nothing changes
    res2 = copy.copy(results["20250101-000000-aaaa"][0])
    res2.summary, res2.per_item = copy.deepcopy(before), res2.per_item.copy()
    assert add_human_labels(res2, "") == [] and res2.summary == before
    assert list(res2.per_item.columns) == list(results["20250101-000000-aaaa"][2].columns)


def test_bad_label_sheets_are_clear_errors(labelled_runs, tmp_path):
    root, results, sheet, ids = labelled_runs
    res = copy.copy(results["20250101-000000-aaaa"][0])
    res.summary, res.per_item = copy.deepcopy(results["20250101-000000-aaaa"][1]), res.per_item.copy()
    with pytest.raises(ValueError, match="no such file"):
        add_human_labels(res, str(tmp_path / "missing.csv"))
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig", newline="")))
    for r in rows[1:]:
        r[6] = "answer_correctness"
    with open(tmp_path / "other.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(ValueError, match="labels 'answer_correctness', which this notebook's per-item table has not"):
        add_human_labels(res, str(tmp_path / "other.csv"))
    # a label is of the answer the reviewer read: a run whose answer changed cannot use it
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig", newline="")))
    res.per_item.loc[res.per_item["id"] == rows[1][0], "answer"] = "Somewhere else entirely."
    with pytest.raises(ValueError, match=f"answer of 1 of 8 labelled item.*'{rows[1][0]}'.*make a new plan"):
        add_human_labels(res, str(sheet))
    assert "judge_faithfulness_ppi" not in res.summary


def _record_run(root, run_id, result, sheet):
    from ragnb.runs.record import append_run_record
    from ragnb.runs.build import build_record

    res = copy.copy(result[0])
    res.summary, res.per_item, res.notes = copy.deepcopy(result[1]), result[2].copy(), list(res.notes)
    if sheet is not None:
        add_human_labels(res, str(sheet))
    run_dir = root / "runs" / run_id
    path = res.write(run_dir, "tier2_generation")
    metrics = json.loads(path.read_text(encoding="utf-8"))
    reports = [{"name": "tier2_generation", "stem": "tier2_generation", "status": "ok"}]
    record = build_record(run_id, {"tier_2_metrics": metrics}, None, None, "mini", {"reports": reports}, cwd=root)
    append_run_record(root / "benchmark_runs.json", record)
    return record, metrics


@pytest.mark.parametrize("labelled", ["both", "none", "A only"])
def test_record_and_compare_use_the_ppi_estimate(labelled_runs, tmp_path, labelled):
    from ragnb.runs import compare
    from ragnb.runs.record import format_aggregate, iter_aggregates
    from ragnb.runs.significance import Z95

    root, results, sheet, ids = labelled_runs
    out = tmp_path / "outputs"
    rec_a, m_a = _record_run(out, "20250101-000000-aaaa", results["20250101-000000-aaaa"],
                             None if labelled == "none" else sheet)
    rec_b, m_b = _record_run(out, "20250102-000000-bbbb", results["20250102-000000-bbbb"],
                             sheet if labelled == "both" else None)
    graded = dict(iter_aggregates(rec_a["tier_2_metrics"]))["judge_faithfulness"]
    if labelled != "none":
        ppi_a, ppi_b = m_a["judge_faithfulness_ppi"], m_b.get("judge_faithfulness_ppi")
        assert graded["mean"] == ppi_a["estimate"] and graded["ci95"] == [ppi_a["ci_low"], ppi_a["ci_high"]]
        assert graded["n_labels"] == 8 and graded["judge_only"]["mean"] == m_a["judge_faithfulness"]["mean"]
        assert "PPI++ with 8 human labels" in format_aggregate(graded)
    else:
        assert graded == m_a["judge_faithfulness"]
    runs = compare.load_runs(out / "benchmark_runs.json")
    comp = compare.compare_runs(runs, out, "20250101-000000-aaaa", "20250102-000000-bbbb", n_boot=200)
    row = comp.table.set_index("metric").loc["judge_faithfulness"]
    if labelled != "both":  # the lenient judge: +0.3 on every item, a paired 'B better' that is the judge's bias
        assert row.paired and row.verdict == "B better"
        assert (row.mean_a, row.mean_b) == (m_a["judge_faithfulness"]["mean"], m_b["judge_faithfulness"]["mean"])
        if labelled == "none":
            assert pd.isna(row.estimate) and not any("PPI" in n for n in comp.notes)
        else:  # never A's PPI++ estimate against B's judge: the judges' own means, and the output says so
            assert "only run A has human labels" in row.estimate and "only run A has human labels" in row.test
            assert any("judge_faithfulness: compared on the judges' own means" in n for n in comp.notes)
        return
    # both runs' PPI++ estimates, unpaired z from their intervals: the judge's bias is corrected away
    se = math.hypot((ppi_a["ci_high"] - ppi_a["ci_low"]) / (2 * Z95), (ppi_b["ci_high"] - ppi_b["ci_low"]) / (2 * Z95))
    assert (row.mean_a, row.mean_b) == (ppi_a["estimate"], ppi_b["estimate"])
    assert row.delta == pytest.approx(ppi_b["estimate"] - ppi_a["estimate"])
    assert row.ci_hi - row.ci_lo == pytest.approx(2 * Z95 * se)
    assert not row.paired and row.estimate.startswith("PPI++ estimates of both runs") and "PPI++" in row.test
    # B's judge is A's shifted by +0.3 on every item: PPI++ (same λ, shift-invariant) removes the shift exactly
    assert m_b["judge_faithfulness"]["mean"] - m_a["judge_faithfulness"]["mean"] == pytest.approx(0.3)
    assert row.delta == pytest.approx(0.0, abs=1e-12) and row.verdict.startswith("no significant difference")
    assert any("judge_faithfulness: compared on PPI++ estimates" in n for n in comp.notes)


@pytest.mark.slow
def test_tier2_notebook_with_human_labels(tmp_path):
    """The notebook parameter end to end: the demo's first 8 questions, labels for 4 of them on a sheet of
    label-plan; the report's PPI block equals ppi_mean on the notebook's own per-item table."""
    from ragnb.datasets import demo
    from ragnb.datasets.label_plan import plan, write_sheet
    from ragnb.runs.runner import run_notebooks

    ids = [it.id for it in demo.dataset("ru").items[:8]]
    params = {"corpus": "demo", "max_questions": 8, "consistency_runs": 1, "n_boot": 100}
    # the sheet is planned on a first run's per-item table, so it shows (and binds its labels to) those answers
    first = run_notebooks(["tier2_generation"], params, outputs=tmp_path / "first", log=lambda *_: None)
    frame = pd.read_csv(first.run_dir / "tier2_generation.per_item.csv", dtype={"id": str})
    assert sorted(frame["id"]) == sorted(ids)
    sheet = write_sheet(plan(frame, "fallback_faithfulness", 4, seed=5), tmp_path / "labels.csv")
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig", newline="")))
    truth = {i: float(k % 2) for k, i in enumerate(ids)}
    for r in rows[1:]:
        r[1] = "1" if truth[r[0]] else "0"
    with open(sheet, "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f).writerows(rows)
    run = run_notebooks(["tier2_generation"], {**params, "human_labels": str(sheet)}, outputs=tmp_path / "out",
                        log=lambda *_: None)
    assert run.failures == []
    m = json.loads((run.run_dir / "tier2_generation.metrics.json").read_text(encoding="utf-8"))
    per_item = pd.read_csv(run.run_dir / "tier2_generation.per_item.csv")
    s = per_item["fallback_faithfulness"].to_numpy(dtype=float)
    lab = per_item["id"].isin([r[0] for r in rows[1:]]).to_numpy()
    expect = ppi_mean(s, s[lab], [truth[i] for i in per_item["id"][lab]], binary=True)
    block = m["fallback_faithfulness_ppi"]
    assert (block["n"], block["N"]) == (4, 8) and block["estimate"] == pytest.approx(expect.estimate, rel=1e-12)
    assert [block["ci_low"], block["ci_high"]] == pytest.approx(list(expect.ci), rel=1e-12)
    html = (run.run_dir / "tier2_generation.html").read_text(encoding="utf-8")
    assert "fallback_faithfulness: quote" in html and "judge_only" in html
    # the record grades the PPI++ estimate
    assert run.record["tier_2_metrics"]["fallback_faithfulness_ppi"]["estimate"] == block["estimate"]
