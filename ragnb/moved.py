"""Old import paths of modules that moved to the folder of their layer: they keep working for one release, with a
:class:`DeprecationWarning` naming the new path (0.1 → 0.2: the layout of issue 28, one folder per layer).

``import ragnb.rag.embeddings`` (or any module under an old path) gives the module at its new path — the same
object, so ``ragnb.rag.embeddings.get_encoder is ragnb.embeddings.models.get_encoder`` — and warns once, where
it is first imported. One finder on :data:`sys.meta_path`, installed by ``ragnb/__init__.py``, handles every
old path; nothing else in the package refers to them.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType

REMOVED_IN = "0.2"

# old module (and everything under it) → new module; longest match wins
MOVED: dict[str, str] = {
    "ragnb.rag.encoders": "ragnb.embeddings",
    "ragnb.rag.embeddings": "ragnb.embeddings.models",
    "ragnb.rag.embedding_cache": "ragnb.embeddings.cache",
    "ragnb.llm.judges": "ragnb.judges",
    "ragnb.datasets.urls": "ragnb.urls",
}


def new_name(old: str) -> str | None:
    """The module's new path, or None when ``old`` is no moved path."""
    for prefix in sorted(MOVED, key=len, reverse=True):
        if old == prefix or old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix):]
    return None


def _importer_level() -> int:
    """The ``stacklevel`` of the line that imported the old path, so that the warning names the user's file and line
    (and shows where Python shows DeprecationWarnings). :func:`warnings.warn` skips the frozen import machinery
    itself; ``importlib.import_module`` is skipped here."""
    frame, level = sys._getframe(2), 2  # the caller of create_module
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        if not (name.startswith("<frozen importlib") or name.endswith("importlib/__init__.py")):
            break
        if not name.startswith("<frozen importlib"):  # warnings counts this frame, not the frozen ones
            level += 1
        frame = frame.f_back
    return level


class _MovedPaths:
    """Finder and loader of the old paths: the module is imported from its new path and also bound to the old."""

    def __init__(self) -> None:
        self._specs: dict[str, ModuleSpec | None] = {}  # old path → the module's own spec, while it is bound

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if not fullname.startswith("ragnb."):
            return None
        new = new_name(fullname)
        return None if new is None else ModuleSpec(fullname, self, origin=new)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = str(spec.origin)
        warnings.warn(f"{spec.name} moved to {new}; import it from there ({spec.name} goes in ragnb {REMOVED_IN})",
                      DeprecationWarning, stacklevel=_importer_level())
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__  # the import system now sets the old path's spec on it
        return module

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is not None and spec.name in self._specs:
            module.__spec__ = self._specs.pop(spec.name)  # the module keeps its own name and spec


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (once): an old path must not be found as a namespace
    package or a stale file elsewhere on ``sys.path``."""
    if not any(isinstance(f, _MovedPaths) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedPaths())
