"""``ragnb run``: execute report notebooks; ``--list`` shows what they take; ``--fail-on attention`` gates CI."""

from __future__ import annotations

import os
from pathlib import Path

import click
import typer
import yaml

from ragnb.cli.common import EXIT_ATTENTION, EXIT_FAILED, ClickCommand, fail


STANDALONE_HELP = ("Self-contained HTML reports (plotly.js inside each, ~5 MB) to e-mail one file; by default "
                   "every run's reports share one copy in the outputs folder's assets/.")


def parse_value(text: str):
    """``-p top_k 10`` → 10; YAML scalars, so true/false, numbers and strings work as on papermill's CLI. A
    mapping or list (``-p embedding_model_options '{"endpoint:e5": {…}}'``) stays text: the notebook's declared
    type decides (a ``str`` parameter takes the JSON text as written, a ``dict`` one gets it parsed —
    :func:`ragnb.runs.params.merge_params`)."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, (dict, list)):
        return text
    return text if value is None and text.strip() not in ("null", "~") else value


def _notebook_listing() -> str:
    from ragnb.spec import TIERS

    return ("Notebooks (notebooks/<name>.ipynb): " + ", ".join(t.name for t in TIERS)
            + "; the long names of their output files (tier1_retrieval, …) work too. `ragnb run --list` shows "
              "their parameters.")


def describe_notebooks(nb_dir: Path | None = None) -> str:
    """Every notebook of :data:`ragnb.spec.TIERS` with its parameters: name, type, default and help, as its
    parameters cell declares them (``output_dir`` is the runner's)."""
    from ragnb.runs.params import declared_params, resolve
    from ragnb.runs.runner import notebooks_dir
    from ragnb.spec import TIERS

    folder = nb_dir or notebooks_dir()
    lines = []
    for tier in TIERS:
        nb = resolve([tier.name], folder)[0]
        lines.append(f"{tier.name}  ({tier.notebook}) — {tier.label}")
        for name, info in declared_params(nb).items():
            if name == "output_dir":
                continue
            help_text = f"  # {info['help']}" if info.get("help") else ""
            lines.append(f"    {name}: {info.get('inferred_type_name') or 'any'} = {info.get('default')}{help_text}")
        lines.append("")
    lines.append("Set them with -p NAME VALUE (every notebook that has NAME), -p tier1.NAME VALUE (one notebook) "
                 "or -f params.yaml.")
    return "\n".join(lines)


def attention_lines(record: dict) -> list[str]:
    """One line per graded metric of the run in the attention band (the record's own grading:
    :func:`ragnb.runs.record.record_statuses`): label, metric, value with CI, and the threshold — or the trivial
    baseline it does not beat (:func:`ragnb.spec.grade_of`)."""
    from ragnb import spec
    from ragnb.runs.record import format_aggregate, record_statuses

    out = []
    for key, name, value, status in record_statuses(record):
        if status != "attention":
            continue
        other = key.startswith("other:")
        block = (record.get("other_metrics") or {}).get(key[6:]) if other else record.get(key)
        bounds = spec.thresholds_of(name, None if other else key, block)
        label = key[6:] if other else spec.label_of(key)
        grade = spec.grade_of(bounds, value)
        why = f" — {grade.reason}" if grade.rule == "baselines" else (f" < {bounds[1]:g}" if bounds else "")
        out.append(f"{label}: {name} = {format_aggregate(value)}{why}")
    return out


def report_run(result, fail_on: str) -> None:
    """Print the outcome; exit 1 when a notebook failed, 3 when ``fail_on == "attention"`` and a graded metric
    needs attention."""
    for failure in result.failures:  # the runner has already printed the run's status and index page
        typer.secho(f"failed: {failure}", fg=typer.colors.RED, err=True)
    if result.failures:
        raise typer.Exit(EXIT_FAILED)
    if fail_on == "attention":
        lines = attention_lines(result.record)
        if lines:
            typer.secho(f"--fail-on attention: {len(lines)} graded metric(s) need attention:", fg=typer.colors.RED,
                        err=True)
            for line in lines:
                typer.secho(f"  {line}", err=True)
            raise typer.Exit(EXIT_ATTENTION)


@click.command("run", cls=ClickCommand, context_settings={"help_option_names": ["-h", "--help"]},
               epilog=_notebook_listing())
@click.argument("notebooks", nargs=-1)
@click.option("-p", "--parameter", "parameters", nargs=2, multiple=True, metavar="NAME VALUE",
              help="Notebook parameter (repeatable), e.g. -p top_k 10; -p tier1.top_k 10 for one notebook.")
@click.option("-f", "--params-file", type=click.Path(exists=True, dir_okay=False), help="YAML parameter file.")
@click.option("--run-id", help="Resume (or name) a run: finished notebooks of that run are skipped.")
@click.option("--outputs", type=click.Path(file_okay=False),
              help="Outputs folder (default: RAGNB_OUTPUTS, else outputs/ of the project).")
@click.option("--judge-models", help="Model sweep: comma-separated judge models; every combination with "
              "--generation-models runs and lands in the record's model_runs.")
@click.option("--generation-models", help="Model sweep: comma-separated generation models.")
@click.option("--fail-on", type=click.Choice(["failure", "attention"]), default="failure", show_default=True,
              help="failure: exit 1 when a notebook fails; attention: also exit 3 when a graded metric is in the "
                   "attention band of its thresholds (ungraded constant or few-item metrics never count).")
@click.option("--standalone", is_flag=True, help=STANDALONE_HELP)
@click.option("--retry-failed/--keep-failed", default=True, show_default=True,
              help="Resuming a --run-id: score items that failed (transient errors, unusable replies) again, or "
                   "keep them failed (sets RAGNB_RETRY_FAILED for the notebooks).")
@click.option("--list", "list_notebooks", is_flag=True, help="List the notebooks with their parameters and exit.")
def run_command(notebooks: tuple[str, ...], parameters: tuple[tuple[str, str], ...], params_file: str | None,
                run_id: str | None, outputs: str | None, judge_models: str | None, generation_models: str | None,
                fail_on: str, standalone: bool, retry_failed: bool, list_notebooks: bool) -> None:
    """Execute report notebooks (tier0, tier1, …) and write HTML, metrics JSON and the run record.

    Relative paths in parameters are read from the current folder and checked before the first notebook starts.
    """
    from ragnb.io import DiskFullError, comma_list
    from ragnb.runs.runner import run_notebooks

    if list_notebooks:
        typer.echo(describe_notebooks())
        return
    if not notebooks:
        raise click.UsageError("name the notebooks to run, e.g. `ragnb run tier1 tier2` (`ragnb run --list` "
                               "lists them)")
    params = {name: parse_value(value) for name, value in parameters}
    if not retry_failed:  # read by the item logs inside the kernels, which inherit this environment
        os.environ["RAGNB_RETRY_FAILED"] = "0"
    try:
        result = run_notebooks(list(notebooks), params, params_file=params_file, run_id=run_id, outputs=outputs,
                               judge_models=comma_list(judge_models, "--judge-models") or None,
                               generation_models=comma_list(generation_models, "--generation-models") or None,
                               standalone=standalone, log=typer.echo)  # flushed: a log shows it at once
    except DiskFullError as exc:  # not a usage error: the notebook that failed runs again on a resume
        fail(exc, EXIT_FAILED)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    report_run(result, fail_on)
