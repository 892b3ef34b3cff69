"""The registry is the only list of metric names: what is graded, documented or loaded is checked against it.

* every module that registers a metric is found by discovery (no hand-kept list of modules);
* every threshold key of :mod:`ragnb.spec` names a registered metric whose direction matches its bounds (the grade
  rule calls a value above ``excellent_above`` excellent, so a graded metric is higher-is-better) and whose range
  holds both bounds — the run comparison reads the direction from the registry alone;
* every registered name has a row in docs/metrics.md's index, generated from the registry (kind, direction, range,
  the docstring's formula), and the index names nothing else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ragnb import spec
from ragnb.metrics import registry

REGISTRY = registry.load_all()
DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_every_registering_module_is_discovered():
    modules = set(registry.metric_modules())
    for path in (Path(registry.__file__).parent).glob("*.py"):
        name = "ragnb.metrics" if path.stem == "__init__" else f"ragnb.metrics.{path.stem}"
        assert name in modules, name
    outside = {n: m.fn.__module__ for n, m in REGISTRY.items()
               if m.computed_by is None and m.fn.__module__ not in modules}
    assert not outside, f"registered from modules load_all() does not import: {outside}"


@pytest.mark.parametrize("key", sorted(spec.THRESHOLDS))
def test_every_threshold_key_is_registered_with_a_matching_direction(key):
    excellent_above, attention_below = spec.THRESHOLDS[key]
    metric = registry.resolve(key)
    assert metric is not None, f"{key} is graded in ragnb.spec but names no registered metric"
    assert excellent_above > attention_below, f"{key}: a graded metric's bands run upwards"
    assert registry.direction(key) == "higher", f"{key} is graded (higher is better) but registered lower-is-better"
    low, high = metric.value_range
    assert low <= attention_below < excellent_above <= high, f"{key}: bounds outside {metric.value_range}"


@pytest.mark.parametrize("key", sorted({a for s in spec.TIERS for a in s.aliases.values()} | set(spec.LLM_JUDGED)))
def test_every_metric_the_tiers_name_is_registered(key):
    assert registry.resolve(key) is not None, f"{key} (ragnb.spec) names no registered metric"


def _index_rows() -> dict[str, str]:
    """Base name → its row in docs/metrics.md's generated index (scripts/gen_reference.py writes it)."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- BEGIN GENERATED: metric-index -->", 1)[1].split("<!-- END GENERATED: metric-index -->")[0]
    return {m.group(1): line for line in block.splitlines() if (m := re.match(r"^\| `([a-z0-9_]+)(?:@k)?`", line))}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_name_has_a_definition_row_in_docs_metrics(name):
    # A row, not a mention anywhere: the index is generated from the registration (tests/test_reference_docs.py
    # fails when it is stale), so the row holds the docstring's formula, the range and the direction.
    row = _index_rows().get(name)
    assert row is not None, f"{name} is registered but has no row in docs/metrics.md's index; run " \
                            "python scripts/gen_reference.py"
    metric = REGISTRY[name]
    assert f"| {metric.kind} | {'↑' if metric.higher_is_better else '↓'} |" in row, row


def test_the_index_has_no_row_for_an_unregistered_name():
    assert not set(_index_rows()) - set(REGISTRY), set(_index_rows()) - set(REGISTRY)


# --------------------------------------------------------------------------- the default list, declared once

# The 14 chunk-level metrics Tier 1 reported when it kept its own copy of the list (ragnb/tiers/tier1.py).
TIER1_BEFORE = ["hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr", "recall@1", "recall@3", "recall@5", "recall@10",
                "precision@1", "precision@3", "precision@5", "precision@10", "ndcg@5", "ndcg@10"]

# A metric written as CONTRIBUTING.md, "Adding a metric", says, in a module of its own.
RECIPE_MODULE = '''
import numpy as np

from ragnb.metrics.ranked_gains import RankedGains
from ragnb.metrics.registry import register

FAMILY = "retrieval"


@register("x_recipe_first_hit", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, default=True)
def x_recipe_first_hit(t: RankedGains, k: None = None) -> np.ndarray:
    """1 if the first retrieved doc is relevant, else 0.

    first_hit = 𝟙[ rel_1 > 0 ]
    """
    return np.where(t.n_rel > 0, (t.first_rel == 1).astype(float), np.nan)
'''


def test_the_default_retrieval_list_is_the_registrys():
    from ragnb.metrics import retrieval

    assert retrieval.default_metrics() == TIER1_BEFORE == registry.default_names("retrieval")
    assert retrieval.DEFAULT_METRICS == TIER1_BEFORE  # the old name reads the registry
    assert registry.default_names("embedding") == []


