"""Compile ahead, at the lowest CPU priority, what a notebook of the run would otherwise compile while it runs.

A notebook declares it in its :class:`ragnb.spec.TierSpec` (``warm_up``: a module with ``warm_in_background()``
returning the child process it started, or None when there is nothing to compile). The vector-space map is the
one today: on a cold numba cache, UMAP's code takes ~20 s of one core to compile; a child process started when
the run starts does it on the cores the notebooks before it leave idle (lowest priority: it never takes CPU a
notebook could use), and the notebook then loads the compiled code from disk.
"""

from __future__ import annotations

import contextlib
import importlib
import subprocess
from typing import Iterable

from ragnb import spec

_RUNNING: dict[str, subprocess.Popen] = {}  # module → its warm-up child, so that no run starts a second one


def start(stems: Iterable[str]) -> list[subprocess.Popen]:
    """Start the warm-ups the notebooks ``stems`` declare and that are not running yet; returns those started."""
    modules = [t.warm_up for t in (spec.by_stem(s) for s in stems) if t is not None and t.warm_up]
    started = []
    for module in dict.fromkeys(modules):
        running = _RUNNING.get(module)
        if running is not None and running.poll() is None:
            continue
        with contextlib.suppress(Exception):  # a warm-up is only ever a head start: the notebook compiles anyway
            proc = importlib.import_module(module).warm_in_background()
            if proc is not None:
                _RUNNING[module] = proc
                started.append(proc)
    return started


def stop(procs: Iterable[subprocess.Popen]) -> None:
    """End warm-ups a caller started (their notebooks have run): no child outlives the run."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
