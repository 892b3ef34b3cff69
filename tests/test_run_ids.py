"""Run ids as folder names, and ``ragnb runs delete``: only ragnb's own run folders, record and folder together.

Everything runs on real folders in a temporary directory, through the real ``ragnb`` command; a sentinel folder
beside the outputs folder (and a file inside it, outside ``runs/``) must survive every case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO
from ragnb.cli.main import build_cli
from ragnb.runs.delete import TRASH, delete_runs, settle_deletions
from ragnb.runs.record import check_run_id, load_runs, run_folder
from ragnb.runs.runner import run_lock

IDS = ["20250101-000000-aaaa", "base", "v1.2_rc-3"]
BAD_NAME = "is not usable as a folder name"


@pytest.mark.parametrize("run_id", IDS + ["a" * 100, "0"])
def test_valid_run_ids_name_a_folder_inside_runs(run_id, tmp_path):
    assert check_run_id(run_id) == run_id
    assert run_folder(tmp_path, run_id) == tmp_path / "runs" / run_id


@pytest.mark.parametrize("run_id, message", [
    ("", "run id '' is empty (an unset variable such as $RUN_ID?)"),
    ("   ", "run id '   ' is empty"),
    (".", f"run id '.' {BAD_NAME}"),
    ("..", f"run id '..' {BAD_NAME}"),
    ("../../x", f"run id '../../x' {BAD_NAME}"),
    ("a/b", f"run id 'a/b' {BAD_NAME}"),
    ("a\\b", f"run id 'a\\\\b' {BAD_NAME}"),
    ("/etc", f"run id '/etc' {BAD_NAME}"),
    (".hidden", f"run id '.hidden' {BAD_NAME}"),
    (TRASH + "base", f"run id '.deleting.base' {BAD_NAME}"),
    ("a" * 101, BAD_NAME),
    ("run 1", f"run id 'run 1' {BAD_NAME}"),
    ("запуск", f"run id 'запуск' {BAD_NAME}"),
    (None, f"run id None {BAD_NAME}"),
])
def test_run_ids_that_are_not_plain_folder_names_are_refused(run_id, message, tmp_path):
    with pytest.raises(ValueError) as err:
        run_folder(tmp_path, run_id)
    assert message in str(err.value)
    assert "`ragnb run` without --run-id makes a new timestamped one" in str(err.value)


# --------------------------------------------------------------------------------------------
# ragnb runs delete
# --------------------------------------------------------------------------------------------


def _outputs(tmp_path: Path) -> tuple[Path, Path]:
    """An outputs folder with three recorded runs (folder + record each), a file outside runs/, and a sentinel
    folder beside the outputs folder."""
    out, sentinel = tmp_path / "outputs", tmp_path / "sentinel"
    for run_id in IDS:
        folder = out / "runs" / run_id
        folder.mkdir(parents=True)
        (folder / "index.html").write_text(f"<h1>{run_id}</h1>")
        (folder / "tier1_retrieval.metrics.json").write_text('{"mrr": 0.5}')
    (out / "benchmark_runs.json").write_text(json.dumps([{"id": run_id, "overall_status": "good"} for run_id in IDS]))
    (out / "notes.txt").write_text("not a run")
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("precious")
    return out, sentinel


def _snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with its content (lock files aside: taking a lock creates one)."""
    return {str(p.relative_to(root)): (p.read_text() if p.is_file() else "<dir>")
            for p in sorted(root.rglob("*")) if not p.name.endswith(".lock")}


def _cli(*args: str):
    return CliRunner().invoke(build_cli(), list(args), catch_exceptions=False)


