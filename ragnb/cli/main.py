"""The ``ragnb`` command: database, loading, embedding, retrieval runs, metrics and notebook reports."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click
import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},  # -h everywhere, as on `ragnb run`
                  help="Benchmark Retrieval-Augmented-Generation systems from Jupyter notebooks.")
db_app = typer.Typer(no_args_is_help=True, help="The database: embedded PostgreSQL + pgvector, or RAGNB_DATABASE_URL.")
load_app = typer.Typer(no_args_is_help=True, help="Load chunks or question logs (JSONL, CSV, Parquet; chunks also from a folder).")
metrics_app = typer.Typer(no_args_is_help=True, help="Compute metrics of external results.")
app.add_typer(db_app, name="db")
app.add_typer(load_app, name="load")
app.add_typer(metrics_app, name="metrics")

from ragnb.embeddings.base import encode_queries
from ragnb.cli.dataset import dataset_app  # noqa: E402  (its own module: the dataset modes are many)
from ragnb.cli.runs import compare_command, runs_app  # noqa: E402
from ragnb.cli.run import STANDALONE_HELP  # noqa: E402

app.add_typer(dataset_app, name="dataset")
app.add_typer(runs_app, name="runs")
app.command("compare")(compare_command)


from ragnb.cli.common import fail as _fail, print_json as _print_json  # noqa: E402  (one of each for every command)


# ------------------------------------------------------------------------------------------ db


@db_app.command("up")
def db_up() -> None:
    """Start the embedded server (or attach to the running one) and create the ragnb tables."""
    from ragnb import config
    from ragnb.store.engine import connect, embedded_status
    from ragnb.store.schema import ensure_schema

    if config.database_url():
        typer.echo("RAGNB_DATABASE_URL is set: ragnb uses that server; the embedded one is not needed.")
        return
    db = connect()
    ensure_schema(db)
    status = embedded_status()
    typer.echo(f"embedded PostgreSQL running (pid {status['pid']}), data in {status['pgdata']}")
    typer.echo(db.display_url)


@db_app.command("down")
def db_down() -> None:
    """Stop the embedded server (its data stays in the data directory)."""
    from ragnb.store.engine import stop_embedded

    typer.echo("stopped" if stop_embedded() else "not running")


@db_app.command("status")
def db_status() -> None:
    """Where the data is, whether the server runs, how many rows are loaded, and every embedding model per table
    (dimension, where its vectors are, how many rows have one)."""
    from ragnb import config
    from ragnb.store.engine import connect, embedded_status
    from ragnb.store.loaders import count_rows
    from ragnb.store.models import model_status

    out: dict = {"external": bool(config.database_url())}
    if not out["external"]:
        out["embedded"] = embedded_status()
        if not out["embedded"]["running"]:
            _print_json(out)
            return
    try:
        db = connect()
        out["url"] = db.display_url
        for which in ("chunks", "questions"):
            out[which] = count_rows(db, which)
            if out[which]["rows"]:
                out[which]["models"] = model_status(db, which)
    except Exception as exc:  # noqa: BLE001 - status reports what is wrong instead of failing
        out["error"] = str(exc)
    _print_json(out)


@db_app.command("reset")
def db_reset(
    database: Optional[str] = typer.Option(None, "--database", help="Which database of the embedded server "
                                           "(default: RAGNB_EMBEDDED_DB, else ragnb; the demo's is ragnb_demo)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete everything loaded into a database of the embedded server — chunks, question logs, every model's
    vectors — so the next `ragnb load` starts empty. Never touches an external RAGNB_DATABASE_URL."""
    from ragnb import config
    from ragnb.cli.common import confirm
    from ragnb.store.engine import drop_embedded_database, embedded_databases

    # Like dropdb: the database to drop is named exactly, or defaults only when no name is given — an empty
    # --database (an unset $VAR in a script) never falls back to the default database.
    if database is not None and not database.strip():
        _fail("--database is empty; name the embedded database to reset (e.g. --database ragnb_demo), or leave "
              "the option out to reset RAGNB_EMBEDDED_DB's (default ragnb). Nothing was changed")
    if config.database_url():  # whatever --database says: the name could as well mean a database of that server
        _fail(f"RAGNB_DATABASE_URL is set ({config.redact_url(config.database_url())}): ragnb never deletes data "
              "in an external database. Empty its tables with your own tools, or run `ragnb db reset` without "
              "RAGNB_DATABASE_URL in the environment to reset a database of the embedded server")
    name = database if database is not None else config.embedded_database_name()
    known = embedded_databases()
    if name not in known:
        _fail(f"the embedded server has no database {name!r}; its databases: {', '.join(known) or '(none)'}")
    confirm(f"delete every chunk, question and vector in the embedded database {name!r}?", yes)
    drop_embedded_database(name)
    typer.echo(f"database {name!r} dropped; the next command recreates it empty")


