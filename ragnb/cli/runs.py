"""``ragnb runs list | show | delete`` and ``ragnb compare``: the run history from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ragnb.cli.common import EXIT_FAILED, EXIT_NOT_COMPARABLE, confirm, fail, print_json

runs_app = typer.Typer(no_args_is_help=True, help="The run history in benchmark_runs.json: list, show, delete.")

_OUTPUTS = typer.Option(None, "--outputs", help="Outputs folder (default: RAGNB_OUTPUTS, else outputs/ of the project).")
_FORMAT = typer.Option("md", "--format", help="md (Markdown, e.g. for a pull-request comment) or json.")


def _outputs(outputs: Optional[Path]) -> Path:
    from ragnb import config

    return outputs.resolve() if outputs else config.outputs_dir()


def _runs(outputs: Path) -> list[dict]:
    from ragnb.runs.delete import settle_deletions
    from ragnb.runs.history import sort_runs
    from ragnb.runs.record import RUNS_FILE, load_runs

    try:
        settle_deletions(outputs)  # a delete interrupted by a crash: its record and folder agree again
        return sort_runs(load_runs(outputs / RUNS_FILE))
    except ValueError as exc:
        fail(exc)


def _summary_row(run: dict) -> dict:
    from ragnb.runs.history import blocks_of

    reports = [r for r in run.get("reports") or [] if isinstance(r, dict)]
    return {"id": run.get("id"), "timestamp": run.get("timestamp"), "status": run.get("overall_status"),
            "notebooks": len(reports) or len(blocks_of(run)), "failed": len(run.get("failures") or []),
            "duration_s": run.get("duration_s"), "dataset": run.get("dataset_file"),
            "git": (run.get("git_commit_hash") or "")[:10] or None}


@runs_app.command("list")
def runs_list(outputs: Optional[Path] = _OUTPUTS, fmt: str = typer.Option("table", "--format", help="table or json.")) -> None:
    """Every recorded run, oldest first: id, time, status, notebooks, failures, duration, dataset, commit."""
    folder = _outputs(outputs)
    rows = [_summary_row(r) for r in _runs(folder)]
    if fmt == "json":
        print_json(rows)
        return
    if fmt != "table":
        fail(f"--format {fmt!r}: use table or json")
    if not rows:
        typer.echo(f"no runs recorded in {folder}")
        return
    header = ("id", "timestamp", "status", "notebooks", "failed", "duration", "dataset")
    lines = [header] + [(str(r["id"]), str(r["timestamp"] or "—"), str(r["status"] or "—"), str(r["notebooks"]),
                         str(r["failed"]), f"{r['duration_s']:.0f} s" if r["duration_s"] is not None else "—",
                         str(r["dataset"] or "—")) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    typer.echo(f"{len(rows)} run(s) in {folder}")


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help="A run id (`ragnb runs list`)."), outputs: Optional[Path] = _OUTPUTS,
              as_json: bool = typer.Option(False, "--json", help="Print the whole run record as JSON.")) -> None:
    """One run: status, summary, each notebook with its status and duration, and where its reports are."""
    from ragnb.runs.history import find_run
    from ragnb.runs.record import check_run_id, git_text, run_folder

    folder = _outputs(outputs)
    try:
        run = find_run(_runs(folder), check_run_id(run_id))  # "" or "../x" is refused as such, not "unknown"
    except ValueError as exc:
        fail(exc)
    if as_json:
        print_json(run)
        return
    row = _summary_row(run)
    git = git_text(run, width=10)  # None outside a git checkout: left out, never "git —"
    typer.echo(f"run {run_id}: {row['status']} — {run.get('timestamp')}" + (f", git {git}" if git else ""))
    typer.echo(str(run.get("executive_summary") or "").strip())
    for report in run.get("reports") or []:
        if isinstance(report, dict):
            took = f"{report['duration_s']:.1f} s" if report.get("duration_s") is not None else "—"
            error = f" — {report['error']}" if report.get("error") else ""
            typer.echo(f"  {report.get('name') or report.get('stem')}: {report.get('status')} ({took}){error}")
    index = run_folder(folder, run_id) / "index.html"
    typer.echo(str(index) if index.exists() else f"(no run folder in {folder / 'runs'})")


@runs_app.command("delete")
def runs_delete(run_ids: Optional[list[str]] = typer.Argument(None, help="Run ids (`ragnb runs list`); several "
                                                              "ids delete several runs."),
                all_runs: bool = typer.Option(False, "--all", help="Delete every run: all records and run folders."),
                outputs: Optional[Path] = _OUTPUTS,
                yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")) -> None:
    """Remove runs from benchmark_runs.json and delete their run folders, together (a run still executing is
    refused). Deleting every run needs --all; an empty id is an error, never "all"."""
    from ragnb.runs.delete import delete_runs, plan
    from ragnb.runs.record import RUNS_DIR, RUNS_FILE

    if run_ids and all_runs:
        fail("give run ids or --all, not both")
    if not run_ids and not all_runs:
        fail("name the runs to delete (`ragnb runs list`), or pass --all to delete every run")
    folder = _outputs(outputs)
    try:
        doomed = plan(folder, None if all_runs else list(run_ids or []))
    except ValueError as exc:
        fail(exc)
    if not doomed:
        typer.echo(f"no runs recorded in {folder}: nothing to delete")
        return
    what = (f"all {len(doomed)} run(s)" if all_runs else
            f"run{'s' if len(doomed) > 1 else ''} {', '.join(d.run_id for d in doomed)}")
    confirm(f"delete {what} from {folder / RUNS_FILE} and {folder / RUNS_DIR}?", yes)
    try:
        removed = delete_runs(folder, None if all_runs else [d.run_id for d in doomed])
    except ValueError as exc:
        fail(exc)
    print_json(removed)


def _names(text: Optional[str], option: str) -> list[str]:
    """The names/patterns of ``--metrics`` / ``--fail-if-worse``; given but empty (``,``) is a usage error."""
    from ragnb.io import comma_list

    names = comma_list(text, option)
    if text is not None and not names:
        fail(f"{option} {text!r} names no metric: give names or patterns such as 'hit_rate@*,mrr'")
    return names


def compare_command(
    run_a: Optional[str] = typer.Argument(None, help="Baseline run id (default: the latest earlier run on the same "
                                          "data as B)."),
    run_b: Optional[str] = typer.Argument(None, help="Run to judge (default: the latest run)."),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="Metrics to show, comma-separated; shell patterns "
                                          "such as 'hit_rate@*' work (default: all)."),
    fail_if_worse: Optional[str] = typer.Option(None, "--fail-if-worse", help="Exit 1 when B is significantly worse "
                                                "on one of these metrics (comma-separated, patterns allowed) or "
                                                "cannot report one that A reports; exit 4 when they are not "
                                                "comparable. Chunk-level metrics of runs on other chunks are gated "
                                                "on their page-level doc_ versions."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Gate only the metrics both runs recorded; "
                                       "list the others instead of failing."),
    max_failed: Optional[float] = typer.Option(None, "--max-failed", help="Exit 1 when a gated metric failed (NaN: "
                                               "a refused judge request, an error) on more than this share of its "
                                               "items in either run (default 0.05)."),
    fmt: str = _FORMAT,
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level (family-wise, Holm)."),
    outputs: Optional[Path] = _OUTPUTS,
) -> None:
    """Run B vs. run A, metric by metric, in Markdown for a pull-request comment (or JSON).

    The dashboard's statistics: paired tests on per-item results, Holm-adjusted, after checking per metric
    family that the runs measured the same thing; what is not comparable is reported as such, with no winner."""
    from ragnb.runs import gate
    from ragnb.runs.compare import choose_runs, compare_runs

    if fmt not in ("md", "json"):
        fail(f"--format {fmt!r}: use md or json")
    shown, gated = _names(metrics, "--metrics"), _names(fail_if_worse, "--fail-if-worse")
    folder = _outputs(outputs)
    runs = _runs(folder)
    try:
        a, b = choose_runs(runs, folder, run_a or "", run_b or "")
        if a is None or b is None:
            fail(f"need two runs to compare; {folder} has {len(runs)} with metrics (`ragnb runs list`)")
        comparison = compare_runs(runs, folder, a, b, alpha=alpha, metrics=gate.compared_patterns(shown, gated))
        gate.check_names(shown, comparison, "--metrics")
        gate.check_names(gated, comparison, "--fail-if-worse")
        result = gate.gate(comparison, gated, allow_missing,
                           gate.MAX_FAILED if max_failed is None else max_failed)
    except ValueError as exc:
        fail(exc)
    if shown:  # the table shows --metrics; gated metrics and their page-level stand-ins are compared regardless
        stand_ins = {s["page_level"] for s in result.substituted}
        keep = comparison.table["metric"].map(lambda m: gate.matches(m, shown) or m in stand_ins)
        comparison.table = comparison.table[keep.astype(bool)]
    if fmt == "json":
        print_json(gate.to_json(comparison, result))
    else:
        typer.echo(gate.to_markdown(comparison, result))
    if result.outcome == "not comparable":
        typer.secho(f"--fail-if-worse: {result.message}", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(EXIT_NOT_COMPARABLE)
    if result.outcome in ("worse", "too many failed", "missing"):
        typer.secho(f"--fail-if-worse: {result.message}", fg=typer.colors.RED, err=True)
        raise typer.Exit(EXIT_FAILED)
