"""Deleting runs (``ragnb runs delete``): a run's record in ``benchmark_runs.json`` and its folder
``<outputs>/runs/<run_id>`` go together, and nothing outside ``<outputs>/runs`` is ever touched.

Run ids are checked as folder names (:func:`ragnb.runs.record.check_run_id`: never empty, ``.``, ``..`` or a
path), and a run folder must be a real folder directly inside ``<outputs>/runs`` (not a link elsewhere).
Deleting every run is asked for explicitly (``delete_runs(outputs, None)``, the CLI's ``--all``).

The order makes a crash harmless. Under the lock of ``benchmark_runs.json`` (and each run's own lock, so a run
still executing is refused): 1. each run folder is renamed to ``runs/.deleting.<run_id>`` (atomic, a name no run
id can have); 2. ``benchmark_runs.json`` is rewritten without the runs (atomically) — the commit; 3. the renamed
folders are removed. A failure before 2 (a full disk) renames the folders back. A crash between 1 and 2 or 2
and 3 leaves a ``.deleting.`` folder that :func:`settle_deletions` (run by every delete and ``ragnb runs list``)
puts back while the record still lists its run, and removes otherwise.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ragnb.io import atomic_write_text, dumps_strict
from ragnb.runs.history import find_run
from ragnb.runs.record import RUNS_DIR, RUNS_FILE, check_run_id, load_runs, run_folder

TRASH = ".deleting."  # prefix of a run folder being deleted: a leading dot, which no run id may have


@dataclass
class Doomed:
    """One run to delete: whether benchmark_runs.json has its record, and its folder (None: it has none)."""

    run_id: str
    has_record: bool
    folder: Path | None


def _runs_root(outputs: Path) -> Path:
    return outputs / RUNS_DIR


def _own_folder(outputs: Path, run_id: str) -> Path | None:
    """The run's folder if it exists, after checking that it is a real folder directly inside ``<outputs>/runs``."""
    folder = run_folder(outputs, run_id)
    if not folder.exists() and not folder.is_symlink():
        return None
    root = _runs_root(outputs).resolve()
    if folder.is_symlink() or not folder.is_dir() or folder.resolve().parent != root:
        raise ValueError(f"{folder} is not a run folder inside {root} (a link or a file); ragnb deletes only its own "
                         "run folders — remove it by hand if it is not needed")
    return folder


def plan(outputs: str | Path, run_ids: list[str] | None) -> list[Doomed]:
    """What deleting ``run_ids`` (None: every run) would remove; ValueError, before anything is touched, for an
    empty list, an id that cannot be a folder name, an unknown id, or a folder that is not ragnb's."""
    outputs = Path(outputs).resolve()
    records = load_runs(outputs / RUNS_FILE)
    recorded = [str(r.get("id")) for r in records]
    if run_ids is None:
        root = _runs_root(outputs)
        folders = sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []
        ids = list(dict.fromkeys(recorded + [name for name in folders if _valid(name)]))
        return [Doomed(i, i in recorded, _own_folder(outputs, i) if _valid(i) else None) for i in ids]
    if not run_ids:
        raise ValueError("name the runs to delete (`ragnb runs list`), or ask for every run explicitly (--all)")
    out = []
    for run_id in dict.fromkeys(run_ids):
        folder = _own_folder(outputs, check_run_id(run_id))
        if folder is None and run_id not in recorded:
            find_run(records, run_id)  # raises, listing the known ids
        out.append(Doomed(run_id, run_id in recorded, folder))
    return out


def _valid(run_id: str) -> bool:
    try:
        check_run_id(run_id)
    except ValueError:
        return False
    return True


def settle_deletions(outputs: str | Path, timeout: float = 120.0) -> list[str]:
    """Finish what a crashed delete left (module docstring): a ``runs/.deleting.<id>`` folder goes back to
    ``runs/<id>`` while benchmark_runs.json still lists the run, and is removed otherwise. Returns the ids put back."""
    outputs = Path(outputs).resolve()
    root = _runs_root(outputs)
    if not root.is_dir() or not any(p.name.startswith(TRASH) for p in root.iterdir()):
        return []
    with FileLock(str(outputs / RUNS_FILE) + ".lock", timeout=timeout):
        return _settle(outputs)


def _settle(outputs: Path) -> list[str]:
    root = _runs_root(outputs)
    recorded = {str(r.get("id")) for r in load_runs(outputs / RUNS_FILE)}
    restored = []
    for trash in sorted(p for p in root.iterdir() if p.name.startswith(TRASH)):
        run_id = trash.name[len(TRASH):]
        if trash.is_symlink() or not trash.is_dir():
            continue  # not made by ragnb: left alone
        if run_id in recorded and _valid(run_id) and not (root / run_id).exists():
            trash.rename(root / run_id)
            restored.append(run_id)
        else:
            shutil.rmtree(trash)
    return restored


def delete_runs(outputs: str | Path, run_ids: list[str] | None, timeout: float = 120.0) -> dict:
    """Delete the runs ``run_ids`` (None: every run): their records in ``<outputs>/benchmark_runs.json`` and their
    folders ``<outputs>/runs/<run_id>``, all or none (module docstring). ValueError (nothing deleted) for what
    :func:`plan` refuses and for a run still executing. Returns what was removed."""
    from ragnb.runs.runner import run_lock  # the lock a runner holds while it writes into its run folder

    outputs = Path(outputs).resolve()
    if not outputs.is_dir():
        raise ValueError(f"no outputs folder {outputs}: there is no run to delete (`ragnb runs list`)")
    path = outputs / RUNS_FILE
    with FileLock(str(path) + ".lock", timeout=timeout), contextlib.ExitStack() as locks:
        _settle(outputs)
        doomed = plan(outputs, run_ids)
        for d in doomed:
            if d.folder is not None:
                locks.enter_context(run_lock(d.folder, d.run_id))  # refused while the run executes
        moved = _move_aside(doomed)
        try:
            records = load_runs(path)
            gone = {d.run_id for d in doomed}
            kept = [r for r in records if str(r.get("id")) not in gone]
            if len(kept) != len(records):
                atomic_write_text(path, dumps_strict(kept) + "\n")  # the commit: the runs are deleted
        except BaseException:
            for folder, trash in moved:
                trash.rename(folder)
            raise
        for _, trash in moved:
            shutil.rmtree(trash)
    return {"deleted": [{"run_id": d.run_id, "record_removed": d.has_record,
                         "folder_removed": str(d.folder) if d.folder else None} for d in doomed],
            "runs_left": len(kept)}


def _move_aside(doomed: list[Doomed]) -> list[tuple[Path, Path]]:
    """Rename each run folder to ``.deleting.<run_id>`` beside it; all renamed back if one rename fails."""
    moved: list[tuple[Path, Path]] = []
    try:
        for d in doomed:
            if d.folder is not None:
                trash = d.folder.with_name(TRASH + d.run_id)
                d.folder.rename(trash)
                moved.append((d.folder, trash))
    except BaseException:
        for folder, trash in moved:
            trash.rename(folder)
        raise
    return moved
