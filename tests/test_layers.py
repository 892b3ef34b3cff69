"""The package's layers: data flows one way, and imports only point backwards along it.

``LAYERS`` is the one list of the layers, lowest first, each a set of folders of ``ragnb/`` (or top-level
modules): a module's layer is its folder's, so its path names its layer. A module may import only modules of its
own layer or of layers before it. Every import counts — at the top of a module, inside a function, under
``TYPE_CHECKING``, relative — because each is a dependency a contributor has to keep working; so does an import
of the package itself (``import ragnb`` from inside is an import of the top). An import by name
(``importlib.import_module``, ``__import__``) counts too: the modules that make one are listed in
``DYNAMIC_IMPORTS`` with what they may import, and the ragnb module names they hold as text are checked against it.
An old path of a moved module (:mod:`ragnb.moved`) is no way round: inside the package it is refused.

Inside a layer imports may go either way, but never in a circle (:func:`test_no_circle_of_imports_inside_a_layer`):
modules in a circle cannot be read, tested or moved one at a time. The package ``ragnb`` itself (its
``__init__``, the public API, and the old paths it keeps for one release) is the top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import ragnb
from ragnb.moved import new_name

PACKAGE = Path(ragnb.__file__).resolve().parent

# (layer, folders or top-level modules of ragnb/), lowest first. The README's order — files → store → embeddings →
# retrieval/system → tiers → notebooks → runs — made exact: the embeddings below the store (it embeds the tables
# it loads), the LLM client below the embeddings (an endpoint encoder calls it), the LLM judges above the system
# they judge; the notebooks above the runs: the runner runs them as files and never imports one, and the dashboard
# notebook shows the run records runs write.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("files", ("io", "config", "envvars", "progress", "version", "urls")),
    ("metrics", ("metrics",)),
    ("spec", ("spec",)),
    ("llm client", ("llm",)),
    ("embeddings", ("embeddings",)),
    ("store", ("store",)),
    ("retrieval/system", ("rag",)),
    ("llm judges", ("judges",)),
    ("datasets", ("datasets",)),
    ("tiers", ("tiers",)),
    ("analysis", ("analysis",)),
    ("display", ("reports",)),  # what notebooks show
    ("runs", ("runs",)),  # the runner, run records, the pages and index a run writes, comparison
    ("notebooks", ("notebooks",)),
    ("cli", ("cli",)),
    ("public API", ("__init__", "moved")),
)

# (module, module, why): circles of imports inside a layer that could not be broken yet. At most two.
ALLOWED_CIRCLES: tuple[tuple[str, str, str], ...] = ()

# (module, ragnb prefixes it may import *by name*, why): every module that imports through importlib
# (``importlib.import_module``, ``__import__``), whose targets the import walk above cannot see. A module that
# imports by name must be listed, and may name (as text) and import only its own layer, the layers before it and
# the prefixes listed here — so an upward import cannot pass as a string.
DYNAMIC_IMPORTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("ragnb", ("ragnb",), "the lazy public API: each public name is imported from its module on first use"),
    ("ragnb.moved", (), "an old path of a moved module gives the module at its new path, for one release"),
    ("ragnb.metrics.registry", ("ragnb.judges", "ragnb.rag.retrieval", "ragnb.tiers", "ragnb.analysis"),
     "load_all imports the metric packages (METRIC_PACKAGES); a declared metric's computed_by is imported on use"),
    ("ragnb.runs.warmup", ("ragnb.analysis.umap_warmup",), "the warm-up module a TierSpec names (spec.warm_up)"),
    ("ragnb.rag.system", (), "the user's system, 'package.module:attribute' given by the user, never a ragnb one"),
)
_MODULE_TEXT = re.compile(r"^(ragnb(?:\.[a-z_][a-z0-9_]*)+)(?::[\w.]+)?$")


def top_of(module: str) -> str:
    """The folder or top-level module of ``ragnb/`` that holds ``module`` (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer whose folders hold ``module``."""
    for i, (_, tops) in enumerate(LAYERS):
        if top_of(module) in tops:
            return i
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS in tests/test_layers.py")


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
    """Each import of ``module`` that points to a later layer than its own, or names a moved module by its old
    path, as a readable line."""
    out = []
    own = layer_of(module)
    for line, target, names in imports_of(module, source, is_package):
        old = [t for t in [target, *(f"{target}.{n}" for n in names)] if new_name(t)]
        if old and top_of(module) not in LAYERS[-1][1]:
            out.append(f"{module}:{line} imports {old[0]}, the old path of {new_name(old[0])}; use the new one")
            continue
        for reached in resolve(target, names, modules):
            if layer_of(reached) > own:
                what = "the package's public API" if reached == "ragnb" else reached
                out.append(f"{module}:{line} ({LAYERS[own][0]}) imports {what} ({LAYERS[layer_of(reached)][0]}), "
                           "a later layer" + ("; import from the module that defines it" if reached == "ragnb" else ""))
    return out


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """module → the package modules it imports (every import, as :func:`violations` reads them)."""
    modules = package_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = imports_of(name, path.read_text(encoding="utf-8"), path.name == "__init__.py")
        graph[name] = {r for _, t, n in found for r in resolve(t, n, set(modules))} - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph``: its strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:  # recursion depth ≤ the longest import chain, a few dozen
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_every_import_points_backwards_along_the_layers():
    modules = package_modules()
    found = []
    for name, path in modules.items():
        found += violations(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", set(modules))
    assert not found, "upward imports (tests/test_layers.py lists the layers):\n" + "\n".join(found)


def test_every_folder_is_in_one_layer():
    tops = [t for _, ts in LAYERS for t in ts]
    assert len(tops) == len(set(tops)), "a folder listed in two layers"
    present = {top_of(m) for m in package_modules()}
    assert present <= set(tops), f"folders in no layer: {sorted(present - set(tops))}"
    assert set(tops) <= present, f"LAYERS lists folders that do not exist: {sorted(set(tops) - present)}"


def test_no_circle_of_imports_inside_a_layer():
    """Modules that import each other round a circle (through any import, one inside a function too) are one
    module in practice; only the circles in ALLOWED_CIRCLES (at most two, each with its reason) are left."""
    assert len(ALLOWED_CIRCLES) <= 2
    found = circles(import_graph())
    allowed = [c for c in found if any(a in c and b in c for a, b, _ in ALLOWED_CIRCLES)]
    new = [c for c in found if c not in allowed]
    assert not new, ("circles of imports (move what the modules share into a module below them):\n"
                     + "\n".join(", ".join(c) for c in new))
    # and each allowance still names a circle: one that nothing needs would let a new circle through
    for a, b, _ in ALLOWED_CIRCLES:
        assert any(a in c and b in c for c in found), (a, b)


def test_the_circle_walk_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}, "g": {"g"}}
    assert circles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("module, source, expected", [
    ("ragnb.spec", "def f():\n    from ragnb.runs.record import metric_value\n", ["ragnb.runs.record"]),
    ("ragnb.store.vectors", "from ragnb import datasets\n", ["ragnb.datasets "]),  # the package: a later layer
    ("ragnb.store.vectors", "from .. import urls\n", []),
    ("ragnb.store.vectors", "from ..datasets import build\n", ["ragnb.datasets.build"]),
    ("ragnb.reports.report", "import ragnb.runs.record\n", ["ragnb.runs.record"]),
    ("ragnb.tiers.ux", "from ragnb import evaluate_retrieval\n", ["public API"]),
    ("ragnb.runs.runner", "import ragnb\nfrom ragnb import __version__\n", ["public API", "public API"]),
    ("ragnb.runs.runner", "from ragnb.version import __version__\n", []),
    ("ragnb.runs.runner", "import ragnb.notebooks.tier1\n", ["ragnb.notebooks.tier1"]),
    ("ragnb.notebooks.dashboard", "from ragnb.runs import compare\n", []),
    ("ragnb.store.vectors", "from ragnb.rag.encoders.base import TextEncoder\n", ["old path"]),
    ("ragnb.llm.client", "from ragnb.llm import judges\n", ["old path of ragnb.judges"]),
    ("ragnb.tiers.ux", "import ragnb.rag.embeddings\n", ["old path of ragnb.embeddings.models"]),
])
def test_the_walk_finds_upward_imports(module, source, expected):
    modules = set(package_modules())
    found = violations(module, source, False, modules)
    assert len(found) == len(expected), found
    for f, e in zip(found, expected):
        assert e in f, f


def dynamic_imports(source: str) -> list[int]:
    """Lines that import a module by name: ``importlib.import_module(…)``, ``import_module(…)``,
    ``__import__(…)``."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
        or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))]