@db_app.command("url")
def db_url() -> None:
    """Print the connection URL (password hidden)."""
    from ragnb.store.engine import connect

    typer.echo(connect().display_url)


@db_app.command("index")
def db_index(
    drop: bool = typer.Option(False, "--drop", help="Drop the HNSW index instead of creating it."),
    m: Optional[int] = typer.Option(None, help="HNSW: links per node (default: 16)."),
    ef_construction: Optional[int] = typer.Option(None, help="HNSW: candidate list size while building (default: 64, "
                                                  "or 128 from 300,000 vectors, where 64 was measured to fall short "
                                                  "of recall 0.95)."),
    write: bool = typer.Option(False, "--write", help="Allow writing to an external RAGNB_DATABASE_URL."),
    model: Optional[str] = typer.Option(None, "--model", help="Whose chunk vectors (a name `ragnb db status` lists; "
                                        "default: the default model's)."),
) -> None:
    """Create (or drop) an HNSW cosine index on one model's chunk vectors; Tier 1 then reports its recall vs exact."""
    from ragnb.rag.index_build import create_hnsw_index, drop_hnsw_indexes, hnsw_options
    from ragnb.store.engine import connect

    try:
        db = connect(write=write)
        if drop:
            typer.echo(f"dropped: {drop_hnsw_indexes(db, model=model)}")
            return
        before = hnsw_options(db, model=model)
        name = create_hnsw_index(db, m=16 if m is None else m, ef_construction=ef_construction, model=model)
        built = hnsw_options(db, model=model) or {}
        line = f"index ready: {name} (m {built.get('m')}, ef_construction {built.get('ef_construction')})"
        asked = {"m": m, "ef_construction": ef_construction}
        if before is not None and any(v is not None and before[k] != v for k, v in asked.items()):
            line += (" — it was there already, built with these settings; drop it (`ragnb db index --drop`) and run "
                     "this again to build it with yours")
        typer.echo(line)
    except ValueError as exc:
        _fail(exc)


# ---------------------------------------------------------------------------------------- load


def _parse_map(spec: str | None) -> dict[str, str]:
    from ragnb.io import comma_list

    out = {}
    for part in comma_list(spec, "--map"):
        field, sep, column = part.partition("=")
        if not sep or not field.strip() or not column.strip():
            raise ValueError(f"--map {spec!r}: write FIELD=COLUMN pairs separated by commas, e.g. id=doc_id,url=link")
        out[field.strip()] = column.strip()
    return out


def _load(kind: str, path: Path, mapping: str | None, chunk_size: int, overlap: int, write: bool,
          date_format: str | None = None, update: bool = False, url_template: str | None = None) -> None:
    from ragnb.urls import url_match, url_match_warning
    from ragnb.store.engine import connect
    from ragnb.store.loaders import load_file, stored_urls

    try:
        db = connect(write=write)
        stats = load_file(db, kind, path, _parse_map(mapping), chunk_size, overlap, date_format=date_format,
                          update=update, url_template=url_template)
        # Once both tables are loaded: do the logged URLs name pages the chunks have? (else no relevance labels)
        logged, chunk_urls = stored_urls(db, "questions"), stored_urls(db, "chunks")
    except ValueError as exc:
        _fail(exc)
    out = stats.as_dict()
    if logged and chunk_urls:
        match = url_match(logged, chunk_urls)
        out["url_match"] = {"logged_urls": match["logged"], "matched": match["matched"]}
        warning = url_match_warning(match)
        if warning:
            stats.warnings.append(warning)
    for warning in stats.warnings:
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
    _print_json(out)


