"""Resumable per-item logs: a killed run continues without re-scoring or duplicating anything."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ragnb.tiers.itemlog import ItemLog, fingerprint, run_items


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_resume_after_sigkill_scores_only_the_rest(tmp_path):
    log_path = tmp_path / "items.jsonl"
    calls = tmp_path / "calls.txt"
    script = textwrap.dedent(f"""
        import asyncio, sys
        from ragnb.tiers.itemlog import ItemLog, run_items
        async def score(key):
            with open({str(calls)!r}, "a") as fh:
                fh.write(key + "\\n")
            await asyncio.sleep(0.05 if key != "k07" else 3600)   # k07 hangs: the process is killed there
            return {{"score": int(key[1:]) / 10}}
        log = ItemLog({str(log_path)!r}, "fp1")
        asyncio.run(run_items([f"k{{i:02d}}" for i in range(12)], score, log, concurrency=1))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    for _ in range(600):  # wait until the hanging item has started (ordering, not a speed check)
        if calls.exists() and "k07" in calls.read_text():
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = _lines(log_path)
    assert [e["key"] for e in first] == [f"k{i:02d}" for i in range(7)]

    scored = []

    async def score(key):
        scored.append(key)
        return {"score": int(key[1:]) / 10}

    log = ItemLog(log_path, "fp1")
    result = asyncio.run(run_items([f"k{i:02d}" for i in range(12)], score, log, concurrency=3))
    assert sorted(scored) == [f"k{i:02d}" for i in range(7, 12)]  # nothing finished is scored again
    assert list(result) == [f"k{i:02d}" for i in range(12)]
    assert [r["score"] for r in result.values()] == [i / 10 for i in range(12)]
    keys = [e["key"] for e in _lines(log_path)]
    assert len(keys) == len(set(keys)) == 12  # no duplicates


def test_torn_last_line_is_ignored_and_repaired(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text('{"key": "a", "fingerprint": "f", "record": {"score": 1}}\n{"key": "b", "finger')
    log = ItemLog(path, "f")
    assert log.done == {"a": {"score": 1}}
    log.append("b", {"score": 0.5})
    assert [e["key"] for e in _lines(path)] == ["a", "b"]


def test_other_settings_are_not_reused(tmp_path):
    path = tmp_path / "items.jsonl"
    fp_a, fp_b = fingerprint({"metric": "faithfulness", "models": ["m1"]}), fingerprint({"metric": "faithfulness", "models": ["m2"]})
    assert fp_a != fp_b and fp_a == fingerprint({"models": ["m1"], "metric": "faithfulness"})
    ItemLog(path, fp_a).append("q1", {"score": 1.0})
    assert ItemLog(path, fp_b).pending(["q1"]) == ["q1"]
    assert ItemLog(path, fp_a).pending(["q1", "q2"]) == ["q2"]


def test_an_escaping_error_keeps_what_finished(tmp_path):
    log = ItemLog(tmp_path / "items.jsonl", "f")

    async def score(key):
        if key == "bad":
            raise RuntimeError("bug")
        return {"score": 1}

    with pytest.raises(RuntimeError):
        asyncio.run(run_items(["a", "b", "bad"], score, log, concurrency=1))
    assert set(ItemLog(tmp_path / "items.jsonl", "f").done) == {"a", "b"}
    with pytest.raises(ValueError, match="concurrency"):
        asyncio.run(run_items(["a"], score, log, concurrency=0))


def test_failed_items_are_scored_again_and_counted(tmp_path, monkeypatch):
    from ragnb.tiers.itemlog import record_failed

    assert record_failed({"error": "generation failed"}) and record_failed({"result": {"status": "partial"}})
    assert record_failed({"judge": {"m": {"status": "failed"}}, "error": None})
    assert not record_failed({"status": "undefined", "error": None, "judge": {"m": {"status": "ok"}}})

    path, fp = tmp_path / "items.jsonl", fingerprint({"m": 1})
    outcome = {"a": "ok", "b": "failed", "c": "failed"}

    async def score(key):
        return {"id": key, "status": outcome[key]}

    asyncio.run(run_items(["a", "b", "c"], score, ItemLog(path, fp)))
    outcome.update(b="ok")  # the provider recovered for b, not for c
    log = ItemLog(path, fp)
    assert set(log.done) == {"a"} and log.retried == {"b", "c"}
    records = asyncio.run(run_items(["a", "b", "c"], score, log))
    assert [records[k]["status"] for k in "abc"] == ["ok", "ok", "failed"]
    assert log.recovered == ["b"]
    assert log.resume_note() == ("Resumed from items.jsonl: 1 finished item(s) read back, not scored again; "
                                 "2 item(s) that had failed were scored again — 1 of 2 recovered.")
    assert set(ItemLog(path, fp).done) == {"a", "b"}  # the last line of a key wins
    monkeypatch.setenv("RAGNB_RETRY_FAILED", "0")
    assert set(ItemLog(path, fp).done) == {"a", "b", "c"}


def test_failed_logged_items_tells_the_runner_what_a_rerun_would_retry(tmp_path, monkeypatch):
    from ragnb.tiers.itemlog import failed_logged_items

    log = ItemLog(tmp_path / "tier2_generation.items.jsonl", "fp")
    log.append("a", {"error": None, "judge": {"m": {"status": "ok"}}})
    log.append("b", {"error": "generation failed: cut off"})
    ItemLog(tmp_path / "rag_metrics.faithfulness.items.jsonl", "fp").append("c", {"status": "partial"})
    assert failed_logged_items(tmp_path, "tier2_generation") == 1
    assert failed_logged_items(tmp_path, "rag_metrics") == 1
    assert failed_logged_items(tmp_path, "tier3_e2e") == 0
    again = ItemLog(tmp_path / "tier2_generation.items.jsonl", "fp")
    again.append("b", {"error": None})  # recovered: the last line of a key wins
    assert failed_logged_items(tmp_path, "tier2_generation") == 0
    monkeypatch.setenv("RAGNB_RETRY_FAILED", "0")
    assert failed_logged_items(tmp_path, "rag_metrics") == 0
