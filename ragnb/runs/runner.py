"""Execute tier notebooks with papermill, render them to HTML, and record the run.

Layout of one run (``outputs`` defaults to ``$RAGNB_OUTPUTS`` or ``./outputs``)::

    outputs/benchmark_runs.json             every run's record (JSON array, schema 2.0)
    outputs/runs/<run_id>/index.html        links to everything below, key metrics, summary
    outputs/runs/<run_id>/run_record.json   this run's record (also used to resume)
    outputs/runs/<run_id>/<stem>.ipynb      executed notebook (kept when it fails)
    outputs/runs/<run_id>/<stem>.html       rendered report, code hidden, offline
    outputs/runs/<run_id>/<stem>.metrics.json (+ .per_item.csv/.parquet) written by the notebook
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

import ragnb
from ragnb import config
from ragnb.reports.report import find_secret, notebook_to_html, write_index
from ragnb.runs.record import append_run_record, build_record, check_run_id, new_run_id
from ragnb.io import atomic_write_text, dumps_strict

# Short name → notebook stem, in the order `ragnb demo` runs them (the dashboard last: it reads the run record).
NOTEBOOKS: dict[str, str] = {
    "tier0": "tier0_embeddings", "tier1": "tier1_retrieval", "tier2": "tier2_generation", "tier3": "tier3_e2e",
    "judge": "tier_judge", "judge_pipeline": "tier_judge_pipeline", "rag_metrics": "rag_metrics",
    "ux": "tier_ux", "real_users": "real_users", "utilization": "utilization", "topics": "topic_coverage",
    "domain": "domain_analysis", "vector_space": "vector_space", "chunking": "chunking", "dashboard": "dashboard",
}
# Notebook stem → run-record block (seed 001 schema 2.0); other notebooks land in ``other_metrics``.
TIER_KEY: dict[str, str] = {
    "tier0_embeddings": "tier_0_metrics", "tier1_retrieval": "tier_1_metrics", "tier2_generation": "tier_2_metrics",
    "tier3_e2e": "tier_3_metrics", "tier_judge": "tier_judge_metrics", "tier_judge_pipeline": "tier_judge_pipeline_metrics",
    "tier_ux": "tier_ux_metrics", "real_users": "real_user_metrics", "utilization": "utilization_metrics",
    "topic_coverage": "topic_coverage_metrics", "domain_analysis": "domain_analysis_metrics",
}

# Notebook parameters a multi-model sweep sets per combination.
SWEEP_PARAMS = ("judge_models", "generation_model")
# Notebooks that run after the run's record is written, because they read benchmark_runs.json.
POST_RECORD = ("dashboard",)

RUNS_FILE = "benchmark_runs.json"
RECORD_FILE = "run_record.json"
# Record fields a notebook may report in its metrics JSON (or take as a parameter); first one wins.
RECORD_FIELDS = ("dataset_file", "dataset_type", "embedding_model", "judge_model", "generation_model",
                 "judge_eval_mode", "consistency_runs")
_SECRET_WORDS = {"key", "apikey", "token", "password", "passwd", "pwd", "secret"}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def notebooks_dir() -> Path:
    """The notebooks shipped inside the ``ragnb`` package (``notebooks/`` of a checkout links to them)."""
    folder = Path(ragnb.__file__).resolve().parent / "notebooks"
    if not folder.is_dir():
        raise ValueError(f"no notebooks/ folder in {folder.parent}; reinstall ragnb or pass notebooks_dir=")
    return folder


_default_notebooks_dir = notebooks_dir  # run_notebooks() has an argument of the same name


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    index_path: Path
    record: dict
    failures: list[str]
    reports: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0


@dataclass(frozen=True)
class _Notebook:
    name: str  # short name as asked for (tier1) or the stem of a notebook outside NOTEBOOKS
    stem: str
    path: Path


# --------------------------------------------------------------------------------------------
# Notebooks and parameters
# --------------------------------------------------------------------------------------------


def _resolve(names: list[str], nb_dir: Path) -> list[_Notebook]:
    if isinstance(names, str) or not names:
        raise ValueError(f"name the notebooks to run as a list, e.g. ['tier1']; known: {sorted(NOTEBOOKS)}")
    stem_to_name = {stem: short for short, stem in NOTEBOOKS.items()}
    out: list[_Notebook] = []
    for name in names:
        stem = NOTEBOOKS.get(name, name)
        path = nb_dir / f"{stem}.ipynb"
        if not path.is_file():
            available = sorted(p.stem for p in nb_dir.glob("*.ipynb"))
            raise ValueError(
                f"unknown notebook {name!r}: {path} does not exist; known short names: {sorted(NOTEBOOKS)}, "
                f"notebooks in {nb_dir}: {available}"
            )
        if all(nb.stem != stem for nb in out):
            out.append(_Notebook(stem_to_name.get(stem, name), stem, path))
    return out


def _declared(nb: _Notebook) -> dict[str, dict]:
    import papermill as pm

    declared = pm.inspect_notebook(str(nb.path))
    if "output_dir" not in declared:
        raise ValueError(
            f"{nb.path}: its parameters cell has no `output_dir: str` parameter; every ragnb notebook needs one "
            "and must write <output_dir>/<stem>.metrics.json with ragnb.reports.report.write_metrics"
        )
    return declared


def _describe(declared: dict[str, dict]) -> str:
    return ", ".join(f"{k}: {v.get('inferred_type_name')}" for k, v in declared.items() if k != "output_dir")


def _check_name_and_value(name: str, value: Any, where: str) -> None:
    words = set(re.split(r"[^a-z0-9]+", str(name).lower()))
    if words & _SECRET_WORDS:
        raise ValueError(
            f"{where}: parameter {name!r} looks like a secret; secrets never go into parameters (they would be "
            "saved in the executed notebook and the run record) — set them as environment variables, e.g. "
            "RAGNB_DATABASE_URL or the LLM endpoint's API-key variable"
        )
    if name == "output_dir":
        raise ValueError(f"{where}: output_dir is set by the runner to the run folder; choose the outputs folder "
                         "with outputs= (ragnb run --outputs) or RAGNB_OUTPUTS")
    if isinstance(value, str) and (what := find_secret(value)):
        raise ValueError(f"{where}: the value of {name!r} looks like it contains {what}; pass secrets through "
                         "environment variables, never as parameters")


def load_params_file(path: str | Path) -> dict[str, Any]:
    """Read a parameters YAML file (see :func:`run_notebooks` for its layout)."""
    return config.read_yaml_mapping(path, "parameters file",
                                    "a mapping of parameter: value (with optional per-notebook sections)")


def _coerce(name: str, value: Any, declared: dict, where: str) -> Any:
    kind = declared.get("inferred_type_name")
    if isinstance(value, str) and kind in ("int", "float", "bool"):
        parsed = yaml.safe_load(value) if value.strip() else value  # CLI values arrive as text
        value = float(parsed) if kind == "float" and isinstance(parsed, int) and not isinstance(parsed, bool) else parsed
    ok = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
    }.get(kind or "")
    if ok is not None and not ok(value):
        raise ValueError(f"{where}: parameter {name!r} must be {kind} (default {declared.get('default')}), got {value!r}")
    return value


def _merge_params(
    nbs: list[_Notebook], declared: dict[str, dict[str, dict]], file_params: dict, params: dict, nb_dir: Path,
    file_label: str,
) -> dict[str, dict[str, Any]]:
    by_alias = {a: nb for nb in nbs for a in (nb.name, nb.stem)}
    known_sections = set(NOTEBOOKS) | set(NOTEBOOKS.values()) | set(by_alias)
    merged: dict[str, dict[str, Any]] = {nb.stem: {} for nb in nbs}

    def put(nb: _Notebook, name: str, value: Any, where: str) -> None:
        _check_name_and_value(name, value, where)
        if name not in declared[nb.stem]:
            raise ValueError(
                f"{where}: notebook {nb.stem} has no parameter {name!r}; its parameters are: "
                f"{_describe(declared[nb.stem])}"
            )
        merged[nb.stem][name] = _coerce(name, value, declared[nb.stem][name], where)

    def put_common(name: str, value: Any, where: str, others_ok: bool) -> None:
        _check_name_and_value(name, value, where)
        takers = [nb for nb in nbs if name in declared[nb.stem]]
        if not takers and not (others_ok and _declared_elsewhere(name, nb_dir, nbs)):
            listing = "; ".join(f"{nb.stem}: {_describe(declared[nb.stem])}" for nb in nbs)
            raise ValueError(f"{where}: no notebook of this run has a parameter {name!r}. Parameters: {listing}")
        for nb in takers:
            put(nb, name, value, where)

    common = {k: v for k, v in file_params.items() if k not in known_sections}
    sections = {k: v for k, v in file_params.items() if k in known_sections}
    for key, section in sections.items():
        if not isinstance(section, dict):
            raise ValueError(f"{file_label}: '{key}' names a notebook, so its value must be a mapping of parameters")
    # precedence (later wins): file common < file section < params common < params "<notebook>.<name>"
    for name, value in common.items():
        put_common(name, value, f"{file_label}: {name}", others_ok=True)
    for key, section in sections.items():
        if key in by_alias:
            for name, value in section.items():
                put(by_alias[key], name, value, f"{file_label}: {key}.{name}")
    targeted = {k: v for k, v in params.items() if "." in k}
    for name, value in params.items():
        if "." not in name:
            put_common(name, value, f"parameter {name}", others_ok=False)
    for key, value in targeted.items():
        prefix, name = key.split(".", 1)
        if prefix not in by_alias:
            raise ValueError(f"parameter {key}: {prefix!r} is not a notebook of this run ({[nb.name for nb in nbs]})")
        put(by_alias[prefix], name, value, f"parameter {key}")
    return merged


def _declared_elsewhere(name: str, nb_dir: Path, nbs: list[_Notebook]) -> bool:
    # A shared YAML file may hold settings for tiers that are not part of this run.
    running = {nb.stem for nb in nbs}
    for stem in NOTEBOOKS.values():
        path = nb_dir / f"{stem}.ipynb"
        if stem not in running and path.is_file():
            import papermill as pm

            if name in pm.inspect_notebook(str(path)):
                return True
    return False


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def _error_text(exc: BaseException) -> str:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):
        text = f"{exc.ename}: {exc.evalue} (cell In [{exc.exec_count}])"
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = config.redact_url(_ANSI.sub("", text))
    return text if len(text) <= 2000 else text[:2000] + "…"


def _execute(nb: _Notebook, params: dict, run_dir: Path, cwd: Path, kernel_name: str | None,
             log: Callable[[str], None]) -> dict:
    import papermill as pm

    out_ipynb, html = run_dir / f"{nb.stem}.ipynb", run_dir / f"{nb.stem}.html"
    metrics = run_dir / f"{nb.stem}.metrics.json"
    report = {"name": nb.name, "stem": nb.stem, "ipynb": out_ipynb.name, "html": html.name,
              "metrics": metrics.name, "status": "ok", "error": None, "duration_s": None}
    if metrics.exists():
        log(f"[{nb.name}] {metrics.name} exists: skipping (resumed run)")
        report["status"] = "skipped"
        if out_ipynb.exists() and not html.exists():
            notebook_to_html(out_ipynb, html)
        return report
    log(f"[{nb.name}] executing {nb.path} → {out_ipynb}")
    start = time.monotonic()
    try:
        pm.execute_notebook(str(nb.path), str(out_ipynb), parameters=params, kernel_name=kernel_name,
                            cwd=str(cwd), progress_bar=False, log_output=False)
        if not metrics.exists():
            raise RuntimeError(f"the notebook finished without writing {metrics.name}; its last cell must call "
                               f"ragnb.reports.report.write_metrics(output_dir, {nb.stem!r}, metrics)")
    except Exception as exc:  # a failed notebook must not stop the others
        report.update(status="failed", error=_error_text(exc))
        if metrics.exists():  # written before the failure: move it so that a resume re-runs the notebook
            metrics.replace(metrics.with_name(f"{nb.stem}.metrics.failed.json"))
        log(f"[{nb.name}] FAILED: {report['error']}")
    report["duration_s"] = round(time.monotonic() - start, 2)
    if out_ipynb.exists():
        try:
            notebook_to_html(out_ipynb, html)
        except Exception as exc:
            report["error"] = (report["error"] + "\n" if report["error"] else "") + f"HTML rendering failed: {_error_text(exc)}"
            report["status"] = "failed"
    if report["status"] == "ok":
        log(f"[{nb.name}] done in {report['duration_s']:.1f} s → {html}")
    return report


def _read_metrics(path: Path) -> dict | None:
    import json

    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object of metrics")
    return data


def _previous(run_dir: Path) -> dict:
    import json

    path = run_dir / RECORD_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _combo_slug(judge: str | None, gen: str | None) -> str:
    text = f"{judge or 'default-judge'}__{gen or 'default-generation'}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:120]


def _model_combos(judge_models: list[str] | None, generation_models: list[str] | None) -> list[tuple[str | None, str | None]]:
    """Every (judge model × generation model) pair of a multi-model sweep; [] when no sweep was asked for."""
    judges = [m.strip() for m in (judge_models or []) if m and m.strip()]
    gens = [m.strip() for m in (generation_models or []) if m and m.strip()]
    for label, models in (("--judge-models", judges), ("--generation-models", gens)):
        if len(set(models)) != len(models):
            raise ValueError(f"{label} names a model twice: {models}")
    if not judges and not gens:
        return []
    return [(j, g) for j in (judges or [None]) for g in (gens or [None])]


def _collect(reports: dict[str, dict], run_dir: Path, all_params: dict) -> tuple[dict, dict, dict]:
    """Tier blocks, other metrics and record fields from the metrics JSON of finished reports."""
    tier_metrics: dict[str, dict] = {}
    other: dict[str, dict] = {}
    fields: dict[str, Any] = {}
    for key, report in reports.items():
        if report.get("status") == "failed":
            continue
        stem = report["stem"]
        if stem in POST_RECORD:  # reports about other runs (the dashboard): not this run's metrics
            continue
        try:
            metrics = _read_metrics(run_dir / report.get("metrics", f"{stem}.metrics.json"))
        except (ValueError, OSError) as exc:
            report.update(status="failed", error=f"unreadable metrics JSON: {exc}")
            continue
        if metrics is None:
            continue
        (tier_metrics if stem in TIER_KEY else other)[TIER_KEY.get(stem, stem)] = metrics
        for name in RECORD_FIELDS:
            value = metrics.get(name, all_params.get(key, {}).get(name))
            if fields.get(name) is None and value is not None and not isinstance(value, (dict, list)):
                fields[name] = value
    return tier_metrics, other, fields


def run_notebooks(
    names: list[str],
    params: dict[str, Any] | None = None,
    params_file: str | Path | None = None,
    run_id: str | None = None,
    outputs: str | Path | None = None,
    kernel_name: str | None = None,
    log: Callable[[str], None] = print,
    notebooks_dir: str | Path | None = None,
    judge_models: list[str] | None = None,
    generation_models: list[str] | None = None,
) -> RunResult:
    """Execute notebooks into ``<outputs>/runs/<run_id>/``, render HTML, and record the run.

    ``names``: short names from :data:`NOTEBOOKS` (``"tier1"``) or notebook stems in ``notebooks_dir``.

    Parameters, later sources winning:

    1. ``params_file`` (YAML). Top-level keys that name a notebook (short name such as ``tier1`` or stem
       such as ``tier1_retrieval``) are per-notebook sections; every other top-level key is a common
       parameter given to each notebook that declares it. Sections override common keys::

           dataset_file: data/demo/dataset.jsonl   # common: every notebook with this parameter gets it
           embedding_model: all-MiniLM-L6-v2
           tier1:                                   # only for tier1_retrieval
             top_k: 10
           tier0: {sample_size: 500}

       A common key must be a parameter of some notebook (of this run, or of another known tier — so one
       file can serve all tiers); a section's keys must be parameters of that notebook.
    2. ``params``: ``{"top_k": 10}`` goes to every notebook of this run that declares ``top_k`` (at least
       one must); ``{"tier1.top_k": 10}`` targets one notebook. Text values are converted to the declared
       int/float/bool type (CLI input).

    Unknown names are rejected with the notebook's parameter list; names that look like secrets
    (``key``, ``token``, ``password``, ``secret``) are rejected — use environment variables. ``output_dir``
    is always the run folder. Notebooks run in the current working directory.

    Multi-model sweep: with ``judge_models`` and/or ``generation_models``, every notebook that declares
    ``judge_models`` / ``generation_model`` runs once per (judge × generation) combination, each into
    ``runs/<run_id>/models/<combination>/``; the record's ``model_runs`` holds one entry per combination
    (models, status, tier metrics) and its top-level tier blocks are those of the first combination.

    Notebooks in :data:`POST_RECORD` (the dashboard) run after this run's record has been appended to
    ``benchmark_runs.json``, so they see it; the record and index are then updated with their reports.

    A failing notebook keeps its executed ``.ipynb`` and HTML, is recorded as failed, and the next one
    runs; ``RunResult.exit_code`` is then 1. Calling again with the same ``run_id`` skips notebooks whose
    metrics JSON exists and updates the run's record instead of adding a second one.
    """
    nb_dir = Path(notebooks_dir).resolve() if notebooks_dir is not None else _default_notebooks_dir()
    if not nb_dir.is_dir():
        raise ValueError(f"notebooks_dir {nb_dir} is not a folder")
    nbs = _resolve(list(names) if not isinstance(names, str) else names, nb_dir)
    params = dict(params or {})
    file_params = load_params_file(params_file) if params_file else {}
    declared = {nb.stem: _declared(nb) for nb in nbs}
    merged = _merge_params(nbs, declared, file_params, params, nb_dir, str(params_file or "parameters file"))
    combos = _model_combos(judge_models, generation_models)
    swept = [nb for nb in nbs if nb.stem not in POST_RECORD
             and any(p in declared[nb.stem] for p in SWEEP_PARAMS)]
    if combos:
        _check_sweep(combos, swept, nbs)

    run_id = check_run_id(run_id) if run_id else new_run_id()
    out_root = Path(outputs).resolve() if outputs is not None else config.outputs_dir()
    run_dir = out_root / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    # Notebooks run in the caller's folder, so relative paths in parameters mean what the user meant.
    repo_root = Path.cwd()
    log(f"run {run_id} → {run_dir}")

    previous = _previous(run_dir)
    reports = {r.get("key") or r["stem"]: r for r in previous.get("reports") or []
               if isinstance(r, dict) and r.get("stem")}
    all_params = dict(previous.get("params") or {})
    started = time.monotonic()

    def save_progress() -> None:
        # progress on disk, so that an interrupted run resumes with what already finished
        atomic_write_text(run_dir / RECORD_FILE, dumps_strict(
            {**previous, "id": run_id, "reports": list(reports.values()), "params": all_params}) + "\n")

    def execute(nb: _Notebook, folder: str, extra: dict, label: str) -> None:
        key = f"{folder}/{nb.stem}" if folder else nb.stem
        nb_params = {**merged[nb.stem], **extra, "output_dir": str(run_dir / folder) if folder else str(run_dir)}
        if "outputs" in declared[nb.stem] and not nb_params.get("outputs"):
            nb_params["outputs"] = str(out_root)  # the dashboard reads this run's benchmark_runs.json
        (run_dir / folder).mkdir(parents=True, exist_ok=True)
        report = _execute(nb, nb_params, run_dir / folder, repo_root, kernel_name, log)
        report.update(key=key, name=label)
        if folder:
            for field_name in ("ipynb", "html", "metrics"):
                report[field_name] = f"{folder}/{report[field_name]}"
        if report["status"] == "skipped" and key in reports:
            report = {**reports[key], "status": reports[key].get("status", "ok")}
        else:
            all_params[key] = nb_params
        reports[key] = report
        save_progress()

    for nb in nbs:
        if nb.stem in POST_RECORD or (combos and nb in swept):
            continue
        execute(nb, "", {}, nb.name)
    model_runs = []
    for judge, gen in combos:
        slug = _combo_slug(judge, gen)
        folder = f"models/{slug}"
        for nb in swept:
            extra = {}
            if judge and "judge_models" in declared[nb.stem]:
                extra["judge_models"] = judge
            if gen and "generation_model" in declared[nb.stem]:
                extra["generation_model"] = gen
            execute(nb, folder, extra, f"{nb.name} [judge {judge or 'default'} · generation {gen or 'default'}]")
        combo_reports = {k: r for k, r in reports.items() if k.startswith(folder + "/")}
        tiers, other, _ = _collect(combo_reports, run_dir, all_params)
        model_runs.append({
            "judge_model": judge, "generation_model": gen, "folder": folder,
            "status": "failed" if any(r.get("status") == "failed" for r in combo_reports.values()) else "ok",
            "reports": [r["key"] for r in combo_reports.values()], **tiers, **({"other_metrics": other} if other else {}),
        })

    def finish() -> tuple[dict, list[dict]]:
        main = {k: r for k, r in reports.items() if "/" not in k}
        first = model_runs[0]["folder"] + "/" if model_runs else None
        if first:  # top-level tier blocks of a sweep: the first combination's
            main.update({k: r for k, r in reports.items() if k.startswith(first)})
        tier_metrics, other, fields = _collect(main, run_dir, all_params)
        report_list = list(reports.values())
        failures = [r.get("name") or r["stem"] for r in report_list if r.get("status") == "failed"]
        extra = {
            "judge_model": model_runs[0]["judge_model"] if model_runs and model_runs[0]["judge_model"] else fields.get("judge_model"),
            "generation_model": (model_runs[0]["generation_model"] if model_runs and model_runs[0]["generation_model"]
                                 else fields.get("generation_model")),
            "judge_eval_mode": fields.get("judge_eval_mode"), "consistency_runs": fields.get("consistency_runs"),
            "model_runs": model_runs or previous.get("model_runs") or [],
            "reports": report_list, "failures": failures, "params": all_params,
            "duration_s": round(float(previous.get("duration_s") or 0.0) + time.monotonic() - started, 2),
            "ragnb_version": ragnb.__version__,
        }
        if other:
            extra["other_metrics"] = other
        record = build_record(run_id, tier_metrics, fields.get("dataset_file"), fields.get("dataset_type"),
                              fields.get("embedding_model"), extra, cwd=repo_root)
        atomic_write_text(run_dir / RECORD_FILE, dumps_strict(record) + "\n")
        append_run_record(out_root / RUNS_FILE, record)
        write_index(run_dir, record, report_list)
        return record, report_list

    record, report_list = finish()
    post = [nb for nb in nbs if nb.stem in POST_RECORD]
    if post:
        for nb in post:
            execute(nb, "", {}, nb.name)
        record, report_list = finish()
    index_path = run_dir / "index.html"
    failures = list(record.get("failures") or [])
    log(f"run {run_id}: {record['overall_status']} — {index_path}")
    return RunResult(run_id, run_dir, index_path, record, failures, report_list)


def _check_sweep(combos: list[tuple[str | None, str | None]], swept: list[_Notebook], nbs: list[_Notebook]) -> None:
    from ragnb.llm import LLMSettings

    if not swept:
        raise ValueError(
            f"a model sweep needs notebooks that take judge_models or generation_model (tier2, tier3, judge, "
            f"rag_metrics…); this run has {[nb.name for nb in nbs]}"
        )
    if not LLMSettings.from_env().configured:
        raise ValueError(
            "a model sweep compares LLMs, so it needs an OpenAI-compatible endpoint: set RAGNB_LLM_BASE_URL "
            "and the key in RAGNB_LLM_API_KEY (or OPENAI_API_KEY / OPENROUTER_API_KEY)"
        )
