"""Progress of long steps inside a notebook, shown in the terminal that runs ``ragnb run`` — not in the report.

``ragnb run`` executes each notebook in a kernel whose environment names a progress file
(``RAGNB_PROGRESS_FILE``); a long step reports ``(done, total)`` through :func:`reporter` or :func:`track`, which
append one JSON line ``{"label", "done", "total", "elapsed_s"}`` to that file at most every
:data:`MIN_INTERVAL_S` seconds (and on the last item). The runner follows the file and prints the lines
(:mod:`ragnb.runs.progress`). Nothing goes to the cell's output, so the HTML report stays clean; without the
variable (JupyterLab, plain papermill) reporting costs nothing and shows nothing.
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable, Iterable, Iterator, TypeVar

PROGRESS_ENV = "RAGNB_PROGRESS_FILE"
MIN_INTERVAL_S = 2.0  # a line at most every 2 s: readable in a terminal, negligible cost

T = TypeVar("T")


def reporter(label: str, min_interval: float = MIN_INTERVAL_S) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` callback writing to the runner's progress file, or None when no runner
    listens (so callers can pass it where ``progress=None`` means "no progress")."""
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return None
    start = time.monotonic()
    last = [float("-inf")]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < min_interval and done < total:
            return
        last[0] = now
        line = json.dumps({"label": label, "done": int(done), "total": int(total),
                           "elapsed_s": round(now - start, 2)}, ensure_ascii=False)
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        except OSError:  # progress is a courtesy: never fail a notebook over it
            pass

    return report


def track(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """``for x in track(items, "encoding chunks"): …`` — yields ``items`` and reports each step (see module)."""
    report = reporter(label)
    if report is None:
        yield from items
        return
    if total is None:
        total = len(items) if hasattr(items, "__len__") else 0  # type: ignore[arg-type]
    done = 0
    for item in items:
        yield item
        done += 1
        report(done, max(total, done))
