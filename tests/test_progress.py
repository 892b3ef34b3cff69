"""Progress lines (ragnb.progress, ragnb.runs.progress): on stderr whatever the terminal, one line per step or
every ~10 s in a log, never a redrawn bar — checked with an injected clock, and on the real ``ragnb`` command run
with pipes (as CI, ``nohup`` or a notebook server's log would run it)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from ragnb import progress
from ragnb.runs.progress import Relay, RunProgress


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def on_stderr(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    progress.show_on_stderr(True)
    yield
    progress.show_on_stderr(False)


def test_stderr_lines_are_rate_limited_by_the_clock(on_stderr, capsys):
    clock = FakeClock()
    report = progress.reporter("embedding chunks (all-MiniLM-L6-v2)", "rows", min_interval=10.0, clock=clock)
    # 256 (3 s after the first line) and 512 (9.9 s) are not due; 768 at exactly 10 s is; the last always is
    for done, t in [(0, 100.0), (256, 103.0), (512, 109.9), (768, 110.0), (1024, 115.0), (1190, 116.0)]:
        clock.now = t
        report(done, 1190)
    err = capsys.readouterr().err
    # time left at 768: from the first report with rows done (256 at 3 s): 7 s / 512 rows × 422 rows = 5.8 s
    assert err.splitlines() == [
        "embedding chunks (all-MiniLM-L6-v2): 0/1190 rows (0%), 0 s",
        "embedding chunks (all-MiniLM-L6-v2): 768/1190 rows (65%), 10 s, ~6 s left",
        "embedding chunks (all-MiniLM-L6-v2): 1190/1190 rows (100%), 16 s",
    ]
    assert "\r" not in err and "\x1b" not in err


def test_the_pace_is_10_s_in_a_log_and_2_s_on_a_terminal(on_stderr, capsys, monkeypatch):
    assert progress.stderr_interval() == progress.LOG_INTERVAL_S == 10.0  # captured stderr: not a terminal
    clock = FakeClock(0.0)
    report = progress.reporter("items scored", clock=clock)
    for t in range(0, 21):  # one item per second
        clock.now = float(t)
        report(t + 1, 40)
    assert [line.split(":")[1].split(" (")[0] for line in capsys.readouterr().err.splitlines()] == \
        [" 1/40", " 11/40", " 21/40"]
    tty = TtyStream()
    monkeypatch.setattr(sys, "stderr", tty)
    assert progress.stderr_interval() == progress.MIN_INTERVAL_S == 2.0
    report = progress.reporter("items scored", clock=clock)
    for t in range(0, 5):
        clock.now = float(t)
        report(t + 1, 5)
    assert [line.split(": ")[1].split(" (")[0] for line in tty.getvalue().splitlines()] == ["1/5", "3/5", "5/5"]


def test_nothing_listens_outside_the_command_and_a_runner(monkeypatch, tmp_path):
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    progress.show_on_stderr(False)
    assert progress.reporter("x") is None  # a notebook in JupyterLab, a script: quiet, and free
    path = tmp_path / "p.jsonl"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    clock = FakeClock(0.0)
    report = progress.reporter("embedding questions (m)", "rows", clock=clock)
    for done, t in [(0, 0.0), (256, 1.5), (512, 2.5), (600, 3.0)]:
        clock.now = t
        report(done, 600)
    # the runner's file: the first record, then at most one per 2 s (MIN_INTERVAL_S), and the last
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"label": "embedding questions (m)", "unit": "rows", "done": 0, "total": 600, "elapsed_s": 0.0},
        {"label": "embedding questions (m)", "unit": "rows", "done": 512, "total": 600, "elapsed_s": 2.5},
        {"label": "embedding questions (m)", "unit": "rows", "done": 600, "total": 600, "elapsed_s": 3.0},
    ]


def test_relay_paces_each_step_and_extrapolates_from_its_first_record():
    shown: list[str] = []
    clock = FakeClock(0.0)
    relay = Relay("judge", shown.append, interval=10.0, clock=clock)
    rec = lambda label, done, total, el, unit="": json.dumps(  # noqa: E731
        {"label": label, "unit": unit, "done": done, "total": total, "elapsed_s": el})
    # the kernel writes every 2 s; the relay shows a step's first record, then one per 10 s, and its last
    feed = [(0.0, rec("items scored", 1, 40, 4.0)), (2.0, rec("items scored", 5, 40, 6.0)),
            (4.0, rec("embedding chunks (m)", 0, 120, 0.0, "rows")),  # another step: its own pace
            (9.0, rec("items scored", 11, 40, 9.0)), (10.0, rec("items scored", 21, 40, 14.0)),
            (12.0, rec("embedding chunks (m)", 120, 120, 8.0, "rows")), (13.0, rec("items scored", 40, 40, 20.0)),
            (14.0, "not json"), (15.0, rec("items scored", 1, 2, 0.5))]  # the same label again starts afresh
    for t, line in feed:
        clock.now = t
        relay.feed(line)
    # 1 item at 4 s (warm-up: no estimate); 21 items at 14 s → 0.5 s per item → 19 left ≈ 9.5 s → "10 s"
    assert shown == [
        "    judge · items scored: 1/40 (2%), 4 s",
        "    judge · embedding chunks (m): 0/120 rows (0%), 0 s",
        "    judge · items scored: 21/40 (52%), 14 s, ~10 s left",
        "    judge · embedding chunks (m): 120/120 rows (100%), 8 s",
        "    judge · items scored: 40/40 (100%), 20 s",
        "    judge · items scored: 1/2 (50%), 0 s",
    ]


def test_each_notebook_says_when_it_begins_and_ends():
    lines: list[str] = []
    p = RunProgress(["tier0", "tier1", "tier2"], {"tier1": 20.0}, lines.append)
    p.begin("tier0", "tier0")
    p.end({"status": "ok", "duration_s": 21.9})
    p.begin("tier1", "tier1")
    p.end({"status": "failed", "duration_s": 3.2})
    p.begin("tier2", "tier2")
    p.end({"status": "skipped", "duration_s": None})
    assert lines == [
        "[1/3] tier0 (first timing) — run: about 20 s left + 2 notebook(s) never timed before",
        "[1/3] tier0 done in 22 s — run: about 20 s left + 1 notebook(s) never timed before",
        "[2/3] tier1 (usually 20 s) — run: about 20 s left + 1 notebook(s) never timed before",
        "[2/3] tier1 FAILED after 3 s — run: no estimate yet (no earlier run of these notebooks)",
        "[3/3] tier2 (first timing) — run: no estimate yet (no earlier run of these notebooks)",
        "[3/3] tier2 skipped (finished in an earlier run)",  # the last one: no time left to tell
    ]


def _ragnb(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """The real command with pipes for stdout and stderr: neither is a terminal."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    full.pop(progress.PROGRESS_ENV, None)
    return subprocess.run([sys.executable, "-m", "ragnb.cli.main", *args], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=None)


