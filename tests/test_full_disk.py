"""A full disk: on a small tmpfs the test mounts (root only; skipped with the reason elsewhere — CI runs as root).

Every file a run writes is written atomically, so a full disk leaves the previous version or nothing, never half a
file; the error is one message naming the file, the folder and the space; and once space is freed, resuming the
run with the same ``--run-id`` runs the notebook that failed again and the run passes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import REPO
from ragnb.cli.main import build_cli
from ragnb.io import DiskFullError, atomic_write, atomic_write_text, format_bytes, is_disk_full
from ragnb.runs.record import load_runs
from ragnb.runs.runner import run_notebooks

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MB tmpfs mounted at ``tmp_path/disk`` for the test."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"this machine does not allow mounting a tmpfs: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """Write a ballast file so that about ``leave`` bytes stay free; delete it to free the space."""
    ballast = disk / "ballast"
    with open(ballast, "wb") as fh:
        fh.write(b"\0" * max(shutil.disk_usage(disk).free - leave, 0))
    return ballast


def _leftovers(folder: Path) -> list[str]:
    """Temp files of atomic writes left behind (there must be none)."""
    return sorted(str(p) for p in folder.rglob("*.tmp"))


def _all_files_whole(folder: Path) -> None:
    """Every JSON file and notebook under ``folder`` parses; every CSV and Parquet file reads."""
    for path in folder.rglob("*"):
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".ipynb":
            nbformat.validate(nbformat.read(path, as_version=4))
        elif path.suffix == ".csv":
            pd.read_csv(path)
        elif path.suffix == ".parquet":
            pd.read_parquet(path)


def test_atomic_writes_keep_the_previous_file_and_say_how_much_space(small_disk):
    target = small_disk / "data" / "report.json"
    atomic_write_text(target, '{"version": 1}\n')
    _fill(small_disk, 16_384)
    big = "x" * 200_000
    with pytest.raises(DiskFullError) as err:
        atomic_write_text(target, big)
    free = format_bytes(shutil.disk_usage(small_disk).free)
    assert str(err.value) == (f"disk full: cannot write report.json in {target.parent} (200.0 kB needed, {free} free); "
                              "nothing half-written was kept; free some space on that disk and run again")
    assert target.read_text() == '{"version": 1}\n' and _leftovers(small_disk) == []
    # a write through a callback (pandas) knows only what it wrote before the disk was full: "at least"
    frame = pd.DataFrame({"text": ["строка " * 50] * 2_000})
    with pytest.raises(DiskFullError, match=r"cannot write table\.csv in .*\(at least [0-9.]+ kB needed, "):
        atomic_write(small_disk / "data" / "table.csv", lambda p: frame.to_csv(p, index=False))
    assert not (small_disk / "data" / "table.csv").exists() and _leftovers(small_disk) == []
    assert is_disk_full(OSError(28, "No space left on device")) and not is_disk_full(OSError(13, "Permission denied"))


@pytest.mark.slow
@pytest.mark.parametrize("leave", [40_000, 1_000_000])
def test_a_run_on_a_full_disk_leaves_whole_files_and_resumes(small_disk, leave):
    """40 kB: saving the executed notebook fails; 1 MB: plotly.js of the HTML report (the failure points measured
    with tiny_report; the assertions hold wherever it fails)."""
    out = small_disk / "outputs"
    ballast = _fill(small_disk, leave)
    with pytest.raises(DiskFullError) as err:
        run_notebooks(["tiny_report"], {"n_points": 6}, run_id="r1", outputs=out, notebooks_dir=FIXTURES,
                      log=lambda m: None)
    message = str(err.value)
    assert message.startswith("disk full while running tiny_report: cannot write "), message
    # the run's folder, or the outputs folder's one shared copy of plotly.js (written beside the runs)
    assert (f" in {out / 'runs' / 'r1'}" in message or f"plotly.min.js in {out / 'assets'}" in message), message
    assert " needed, " in message and " free)" in message
    assert message.endswith(" — nothing half-written was kept; free some space on that disk, then resume the run "
                            "with --run-id r1: the notebook that failed runs again, finished ones are kept")
    assert "\n" not in message and "Traceback" not in message
    run_dir = out / "runs" / "r1"
    _all_files_whole(out)
    assert _leftovers(small_disk) == []
    assert not (run_dir / "tiny_report.metrics.json").exists()  # a failed notebook is never "done"
    assert load_runs(out / "benchmark_runs.json") == []  # the run stopped before its record

    ballast.unlink()
    messages: list[str] = []
    result = run_notebooks(["tiny_report"], {"n_points": 6}, run_id="r1", outputs=out, notebooks_dir=FIXTURES,
                           log=messages.append)
    assert not any("skipping" in m for m in messages)  # run again, not taken as finished
    assert result.failures == [] and result.exit_code == 0
    assert result.record["overall_status"] == "attention"  # tiny_report's mrr = 0.45 < 0.5, as on a roomy disk
    assert [r["status"] for r in result.record["reports"]] == ["ok"]
    assert [r["id"] for r in load_runs(out / "benchmark_runs.json")] == ["r1"]
    executed = nbformat.read(run_dir / "tiny_report.ipynb", as_version=4)
    assert all(c.get("execution_count") for c in executed.cells if c.cell_type == "code")
    assert "Squares" in (run_dir / "tiny_report.html").read_text()
    _all_files_whole(out)
    assert _leftovers(small_disk) == []


@pytest.mark.slow
def test_ragnb_run_on_a_full_disk_is_one_message_and_exit_1(small_disk, tmp_path):
    out = small_disk / "outputs"
    ballast = _fill(small_disk, 40_000)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "ragnb.cli.main", "run", "dashboard", "--run-id", "ci-1", "--outputs", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: disk full while running dashboard: cannot write ")
    assert "--run-id ci-1" in errors[0]
    assert "Traceback" not in res.stderr + res.stdout and "Usage:" not in res.stderr
    _all_files_whole(out)
    ballast.unlink()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "run ci-1: no-data" in again.stdout  # the dashboard of an empty history: ran, nothing to grade
    assert (out / "runs" / "ci-1" / "dashboard.html").is_file()


def test_runs_delete_on_a_full_disk_keeps_record_and_folder(small_disk):
    """Rewriting benchmark_runs.json needs room for its new copy: without it, nothing is deleted."""
    out = small_disk / "outputs"
    records = [{"id": f"run-{i}", "executive_summary": "x" * 2_000} for i in range(40)]
    (out / "runs" / "run-0").mkdir(parents=True)
    (out / "runs" / "run-0" / "index.html").write_text("<h1>run-0</h1>")
    (out / "benchmark_runs.json").write_text(json.dumps(records))
    before = (out / "benchmark_runs.json").read_text()
    ballast = _fill(small_disk, 8_192)
    res = CliRunner().invoke(build_cli(), ["runs", "delete", "run-0", "--yes", "--outputs", str(out)])
    assert res.exit_code == 2, res.output
    assert f"error: disk full: cannot write benchmark_runs.json in {out} (" in res.output
    assert (out / "benchmark_runs.json").read_text() == before
    assert (out / "runs" / "run-0" / "index.html").read_text() == "<h1>run-0</h1>"
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["run-0"] and _leftovers(small_disk) == []
    ballast.unlink()
    res = CliRunner().invoke(build_cli(), ["runs", "delete", "run-0", "--yes", "--outputs", str(out)])
    assert res.exit_code == 0, res.output
    assert len(load_runs(out / "benchmark_runs.json")) == 39 and not (out / "runs" / "run-0").exists()
