"""Progress of long steps — embedding rows, items scored, notebooks of a run — as plain lines on stderr.

A long step reports ``(done, total)`` through :func:`reporter` or :func:`track`. Where the report goes:

* inside a notebook that ``ragnb run`` executes, the kernel's environment names a progress file
  (``RAGNB_PROGRESS_FILE``): one JSON line ``{"label", "unit", "done", "total", "elapsed_s"}`` is appended at
  most every :data:`MIN_INTERVAL_S` seconds (and on the last item); the runner follows the file and relays the
  lines to its own stderr (:mod:`ragnb.runs.progress`). Nothing goes to the cell's output, so the HTML report
  stays clean;
* in the ``ragnb`` command itself (which calls :func:`show_on_stderr`): a line on stderr;
* anywhere else (JupyterLab, plain papermill, a script): nowhere, at no cost.

Lines, never a redrawn bar, and always on stderr whatever stdout is: a CI log, ``nohup`` or a notebook server's
log keeps every line as it happens. On a terminal a step prints at most every :data:`MIN_INTERVAL_S` seconds,
elsewhere at most every :data:`LOG_INTERVAL_S` seconds, so that a log stays readable; the first and the last
report of a step always print.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Callable, Iterable, Iterator, TypeVar

PROGRESS_ENV = "RAGNB_PROGRESS_FILE"
MIN_INTERVAL_S = 2.0  # a line at most every 2 s: readable in a terminal, negligible cost
LOG_INTERVAL_S = 10.0  # stderr that is not a terminal (a log file): one line every ~10 s per step

T = TypeVar("T")
Clock = Callable[[], float]

_on_stderr = False  # set by the ragnb command (show_on_stderr); a library or a notebook stays quiet


def show_on_stderr(enabled: bool = True) -> None:
    """Let reporters with no runner listening print their lines on stderr (the ``ragnb`` command does)."""
    global _on_stderr
    _on_stderr = enabled


def stderr_interval() -> float:
    """Seconds between two lines of a step on stderr: :data:`MIN_INTERVAL_S` on a terminal, else
    :data:`LOG_INTERVAL_S`."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        tty = False
    return MIN_INTERVAL_S if tty else LOG_INTERVAL_S


def emit(line: str) -> None:
    """One progress line on stderr, flushed at once (a log shows it when it happens)."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # progress is a courtesy: a closed stderr never fails the work
        pass


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Step:
    """One long step's reports: which of them are due, and the line each shows.

    :meth:`due`: at most one report every ``interval`` seconds of ``clock``, but always the first and the last
    (``done >= total``); ``total`` 0: not known yet (a file being read), reports by the clock alone, shown as
    ``label: done unit, elapsed``. :meth:`line`: ``label: done/total unit (pct%), elapsed, ~left`` — the time left is
    extrapolated from the rate since the step's first report with ``done > 0``, so a slow start (loading a
    model, warming a cache) does not inflate it; that report itself gets no estimate.
    """

    def __init__(self, label: str, unit: str = "", interval: float = MIN_INTERVAL_S, clock: Clock = time.monotonic):
        self.label, self.unit, self.interval, self.clock = label, unit, interval, clock
        self.start = clock()
        self._last = -math.inf
        self._base: tuple[int, float] | None = None

    def due(self, done: int, total: int) -> bool:
        now = self.clock()
        if (done < total or total <= 0) and now - self._last < self.interval:
            return False
        self._last = now
        return True

    def text(self, done: int, total: int, elapsed: float | None = None) -> str:
        """The line of a report (``elapsed``: seconds since the step began, default by ``clock``)."""
        elapsed = self.clock() - self.start if elapsed is None else elapsed
        if self._base is None and done > 0:
            self._base = (done, elapsed)
        unit = f" {self.unit}" if self.unit else ""
        text = f"{self.label}: {done}/{total}{unit}" if total > 0 else f"{self.label}: {done}{unit}"
        if total > 0:
            text += f" ({100 * done / total:.0f}%)"
        text += f", {format_duration(elapsed)}"
        if self._base is not None and self._base[0] < done < total and elapsed > self._base[1]:
            rate = (elapsed - self._base[1]) / (done - self._base[0])
            text += f", ~{format_duration(rate * (total - done))} left"
        return text

    def line(self, done: int, total: int, elapsed: float | None = None) -> str | None:
        """The line of a report when it is due, else None (the rate still learns from it)."""
        text = self.text(done, total, elapsed)
        return text if self.due(done, total) else None


def reporter(label: str, unit: str = "", min_interval: float | None = None,
             clock: Clock = time.monotonic) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` callback (module docstring: where it reports), or None when nothing listens
    — so callers can pass it where ``progress=None`` means "no progress". ``min_interval`` overrides the
    seconds between two reports; ``clock`` is for tests."""
    path = os.environ.get(PROGRESS_ENV)
    if path:
        return _file_reporter(path, Step(label, unit, MIN_INTERVAL_S if min_interval is None else min_interval,
                                         clock))
    if not _on_stderr:
        return None
    step = Step(label, unit, stderr_interval() if min_interval is None else min_interval, clock)

    def report(done: int, total: int) -> None:
        shown = step.line(int(done), int(total))
        if shown is not None:
            emit(shown)

    return report


def _file_reporter(path: str, step: Step) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        if not step.due(done, total):
            return
        line = json.dumps({"label": step.label, "unit": step.unit, "done": int(done), "total": int(total),
                           "elapsed_s": round(step.clock() - step.start, 2)}, ensure_ascii=False)
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        except OSError:  # progress is a courtesy: never fail a notebook over it
            pass

    return report


def track(items: Iterable[T], label: str, total: int | None = None, unit: str = "") -> Iterator[T]:
    """``for x in track(items, "encoding chunks"): …`` — yields ``items`` and reports each step (see module)."""
    report = reporter(label, unit)
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
