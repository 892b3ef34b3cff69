"""numba's on-disk cache for UMAP: compiled umap-learn / pynndescent code reused across processes.

Call :func:`enable_jit_cache` before anything imports umap (the ``vector_space`` notebook does it first).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ragnb import config

JIT_PACKAGES = ("umap", "pynndescent")
WARM_MARKER = ".ragnb-warm"  # in the cache folder once umap_warmup.warm_up() finished: the versions it compiled for

_JIT_STATE: dict | None = None  # what the first enable_jit_cache() call of this process did


def jit_cache_dir() -> Path:
    """Where compiled UMAP / pynndescent code is kept between processes: ``<RAGNB_HOME>/numba_cache``."""
    return config.ragnb_home() / "numba_cache"


def enable_jit_cache(cache_dir: str | Path | None = None) -> dict:
    """Import umap with numba's on-disk cache on for all its jitted functions, and say what was done.

    pynndescent marks its functions ``cache=True``, umap-learn 0.5 almost none of its own, so by default a
    fresh process recompiles UMAP's layout optimiser and graph code on every first fit. Turning on
    ``enable_caching()`` for every not-yet-cached numba dispatcher in ``umap.*`` and ``pynndescent.*`` makes
    a second fresh process load them from disk (benchmarks/bench_umap.py, 732 points: a new process's
    first fit 15 s → 0.8 s with :func:`ragnb.analysis.vector_space.project`, and ``import umap`` 17 s → 2.3 s; results bit-identical). numba keys each
    cache entry on the function's bytecode, closure values, source-file timestamp, numba version and CPU,
    so an upgrade of umap-learn or numba recompiles instead of loading stale code.

    The cache folder is ``NUMBA_CACHE_DIR`` when set, else ``cache_dir``, else :func:`jit_cache_dir`. numba
    binds pynndescent's ``cache=True`` functions to a folder when pynndescent is imported, so call this before
    anything imports umap (if something did, those functions keep numba's default folder — ``__pycache__``
    next to their source, or ``~/.cache/numba`` — and everything else still goes to the folder above). Later
    calls return what the first one did. Returns ``{"cache_dir", "functions_made_cacheable", "umap_was_imported"}``.
    """
    global _JIT_STATE
    if _JIT_STATE is not None:
        return dict(_JIT_STATE)
    already = any(name in sys.modules for name in JIT_PACKAGES)
    if not os.environ.get("NUMBA_CACHE_DIR"):
        target = Path(cache_dir) if cache_dir else jit_cache_dir()
        target.mkdir(parents=True, exist_ok=True)
        os.environ["NUMBA_CACHE_DIR"] = str(target)
        if "numba" in sys.modules:  # numba read its settings at import; make it read the new folder
            from numba.core import config as numba_config

            numba_config.reload_config()
    import umap  # noqa: F401  (imports pynndescent, whose cache=True functions bind the folder now)
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    made = 0
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in JIT_PACKAGES:
            continue
        for obj in list(vars(module).values()):
            if isinstance(obj, Dispatcher) and isinstance(obj._cache, NullCache):
                obj.enable_caching()
                made += 1
    _JIT_STATE = {"cache_dir": os.environ.get("NUMBA_CACHE_DIR"), "functions_made_cacheable": made,
                  "umap_was_imported": already}
    return dict(_JIT_STATE)


def _versions() -> str:
    from importlib.metadata import version

    return " ".join(f"{p}={version(p)}" for p in ("numba", "umap-learn", "pynndescent"))


def _cache_folder() -> Path:
    return Path(os.environ.get("NUMBA_CACHE_DIR") or jit_cache_dir())


def is_warm() -> bool:
    """Whether :func:`ragnb.analysis.umap_warmup.warm_up` finished for the installed numba / umap-learn / pynndescent in this cache."""
    try:
        return (_cache_folder() / WARM_MARKER).read_text(encoding="utf-8").strip() == _versions()
    except OSError:
        return False


def mark_warm() -> None:
    """Record in the cache that the installed versions' code is compiled (what :func:`is_warm` reads)."""
    (_cache_folder() / WARM_MARKER).write_text(_versions() + "\n", encoding="utf-8")