_WRITE = typer.Option(False, "--write", help="Allow writing to an external RAGNB_DATABASE_URL (read-only otherwise).")
_QUERY_PROMPT = typer.Option(None, "--query-prompt", help="Text put before each query (question) for this model, "
                             "replacing its own prompt; '' = none. Recorded with the vectors.")
_DOCUMENT_PROMPT = typer.Option(None, "--document-prompt", help="Text put before each document (chunk) for this "
                                "model, replacing its own prompt; '' = none. Recorded with the vectors.")
_INPUT_TYPE = typer.Option(None, "--input-type", help="Endpoint models: the input_type sent for queries and "
                           "documents, QUERY,DOCUMENT (e.g. query,document or search_query,search_document).")
_DIMENSIONS = typer.Option(None, "--dimensions", help="Endpoint models: ask for vectors this long (>= 1).")


def _model_settings(query_prompt: Optional[str], document_prompt: Optional[str], input_type: Optional[str],
                    dimensions: Optional[int]) -> dict:
    """The query/document settings given on the command line (those not given: the environment's)."""
    given = {"query_prompt": query_prompt, "document_prompt": document_prompt, "input_type": input_type,
             "dimensions": dimensions}
    if dimensions is not None and dimensions < 1:
        _fail(f"--dimensions {dimensions}: give a positive vector length (e.g. 1024)")
    return {k: v for k, v in given.items() if v is not None}
_UPDATE = typer.Option(False, "--update", help="Overwrite rows whose id is already stored with a different text "
                       "(listed in the output); without it such a row is an error.")
_MAP = typer.Option(None, "--map", help="Files only: which column holds which field, FIELD=COLUMN pairs, e.g. "
                    "text=Содержание,url=link (fields: chunks id, text, url; questions id, question, answer, url, "
                    "score, user_id, session_id, created_at).")


@load_app.command("chunks")
def load_chunks(
    path: Path = typer.Argument(..., help="A .jsonl/.csv/.parquet file, or a folder of .md/.markdown/.txt pages "
                                "(YAML front matter read)."),
    mapping: Optional[str] = _MAP,
    url_template: Optional[str] = typer.Option(
        None, "--url-template", help="Folder only: each page's URL, e.g. 'https://wiki.example.com/{path}'. "
        "Placeholders: {path} relative path without suffix (ops/vpn), {relpath} with suffix, {stem} file name "
        "without suffix, {name} file name, {title} front-matter title or first heading, {id} front-matter id. "
        "A page's front-matter url wins. Default: the relative path."),
    chunk_size: int = typer.Option(200, help="Folder only: words per chunk."),
    overlap: int = typer.Option(40, help="Folder only: words shared by consecutive chunks."),
    write: bool = _WRITE,
    update: bool = _UPDATE,
) -> None:
    """Load chunks (id, text, url). A folder's pages may start with YAML front matter (url, title, id). Rows
    already present (same id, same text) are skipped, taking the file's url (urls_updated)."""
    _load("chunks", path, mapping, chunk_size, overlap, write, update=update, url_template=url_template)


@load_app.command("questions")
def load_questions(
    path: Path = typer.Argument(..., help="A .jsonl/.csv/.parquet question log."),
    mapping: Optional[str] = _MAP,
    write: bool = _WRITE,
    update: bool = _UPDATE,
    date_format: Optional[str] = typer.Option(
        None, "--date-format", help="strftime pattern of created_at, e.g. '%d.%m.%Y %H:%M' (ISO 8601 only without it)."),
) -> None:
    """Load a question log (question, answer, url, score 1–5, user_id, session_id, created_at); warns when its
    URLs name no page of the loaded chunks."""
    _load("questions", path, mapping, 200, 40, write, date_format=date_format, update=update)


