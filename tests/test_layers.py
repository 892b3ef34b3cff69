"""The package's layers: data flows one way, and imports only point backwards along it.

``LAYERS`` is the one list of the layers, lowest first. A module belongs to the layer of the longest prefix that
names it, and may import only modules of its own layer or of layers before it. Every import counts — at the top of
a module, inside a function, under ``TYPE_CHECKING`` — because each is a dependency a contributor has to keep
working. One import is allowed upwards: the dashboard notebook reads run records (``ALLOWED_UPWARD``).

The package ``ragnb`` itself (its ``__init__``, the public API) is the top: it may name anything, and a module
inside may take only ``__version__`` and ``__file__`` from it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragnb

PACKAGE = Path(ragnb.__file__).resolve().parent

# (layer, module prefixes), lowest first. The README's order — files → store → embeddings → retrieval/system →
# tiers → notebooks → runs — made exact: encoders sit below the store (it embeds the tables it loads), the LLM
# client below the encoders (an endpoint encoder calls it), the LLM judges above the system they judge.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("files", ("ragnb.io", "ragnb.config", "ragnb.envvars", "ragnb.progress", "ragnb.datasets.urls")),
    ("metrics", ("ragnb.metrics",)),
    ("spec", ("ragnb.spec",)),
    ("llm client", ("ragnb.llm",)),
    ("embeddings", ("ragnb.rag.encoders", "ragnb.rag.embeddings", "ragnb.rag.embedding_cache")),
    ("store", ("ragnb.store",)),
    ("retrieval/system", ("ragnb.rag",)),
    ("llm judges", ("ragnb.llm.judges",)),
    ("datasets", ("ragnb.datasets",)),
    ("tiers", ("ragnb.tiers",)),
    ("analysis", ("ragnb.analysis",)),
    ("display", ("ragnb.reports",)),  # what notebooks show
    ("notebooks", ("ragnb.notebooks",)),
    ("runs", ("ragnb.runs",)),  # the runner, run records, the pages and index a run writes, comparison
    ("cli", ("ragnb.cli",)),
    ("public API", ("ragnb",)),
)

# (importing module, imported prefix, why): the only imports allowed to point up.
ALLOWED_UPWARD = (
    ("ragnb.notebooks.dashboard", "ragnb.runs", "the dashboard notebook displays the run records runs write"),
)

ROOT_NAMES = {"__version__", "__file__"}  # what a module may take from the package itself


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix naming ``module``."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None or (LAYERS[best][1] == ("ragnb",) and module != "ragnb"):
        raise AssertionError(f"{module} is in no layer: add its package to LAYERS in tests/test_layers.py")
    return best


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(module: str, source: str, is_package: bool) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, imported module, names taken from it) for every ``ragnb`` import in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, ()) for a in node.names if a.name.partition(".")[0] == "ragnb"]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            if target.partition(".")[0] == "ragnb":
                found.append((node.lineno, target, tuple(a.name for a in node.names)))
    return found


def resolve(target: str, names: tuple[str, ...], modules: set[str]) -> list[str]:
    """The package modules an import reaches: ``from a import b`` reaches ``a.b`` when that is a module."""
    reached = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
    rest = [n for n in names if f"{target}.{n}" not in modules]
    if rest or not names:
        parts = target.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        reached.append(".".join(parts))
    return reached


def violations(module: str, source: str, is_package: bool, modules: set[str]) -> list[str]:
    """Each import of ``module`` that points to a later layer than its own, as a readable line."""
    out = []
    own = layer_of(module)
    for line, target, names in imports_of(module, source, is_package):
        for reached in resolve(target, names, modules):
            if reached == "ragnb" and module != "ragnb":
                taken = set(n for n in names if f"ragnb.{n}" not in modules)
                if taken <= ROOT_NAMES:
                    continue
                out.append(f"{module}:{line} takes {sorted(taken - ROOT_NAMES)} from the package's public API; "
                           f"import them from the module that defines them")
                continue
            if layer_of(reached) <= own:
                continue
            if any(module == m and (reached == p or reached.startswith(p + ".")) for m, p, _ in ALLOWED_UPWARD):
                continue
            out.append(f"{module}:{line} ({LAYERS[own][0]}) imports {reached} ({LAYERS[layer_of(reached)][0]}), "
                       f"a later layer")
    return out


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_import_points_backwards_along_the_layers():
    modules = package_modules()
    found = []
    for name, path in modules.items():
        found += violations(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", set(modules))
    assert not found, "upward imports (tests/test_layers.py lists the layers):\n" + "\n".join(found)


def test_the_allowed_upward_import_is_still_there():
    # An exception that nothing uses any more would let a future upward import through unnoticed.
    modules = package_modules()
    for module, prefix, _ in ALLOWED_UPWARD:
        reached = {r for _, t, n in imports_of(module, modules[module].read_text(encoding="utf-8"), False)
                   for r in resolve(t, n, set(modules))}
        assert any(r == prefix or r.startswith(prefix + ".") for r in reached), (module, prefix)


@pytest.mark.parametrize("module, source, expected", [
    ("ragnb.spec", "def f():\n    from ragnb.runs.record import metric_value\n", ["ragnb.runs.record"]),
    ("ragnb.store.vectors", "from ragnb import datasets\n", ["ragnb.datasets "]),  # the package: a later layer
    ("ragnb.store.vectors", "from ..datasets import urls\n", []),
    ("ragnb.reports.report", "import ragnb.runs.record\n", ["ragnb.runs.record"]),
    ("ragnb.tiers.ux", "from ragnb import evaluate_retrieval\n", ["public API"]),
    ("ragnb.runs.runner", "import ragnb\nfrom ragnb import __version__\n", []),
    ("ragnb.notebooks.tier1", "from ragnb.runs import compare\n", ["ragnb.runs.compare"]),
    ("ragnb.notebooks.dashboard", "from ragnb.runs import compare\n", []),
])
def test_the_walk_finds_upward_imports(module, source, expected):
    modules = set(package_modules())
    found = violations(module, source, False, modules)
    assert len(found) == len(expected), found
    for f, e in zip(found, expected):
        assert e in f, f
