"""Execute tier notebooks with papermill, render them to HTML, and record the run.

Layout of one run (``outputs`` defaults to ``$RAGNB_OUTPUTS`` or ``./outputs``)::

    outputs/benchmark_runs.json             every run's record (JSON array, schema 2.0)
    outputs/runs/<run_id>/index.html        links to everything below, key metrics, summary
    outputs/runs/<run_id>/run_record.json   this run's record (also used to resume)
    outputs/runs/<run_id>/<stem>.ipynb      executed notebook (kept when it fails)
    outputs/runs/<run_id>/<stem>.html       rendered report, code hidden, offline
    outputs/assets/plotly.min.js            plotly.js (and the lab CSS), one copy shared by every run's reports
    outputs/runs/<run_id>/<stem>.metrics.json (+ .per_item.csv) written by the notebook
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ragnb import config, spec
from ragnb.version import __version__
from ragnb.io import DiskFullError, atomic_write_text, dumps_strict, is_disk_full
from ragnb.runs.pages import notebook_to_html, write_index
from ragnb.runs.params import (Notebook, database_readers, declared_params, load_params_file, merge_params,
                               notebooks_dir, resolve, resolve_paths)
from ragnb.progress import PROGRESS_ENV, emit
from ragnb.runs import kernel_imports, warmup
from ragnb.runs.prestart import KernelStarter, enabled as prestart_enabled, kernel_name_of
from ragnb.runs.progress import RunProgress, expected_durations, follow
from ragnb.runs.render import BackgroundRenders, render_into
from ragnb.runs.files import disk_full_detail, make_folder, output_uri, resume_message, set_aside
from ragnb.runs.build import build_record
from ragnb.runs.record import RUNS_FILE, append_run_record, check_run_id, new_run_id, run_folder
from ragnb.runs.summary import run_summary
from ragnb.runs.collect import RECORD_FILE, collect_reports, previous_record
from ragnb.runs.sweep import SWEEP_PARAMS, SweepStep, check_sweep, model_combos, plan_sweep
from ragnb.tiers.itemlog import failed_logged_items

LOCK_FILE = ".run.lock"  # held (an OS file lock) while a runner writes into the run folder
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _import_for_finish() -> threading.Thread:
    """Import what :meth:`_Run.finish` needs beyond the runner's own modules — scipy.stats for the summary's
    paired tests, every metric module for their directions: ~2 s once per process — on a worker thread while
    the first notebook runs (the main thread only waits for the kernel then). finish() joins it before it uses
    any of them, so the registry is never read half-loaded."""
    def work() -> None:
        with contextlib.suppress(Exception):  # a failing import is left for finish() to raise where it is used
            import scipy.stats  # noqa: F401

            from ragnb.metrics.registry import load_all

            load_all()

    thread = threading.Thread(target=work, name="ragnb-import-for-finish", daemon=True)
    thread.start()
    return thread


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


def _will_execute(nb: Notebook, run_dir: Path) -> bool:
    """Whether :func:`_execute` runs the notebook (not skipped as finished by an earlier, resumed run)."""
    metrics = run_dir / f"{nb.stem}.metrics.json"
    return not metrics.exists() or bool(failed_logged_items(run_dir, nb.stem))


def _execute(nb: Notebook, params: dict, run_dir: Path, cwd: Path, kernel_name: str | None,
             log: Callable[[str], None], assets_root: Path | None = None, km: Any = None,
             renders: BackgroundRenders | None = None, starter: KernelStarter | None = None) -> dict:
    """Execute one notebook into ``run_dir`` and render its HTML (``assets_root``: see :func:`notebook_to_html`).
    ``km``: a kernel ``starter`` started for this notebook (:mod:`ragnb.runs.prestart`), handed back to it
    afterwards to shut down (what the notebook imported is kept for its next kernel: :mod:`ragnb.runs.
    kernel_imports`); ``renders``: render the HTML there, while the next notebook runs (else now)."""
    import papermill as pm

    from ragnb.runs.kernel import RunKernelManager

    out_ipynb, html = run_dir / f"{nb.stem}.ipynb", run_dir / f"{nb.stem}.html"
    metrics = run_dir / f"{nb.stem}.metrics.json"
    report = {"name": nb.name, "stem": nb.stem, "ipynb": out_ipynb.name, "html": html.name,
              "metrics": metrics.name, "status": "ok", "error": None, "duration_s": None}
    retry = failed_logged_items(run_dir, nb.stem) if metrics.exists() else 0
    if retry:  # the notebook's item log reads back the finished items and scores the failed ones again
        log(f"[{nb.name}] {retry} failed item(s) in its item log: running it again to retry them "
            "(RAGNB_RETRY_FAILED=0 keeps them)")
    elif metrics.exists():
        log(f"[{nb.name}] {metrics.name} exists: skipping (resumed run)")
        report["status"] = "skipped"
        if out_ipynb.exists() and not html.exists():
            notebook_to_html(out_ipynb, html, assets_root=assets_root)
        return report
    log(f"[{nb.name}] executing {nb.path} → {out_ipynb}")
    start = time.monotonic()
    try:
        pm.execute_notebook(str(nb.path), output_uri(out_ipynb), parameters=params, kernel_name=kernel_name,
                            cwd=str(cwd), progress_bar=False, log_output=False,
                            kernel_manager_class=RunKernelManager, **({"km": km} if km is not None else {}))
        if not metrics.exists():
            raise RuntimeError(f"the notebook finished without writing {metrics.name}; its last cell must call "
                               f"result.write(output_dir, {nb.stem!r}) (ragnb.tiers.result.TierResult)")
    except Exception as exc:  # a failed notebook must not stop the others
        report.update(status="failed", error=_error_text(exc))
        set_aside(metrics)  # written before the failure: a resume must run the notebook again
        log(f"[{nb.name}] FAILED: {report['error']}")
    finally:
        if km is not None and starter is not None:  # nbclient leaves a kernel it did not start running
            if report["status"] == "ok":
                kernel_imports.record(km, nb.stem)
            starter.stop(km)
    report["duration_s"] = round(time.monotonic() - start, 2)
    if out_ipynb.exists() and not is_disk_full(report["error"] or ""):  # no room for a report
        if renders is not None:
            renders.submit(report, nb.name, out_ipynb, html, assets_root, _error_text)
        else:
            render_into(report, out_ipynb, html, assets_root, _error_text)
    if report["status"] == "ok":
        log(f"[{nb.name}] done in {report['duration_s']:.1f} s → {html}")
    return report


@dataclass
class _Run:
    """One run in progress: where it writes, what finished, and the parameters each notebook got."""

    run_id: str
    run_dir: Path
    out_root: Path
    cwd: Path  # notebooks run in the caller's folder, so relative paths in parameters mean what the user meant
    kernel_name: str | None
    log: Callable[[str], None]
    merged: dict[str, dict[str, Any]]
    declared: dict[str, dict[str, dict]]
    previous: dict = field(default_factory=dict)
    standalone: bool = False  # self-contained HTML reports (plotly.js inlined) instead of one shared copy
    reports: dict[str, dict] = field(default_factory=dict)
    all_params: dict[str, dict] = field(default_factory=dict)
    model_runs: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    progress: RunProgress | None = None  # what the terminal shows: [i/N] per notebook, ETA, in-notebook steps
    progress_log: Callable[[str], None] = emit  # where those lines go (stderr, whatever the terminal)
    queue: list[tuple[Notebook, str]] = field(default_factory=list)  # executions in order: (notebook, folder)
    starter: KernelStarter | None = None  # starts the next notebook's kernel while one runs (None: off)
    renders: BackgroundRenders | None = None  # renders HTML reports while the next notebook runs (None: in line)
    imports: threading.Thread | None = None  # imports finish() needs, on a worker thread (_import_for_finish)

    @classmethod
    def start(cls, run_id: str, out_root: Path, kernel_name: str | None,
              log: Callable[[str], None], merged: dict, declared: dict) -> _Run:
        run_dir = run_folder(out_root, run_id)
        previous = previous_record(run_dir)
        reports = {r.get("key") or r["stem"]: r for r in previous.get("reports") or []
                   if isinstance(r, dict) and r.get("stem")}
        for report in reports.values():  # e.g. its HTML failed on a full disk after the metrics were written
            rel = Path(str(report.get("metrics") or f"{report['stem']}.metrics.json"))
            if report.get("status") == "failed" and not rel.is_absolute() and ".." not in rel.parts:
                set_aside(run_dir / rel)
        return cls(run_id, run_dir, out_root, Path.cwd(), kernel_name, log, merged, declared, previous=previous,
                   reports=reports, all_params=dict(previous.get("params") or {}))

    def save_progress(self) -> None:
        # progress on disk, so that an interrupted run resumes with what already finished
        atomic_write_text(self.run_dir / RECORD_FILE, dumps_strict(
            {**self.previous, "id": self.run_id, "reports": list(self.reports.values()), "params": self.all_params})
            + "\n")

    def execute(self, nb: Notebook, folder: str = "", extra: dict | None = None, label: str | None = None) -> None:
        key = f"{folder}/{nb.stem}" if folder else nb.stem
        out_dir = self.run_dir / folder if folder else self.run_dir
        nb_params = {**self.merged[nb.stem], **(extra or {}), "output_dir": str(out_dir)}
        if "outputs" in self.declared[nb.stem] and not nb_params.get("outputs"):
            nb_params["outputs"] = str(self.out_root)  # the dashboard reads this run's benchmark_runs.json
        out_dir.mkdir(parents=True, exist_ok=True)
        report = self._execute_with_progress(nb, nb_params, out_dir, label or nb.name)
        report.update(key=key, name=label or nb.name)
        if folder:
            for field_name in ("ipynb", "html", "metrics"):
                report[field_name] = f"{folder}/{report[field_name]}"
        if report["status"] == "skipped" and key in self.reports:
            report = {**self.reports[key], "status": self.reports[key].get("status", "ok")}
        else:
            self.all_params[key] = nb_params
        self.reports[key] = report
        self.save_progress()
        if report["status"] == "failed" and is_disk_full(report["error"] or ""):
            # every next notebook would fail the same way: stop here, with one message
            raise DiskFullError(disk_full_detail(label or nb.name, report["error"], out_dir))

    def _execute_with_progress(self, nb: Notebook, nb_params: dict, out_dir: Path, name: str) -> dict:
        # reports load plotly.js and the lab CSS from <outputs>/assets: one copy for every run, not ~5 MB each
        assets = None if self.standalone else self.out_root
        if self.progress is None:
            km = self._kernel_for(nb, out_dir)
            return _execute(nb, nb_params, out_dir, self.cwd, self.kernel_name, self.log, assets, km, self.renders,
                            self.starter)
        self.progress.begin(nb.stem, name)
        report = None
        try:
            with follow(out_dir / f".{nb.stem}.progress.jsonl", name, self.progress_log):
                km = self._kernel_for(nb, out_dir)
                report = _execute(nb, nb_params, out_dir, self.cwd, self.kernel_name, self.log, assets, km,
                                  self.renders, self.starter)
                return report
        finally:
            self.progress.end(report)

    def _kernel_spec(self, nb: Notebook, out_dir: Path) -> tuple[tuple, str, dict] | None:
        """(key, kernel name, environment) of the kernel papermill would start for ``nb`` now."""
        from ragnb.runs.kernel import kernel_env

        name = kernel_name_of(nb.path, self.kernel_name)
        if name is None:
            return None
        env = dict(os.environ)
        if self.progress is not None:  # as follow() sets it while the notebook runs
            env[PROGRESS_ENV] = str(out_dir / f".{nb.stem}.progress.jsonl")
        env = kernel_env(env)
        return (nb.stem, str(out_dir), name, str(self.cwd), tuple(sorted(env.items()))), name, env

    def _kernel_for(self, nb: Notebook, out_dir: Path) -> Any:
        """The kernel started for ``nb`` — ahead, or now when none was (None: papermill starts one) — after
        starting the next one's."""
        if self.starter is None:
            return None
        spec_now = self._kernel_spec(nb, out_dir)
        km = self.starter.take(spec_now[0]) if spec_now else None
        if km is None and spec_now is not None and _will_execute(nb, out_dir):
            self.starter.start(*spec_now, self.cwd, kernel_imports.load(nb.stem))
            km = self.starter.take(spec_now[0])
        keys = [(q.stem, self.run_dir / folder if folder else self.run_dir) for q, folder in self.queue]
        at = keys.index((nb.stem, out_dir)) if (nb.stem, out_dir) in keys else None
        if at is not None and at + 1 < len(self.queue):
            nxt, nxt_dir = self.queue[at + 1][0], keys[at + 1][1]
            nxt_spec = self._kernel_spec(nxt, nxt_dir) if _will_execute(nxt, nxt_dir) else None
            if nxt_spec is not None:
                self.starter.start(*nxt_spec, self.cwd, kernel_imports.load(nxt.stem))
        return km

    def settle_renders(self) -> None:
        """Wait for the HTML reports being rendered; save the record again when one of them failed."""
        errors = {key: report.get("error") for key, report in self.reports.items()}
        if self.renders is not None and self.renders.settle(self.log):
            self.save_progress()
            for key, report in self.reports.items():
                if report.get("error") != errors[key] and is_disk_full(report["error"] or ""):
                    raise DiskFullError(disk_full_detail(report.get("name") or key, report["error"],
                                                          self.run_dir))

    def run_combination(self, step: SweepStep) -> None:
        """One combination of a sweep (:func:`ragnb.runs.sweep.plan_sweep`): its notebooks into
        ``models/<combination>/``; those depending on fewer models share an earlier combination's run."""
        judge, gen, folder = step.judge, step.generation, step.folder
        for nb, extra in step.run:
            self.execute(nb, folder, extra, f"{nb.name} [judge {judge or 'default'} · generation {gen or 'default'}]")
        self.settle_renders()
        combo_reports = {k: r for k, r in self.reports.items() if k.startswith(folder + "/")}
        combo_reports.update({f"{src}/{stem}": self.reports[f"{src}/{stem}"] for stem, src in step.reuse.items()
                              if f"{src}/{stem}" in self.reports})
        tiers, other, _ = collect_reports(combo_reports, self.run_dir, self.all_params)
        self.model_runs.append({
            "judge_model": judge, "generation_model": gen, "folder": folder,
            "status": "failed" if any(r.get("status") == "failed" for r in combo_reports.values()) else "ok",
            "reports": [r["key"] for r in combo_reports.values()], **tiers, **({"other_metrics": other} if other else {}),
        })

    def finish(self) -> tuple[dict, list[dict]]:
        """Build the record from every finished notebook, write it (run folder + benchmark_runs.json) and the index."""
        self.settle_renders()
        if self.imports is not None:
            self.imports.join()
        main = {k: r for k, r in self.reports.items() if "/" not in k}
        first = self.model_runs[0] if self.model_runs else None
        if first:  # top-level tier blocks of a sweep: the first combination's
            main.update({k: r for k, r in self.reports.items() if k.startswith(first["folder"] + "/")})
        tier_metrics, other, fields = collect_reports(main, self.run_dir, self.all_params)
        report_list = list(self.reports.values())
        extra = {
            "judge_model": first["judge_model"] if first and first["judge_model"] else fields.get("judge_model"),
            "generation_model": (first["generation_model"] if first and first["generation_model"]
                                 else fields.get("generation_model")),
            "judge_eval_mode": fields.get("judge_eval_mode"), "consistency_runs": fields.get("consistency_runs"),
            "model_runs": self.model_runs or self.previous.get("model_runs") or [],
            "reports": report_list,
            "failures": [r.get("name") or r["stem"] for r in report_list if r.get("status") == "failed"],
            "params": self.all_params,
            "duration_s": round(float(self.previous.get("duration_s") or 0.0) + time.monotonic() - self.started, 2),
            "ragnb_version": __version__,
        }
        if other:
            extra["other_metrics"] = other
        record = build_record(self.run_id, tier_metrics, fields.get("dataset_file"), fields.get("dataset_type"),
                              fields.get("embedding_model"), extra, cwd=self.cwd)
        record["executive_summary"] = run_summary(record, self.out_root)  # with the change against earlier runs
        atomic_write_text(self.run_dir / RECORD_FILE, dumps_strict(record) + "\n")
        if self.benchmarked():
            append_run_record(self.out_root / RUNS_FILE, record)
        write_index(self.run_dir, record, report_list)
        return record, report_list

    def benchmarked(self) -> bool:
        """Whether a benchmark notebook ran: rendering only the dashboard (a report about other runs) must not
        add a run to the history it reads, so such a run's record stays in its own folder only."""
        def post(stem: str) -> bool:
            tier = spec.by_stem(stem)
            return tier is not None and tier.post_record

        return any(not post(r.get("stem", "")) for r in self.reports.values())


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
    standalone: bool = False,
    progress_log: Callable[[str], None] = emit,
) -> RunResult:
    """Execute notebooks into ``<outputs>/runs/<run_id>/``, render HTML, and record the run.

    ``names``: short names of :data:`ragnb.spec.TIERS` (``"tier1"``) or notebook stems in ``notebooks_dir``.
    ``params_file`` (YAML) and ``params`` (``{"top_k": 10}`` or ``{"tier1.top_k": 10}``) set notebook
    parameters as :mod:`ragnb.runs.params` describes; ``output_dir`` is always the run folder. Notebooks run
    in the current working directory.

    Multi-model sweep: with ``judge_models`` and/or ``generation_models``, every notebook that declares
    ``judge_models`` / ``generation_model`` runs once per combination of the models it takes (a judge-only
    notebook once per judge model; :mod:`ragnb.runs.sweep`), each into ``runs/<run_id>/models/<combination>/``,
    after the model ids were checked against the endpoint's ``/v1/models`` (when it has one); the record's ``model_runs`` holds one entry per combination
    (models, status, tier metrics) and its top-level tier blocks are those of the first combination.

    Reports load plotly.js from the outputs folder's ``assets/plotly.min.js`` (``../../assets/…`` from a run
    folder: one copy for every run; executed notebooks carry only each figure's JSON), so a run folder copied
    elsewhere draws its charts only next to that ``assets`` folder; ``standalone=True`` inlines plotly.js into
    every HTML report instead, so a single file or folder can be e-mailed.

    ``log`` gets what the runner does (executing, skipping, failures, the index page); ``progress_log`` the
    progress lines — ``[2/5] tier1 …`` when each notebook begins and ends, and the long steps the notebook
    reports (:mod:`ragnb.runs.progress`) — by default on stderr, whatever the terminal, so a log shows them.

    Notebooks whose tier is ``post_record`` (the dashboard) run after this run's record has been appended to
    ``benchmark_runs.json``, so they see it; the record and index are then updated with their reports. A run
    of post-record notebooks only (``ragnb run dashboard``) is not appended to ``benchmark_runs.json``: looking
    at the history adds nothing to it (its record is in its run folder).

    A failing notebook keeps its executed ``.ipynb`` and HTML, is recorded as failed, and the next one
    runs; ``RunResult.exit_code`` is then 1. Calling again with the same ``run_id`` skips notebooks whose
    metrics JSON exists and updates the run's record instead of adding a second one.
    """
    nb_dir = Path(notebooks_dir).resolve() if notebooks_dir is not None else _default_notebooks_dir()
    if not nb_dir.is_dir():
        raise ValueError(f"notebooks_dir {nb_dir} is not a folder")
    nbs = resolve(list(names) if not isinstance(names, str) else names, nb_dir)
    file_params = load_params_file(params_file) if params_file else {}
    declared = {nb.stem: declared_params(nb) for nb in nbs}
    merged = resolve_paths(merge_params(nbs, declared, file_params, dict(params or {}), nb_dir,
                                        str(params_file or "parameters file")))
    _check_database(database_readers(merged, declared))
    combos = model_combos(judge_models, generation_models)
    swept = [nb for nb in nbs if not nb.post_record and any(p in declared[nb.stem] for p in SWEEP_PARAMS)]
    if combos:
        check_sweep(combos, swept, nbs)

    run_id = check_run_id(run_id) if run_id is not None else new_run_id()
    out_root = Path(outputs).resolve() if outputs is not None else config.outputs_dir()
    run_dir = make_folder(run_folder(out_root, run_id))
    with run_lock(run_dir, run_id):  # before reading what the run finished: another runner may still add to it
        run = _Run.start(run_id, out_root, kernel_name=kernel_name, log=log, merged=merged, declared=declared)
        run.standalone, run.progress_log = standalone, progress_log
        return _run_all(run, nbs, swept, combos, log)