_STEP = re.compile(r"^(?P<indent> {4}(?P<nb>\S+) · )?embedding (?P<which>chunks|questions) \((?P<model>[^)]+)\): "
                   r"(?P<done>\d+)/(?P<total>\d+) rows \(\d+%\), [^,]+(, ~.+ left)?$")  # elapsed: 9 s, 1 min 09 s…


def _steps(stderr: str, which: str) -> list[tuple[int, int]]:
    return [(int(m["done"]), int(m["total"])) for m in map(_STEP.match, stderr.splitlines())
            if m and m["which"] == which]


@pytest.mark.slow
def test_ragnb_embed_prints_row_progress_on_stderr_in_a_log(tmp_path):
    from team_wiki import write_bilingual_wiki, write_wiki_log

    env = {"RAGNB_EMBEDDED_DB": f"tprogress{os.getpid()}", "RAGNB_OUTPUTS": str(tmp_path / "outputs")}
    wiki, log = write_bilingual_wiki(tmp_path / "wiki"), write_wiki_log(tmp_path / "log.jsonl")
    for args in (["load", "chunks", str(wiki), "--chunk-size", "8", "--overlap", "0", "--write"],
                 ["load", "questions", str(log), "--write"]):
        res = _ragnb(args, env, tmp_path)
        assert res.returncode == 0, res.stderr[-2000:]
    res = _ragnb(["embed", "--chunks", "--questions", "--write"], env, tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    stats = [json.loads(block) for block in re.findall(r"^\{.*?^\}", res.stdout, re.S | re.M)]
    n_chunks, n_questions = stats[0]["total"], stats[1]["total"]
    assert n_questions == 6 and n_chunks == stats[0]["processed"] > 4  # every page gives chunks of 8 words
    # the step begins (0/N) and ends (N/N) on stderr, with the true N; nothing on stdout but the results
    assert _steps(res.stderr, "chunks") == [(0, n_chunks), (n_chunks, n_chunks)]
    assert _steps(res.stderr, "questions") == [(0, 6), (6, 6)]
    assert "embedding chunks" not in res.stdout and "\r" not in res.stderr
    again = _ragnb(["embed", "--chunks", "--write"], env, tmp_path)  # nothing left to embed: no step at all
    assert again.returncode == 0 and _steps(again.stderr, "chunks") == []


@pytest.mark.slow
def test_ragnb_run_prints_notebook_and_embedding_progress_on_stderr_in_a_log(tmp_path):
    """Two notebooks on a fresh home: tier0 embeds the demo inside its kernel, and the runner relays it."""
    from ragnb.datasets import demo
    from ragnb.store.engine import stop_embedded

    home = tmp_path / "home"
    env = {"RAGNB_HOME": str(home), "RAGNB_OUTPUTS": str(tmp_path / "outputs")}
    try:
        res = _ragnb(["run", "tier0", "tier1", "-f", str(REPO / "params" / "smoke.yaml")], env, tmp_path)
    finally:
        stop_embedded(home / "pgdata")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    err = res.stderr
    assert "\r" not in err and "\x1b" not in err  # lines, never a redrawn bar
    n_chunks, n_questions = len(demo.chunk_rows("ru")), len(demo.question_rows("ru"))
    for which, n in (("chunks", n_chunks), ("questions", n_questions)):
        steps = _steps(err, which)
        assert steps[0] == (0, n) and steps[-1] == (n, n), (which, steps, err)
        assert [done for done, _ in steps] == sorted(done for done, _ in steps)
        assert {total for _, total in steps} == {n}
    relayed = [m for m in map(_STEP.match, err.splitlines()) if m]
    assert {(m["nb"], m["model"]) for m in relayed} == {("tier0", "all-MiniLM-L6-v2")}

    def at(pattern: str) -> int:
        hits = [i for i, line in enumerate(err.splitlines()) if re.match(pattern, line)]
        assert len(hits) == 1, (pattern, err)
        return hits[0]

    order = [at(r"\[1/2\] tier0 \(first timing\) — run: no estimate yet"),
             at(rf"    tier0 · embedding chunks \(all-MiniLM-L6-v2\): 0/{n_chunks} rows"),
             at(rf"    tier0 · embedding chunks \(all-MiniLM-L6-v2\): {n_chunks}/{n_chunks} rows \(100%\)"),
             at(rf"    tier0 · embedding questions \(all-MiniLM-L6-v2\): 0/{n_questions} rows"),
             at(rf"    tier0 · embedding questions \(all-MiniLM-L6-v2\): {n_questions}/{n_questions} rows"),
             at(r"\[1/2\] tier0 done in [^—]+ — run: no estimate yet"),
             at(r"\[2/2\] tier1 \(first timing\) — run: no estimate yet"),
             at(r"\[2/2\] tier1 done in [\w ]+$")]
    assert order == sorted(order)
    assert "[1/2]" not in res.stdout and "rows" not in res.stdout  # progress is stderr's; results stay on stdout
    assert re.search(r"^run \S+: \w+ — .*index\.html$", res.stdout, re.M)


def test_a_step_of_unknown_length_reports_by_the_clock_and_ends_with_its_total(on_stderr, capsys):
    """A file being loaded: its rows are counted as they are read (total 0 = not known yet), then the last report
    gives the total."""
    clock = FakeClock()
    report = progress.reporter("loading chunks", "rows", min_interval=10.0, clock=clock)
    for done, t in [(0, 100.0), (1000, 104.0), (2000, 110.0), (3000, 115.0)]:
        clock.now = t
        report(done, 0)
    clock.now = 117.0
    report(3456, 3456)
    assert capsys.readouterr().err.splitlines() == [
        "loading chunks: 0 rows, 0 s",
        "loading chunks: 2000 rows, 10 s",
        "loading chunks: 3456/3456 rows (100%), 17 s",
    ]
