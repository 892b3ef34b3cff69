"""Compiling UMAP's code into numba's disk cache ahead of the vector-space map, in a child process at the lowest
CPU priority (the module a run starts for the ``vector_space`` notebook: :mod:`ragnb.runs.warmup`).

It sits above both what it compiles (:func:`ragnb.analysis.vector_space.project`) and the cache it fills
(:mod:`ragnb.analysis.umap_cache`).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from ragnb.analysis.umap_cache import enable_jit_cache, is_warm, mark_warm
from ragnb.analysis.vector_space import project


def warm_up() -> None:
    """Compile what :func:`ragnb.analysis.vector_space.project` runs into the cache: import umap, then a 2D
    and a 3D fit of a small float32 sample (numba specialises on types, not sizes)."""
    enable_jit_cache()
    sample = np.random.default_rng(0).normal(size=(64, 16)).astype(np.float32)
    for dims in (2, 3):
        project(sample, n_components=dims)
    mark_warm()


def warm_in_background() -> subprocess.Popen | None:
    """Start :func:`warm_up` in a child process at the lowest CPU priority when the cache is cold (None when it
    is warm). A run that will draw the vector-space map starts it first: on a cold cache compiling UMAP costs
    ~20 s of one core in that notebook, and the child compiles on cores the notebooks before it leave idle."""
    if is_warm():
        return None
    options: dict = {}
    if os.name == "posix":
        options["preexec_fn"] = lambda: os.nice(19)
    elif hasattr(subprocess, "IDLE_PRIORITY_CLASS"):
        options["creationflags"] = subprocess.IDLE_PRIORITY_CLASS
    return subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, **options)


if __name__ == "__main__":
    warm_up()
