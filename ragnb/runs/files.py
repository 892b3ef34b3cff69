"""What a run writes, written safely: executed notebooks atomically, failed notebooks never taken as done, and
a full disk as one message.

papermill saves the output notebook after every cell (and at the end) with a plain ``open(path, "w")``, so a
full disk leaves a truncated ``.ipynb`` that is not valid JSON. The runner names its output notebook as a
``file://`` URI (:func:`output_uri`), a scheme papermill has no handler of its own for; the handler registered
here writes through :func:`ragnb.io.atomic_write_text`: the previous save stays whole, and a full disk is a
:class:`ragnb.io.DiskFullError`.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from ragnb.io import DISK_FULL_FIX, atomic_write_text, disk_full_error, format_bytes, is_disk_full, read_text

SCHEME = "file://"
_CELL = re.compile(r" \(cell In \[\d*\]\)")  # where a notebook's error happened (runner._error_text)
_registered = threading.Lock()
_done = False


def local_path(uri: str) -> Path:
    """``file:///a/b%20c.ipynb`` → ``/a/b c.ipynb``; a plain path is returned as is."""
    return Path(url2pathname(urlparse(uri).path)) if uri.startswith(SCHEME) else Path(uri)


class AtomicFileHandler:
    """A papermill I/O handler (``read``, ``write``, ``listdir``, ``pretty_path``) for ``file://`` URIs."""

    def read(self, path: str) -> str:
        return read_text(local_path(path), "notebook")

    def write(self, buf: str, path: str) -> None:
        # saved after every cell: no fsync each time (as papermill's own writes), but never half a file
        atomic_write_text(local_path(path), buf, durable=False)

    def listdir(self, path: str) -> list[str]:
        folder = local_path(path)
        return [(folder / name).as_uri() for name in os.listdir(folder)]

    def pretty_path(self, path: str) -> str:
        return str(local_path(path))


def output_uri(path: str | Path) -> str:
    """The ``file://`` URI to give papermill as the output path of ``path`` (registers the handler once)."""
    global _done
    with _registered:
        if not _done:
            from papermill.iorw import papermill_io

            papermill_io.register(SCHEME, AtomicFileHandler())
            _done = True
    return Path(path).resolve().as_uri()


def make_folder(folder: Path) -> Path:
    """``mkdir -p folder``, a full disk (a folder needs a block on most filesystems) as :class:`DiskFullError`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full_error(folder) from None
        raise
    return folder


def set_aside(metrics: Path) -> None:
    """Rename a failed notebook's ``<stem>.metrics.json`` to ``<stem>.metrics.failed.json``: its presence is what
    marks a notebook as done, and a failed notebook is never done (a resume runs it again)."""
    if metrics.exists():
        metrics.replace(metrics.with_name(metrics.name.replace(".metrics.json", ".metrics.failed.json")))


def resume_message(detail: str, run_id: str) -> str:
    """A disk-full message (:func:`disk_full_detail`) with how to go on: free space, resume the run."""
    return (f"{detail.replace('; ' + DISK_FULL_FIX, '')} — nothing half-written was kept; free some space on that "
            f"disk, then resume the run with --run-id {run_id}: the notebook that failed runs again, finished ones "
            "are kept")


def disk_full_detail(name: str, error: str, out_dir: Path) -> str:
    """What a notebook's disk-full failure says, without the exception's class and cell: the file, folder and
    space of :func:`ragnb.io.disk_full_error`, or (an ``OSError`` raised by other code) the folder and free space."""
    at = error.find("disk full: ")
    if at >= 0:
        return f"disk full while running {name}: {_CELL.sub('', error[at + len('disk full: '):]).splitlines()[0]}"
    try:
        free = f"{format_bytes(shutil.disk_usage(out_dir).free)} free"
    except OSError:
        free = "free space unknown"
    return f"disk full while running {name}: cannot write in {out_dir} ({free}): {error.splitlines()[0]}"
