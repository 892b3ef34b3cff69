"""Run a coroutine from synchronous code — plain scripts and notebooks (inside Jupyter's running loop) alike.

This is the one bridge from sync to async in ragnb: every ``evaluate_sync`` / ``.sync`` call goes through
:func:`run_sync`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# Clients register here so that the connections they opened on a temporary loop are closed with it.
LIVE_CLIENTS: weakref.WeakSet[Any] = weakref.WeakSet()


async def _run_and_release(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return await coro
    finally:
        # The loop is about to close: close the HTTP connections clients opened on it.
        for client in list(LIVE_CLIENTS):
            await client.aclose()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code.

    In plain Python this is ``asyncio.run``. Inside a running event loop (Jupyter) it runs the coroutine
    on a fresh loop in a worker thread and blocks until it finishes, so notebooks can call it directly.
    Connections opened on that temporary loop are closed before it returns; clients stay reusable.
    """
    if not asyncio.iscoroutine(coro):
        raise ValueError("run_sync expects a coroutine, e.g. run_sync(client.chat(...))")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_run_and_release(coro))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragnb-run-sync") as pool:
        return pool.submit(asyncio.run, _run_and_release(coro)).result()



class SyncView:
    """``obj.sync.method(...)`` = ``run_sync(obj.method(...))`` for every coroutine method of ``obj``, so an
    async API gets its synchronous twin without a second definition of each method."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._obj, name)
        if not inspect.iscoroutinefunction(method):
            raise AttributeError(f"{type(self._obj).__name__}.{name} is not a coroutine method; call it directly")

        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            return run_sync(method(*args, **kwargs))

        return call

    def __dir__(self) -> list[str]:
        return [n for n in dir(self._obj) if not n.startswith("_")
                and inspect.iscoroutinefunction(getattr(self._obj, n, None))]