# --------------------------------------------------------------------------------------- embed


@app.command()
def embed(
    chunks: bool = typer.Option(False, "--chunks", help="Embed chunks."),
    questions: bool = typer.Option(False, "--questions", help="Embed logged questions."),
    model: Optional[str] = typer.Option(None, "--model", help="Embedding model: all-MiniLM-L6-v2, "
                                        "multilingual-e5-small, a sentence-transformers folder, or endpoint:<model id> "
                                        "(default: RAGNB_EMBEDDING_MODEL, else all-MiniLM-L6-v2)."),
    batch_size: Optional[int] = typer.Option(None, help="Texts per encoder batch (per request for an endpoint "
                                             "model); >= 1. Default: 32 on the CPU, 256 on a GPU, 32 per request."),
    replace: bool = typer.Option(False, "--replace", help="Re-embed every row of this model; its old vectors are "
                                 "replaced in one transaction once all new ones are encoded, so a failure keeps "
                                 "them (other models' vectors stay)."),
    query_prompt: Optional[str] = _QUERY_PROMPT,
    document_prompt: Optional[str] = _DOCUMENT_PROMPT,
    input_type: Optional[str] = _INPUT_TYPE,
    dimensions: Optional[int] = _DIMENSIONS,
    default: bool = typer.Option(False, "--default", help="Make this model the tables' default (read by "
                                 "whatever names no model); the previous default's vectors "
                                 "move beside it. Default: the first model embedded into a table."),
    write: bool = _WRITE,
) -> None:
    """Embed rows that have no vector of the model yet; another model's vectors are added beside the existing ones,
    never replacing them. Prints total / processed / skipped / errors and where the vectors went per table."""
    from ragnb.embeddings.models import get_encoder
    from ragnb.store.engine import connect
    from ragnb.store.vectors import embed_table

    if not (chunks or questions):
        _fail(ValueError("say what to embed: --chunks, --questions or both"))
    if batch_size is not None and batch_size < 1:
        _fail(f"--batch-size {batch_size}: give a positive number of texts per batch (default 32 on the CPU, 256 on "
              "a GPU)")
    try:
        settings = _model_settings(query_prompt, document_prompt, input_type, dimensions)
        db = connect(write=write)
        encoder = get_encoder(model, **settings)
        for which, wanted in (("chunks", chunks), ("questions", questions)):
            if wanted:
                stats = embed_table(db, which, encoder, batch_size=batch_size, replace=replace).as_dict()
                if default:
                    from ragnb.store.default_model import make_default
                    from ragnb.store.models import locate

                    previous = make_default(db, which, encoder.name)["previous"]
                    stats = {**stats, "storage": locate(db, which).storage, "previous_default": previous}
                _print_json(stats)
    except ValueError as exc:
        _fail(exc)


# ------------------------------------------------------------------------------------ retrieve


