"""The package's layers: data flows one way, and imports only point backwards along it.

``LAYERS`` is the one list of the layers, lowest first. A module belongs to the layer of the longest prefix that
names it, and may import only modules of its own layer or of layers before it. Every import counts — at the top of
a module, inside a function, under ``TYPE_CHECKING`` — because each is a dependency a contributor has to keep
working. One import is allowed upwards: the dashboard notebook reads run records (``ALLOWED_UPWARD``). An import
by name (``importlib.import_module``, ``__import__``) counts too: the modules that make one are listed in
``DYNAMIC_IMPORTS`` with what they may import, and the ragnb module names they hold as text are checked against it.

The package ``ragnb`` itself (its ``__init__``, the public API) is the top: it may name anything, and a module
inside may take only ``__version__`` and ``__file__`` from it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import ragnb

PACKAGE = Path(ragnb.__file__).resolve().parent

# (layer, module prefixes), lowest first. The README's order — files → store → embeddings → retrieval/system →
# tiers → notebooks → runs — made exact: encoders sit below the store (it embeds the tables it loads), the LLM
# client below the encoders (an endpoint encoder calls it), the LLM judges above the system they judge.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("files", ("ragnb.io", "ragnb.config", "ragnb.envvars", "ragnb.progress", "ragnb.version", "ragnb.urls")),
    ("metrics", ("ragnb.metrics",)),
    ("spec", ("ragnb.spec",)),
    ("llm client", ("ragnb.llm",)),
    ("embeddings", ("ragnb.embeddings", "ragnb.embeddings.models", "ragnb.embeddings.cache")),
    ("store", ("ragnb.store",)),
    ("retrieval/system", ("ragnb.rag",)),
    ("llm judges", ("ragnb.judges",)),
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

# (module, ragnb prefixes it may import *by name*, why): every module that imports through importlib
# (``importlib.import_module``, ``__import__``), whose targets the import walk above cannot see. A module that
# imports by name must be listed, and may name (as text) and import only its own layer, the layers before it and
# the prefixes listed here — so an upward import cannot pass as a string.
DYNAMIC_IMPORTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("ragnb", ("ragnb",), "the lazy public API: each public name is imported from its module on first use"),
    ("ragnb.metrics.registry", ("ragnb.judges", "ragnb.rag.retrieval", "ragnb.tiers", "ragnb.analysis"),
     "load_all imports the metric packages (METRIC_PACKAGES); a declared metric's computed_by is imported on use"),
    ("ragnb.runs.warmup", ("ragnb.analysis.umap_warmup",), "the warm-up module a TierSpec names (spec.warm_up)"),
    ("ragnb.rag.system", (), "the user's system, 'package.module:attribute' given by the user, never a ragnb one"),
)
_MODULE_TEXT = re.compile(r"^(ragnb(?:\.[a-z_][a-z0-9_]*)+)(?::[\w.]+)?$")


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
