"""Count parameters of the real report notebooks are bounded by one table before anything runs."""

from __future__ import annotations

import numpy as np
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


# ---------------------------------------------------------------------- checked before any notebook starts


def _merged(names: list[str], params: dict) -> dict:
    """The parameters each notebook would get (the runner's own checks, nothing executed)."""
    from ragnb.runs.params import declared_params, merge_params, resolve
    from ragnb.runs.runner import notebooks_dir

    nbs = resolve(names, notebooks_dir())
    return merge_params(nbs, {nb.stem: declared_params(nb) for nb in nbs}, {}, params, notebooks_dir(), "-p")


def test_n_boot_0_is_refused_for_the_dashboard_before_it_runs(tmp_path):
    with pytest.raises(ValueError, match=r"parameter 'n_boot' = 0 is outside its allowed range in notebook dashboard: "
                                         r"an integer from 1 to 100,000"):
        run_notebooks(["dashboard"], {"n_boot": "0"}, outputs=tmp_path)
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_n_boot_0_means_no_intervals_where_the_notebooks_take_it():
    # CLI text "0" → 0 for the tier notebooks and the chunking comparison, whose intervals it turns off
    assert _merged(["tier1", "chunking"], {"n_boot": "0"}) == {"tier1_retrieval": {"n_boot": 0},
                                                              "chunking": {"n_boot": 0}}


def test_chunking_s_evaluation_takes_n_boot_0_as_no_interval():
    from ragnb.metrics.retrieval import evaluate

    run = {"q1": {"c1": 2.0, "c2": 1.0}, "q2": {"c3": 2.0, "c1": 1.0}}
    qrels = {"q1": {"c1": 1}, "q2": {"c1": 1}}
    frame, summary = evaluate(run, qrels, ["mrr"], n_boot=0)
    assert frame["mrr"].tolist() == [1.0, 0.5]
    assert summary["mrr"]["mean"] == 0.75 and all(np.isnan(summary["mrr"]["ci95"]))
    with pytest.raises(ValueError, match=r"n_boot must be a whole number ≥ 0 .* got -1"):
        evaluate(run, qrels, ["mrr"], n_boot=-1)


def test_embedding_model_options_as_documented_on_the_command_line():
    from ragnb.cli.run import parse_value

    text = '{"endpoint:e5": {"query_prompt": "query: ", "document_prompt": "passage: "}}'  # docs/embeddings.md
    merged = _merged(["tier1"], {"embedding_model_options": parse_value(text)})
    assert merged == {"tier1_retrieval": {"embedding_model_options": text}}  # the JSON text the notebook parses
    # a dict-typed parameter gets the same text parsed
    prices = '{"gpt-x": {"input_per_1m": 0.5, "output_per_1m": 1.5}}'
    assert _merged(["tier2"], {"prices": parse_value(prices)}) == {
        "tier2_generation": {"prices": {"gpt-x": {"input_per_1m": 0.5, "output_per_1m": 1.5}}}}
    with pytest.raises(ValueError, match=r"parameter prices: parameter 'prices' must be dict; '\{oops' cannot be read as one"):
        _merged(["tier2"], {"prices": parse_value("{oops")})
    assert parse_value("10") == 10 and parse_value("true") is True  # scalars as before