@app.command()
def retrieve(
    out: Path = typer.Option(..., "--out", help="TREC run file to write."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="Dataset JSON (default: the demo questions)."),
    qrels_out: Optional[Path] = typer.Option(None, "--qrels-out", help="Also write the dataset's qrels (TREC format)."),
    top_k: int = typer.Option(100, "--top-k", help="Chunks per question."),
    backend: str = typer.Option("pgvector", help="pgvector or memory."),
    index_mode: str = typer.Option("auto", help="pgvector: auto, exact or hnsw."),
    language: str = typer.Option("ru", help="Demo only: ru or en."),
    tag: str = typer.Option("ragnb", help="Run tag in the TREC file."),
    target_recall: float = typer.Option(0.95, "--target-recall", help="Through an HNSW index: search at the smallest "
                                        "ef_search (40 ... 1000) whose recall@top-k vs exact search on 200 seeded "
                                        "questions reaches this, else exactly (0: ef_search 40, recall reported)."),
    ann_time_budget: float = typer.Option(120.0, "--ann-time-budget", help="Seconds the index searches of that "
                                          "choice may take before falling back to exact search."),
    model: Optional[str] = typer.Option(None, "--model", help="Embedding model: its query encoder searches its own "
                                        "stored chunk vectors (default: RAGNB_EMBEDDING_MODEL or all-MiniLM-L6-v2)."),
    query_prompt: Optional[str] = _QUERY_PROMPT,
    document_prompt: Optional[str] = _DOCUMENT_PROMPT,
    input_type: Optional[str] = _INPUT_TYPE,
    dimensions: Optional[int] = _DIMENSIONS,
) -> None:
    """Retrieve top-k for every dataset question and export the ranking as a TREC run file (in the order Tier 1
    evaluates it; tied scores are lowered by one float32 step so trec_eval keeps that order)."""
    from ragnb import config
    from ragnb.datasets import trec
    from ragnb.datasets.corpus import open_corpus, open_dataset
    from ragnb.rag.ann_tune import check_target, checked_recall, choose_ef_search, tuning_label
    from ragnb.rag.retrieval import ann_recall, ann_recall_label, ann_recall_note

    try:
        corpus = "db" if dataset else "demo"
        settings = _model_settings(query_prompt, document_prompt, input_type, dimensions)
        ctx = open_corpus(corpus, language, model or "",
                          {model or config.embedding_model_name(): settings} if settings else "")
        ds = open_dataset(str(dataset) if dataset else "", corpus, language)
        retriever = ctx.retriever(backend, index_mode)
        check_target(target_recall or None, ann_time_budget)
        queries = encode_queries(ctx.encoder, [it.question for it in ds.items])
        choice = None
        if getattr(retriever, "mode", None) == "hnsw" and target_recall:  # the setting that reaches the target
            choice = choose_ef_search(retriever, queries, top_k, target_recall, ann_time_budget)
            retriever = choice.retriever
        res = retriever.search(queries, top_k)
        checked = ""
        if choice is not None and choice.ef_search is None:
            checked = f"; {tuning_label(choice.info)}"
        elif getattr(retriever, "mode", None) == "hnsw":  # an approximate ranking says what it lost
            info = ({**choice.info, **checked_recall(choice, res, top_k)} if choice
                    else ann_recall(retriever, queries, res, top_k))
            checked = (f" at ef_search {retriever.ef_search}; " + ann_recall_label(info)
                       + (f". {ann_recall_note(info)}" if ann_recall_note(info) else ""))
        # The ranking Tier 1 evaluates (ties by chunk id), its scores made strictly decreasing so that
        # trec_eval, which re-sorts by score (ties by doc id descending), reads the same order.
        run = {it.id: list(zip(ids, map(float, sc))) for it, ids, sc in zip(ds.items, res.ids, res.scores)}
        trec.write_run(run, out, tag=tag)
        if qrels_out:
            trec.write_qrels(ds.qrels(), qrels_out)
    except ValueError as exc:
        _fail(exc)
    typer.echo(f"wrote {out} ({len(ds.items)} questions, {res.backend}{checked})")


# ------------------------------------------------------------------------------------- metrics


@metrics_app.command("retrieval")
def metrics_retrieval(
    run: Path = typer.Option(..., "--run", help="TREC run file (qid Q0 docid rank score tag)."),
    qrels: Path = typer.Option(..., "--qrels", help="TREC qrels (qid 0 docid rel) or BEIR TSV."),
    metrics: str = typer.Option("hit_rate@1,hit_rate@5,hit_rate@10,mrr,recall@5,precision@5,ndcg@10", "--metrics",
                                help="Comma-separated canonical names."),
    relevance_level: int = typer.Option(1, "--relevance-level", "-l",
                                        help="Lowest relevant grade, as trec_eval's -l: a grade below it is not "
                                             "relevant (nDCG still gains from every positive grade)."),
) -> None:
    """Aggregate retrieval metrics of any run as JSON (mean, ci95, n, n_valid, n_failed per metric)."""
    from ragnb.datasets import trec
    from ragnb.io import comma_list

    try:
        summary = trec.evaluate_files(run, qrels, comma_list(metrics, "--metrics"), relevance_level=relevance_level)
    except ValueError as exc:
        _fail(exc)
    for note in summary["_info"]["notes"]:
        typer.secho(f"note: {note}", err=True)
    _print_json(summary)


