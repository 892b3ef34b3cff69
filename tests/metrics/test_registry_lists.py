"""The registry is the only list of metric names: what is graded, documented or loaded is checked against it.

* every module that registers a metric is found by discovery (no hand-kept list of modules);
* every threshold key of :mod:`ragnb.spec` names a registered metric whose direction matches its bounds (the grade
  rule calls a value above ``excellent_above`` excellent, so a graded metric is higher-is-better) and whose range
  holds both bounds — the run comparison reads the direction from the registry alone;
* every registered name (or one of its aliases) appears as code in docs/metrics.md, where it is defined.
"""

from __future__ import annotations

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


def _code_spans(text: str) -> str:
    return "\n".join(re.findall(r"`([^`\n]+)`", text))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_name_is_defined_in_docs_metrics(name):
    code = _code_spans(DOC.read_text(encoding="utf-8"))
    names = (name, *REGISTRY[name].aliases)
    assert any(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", code) for n in names), (
        f"{name} is registered but docs/metrics.md never names it as code (`{name}`); define it there")
