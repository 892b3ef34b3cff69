"""Count parameters of the real report notebooks are bounded by one table before anything runs."""

from __future__ import annotations

import pytest

from ragnb.runs.params import COUNT_BOUNDS
from ragnb.runs.runner import run_notebooks


@pytest.mark.parametrize("notebook, name, value, shown", [
    ("tier1", "top_k", "1000000000", "1,000,000,000"),  # CLI text, as `-p top_k 1e9` would pass it
    ("tier1", "top_k", 0, "0"),
    ("tier1", "n_boot", 100_001, "100,001"),
    ("tier1", "max_questions", -5, "-5"),
    ("tier1", "consistency_runs", 1000, "1,000"),
    ("tier0", "sample_size", -1, "-1"),
])
def test_absurd_counts_are_refused_with_the_range(tmp_path, notebook, name, value, shown):
    low, high = COUNT_BOUNDS[name]
    with pytest.raises(ValueError) as err:
        run_notebooks([notebook], {name: value}, outputs=tmp_path)
    msg = str(err.value)
    assert f"parameter {name!r} = " in msg and f"from {low:,} to {high:,}" in msg
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_bounds_apply_to_the_params_file_too(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("tier1:\n  top_k: 20000\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"p.yaml: tier1.top_k: parameter 'top_k' = 20000 is outside .* 1 to 10,000"):
        run_notebooks(["tier1"], {}, params_file=f, outputs=tmp_path)


def test_every_bounded_name_is_a_declared_count_of_some_notebook():
    import papermill as pm

    from ragnb.runs.runner import notebooks_dir

    declared = {}
    for path in notebooks_dir().glob("*.ipynb"):
        declared.update(pm.inspect_notebook(str(path)))
    for name, (low, high) in COUNT_BOUNDS.items():
        assert declared[name]["inferred_type_name"] == "int" and 0 <= low < high
        default = int(declared[name]["default"])
        assert low <= default <= high, (name, default)


def test_a_running_run_id_is_refused_and_a_killed_runner_does_not_block(tmp_path):
    """Another process holds the run folder's lock (as a running ``ragnb run`` does): the same --run-id is
    refused and nothing is written; once that process is killed, the run folder can be taken again."""
    import os
    import signal
    import subprocess
    import sys

    from ragnb.runs.runner import LOCK_FILE, run_lock

    run_dir = tmp_path / "runs" / "20250101-000000-busy"
    run_dir.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from filelock import FileLock; "
         f"l = FileLock({str(run_dir / LOCK_FILE)!r}); l.acquire(); print('held', flush=True); time.sleep(3600)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=r"run 20250101-000000-busy is still running .*choose another --run-id"):
            run_notebooks(["tier1"], {}, run_id="20250101-000000-busy", outputs=tmp_path)
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE]  # nothing overwritten or added
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # a runner killed mid-run leaves its lock file behind
        holder.wait()
    assert (run_dir / LOCK_FILE).exists()
    with run_lock(run_dir, "20250101-000000-busy"):  # the kernel released the dead process's lock
        pass
