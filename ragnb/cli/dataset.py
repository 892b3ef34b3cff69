"""``ragnb dataset …``: build benchmark datasets. The logic is in :mod:`ragnb.datasets` (one module per mode,
shared output handling in :mod:`ragnb.datasets.build`).

Every command writes one JSON file (``--output FILE``, or a timestamped name in ``--out-dir``, default
``<outputs>/datasets``), prints ``wrote <path>`` and a JSON report of counts; warnings go to stderr. Bad
input → ``error: …`` on stderr, exit code 2, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

dataset_app = typer.Typer(no_args_is_help=True, help="Build benchmark datasets (synthetic, real questions, annotation, judge pipeline).")

_OUT_DIR = typer.Option(None, "--out-dir", help="Folder for the timestamped file (default: <outputs>/datasets).")
_OUTPUT = typer.Option(None, "--output", help="Write exactly this .json file instead.")
_CORPUS = typer.Option("db", "--corpus", help="db (the configured database) or demo (bundled XQuAD).")
_LANGUAGE = typer.Option("ru", "--language", help="ru or en: the demo corpus' language; synthetic: the questions' language.")
_EMBEDDING = typer.Option("", "--embedding-model", help="Encoder of the stored vectors (default: RAGNB_EMBEDDING_MODEL or all-MiniLM-L6-v2).")


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def _finish(result, out_dir: Optional[Path], output: Optional[Path], inputs: tuple = ()) -> None:
    from ragnb.datasets.build import resolve_output, write_result

    path = write_result(result, resolve_output(result.prefix, out_dir, output, inputs))
    for warning in result.warnings:
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
    typer.echo(f"wrote {path}")
    typer.echo(json.dumps({"path": str(path), "type": result.dataset.type, **result.report},
                          ensure_ascii=False, indent=2, default=str))


def _real_questions(max_questions: int, exact_score: Optional[int], corpus: str, language: str, top_k: int,
                    backend: str, embedding_model: str, out_dir: Optional[Path], output: Optional[Path]) -> None:
    from ragnb.datasets.build import open_dataset_corpus, resolve_output
    from ragnb.datasets.real_questions import generate_from_real_questions

    try:
        resolve_output("check", out_dir, output)  # a bad --output fails before any work
        ctx = open_dataset_corpus(corpus, language, embedding_model)
        result = generate_from_real_questions(ctx, max_questions, exact_score=exact_score, top_k=top_k, backend=backend)
        _finish(result, out_dir, output)
    except ValueError as exc:
        _fail(exc)


@dataset_app.command("synthetic")
def synthetic(
    max_questions: int = typer.Option(..., "--max-questions", help="Chunks to write a question for (a seeded sample)."),
    language: str = _LANGUAGE,
    model: str = typer.Option("", "--model", help="LLM model id (default: RAGNB_GENERATION_MODEL, else the first of RAGNB_JUDGE_MODELS)."),
    corpus: str = _CORPUS,
    seed: int = typer.Option(0, "--seed", help="Seed of the chunk sample."),
    concurrency: int = typer.Option(8, "--concurrency", help="LLM requests in flight at once."),
    embedding_model: str = _EMBEDDING,
    out_dir: Optional[Path] = _OUT_DIR,
    output: Optional[Path] = _OUTPUT,
) -> None:
    """An LLM writes a question and its reference answer for each sampled chunk (needs RAGNB_LLM_BASE_URL)."""
    from ragnb.datasets.build import open_dataset_corpus, resolve_output
    from ragnb.datasets.synthetic import generate_synthetic, require_llm, resolve_generation_model
    from ragnb.llm.setup import open_llm

    try:
        resolve_output("check", out_dir, output)
        if concurrency < 1:
            raise ValueError(f"--concurrency {concurrency}: use 1 or more")
        llm = open_llm(max_concurrency=concurrency)
        client = require_llm(llm)  # before opening the corpus: a missing endpoint fails fast
        model_id = resolve_generation_model(model)
        ctx = open_dataset_corpus(corpus, language, embedding_model)
        result = generate_synthetic(ctx, client, model_id, max_questions, language=language, seed=seed,
                                    endpoint=llm.endpoint, progress=True)
        _finish(result, out_dir, output)
    except ValueError as exc:
        _fail(exc)


def _real_questions_command(name: str, exact_score: int | None, which: str, doc: str) -> None:
    """Register one of the two real-question modes (they differ only in the score filter)."""

    def command(
        max_questions: int = typer.Option(..., "--max-questions", help=f"First N {which} with an embedding (0: all)."),
        corpus: str = _CORPUS,
        language: str = _LANGUAGE,
        top_k: int = typer.Option(5, "--top-k", help="Chunks retrieved per question."),
        backend: str = typer.Option("pgvector", "--backend", help="pgvector (exact search in the database) or memory."),
        embedding_model: str = _EMBEDDING,
        out_dir: Optional[Path] = _OUT_DIR,
        output: Optional[Path] = _OUTPUT,
    ) -> None:
        _real_questions(max_questions, exact_score, corpus, language, top_k, backend, embedding_model, out_dir, output)

    command.__doc__ = doc
    dataset_app.command(name)(command)


_real_questions_command("from-real-questions", None, "logged questions",
                        "Logged user questions + top-k retrieval; is_relevant_chunk_matched by the logged url's page id.")
_real_questions_command("from-real-questions-score-5", 5, "score-5 questions",
                        "As from-real-questions, only questions whose user score is 5.")


_FORMAT = typer.Option(None, "--format", help="json or csv (default: from the file's suffix; .csv → csv, else json). "
                       "CSV: one row per item for Excel/LibreOffice, list cells one id per line (docs/datasets.md).")


@dataset_app.command("export-annotation")
def export_annotation(
    dataset: Path = typer.Option(..., "--dataset", help="Dataset to review (.json, or an annotation .csv)."),
    fmt: Optional[str] = _FORMAT,
    out_dir: Optional[Path] = _OUT_DIR,
    output: Optional[Path] = typer.Option(None, "--output", help="Write exactly this .json or .csv file instead."),
) -> None:
    """Copy a dataset with review fields (is_question_ok, is_answer_ok, is_chunk_ok, is_confluence_url_ok, notes),
    as JSON or as CSV for a spreadsheet."""
    from ragnb.datasets.annotation import export_annotation as export, read_annotation
    from ragnb.datasets.annotation_csv import pick_format, write_annotation_csv
    from ragnb.datasets.build import FILE_PREFIX, resolve_output

    try:
        fmt = pick_format(output if output is not None else "x.json", fmt, "--format")
        if fmt == "json":
            resolve_output("check", out_dir, output, (dataset,))
            _finish(export(read_annotation(dataset), dataset), out_dir, output, (dataset,))
            return
        path = resolve_output(FILE_PREFIX["export-annotation"], out_dir, output, (dataset,), suffix=".csv")
        result = export(read_annotation(dataset), dataset)
        write_annotation_csv(result.dataset, path)
        typer.echo(f"wrote {path}")
        typer.echo(json.dumps({"path": str(path), "type": result.dataset.type, "format": "csv", **result.report},
                              ensure_ascii=False, indent=2, default=str))
    except ValueError as exc:
        _fail(exc)


def _chunk_lookup(corpus: str, language: str):
    """Opens the chunks of ``--corpus`` (only when a review needs them: a corrected url, a rejected page)."""

    def open_chunks():
        from ragnb.datasets.annotation_chunks import ChunkLookup
        from ragnb.datasets.corpus import CORPORA
        from ragnb.datasets.demo import database_name
        from ragnb.store.engine import connect

        if corpus not in CORPORA:
            raise ValueError(f"--corpus {corpus!r}: use 'db' (the configured database) or 'demo' (the bundled XQuAD)")
        return ChunkLookup.from_db(connect() if corpus == "db" else connect(database=database_name(language)))

    return open_chunks


@dataset_app.command("import-annotation")
def import_annotation(
    annotation: Path = typer.Option(..., "--annotation", help="Reviewed annotation file (.json or .csv)."),
    fmt: Optional[str] = _FORMAT,
    drop_rejected: bool = typer.Option(True, "--drop-rejected/--keep-rejected",
                                       help="Drop rejected items, or keep them marked review_status=rejected."),
    drop_unreviewed: bool = typer.Option(False, "--drop-unreviewed", help="Also drop items nobody reviewed."),
    corpus: str = typer.Option("db", "--corpus", help="Where the chunks are, for corrected urls and rejected pages: "
                               "db (the configured database) or demo (opened only when a review needs it)."),
    language: str = _LANGUAGE,
    out_dir: Optional[Path] = _OUT_DIR,
    output: Optional[Path] = _OUTPUT,
) -> None:
    """Apply a review: drop rejected items, use corrections (a corrected url recomputes the relevant chunks);
    writes dataset_import_annotation_*.json and a change report."""
    from ragnb.datasets.annotation import import_annotation as apply_review
    from ragnb.datasets.build import resolve_output

    try:
        resolve_output("check", out_dir, output, (annotation,))
        result = apply_review(annotation, drop_rejected=drop_rejected, drop_unreviewed=drop_unreviewed, fmt=fmt,
                              chunks=_chunk_lookup(corpus, language))
        _finish(result, out_dir, output, (annotation,))
    except ValueError as exc:
        _fail(exc)


@dataset_app.command("judge-pipeline")
def judge_pipeline(
    from_file: Optional[Path] = typer.Option(None, "--from", help="CSV/JSON/JSONL with question, answer, ground_truth_show (yes/no, true/false, 1/0)."),
    from_annotation: Optional[Path] = typer.Option(None, "--from-annotation", help="Reviewed question-log annotation: is_answer_ok becomes ground_truth_show."),
    out_dir: Optional[Path] = _OUT_DIR,
    output: Optional[Path] = _OUTPUT,
) -> None:
    """The show/no-show dataset of the Tier Judge Pipeline notebook (its dataset_path parameter)."""
    from ragnb.datasets import judge_pipeline as jp
    from ragnb.datasets.build import resolve_output

    try:
        if (from_file is None) == (from_annotation is None):
            raise ValueError("give exactly one of --from FILE or --from-annotation FILE")
        source = from_file or from_annotation
        resolve_output("check", out_dir, output, (source,))
        result = (jp.judge_pipeline_from_file(from_file) if from_file is not None
                  else jp.judge_pipeline_from_annotation(from_annotation))
        _finish(result, out_dir, output, (source,))
    except ValueError as exc:
        _fail(exc)


_SCORES = typer.Option(..., "--scores", help="Per-item table of judge scores (.parquet, .csv, .json, .jsonl) with an "
                       "item_id or id column, e.g. a run's <notebook>.per_item.csv.")
_SCORE = typer.Option(..., "--score", help="The column of the judge's score (NaN/empty = a failed verdict).")
_OTHERS = typer.Option([], "--other-score", help="Another judge's score column (repeatable): needed to estimate from "
                       "an active sheet of an earlier version, which drew the items the judges disagreed on (the "
                       "learned design of --active bins by --score alone).")
_BINARY = typer.Option(False, "--binary", help="The labels are yes/no (0/1); the judge's scores are in [0, 1].")


@dataset_app.command("label-plan")
def label_plan(
    scores: Path = _SCORES,
    score: str = _SCORE,
    budget: int = typer.Option(..., "--budget", help="How many items to label (active: the expected number)."),
    active: bool = typer.Option(False, "--active", help="Learn where the judge errs from the labels of earlier "
                                "uniform rounds (--labelled) and draw there (probabilities recorded, the estimate "
                                "weighted by them) when that is expected narrower than uniform; a first round is "
                                "uniform."),
    others: list[str] = _OTHERS,
    seed: int = typer.Option(0, "--seed", help="Seed of the draw."),
    labelled: list[Path] = typer.Option([], "--labelled", help="A filled sheet of an earlier round (repeatable): its "
                                        "labelled items are not drawn again."),
    out_dir: Optional[Path] = _OUT_DIR,
    output: Optional[Path] = typer.Option(None, "--output", help="Write exactly this .csv file instead."),
) -> None:
    """Pick the next items to label for a budget and write them as a CSV sheet to fill in (docs/ppi.md); prints the
    expected 95% interval widths after labelling (PPI and human-only)."""
    from ragnb.datasets.build import FILE_PREFIX, resolve_output
    from ragnb.datasets.label_estimate import read_rounds
    from ragnb.datasets.label_plan import plan, read_scores, write_sheet

    try:
        path = resolve_output(FILE_PREFIX["label-plan"], out_dir, output, (scores,), suffix=".csv")
        frame = read_scores(scores, score, tuple(others))
        sheets, done = read_rounds(labelled, None, len(frame)) if labelled else ([], {})
        result = plan(frame, score, budget, seed=seed, active=active, others=tuple(others), labelled=done,
                      earlier=[s.design["kind"] for s in sheets])
        write_sheet(result, path)
    except ValueError as exc:
        _fail(exc)
    typer.echo(f"wrote {path}")
    typer.echo(json.dumps({"path": str(path), **result.report}, ensure_ascii=False, indent=2))


@dataset_app.command("ppi")
def ppi(
    scores: Path = _SCORES,
    score: str = _SCORE,
    labels: list[Path] = typer.Option(..., "--labels", help="The sheet label-plan wrote, with human_label filled in "
                                      "(repeatable: every round's sheet)."),
    binary: bool = _BINARY,
    others: list[str] = _OTHERS,
    strata: Optional[str] = typer.Option(None, "--strata", help="Item column to stratify by (uniform design only)."),
    alpha: float = typer.Option(0.05, "--alpha", help="1 − confidence level (0.05: 95% intervals)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
) -> None:
    """Judge-only, human-only and prediction-powered (PPI++) estimates side by side, from the judge's scores and a
    filled label sheet; says which one to quote."""
    from ragnb.datasets.label_estimate import estimate_from_sheets
    from ragnb.datasets.label_plan import read_scores

    try:
        frame = read_scores(scores, score, tuple(others))
        if strata and strata not in frame.columns:
            raise ValueError(f"{scores}: no column {strata!r} (--strata)")
        result, report = estimate_from_sheets(frame, score, labels, binary=binary, alpha=alpha,
                                              others=tuple(others), strata=strata)
    except ValueError as exc:
        _fail(exc)
    if as_json:
        from ragnb.cli.common import print_json

        print_json({**report, **result.to_dict()})
        return
    typer.echo(f"{report['design']}: {report['labelled']} labelled of {report['rows']} rows"
               + (f" ({report['left_empty']} left empty)" if report["left_empty"] else ""))
    level = round(100 * (1 - alpha))
    for row in result.rows():
        mark = "→" if row["quote"] else " "
        ci = f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}]" if row["ci_low"] == row["ci_low"] else "[undefined]"
        extra = f"  λ={row['lambda']:.2f}" if row["lambda"] == row["lambda"] else ""
        extra += f"  worth {row['effective_n']:.0f} labels" if row["effective_n"] == row["effective_n"] else ""
        typer.echo(f"{mark} {row['estimate']:<16} {row['value']:.4f}  {level}% CI {ci}  n={row['n_labels']} "
                   f"N={row['N_items']} failed={row['n_failed']}{extra}" + (f"  ({row['note']})" if row["note"] else ""))
    typer.echo(f"quote: {result.quote[0]} — {result.quote[1]}")