# ---------------------------------------------------------------------------------- run / demo


def _report(result) -> None:
    """Failures, and exit 1 after any (the runner has already printed the run's status and index page)."""
    from ragnb.cli.run import report_run

    report_run(result, "failure")


@app.command()
def demo(
    language: str = typer.Option("ru", help="ru (original) or en (parallel English text)."),
    params_file: Path = typer.Option(Path("params/demo.yaml"), "--params-file", "-f", help="Notebook parameters."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Resume an interrupted demo run."),
    reference: bool = typer.Option(True, "--reference/--no-reference",
                                   help="First record a Tier 1 run on the same questions with all-MiniLM-L6-v2 "
                                        "only. It differs from the main run only in the embedding model, so the "
                                        "dashboard compares the two runs and names the better model."),
    standalone: bool = typer.Option(False, "--standalone", help=STANDALONE_HELP),
) -> None:
    """The main job on the embedded defaults: load and embed the bundled corpus, run every report, print the index."""
    from ragnb.datasets.demo import DEMO_MODELS, ensure_demo
    from ragnb.embeddings.models import get_encoder
    from ragnb.runs import warmup
    from ragnb.runs.record import check_run_id
    from ragnb.runs.runner import run_notebooks
    from ragnb.spec import TIERS

    warm_ups = warmup.start(t.stem for t in TIERS)  # while the demo's texts are loaded and embedded
    try:
        if language not in DEMO_MODELS:
            raise ValueError(f"--language {language!r}; the demo has {', '.join(DEMO_MODELS)}")
        if run_id is not None:  # before minutes of loading and embedding, not after
            check_run_id(run_id)
        models = DEMO_MODELS[language]
        db, stats = ensure_demo(language, [get_encoder(m) for m in models])
        typer.echo(f"demo database {db.display_url}")
        typer.echo(f"  loaded: {stats['chunks_inserted']} new chunks ({stats['chunks_skipped']} already there, kept), "
                   f"{stats['questions_inserted']} new questions ({stats['questions_skipped']} already there)")
        for model, tables_ in stats["models"].items():
            for s in tables_.values():
                typer.echo(f"  {s['table']} ({model}): {s['total']} rows, {s['processed']} embedded now, "
                           f"{s['skipped']} already embedded, {s['errors']} errors")
        file = str(params_file) if params_file.exists() else None
        if reference and run_id is None and len(models) > 1:
            typer.echo(f"reference run: Tier 1 on the same questions with {models[-1]} only (the dashboard compares "
                       f"it with this run's {models[0]})")
            ref = run_notebooks(["tier1"], {"language": language, "tier1.embedding_model": models[-1],
                                            "tier1.embedding_models": ""}, params_file=file,
                                standalone=standalone, log=typer.echo)
            if ref.failures:
                _report(ref)
        result = run_notebooks([t.name for t in TIERS], {"language": language}, params_file=file, run_id=run_id,
                               standalone=standalone, log=typer.echo)
    except ValueError as exc:  # a full disk is no input error: exit 1, as for a failed notebook
        from ragnb.cli.common import EXIT_FAILED, EXIT_USAGE
        from ragnb.io import DiskFullError

        _fail(exc, EXIT_FAILED if isinstance(exc, DiskFullError) else EXIT_USAGE)
    finally:
        warmup.stop(warm_ups)
    _report(result)


def build_cli() -> click.Group:
    """The whole command tree (typer commands plus the click ``run`` command with repeatable ``-p NAME VALUE``)."""
    from ragnb.cli.run import run_command

    from ragnb.cli.common import database_errors_as_messages

    group = typer.main.get_group(app)
    group.add_command(run_command, "run")
    database_errors_as_messages(group)
    return group


def main() -> None:
    from ragnb import progress

    progress.show_on_stderr()  # long steps of the command print progress lines (ragnb.progress)
    build_cli()(prog_name="ragnb")


if __name__ == "__main__":
    main()