def _check_database(readers: list[str]) -> None:
    """A database that is down would fail every notebook reading it, one after the other: check it once first."""
    if not readers:
        return
    from ragnb.store.engine import check_reachable

    try:
        check_reachable()
    except ValueError as exc:
        raise ValueError(f"{', '.join(readers)} read the configured database (corpus: db), but {exc}") from None


@contextlib.contextmanager
def run_lock(run_dir: Path, run_id: str):
    """Hold the run folder's lock, or ValueError if another process holds it (that run is still running).

    An OS lock (``flock`` via filelock), not a marker file: the kernel releases it when its process ends, so a
    killed run never blocks a resume."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(run_dir / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ValueError(f"run {run_id} is still running (another process holds {run_dir / LOCK_FILE}); "
                         "wait for it to finish, or choose another --run-id") from None
    try:
        yield
    finally:
        lock.release()


def _plan_progress(run: _Run, nbs: list[Notebook], swept: list[Notebook], combos: list) -> RunProgress:
    """One planned execution per notebook, and per combination for swept notebooks, with earlier durations."""
    planned = [nb.stem for nb in nbs if not (combos and nb in swept)] + [nb.stem for _ in combos for nb in swept]
    return RunProgress(planned, expected_durations(run.out_root), run.progress_log)


def _run_all(run: _Run, nbs: list[Notebook], swept: list[Notebook], combos: list, log: Callable[[str], None]) -> RunResult:
    log(f"run {run.run_id} → {run.run_dir}")
    run.progress = _plan_progress(run, nbs, swept, combos)
    main = [nb for nb in nbs if not nb.post_record and not (combos and nb in swept)]
    steps = plan_sweep(combos, swept, run.declared)
    post = [nb for nb in nbs if nb.post_record]
    run.queue = ([(nb, "") for nb in main] + [(nb, step.folder) for step in steps for nb, _ in step.run]
                 + [(nb, "") for nb in post])
    run.starter = KernelStarter() if prestart_enabled() else None
    run.renders = BackgroundRenders()
    run.imports = _import_for_finish()
    warm_ups = warmup.start(nb.stem for nb, folder in run.queue
                            if _will_execute(nb, run.run_dir / folder if folder else run.run_dir))
    try:
        for nb in main:
            run.execute(nb)
        for step in steps:
            run.run_combination(step)
        record, report_list = run.finish()
        for nb in post:
            run.execute(nb)
        if post:
            record, report_list = run.finish()
    except DiskFullError as exc:
        raise DiskFullError(resume_message(str(exc), run.run_id)) from None
    finally:
        run.renders.close(run.log)
        warmup.stop(warm_ups)
        if run.starter is not None:
            run.starter.close()
    index_path = run.run_dir / "index.html"
    log(f"run {run.run_id}: {record['overall_status']} — {index_path}")
    return RunResult(run.run_id, run.run_dir, index_path, record, list(record.get("failures") or []), report_list)
