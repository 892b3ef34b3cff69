"""What ``ragnb run`` prints while it works: ``[2/11] tier1 …`` when each notebook begins (with an ETA from
earlier runs' durations) and ends (with its duration), and the progress lines that long steps inside the
notebook report (:mod:`ragnb.progress`), relayed at the pace :func:`ragnb.progress.stderr_interval` sets.

ETA: each notebook's expected duration is the median ``duration_s`` of its last :data:`HISTORY` successful
executions in ``benchmark_runs.json``; the run's remaining time is the sum over the notebooks still to run (minus
the time the current one has already taken). Notebooks that never ran before have no estimate, and the ETA says
how many are left out rather than guessing.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ragnb.progress import PROGRESS_ENV, Clock, Step, format_duration, stderr_interval
from ragnb.runs.record import RUNS_FILE, load_runs

HISTORY = 5  # earlier executions a notebook's expected duration is the median of
POLL_S = 0.5


def expected_durations(outputs: str | Path) -> dict[str, float]:
    """``{stem: median seconds}`` over the last :data:`HISTORY` successful executions recorded in
    ``<outputs>/benchmark_runs.json`` (skipped and failed executions say nothing about the duration)."""
    try:
        runs = load_runs(Path(outputs) / RUNS_FILE)
    except ValueError:  # an unreadable history only costs the estimate; the run itself reports the file
        return {}
    seen: dict[str, list[float]] = {}
    for run in runs:
        for report in run.get("reports") or []:
            if not isinstance(report, dict) or report.get("status") != "ok":
                continue
            took = report.get("duration_s")
            if isinstance(took, (int, float)) and not isinstance(took, bool) and took > 0 and report.get("stem"):
                seen.setdefault(str(report["stem"]), []).append(float(took))
    return {stem: statistics.median(values[-HISTORY:]) for stem, values in seen.items()}


@dataclass
class RunProgress:
    """Per-notebook progress of one run: ``planned`` stems (one per execution, sweeps included)."""

    planned: list[str]
    expected: dict[str, float]
    log: Callable[[str], None]
    started: int = 0
    remaining: Counter = field(default_factory=Counter)
    current: tuple[str, float] | None = None
    name: str = ""  # of the notebook begun last

    def __post_init__(self) -> None:
        self.remaining = Counter(self.planned)

    def eta(self, now: float | None = None) -> str:
        """The remaining time of the run from the expected durations (module docstring)."""
        now = time.monotonic() if now is None else now
        known = sum(self.expected[s] * n for s, n in self.remaining.items() if s in self.expected)
        unknown = sum(n for s, n in self.remaining.items() if s not in self.expected)
        if self.current is not None:
            stem, since = self.current
            if stem in self.expected:
                known += max(self.expected[stem] - (now - since), 0.0)
            else:
                unknown += 1
        if not known and unknown:
            return "no estimate yet (no earlier run of these notebooks)"
        extra = f" + {unknown} notebook(s) never timed before" if unknown else ""
        return f"about {format_duration(known)} left{extra}"

    def begin(self, stem: str, name: str) -> None:
        self.started += 1
        if self.remaining[stem] > 0:
            self.remaining[stem] -= 1
        self.current, self.name = (stem, time.monotonic()), name
        usual = f"usually {format_duration(self.expected[stem])}" if stem in self.expected else "first timing"
        self.log(f"[{self.started}/{len(self.planned)}] {name} ({usual}) — run: {self.eta()}")

    def end(self, report: dict | None = None) -> None:
        """The notebook begun last has ended with ``report`` (None: interrupted, nothing to say)."""
        self.current = None
        if report is None:
            return
        took = report.get("duration_s")
        took_text = format_duration(took) if isinstance(took, (int, float)) else "?"
        outcome = {"ok": f"done in {took_text}", "failed": f"FAILED after {took_text}",
                   "skipped": "skipped (finished in an earlier run)"}.get(str(report.get("status")),
                                                                           str(report.get("status")))
        rest = f" — run: {self.eta()}" if sum(self.remaining.values()) else ""
        self.log(f"[{self.started}/{len(self.planned)}] {self.name} {outcome}{rest}")


class Relay:
    """Turns the JSON lines of a notebook's progress file into lines ``    name · label: …`` for ``log``: one
    :class:`ragnb.progress.Step` per label (so each step has its own pace and time left), at most one line
    every ``interval`` seconds of ``clock`` per step, always its first and last."""

    def __init__(self, name: str, log: Callable[[str], None], interval: float | None = None,
                 clock: Clock = time.monotonic) -> None:
        self.name, self.log, self.clock = name, log, clock
        self.interval = stderr_interval() if interval is None else interval
        self.steps: dict[str, Step] = {}

    def feed(self, line: str) -> str | None:
        """Relay one record; returns the line shown (None: not due, or not a progress record)."""
        try:
            data = json.loads(line)
            done, total, elapsed = int(data["done"]), int(data["total"]), float(data.get("elapsed_s") or 0.0)
        except (ValueError, KeyError, TypeError):
            return None
        label = str(data.get("label", "progress"))
        step = self.steps.setdefault(label, Step(label, str(data.get("unit") or ""), self.interval, self.clock))
        if done >= total:
            self.steps.pop(label, None)  # a later step with the same label starts afresh
        shown = step.line(done, total, elapsed)
        if shown is None:
            return None
        shown = f"    {self.name} · {shown}"
        self.log(shown)
        return shown


@contextlib.contextmanager
def follow(path: Path, name: str, log: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, the kernel it starts reports long steps into ``path`` (via ``RAGNB_PROGRESS_FILE``
    in the environment the kernel inherits) and a thread relays them to ``log`` (:class:`Relay`); the file is
    removed afterwards, so the run folder holds only the reports."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")
    before = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = str(path)
    stop = threading.Event()

    def pump() -> None:
        pending = ""  # a line the kernel is still writing
        relay = Relay(name, log)
        with open(path, encoding="utf-8") as fh:
            while True:
                pending += fh.readline()
                if pending.endswith("\n"):
                    relay.feed(pending)
                    pending = ""
                    continue
                if stop.is_set():
                    return
                stop.wait(POLL_S)

    thread = threading.Thread(target=pump, name=f"ragnb-progress-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        if before is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = before
        with contextlib.suppress(OSError):
            path.unlink()