def test_default_is_checked_at_registration():
    def one(t, k=None):
        """v = 1"""

    for needs_k, default, fix in ((True, True, "default=.5, 10."), (True, (0,), "default=.5, 10."),
                                  (False, (5,), "True or False")):
        with pytest.raises(ValueError, match=fix):
            registry.register("x_default", "test", kind="ranking", value_range=(0, 1), higher_is_better=True,
                              needs_k=needs_k, default=default)(one)
    assert "x_default" not in REGISTRY


def test_a_metric_registered_outside_the_metric_packages_is_refused():
    def one(t, k=None):
        """v = 1"""

    one.__module__ = "ragnb.tiers.tier1"  # load_all() would never import it
    with pytest.raises(ValueError, match="outside the metric packages.*Register it in ragnb/metrics/"):
        registry.register("x_elsewhere", "test", kind="ranking", value_range=(0, 1), higher_is_better=True)(one)
    assert "x_elsewhere" not in REGISTRY


def test_a_metric_added_by_the_recipe_is_in_the_tier1_report(tmp_path, encoder):
    import importlib.util

    from ragnb.datasets.schema import Dataset, DatasetItem
    from ragnb.rag.retrieval import MemoryRetriever
    from ragnb.tiers.tier1 import run_tier1

    path = tmp_path / "recipe_metric.py"
    path.write_text(RECIPE_MODULE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("recipe_metric", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    try:
        assert registry.default_names("retrieval") == [*TIER1_BEFORE, "x_recipe_first_hit"]
        ds = Dataset(name="t", type="manual", items=[
            DatasetItem(id="q1", question="octopus legs", chunk_id="c1", relevant_chunk_ids=["c1"]),
            DatasetItem(id="q2", question="how many legs has a table", chunk_id="c1", relevant_chunk_ids=["c1"])])
        vectors = encoder.encode(["an octopus has eight legs", "tables have four legs"])
        result = run_tier1(ds, encoder, MemoryRetriever(["c1", "c2"], vectors, model=encoder.name), top_k=2,
                           latency_sample=0, n_boot=10)
        # q1 finds c1 first, q2 finds c2 first: the new metric equals hit_rate@1, by hand 1/2
        assert result.per_item["x_recipe_first_hit"].tolist() == [1.0, 0.0]
        assert result.summary["x_recipe_first_hit"]["mean"] == result.summary["hit_rate@1"]["mean"] == 0.5
    finally:
        del REGISTRY["x_recipe_first_hit"]
    assert registry.default_names("retrieval") == TIER1_BEFORE


# What registers a metric: these functions, imported from their modules or called through them.
_REGISTERING = {"ragnb.metrics.registry": {"register", "declare"}, "ragnb.judges.base": {"register_metric"}}


def registering_lines(source: str) -> list[int]:
    """Lines of ``source`` that import a registering function or call one through its module
    (``registry.register(...)``, ``base.register_metric(...)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if _REGISTERING.get(node.module or "", set()) & {a.name for a in node.names}:
                found.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Name)):
            through = {m.rsplit(".", 1)[1]: names for m, names in _REGISTERING.items()}  # registry, base
            if node.func.attr in through.get(node.func.value.id, set()):
                found.append(node.lineno)
    return found


def test_nothing_outside_the_metric_packages_registers():
    # load_all() imports only the metric packages: a registration elsewhere would run only when something happened
    # to import its module, so it is refused here even where no test imports that module.
    package = Path(registry.__file__).resolve().parents[1]
    inside = tuple(package.parent.joinpath(*p.split(".")) for p in registry.METRIC_PACKAGES)
    found = [f"{path.relative_to(package.parent)}:{line}" for path in sorted(package.rglob("*.py"))
             if not any(path.is_relative_to(d) for d in inside)
             for line in registering_lines(path.read_text(encoding="utf-8"))]
    assert not found, f"registers a metric outside {registry.METRIC_PACKAGES} (move it to ragnb/metrics/): {found}"


@pytest.mark.parametrize("source, lines", [
    ("from ragnb.metrics.registry import register\n", [1]),
    ("from ragnb.metrics.registry import parse_name, declare\n", [1]),
    ("from ragnb.metrics import registry\nregistry.register('x', 'f')(f)\n", [2]),
    ("from ragnb.judges import base\nbase.register_metric(m)\n", [2]),
    ("def register(conn):\n    pass\nregister(c)\natexit.register(f)\n", []),
])
def test_the_scan_finds_registrations(source, lines):
    assert registering_lines(source) == lines