def test_empty_and_path_like_ids_delete_nothing_as_a_user_types_them(tmp_path):
    """The issue's cases, as a separate process (what CI runs): `ragnb runs delete "" --yes` with $RUN_ID unset
    deleted every run folder; `..` emptied the outputs folder; `../../x` deleted a folder outside it."""
    out, sentinel = _outputs(tmp_path)
    before = _snapshot(tmp_path)
    cases = [("", "run id '' is empty (an unset variable such as $RUN_ID?)"), (".", BAD_NAME), ("..", BAD_NAME),
             ("../../sentinel", BAD_NAME), ("../notes.txt", BAD_NAME), (str(sentinel), BAD_NAME),
             ("runs/base", BAD_NAME)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAGNB_OUTPUTS": str(out)}
    for arg, message in cases:
        res = subprocess.run([sys.executable, "-m", "ragnb.cli.main", "runs", "delete", arg, "--yes"],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
        shown = f"runs delete {arg!r}: {res.stdout} {res.stderr}"
        assert res.returncode == 2, shown
        assert res.stderr.startswith(f"error: run id {arg!r}") and message in res.stderr, shown
        assert "Traceback" not in res.stderr and res.stdout == "", shown
    assert _snapshot(tmp_path) == before


def test_deleting_several_or_all_runs_must_be_asked_for(tmp_path):
    out, _ = _outputs(tmp_path)
    before = _snapshot(tmp_path)
    none = _cli("runs", "delete", "--yes", "--outputs", str(out))
    assert none.exit_code == 2
    assert "error: name the runs to delete (`ragnb runs list`), or pass --all to delete every run" in none.output
    both = _cli("runs", "delete", IDS[0], "--all", "--yes", "--outputs", str(out))
    assert both.exit_code == 2 and "error: give run ids or --all, not both" in both.output
    unconfirmed = _cli("runs", "delete", "--all", "--outputs", str(out))  # no terminal to ask on, no --yes
    assert unconfirmed.exit_code == 2
    assert f"delete all 3 run(s) from {out / 'benchmark_runs.json'} and {out / 'runs'}?" in unconfirmed.output
    one_unknown = _cli("runs", "delete", IDS[0], "nope", "--yes", "--outputs", str(out))  # all or nothing
    assert one_unknown.exit_code == 2
    assert f"unknown run id 'nope'; runs in benchmark_runs.json: {', '.join(IDS)}" in one_unknown.output
    assert _snapshot(tmp_path) == before


def test_delete_removes_the_record_and_the_folder_together(tmp_path):
    out, sentinel = _outputs(tmp_path)
    res = _cli("runs", "delete", "base", "--yes", "--outputs", str(out))
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == {"deleted": [{"run_id": "base", "record_removed": True,
                                                   "folder_removed": str(out / "runs" / "base")}], "runs_left": 2}
    assert [r["id"] for r in load_runs(out / "benchmark_runs.json")] == [IDS[0], IDS[2]]
    assert sorted(p.name for p in (out / "runs").iterdir()) == [IDS[0], IDS[2]]  # no .deleting. folder left
    assert (out / "notes.txt").read_text() == "not a run" and (sentinel / "keep.txt").read_text() == "precious"
    listed = _cli("runs", "list", "--outputs", str(out), "--format", "json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [IDS[0], IDS[2]]


def test_several_ids_and_all(tmp_path):
    out, sentinel = _outputs(tmp_path)
    (out / "runs" / "dashboard-only").mkdir()  # a folder without a record (a run of the dashboard alone)
    (out / "runs" / "my notes").mkdir()  # not a run id: --all leaves it
    res = _cli("runs", "delete", IDS[0], IDS[2], IDS[0], "--yes", "--outputs", str(out))
    assert res.exit_code == 0, res.output
    assert [d["run_id"] for d in json.loads(res.stdout)["deleted"]] == [IDS[0], IDS[2]]
    assert [r["id"] for r in load_runs(out / "benchmark_runs.json")] == ["base"]
    everything = _cli("runs", "delete", "--all", "--yes", "--outputs", str(out))
    assert everything.exit_code == 0, everything.output
    deleted = json.loads(everything.stdout)["deleted"]
    assert [(d["run_id"], d["record_removed"], bool(d["folder_removed"])) for d in deleted] == [
        ("base", True, True), ("dashboard-only", False, True)]
    assert load_runs(out / "benchmark_runs.json") == []
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["my notes"]
    assert (out / "notes.txt").read_text() == "not a run" and (sentinel / "keep.txt").read_text() == "precious"
    again = _cli("runs", "delete", "--all", "--yes", "--outputs", str(out))
    assert again.exit_code == 0 and f"no runs recorded in {out}: nothing to delete" in again.output


def test_a_run_folder_that_links_outside_is_never_followed(tmp_path):
    out, sentinel = _outputs(tmp_path)
    (out / "runs" / "evil").symlink_to(sentinel, target_is_directory=True)
    runs = load_runs(out / "benchmark_runs.json") + [{"id": "evil"}]
    (out / "benchmark_runs.json").write_text(json.dumps(runs))
    before = _snapshot(tmp_path)
    for args in (["evil"], ["--all"]):
        res = _cli("runs", "delete", *args, "--yes", "--outputs", str(out))
        assert res.exit_code == 2, res.output
        assert f"{out / 'runs' / 'evil'} is not a run folder inside {out / 'runs'} (a link or a file)" in res.output
    assert _snapshot(tmp_path) == before and (sentinel / "keep.txt").read_text() == "precious"


def test_a_run_still_executing_is_not_deleted(tmp_path):
    out, _ = _outputs(tmp_path)
    before = _snapshot(tmp_path)
    with run_lock(out / "runs" / "base", "base"):  # as a runner holds it while it writes into the folder
        res = _cli("runs", "delete", "base", IDS[0], "--yes", "--outputs", str(out))
    assert res.exit_code == 2 and "run base is still running" in res.output
    assert _snapshot(tmp_path) == before


def test_a_delete_interrupted_by_a_crash_is_settled(tmp_path):
    """A crash after the rename and before the record was rewritten: the record still lists the run, so its
    folder goes back; after the record was rewritten: the folder is removed."""
    out, _ = _outputs(tmp_path)
    runs = out / "runs"
    (runs / "base").rename(runs / (TRASH + "base"))  # not committed: benchmark_runs.json still lists it
    (runs / IDS[0]).rename(runs / (TRASH + IDS[0]))  # committed: its record is gone
    (out / "benchmark_runs.json").write_text(json.dumps([{"id": "base"}, {"id": IDS[2]}]))
    listed = _cli("runs", "list", "--outputs", str(out), "--format", "json")
    assert [r["id"] for r in json.loads(listed.stdout)] == ["base", IDS[2]]
    assert sorted(p.name for p in runs.iterdir()) == ["base", IDS[2]]
    assert (runs / "base" / "index.html").read_text() == "<h1>base</h1>"
    assert settle_deletions(out) == []  # nothing left to settle


def test_delete_runs_api_refuses_an_empty_list(tmp_path):
    out, _ = _outputs(tmp_path)
    with pytest.raises(ValueError, match=r"name the runs to delete .* \(--all\)"):
        delete_runs(out, [])
    with pytest.raises(ValueError, match="no outputs folder"):
        delete_runs(tmp_path / "missing", ["base"])
    assert len(load_runs(out / "benchmark_runs.json")) == 3


def test_runs_show_refuses_a_path_like_id(tmp_path):
    out, _ = _outputs(tmp_path)
    res = _cli("runs", "show", "../sentinel", "--outputs", str(out))
    assert res.exit_code == 2 and f"run id '../sentinel' {BAD_NAME}" in res.output
    shown = _cli("runs", "show", "base", "--outputs", str(out))
    assert shown.exit_code == 0 and str(out / "runs" / "base" / "index.html") in shown.output
