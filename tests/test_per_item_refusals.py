"""``ragnb compare`` on damaged per-item files (issue 26, item 8): a file that cannot be read, a metric column
holding text, or a value outside the metric's registered range (a hit rate of −3) is refused, naming the file,
row, column and the fix — never a silent fall-back to unpaired tests, never data."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner
from test_gate import A, B, _runs

from ragnb.cli.main import build_cli


def _compare(out):
    return CliRunner().invoke(build_cli(), ["compare", A, B, "--outputs", str(out), "--fail-if-worse", "mrr"],
                              catch_exceptions=False)


def _only_csv(out, run_id: str, edit) -> str:
    """B's per-item table as a CSV only (no older parquet beside it), edited by ``edit(frame)``; its path."""
    folder = out / "runs" / run_id
    (folder / "tier1_retrieval.per_item.parquet").unlink(missing_ok=True)
    path = folder / "tier1_retrieval.per_item.csv"
    frame = pd.read_csv(path, dtype=object)
    edit(frame)
    frame.to_csv(path, index=False)
    return str(path)


def test_the_intact_files_are_paired(tmp_path):
    out = tmp_path / "out"
    _runs(out, +0.2)
    res = _compare(out)
    assert res.exit_code == 0 and "| 0.575 | 0.775 | +0.200" in res.stdout and "(unpaired)" not in res.stdout


@pytest.mark.parametrize("column, value, says", [
    ("hit_rate@1", "-3", "-3 is outside hit_rate's range [0, 1] (1 such row(s))"),
    ("mrr", "1.5", "1.5 is outside mrr's range [0, 1] (1 such row(s))"),
    ("mrr", "#REF!", "'#REF!' is not a number (1 such row(s))"),
])
def test_a_value_that_is_no_such_metric_is_refused_naming_file_row_and_column(tmp_path, column, value, says):
    out = tmp_path / "out"
    _runs(out, +0.2)
    path = _only_csv(out, B, lambda f: f.__setitem__(column, [*f[column][:3], value, *f[column][4:]]))
    res = _compare(out)
    assert res.exit_code == 2 and res.stdout == "" and res.stderr.count("\n") == 1, res.output
    assert res.stderr.startswith(f"error: {path}: row 4 (line 5), column '{column}': {says}; ")
    assert "restore it (or re-run that notebook), or move it aside" in res.stderr


def test_an_unreadable_file_is_refused_not_compared_unpaired(tmp_path):
    out = tmp_path / "out"
    _runs(out, +0.2)
    folder = out / "runs" / B
    (folder / "tier1_retrieval.per_item.csv").unlink()
    parquet = folder / "tier1_retrieval.per_item.parquet"
    parquet.write_bytes(b"garbage, not parquet" * 10)
    res = _compare(out)
    assert res.exit_code == 2 and res.stderr.startswith(
        f"error: {parquet}: the per-item file cannot be read (")
    assert "or move it aside to compare that notebook unpaired" in res.stderr
    # moved aside, as the message says: the notebook is compared unpaired, and says so
    parquet.rename(parquet.with_suffix(".damaged"))
    res = _compare(out)
    assert res.exit_code == 0 and "B better (unpaired)" in res.stdout
