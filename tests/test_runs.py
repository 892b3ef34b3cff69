import json
import math
import multiprocessing as mp
import re

import numpy as np
import pytest

from ragnb.runs import record as runs
from ragnb.runs.record import THRESHOLDS, append_run_record, check_run_id, git_info, load_runs, new_run_id, overall_status, status_of
from ragnb.runs.build import SCHEMA_FIELDS, build_record
from ragnb.runs.summary import executive_summary
from ragnb.io import to_jsonable


def test_run_id_format_and_order():
    a = new_run_id()
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", a)
    assert check_run_id(a) == a
    assert sorted(["20240101-000000-ffff", "20231231-235959-0000"])[0].startswith("2023")
    for bad in ["../etc", "a/b", "x" * 200, " run"]:
        with pytest.raises(ValueError, match="folder name"):
            check_run_id(bad)
    with pytest.raises(ValueError, match=r"run id '' is empty \(an unset variable such as \$RUN_ID\?\)"):
        check_run_id("")


def test_git_info_outside_a_repo(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_AUTHOR", "Ada")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    info = git_info(tmp_path)
    assert info == {"branch": None, "commit": None, "author": "Ada"}
    assert git_info(tmp_path / "missing")["author"] == "Ada"  # never crashes


@pytest.mark.parametrize(
    "metric, value, expected",
    [
        # docs/metrics.md, Conventions: excellent > 0.8, good 0.5–0.8 (bounds included), attention < 0.5
        ("hit_rate@1", 0.81, "excellent"), ("hit_rate@1", 0.8, "good"), ("hit_rate@1", 0.5, "good"),
        ("hit_rate@1", 0.4999, "attention"), ("mrr", 1.0, "excellent"), ("mrr", 0.0, "attention"),
        ("ndcg@10", 0.8000001, "excellent"), ("ndcg@10", 0.65, "good"),
        ("judge_faithfulness", 0.9, "good"), ("judge_faithfulness", 0.91, "excellent"),
        ("judge_faithfulness", 0.7, "good"), ("judge_faithfulness", 0.69, "attention"),
        ("e2e_score", 0.8, "good"), ("e2e_score", 0.6, "good"), ("e2e_score", 0.59, "attention"),
        ("judge_pipeline_accuracy", 0.95, "good"), ("judge_pipeline_accuracy", 0.951, "excellent"),
        ("judge_pipeline_accuracy", 0.85, "good"), ("judge_pipeline_accuracy", 0.849, "attention"),
        ("judge_consistency", 0.96, "excellent"), ("judge_consistency", 0.8, "attention"),
    ],
)
def test_status_boundaries(metric, value, expected):
    assert status_of(metric, value) == expected
    assert status_of(metric, {"mean": value, "ci95": [0, 1], "n": 3}) == expected


def test_status_of_missing_and_unknown():
    assert set(THRESHOLDS) == {"hit_rate@1", "mrr", "ndcg@10", "judge_faithfulness", "e2e_score",
                               "judge_pipeline_accuracy", "judge_consistency"}
    assert status_of("hit_rate@5", 0.1) is None
    assert status_of("mrr", math.nan) is None
    assert status_of("mrr", None) is None
    assert status_of("mrr", {"mean": None}) is None
    assert status_of("mrr", True) is None
    # short names inside the judge tiers map to their thresholds
    assert status_of("accuracy", 0.99, "tier_judge_pipeline_metrics") == "excellent"
    assert status_of("accuracy", 0.99, "tier_2_metrics") is None
    assert status_of("consistency", 0.86, "tier_judge_metrics") == "good"


def test_overall_status():
    assert overall_status({}) == "no-data"
    assert overall_status({"tier_0_metrics": {"isotropy": 0.3}, "tier_1_metrics": None}) == "no-data"
    assert overall_status({"tier_1_metrics": {"mrr": 0.9, "hit_rate@1": {"mean": 0.85}}}) == "excellent"
    assert overall_status({"tier_1_metrics": {"mrr": 0.9, "ndcg@10": 0.8}}) == "good"
    assert overall_status({"tier_1_metrics": {"mrr": 0.9}, "tier_2_metrics": {"faithfulness": 0.5}}) == "attention"
    # aggregates nested under "metrics" count too
    assert overall_status({"tier_1_metrics": {"metrics": {"mrr": {"mean": 0.2}}}}) == "attention"
    # A deterministic offline judge agrees with itself: its consistency is not graded; an LLM judge's is.
    judge = {"consistency_score": {"mean": 1.0}}
    assert overall_status({"tier_judge_metrics": judge}) == "excellent"
    assert overall_status({"tier_judge_metrics": {**judge, "judge_backend": "offline-fallback"}}) == "no-data"
    assert overall_status({"tier_judge_metrics": {"consistency_score": 0.6, "judge_backend": "openai-compatible"}}) == "attention"


def test_executive_summary_mentions_tiers_ci_and_attention():
    rec = {
        "dataset_file": "demo.jsonl", "dataset_type": "synthetic", "embedding_model": "mini",
        "tier_0_metrics": {"isotropy": {"mean": 0.41, "ci95": [0.4, 0.42], "n": 10}},
        "tier_1_metrics": {"hit_rate@1": {"mean": 0.42, "ci95": [0.35, 0.49], "n": 200, "n_failed": 0},
                           "mrr": 0.61, "judge_backend": "offline-fallback", "embedding_model": "mini",
                           "provenance": {"datasets": [{"name": "demo", "n_items": 200, "sha256": "ab"}]}},
    }
    text = executive_summary(rec)
    lines = text.splitlines()
    assert len(lines) <= 8
    # the record's one dataset_file is not every notebook's: each notebook's own inputs are on the Inputs line
    assert lines[0] == "Status: ATTENTION — 1 of 2 graded metrics below their threshold; 2 notebooks reported metrics."
    assert lines[1] == "Inputs: dataset demo (200 items); model mini."
    assert lines[2] == "Needs attention — Tier 1 (retrieval): hit_rate@1 = 0.420 (95% CI 0.350–0.490, n=200) < 0.500."
    assert "isotropy" not in text  # numbers that are fine stay in the key-metrics table
    assert lines[-1].startswith("Not computed: LLM-judge metrics from the offline fallback") and "Tier 1" in lines[-1]
    ok = executive_summary({"tier_1_metrics": {"mrr": 0.9}})
    assert ok == "Status: EXCELLENT — every graded metric (1) is good or excellent; 1 notebook reported metrics."
    assert "no metric with a threshold could be graded" in executive_summary({})
    undefined = executive_summary({"tier_1_metrics": {"mrr": 0.9, "ndcg@10": None, "limit": None}})
    assert undefined.splitlines()[-1] == "Not computed: undefined (no valid item) — Tier 1 (retrieval): ndcg@10."


def test_build_record_schema(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    rec = build_record("20250102-030405-abcd", {"tier_1_metrics": {"mrr": np.float64(0.55), "x": math.nan}},
                       "d.jsonl", "synthetic", "mini", {"judge_model": "qwen"}, cwd=tmp_path)
    assert list(rec)[: len(SCHEMA_FIELDS)] == list(SCHEMA_FIELDS)
    assert rec["schema_version"] == "2.0"
    assert rec["timestamp"] == "2025-01-02T03:04:05+00:00"
    assert rec["tier_0_metrics"] is None and rec["tier_ux_metrics"] is None
    assert rec["model_runs"] == []
    assert rec["tier_1_metrics"] == {"mrr": 0.55, "x": None}
    assert rec["overall_status"] == "good"
    assert rec["judge_model"] == "qwen" and rec["git_commit_hash"] is None
    assert rec["executive_summary"].startswith("Status: GOOD — every graded metric (1) is good or excellent")
    json.dumps(rec, allow_nan=False)
    failed = build_record("r1", {}, None, None, None, {"failures": ["tier1"]}, cwd=tmp_path)
    assert failed["overall_status"] == "failed" and "1 notebook failed (tier1)" in failed["executive_summary"]
    with pytest.raises(ValueError, match="unknown tier key"):
        build_record("r", {"tier1": {}}, None, None, None, {}, cwd=tmp_path)
    with pytest.raises(ValueError, match="unknown extra field"):
        build_record("r", {}, None, None, None, {"judge_modle": "x"}, cwd=tmp_path)


def test_to_jsonable_strict():
    out = to_jsonable({"a": np.int64(3), "b": np.array([1.0, np.nan]), "c": (np.bool_(True),), "d": -math.inf})
    assert out == {"a": 3, "b": [1.0, None], "c": [True], "d": None}
    with pytest.raises(ValueError, match="cannot store"):
        to_jsonable({"x": object()})


def _append_many(path: str, worker: int, count: int) -> None:
    for i in range(count):
        append_run_record(path, {"id": f"w{worker}-{i}", "worker": worker, "payload": "x" * 2000})


def test_append_is_atomic_under_concurrency(tmp_path):
    path = tmp_path / "benchmark_runs.json"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 10)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    records = json.loads(path.read_text())
    assert len(records) == 80
    assert {r["id"] for r in records} == {f"w{w}-{i}" for w in range(8) for i in range(10)}
    # each writer's records keep their order
    for w in range(8):
        mine = [r["id"] for r in records if r["worker"] == w]
        assert mine == [f"w{w}-{i}" for i in range(10)]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_append_replaces_same_id_and_load(tmp_path):
    path = tmp_path / "out" / "benchmark_runs.json"
    assert load_runs(path) == []
    append_run_record(path, {"id": "a", "v": 1})
    append_run_record(path, {"id": "b", "v": 1})
    append_run_record(path, {"id": "a", "v": 2, "bad": math.nan})
    assert load_runs(path) == [{"id": "a", "v": 2, "bad": None}, {"id": "b", "v": 1}]


@pytest.mark.parametrize("content", ['[{"id": "a"}, {"id": ', '{"id": "a"}', "[1, 2]"])
def test_corrupt_file_is_not_overwritten(tmp_path, content):
    path = tmp_path / "benchmark_runs.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="move it aside") as err:
        append_run_record(path, {"id": "new"})
    assert str(path) in str(err.value)
    assert path.read_text() == content
    with pytest.raises(ValueError, match="benchmark_runs.json"):
        load_runs(path)


def test_empty_file_counts_as_no_runs(tmp_path):
    path = tmp_path / "benchmark_runs.json"
    path.write_text("  \n")
    append_run_record(path, {"id": "x"})
    assert runs.load_runs(path) == [{"id": "x"}]


def test_tier_spec_lookups_and_old_faithfulness_keys():
    from ragnb import spec

    assert [t.record_key for t in spec.TIERS if t.record_key] == list(spec.TIER_KEYS)
    assert spec.by_name("tier1") is spec.by_stem("tier1_retrieval") is spec.by_record_key("tier_1_metrics")
    assert spec.by_name("nope") is None and spec.by_record_key(None) is None
    assert [t.stem for t in spec.TIERS if t.post_record] == ["dashboard"]
    # old records: Tier 2/3 "faithfulness" was the judge's score, or the fallback's when no LLM was configured
    judged = {"faithfulness": {"mean": 0.5}, "judge_backend": "openai-compatible"}
    offline = {"faithfulness": {"mean": 0.5}, "judge_backend": "offline-fallback"}
    assert spec.current_key("faithfulness", "tier_2_metrics", judged) == "judge_faithfulness"
    assert spec.current_key("faithfulness", "tier_3_metrics", offline) == "fallback_faithfulness"
    assert spec.current_key("faithfulness", "rag_metrics") == "faithfulness"
    # old records: the Unicode-aware answer metrics had no suffix (Tier 2/3 blocks, the RAG suite by its stem)
    for key, block in (("tier_2_metrics", judged), ("tier_3_metrics", offline), ("rag_metrics", None)):
        assert spec.current_key("answer_f1", key, block) == "answer_f1_unicode"
        assert spec.current_key("answer_exact_match", key, block) == "answer_exact_match_unicode"
        assert spec.current_key("answer_recall", key, block) == "answer_recall_unicode"
    assert spec.current_key("answer_f1", "tier_1_metrics") == "answer_f1"
    assert overall_status({"tier_2_metrics": judged}) == "attention"
    assert overall_status({"tier_2_metrics": offline}) == "no-data"
    assert overall_status({"tier_3_metrics": {"judge_faithfulness": 0.95, "e2e_score": 0.7}}) == "good"
    assert status_of("faithfulness", 0.5) is None  # the ragas-style statement ratio has no threshold
    assert status_of("fallback_faithfulness", 0.5) is None


def test_expected_durations_and_eta_by_hand(tmp_path):
    from ragnb.runs.progress import RunProgress, expected_durations, format_duration

    def rec(run_id, *reports):
        return {"id": run_id, "reports": [{"stem": s, "status": st, "duration_s": d} for s, st, d in reports]}

    history = [rec("r1", ("tier1", "ok", 10.0), ("tier2", "ok", 40.0)),
               rec("r2", ("tier1", "ok", 30.0), ("tier2", "failed", 1.0)),  # a failure says nothing about time
               rec("r3", ("tier1", "ok", 20.0), ("tier2", "skipped", 0.0))]
    (tmp_path / "benchmark_runs.json").write_text(json.dumps(history))
    expected = expected_durations(tmp_path)
    assert expected == {"tier1": 20.0, "tier2": 40.0}  # median(10, 30, 20) = 20; tier2: only the ok one
    log: list[str] = []
    p = RunProgress(["tier1", "tier2", "tier9"], expected, log.append)
    assert p.eta(now=0.0) == "about 1 min 00 s left + 1 notebook(s) never timed before"
    p.begin("tier1", "tier1")
    assert log[-1].startswith("[1/3] tier1 (usually 20 s) — run: about 1 min 00 s left")
    since = p.current[1]
    assert p.eta(now=since + 15.0) == "about 45 s left + 1 notebook(s) never timed before"  # 5 s of tier1 + 40
    assert p.eta(now=since + 99.0) == "about 40 s left + 1 notebook(s) never timed before"  # overdue: 0, not < 0
    p.end()
    assert [format_duration(s) for s in (0.4, 59.6, 61, 3599, 3725)] == ["0 s", "1 min 00 s", "1 min 01 s",
                                                                         "59 min 59 s", "1 h 02 min"]


def test_progress_reporter_writes_only_under_a_runner(tmp_path, monkeypatch):
    from ragnb import progress

    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    progress.show_on_stderr(False)  # as in a notebook or a script (the ragnb command turns it on)
    assert progress.reporter("x") is None and list(progress.track([1, 2], "x")) == [1, 2]
    path = tmp_path / "p.jsonl"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    assert list(progress.track(range(5), "steps")) == [0, 1, 2, 3, 4]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # the first step, then throttled, then the last one
    assert [(d["label"], d["done"], d["total"]) for d in lines] == [("steps", 1, 5), ("steps", 5, 5)]


def test_default_output_folders(tmp_path, monkeypatch):
    from ragnb import config

    project = tmp_path / "proj"
    (project / "notebooks").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    monkeypatch.delenv("RAGNB_OUTPUTS", raising=False)
    monkeypatch.chdir(project / "notebooks")  # papermill run from inside notebooks/
    assert config.project_root() == project
    assert config.outputs_dir() == project / "outputs"
    assert config.notebook_output_dir("") == project / "outputs" / "latest"
    assert (project / "outputs" / "latest").is_dir()
    monkeypatch.setenv("RAGNB_OUTPUTS", "../elsewhere")  # relative to the current folder
    assert config.notebook_output_dir() == project / "elsewhere" / "latest"
    assert config.notebook_output_dir("given") == project / "notebooks" / "given"
    monkeypatch.delenv("RAGNB_OUTPUTS")
    monkeypatch.chdir(tmp_path)  # outside any project: ./outputs
    assert config.project_root() is None and config.outputs_dir() == tmp_path / "outputs"


def test_database_readers_from_values_and_defaults():
    from ragnb.runs.params import database_readers, declared_default

    declared = {"a": {"corpus": {"default": '"db"'}}, "b": {"corpus": {"default": '"demo"'}}, "c": {"top_k": {}},
                "d": {"corpus": {"default": "some_call()"}}}
    assert declared_default({"default": "10"}) == 10 and declared_default({"default": "f(x)"}) is None
    assert database_readers({"a": {}, "b": {}, "c": {}, "d": {}}, declared) == ["a"]
    assert database_readers({"a": {"corpus": "demo"}, "b": {"corpus": "db"}, "c": {}, "d": {}}, declared) == ["b"]