def named_modules(source: str, modules: set[str]) -> list[tuple[int, str]]:
    """(line, module) for every text constant of ``source`` that names a package module (``"ragnb.x.y"`` or
    ``"ragnb.x.y:function"``): what an import by name may be given."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := _MODULE_TEXT.match(node.value)):
            found += [(node.lineno, r) for r in resolve(m.group(1), (), modules) if r != "ragnb"]
    return found


def dynamic_violations(module: str, source: str, modules: set[str]) -> list[str]:
    """An import by name in a module not listed in DYNAMIC_IMPORTS, and each module a listed one names that lies in
    a later layer outside its allowed prefixes."""
    listed = {m: prefixes for m, prefixes, _ in DYNAMIC_IMPORTS}
    if module not in listed:
        return [f"{module}:{line} imports a module by name; list it in DYNAMIC_IMPORTS (tests/test_layers.py) with "
                "the ragnb modules it may import, or import normally" for line in dynamic_imports(source)]
    own = layer_of(module)
    return [f"{module}:{line} ({LAYERS[own][0]}) names {reached} ({LAYERS[layer_of(reached)][0]}) to import it by "
            f"name, a later layer not in its DYNAMIC_IMPORTS entry"
            for line, reached in named_modules(source, modules)
            if layer_of(reached) > own and not any(reached == p or reached.startswith(p + ".") for p in listed[module])]


def test_every_import_by_name_is_listed_and_points_backwards_or_where_listed():
    modules = package_modules()
    found = []
    for name, path in modules.items():
        found += dynamic_violations(name, path.read_text(encoding="utf-8"), set(modules))
    assert not found, "imports by name (tests/test_layers.py, DYNAMIC_IMPORTS):\n" + "\n".join(found)


def test_what_the_listed_modules_import_by_name_is_within_their_entries():
    # The names these modules import come from data elsewhere (declared.py's computed_by, spec.py's warm_up).
    from ragnb import spec
    from ragnb.metrics import registry

    allowed = {m: prefixes for m, prefixes, _ in DYNAMIC_IMPORTS}
    given = {"ragnb.metrics.registry": [*registry.METRIC_PACKAGES[1:], *(m.computed_by.partition(":")[0]
                                         for m in registry.load_all().values() if m.computed_by)],
             "ragnb.runs.warmup": [t.warm_up for t in spec.TIERS if t.warm_up]}
    for module, targets in given.items():
        own = layer_of(module)
        for target in targets:
            assert layer_of(target) <= own or any(target == p or target.startswith(p + ".") for p in allowed[module]), \
                (module, target)
    # and each entry is still needed: an allowance nothing uses would let a later upward import through
    modules = package_modules()
    for module, prefixes, _ in DYNAMIC_IMPORTS:
        assert dynamic_imports(modules[module].read_text(encoding="utf-8")), f"{module} no longer imports by name"
        for p in prefixes[1:] if module == "ragnb" else prefixes:
            assert any(t == p or t.startswith(p + ".") for t in given.get(module, [])), (module, p)


@pytest.mark.parametrize("module, source, expected", [
    ("ragnb.spec", "import importlib\nimportlib.import_module('ragnb.runs.record')\n", ["list it in DYNAMIC_IMPORTS"]),
    ("ragnb.tiers.tier1", "m = __import__('ragnb.runs.record')\n", ["list it in DYNAMIC_IMPORTS"]),
    ("ragnb.metrics.registry", "X = 'ragnb.runs.record:metric_value'\n", ["names ragnb.runs.record"]),
    ("ragnb.metrics.registry", "X = ('ragnb.tiers.ux:run_tier_ux', 'ragnb.metrics.stats')\n", []),
    ("ragnb.runs.warmup", "X = 'ragnb.cli.main'\n", ["names ragnb.cli.main"]),
])
def test_the_walk_finds_upward_imports_by_name(module, source, expected):
    found = dynamic_violations(module, source, set(package_modules()))
    assert len(found) == len(expected), found
    for f, e in zip(found, expected):
        assert e in f, f
