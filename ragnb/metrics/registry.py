"""Metric registry: every metric ragnb reports, declared once, as a contract.

Each entry states the metric's canonical name, its kind (the shape of its inputs, typed below as a
``Protocol`` per kind), the range of its values, its direction (higher or lower is better) and, in the
docstring of its function, its formula (see docs/metrics.md for the definitions in words).
``tests/metrics/test_common.py`` checks every entry against that contract.

Names
    A base name ``[a-z][a-z0-9_]*``, plus ``@k`` for cut-off metrics: ``ndcg@10`` parses to (ndcg, 10) and
    prints back as ``ndcg@10``. Base names are unique across the registry, whatever the family: the
    retrieval metrics keep the plain names (``precision@k``, ``recall@k``), and a same-named quantity of
    another family carries its family as a prefix (``classification_precision``). An entry may list
    ``aliases``: keys under which a tier block reports it (``f1_score`` → ``f1``); an alias is a name too,
    so it must be unique as well.

Direction of a reported key (:func:`direction`)
    ``faithfulness[gpt-x]`` (a per-model column) → faithfulness; ``hit_rate@5`` → hit_rate; then the key
    itself, or without one ``doc_``/``avg_``/``mean_`` prefix (``avg_faithfulness`` → faithfulness). A key
    that names no metric (a setting such as ``top_k``, ``consistency_runs``, a count such as ``n_items``)
    has no direction: None.

Kinds and their calls (positional data inputs; options are keyword arguments with defaults)
    ranking         fn(table: RankedGains, k) → per-query values (NaN = undefined)
    vectors         fn(vectors) or fn(a, b) on embedding matrices (rows = vectors) → value
    text            fn(text, reference_or_contexts), fn(texts) or fn(score) → value
    classification  fn(y_true, y_pred_or_scores) → value
    session         fn(sessions) → result with ``.value``
    timing          fn(values_ms) → value
    llm             an LLM-judged metric *object* (:class:`ragnb.judges.base.LLMMetric`): evaluate /
                    evaluate_sync on one sample, aevaluate_dataset / evaluate_dataset on many, registered by
                    ``ragnb.judges.base.register_metric``; or, declared, a statistic over judgements
    estimator       fn(judge scores, human labels, …) → an estimate of a judged mean with its CI from few
                    labels (prediction-powered inference, ``ragnb.metrics.ppi``)

The LLM-judged metrics register their objects from ``ragnb.judges`` (:func:`load_all` imports those
modules lazily). Other metrics computed in a layer above ``ragnb.metrics`` (the tiers, the analyses) are
*declared* here with :func:`declare`, which names the function that computes them by its import path
(metrics never imports those layers); the common test checks that the path resolves. Only modules of
:data:`METRIC_PACKAGES` register or declare: another ragnb module would register only when something happened to
import it, so it is refused (and found unimported by ``tests/metrics/test_registry_lists.py``).

Default lists
    ``register(..., default=True)`` (a metric with a cut-off: ``default=(5, 10)``) puts a metric in its family's
    default list, :func:`default_names` — for retrieval, what Tier 1 and ``ragnb.metrics.retrieval.evaluate``
    report when given no list. It is the one list: nothing else enumerates a family's defaults.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
import sys
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, Union, get_args

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

    from ragnb.metrics.ranked_gains import RankedGains

Kind = Literal["ranking", "vectors", "text", "classification", "session", "timing", "llm", "estimator"]
KINDS: tuple[str, ...] = get_args(Kind)
Direction = Literal["higher", "lower"]

_NAME = re.compile(r"^(?P<base>[a-z][a-z0-9_]*)(?:@(?P<k>[0-9]+))?$")
_MODEL_COLUMN = re.compile(r"\[.*\]$")
_PREFIXES = re.compile(r"^(doc_|avg_|mean_)")


# --------------------------------------------------------------------------- the typed call of each kind


class Scored(Protocol):
    """A result object whose headline number is ``value`` (e.g. :class:`ragnb.metrics.ux.SessionScores`)."""

    @property
    def value(self) -> float: ...


class RankingMetric(Protocol):
    def __call__(self, table: RankedGains, k: int | None, /) -> np.ndarray: ...


class MatrixMetric(Protocol):
    def __call__(self, vectors: ArrayLike, /) -> float | Scored: ...


class MatrixPairMetric(Protocol):
    def __call__(self, a: ArrayLike, b: ArrayLike, /) -> float | Scored: ...


class TextPairMetric(Protocol):
    def __call__(self, text: str | Sequence[str], reference: str | Sequence[str], /) -> float: ...


class TextListMetric(Protocol):
    def __call__(self, texts: Sequence[str], /) -> float: ...


class ScoreTransform(Protocol):
    def __call__(self, score: float, /) -> float: ...


class ClassificationMetric(Protocol):
    def __call__(self, y_true: Sequence[Any], y_pred: Sequence[Any], /) -> float: ...


class SessionMetric(Protocol):
    def __call__(self, sessions: Mapping[str, ArrayLike] | Sequence[ArrayLike], /) -> Scored: ...


class TimingMetric(Protocol):
    def __call__(self, values_ms: Sequence[float], /) -> float: ...


class LLMMetric(Protocol):
    """The one API of an LLM-judged metric (implemented by :class:`ragnb.judges.base.LLMMetric`)."""

    def evaluate(self, sample: Any, client: Any, config: Any = None, /) -> Awaitable[Any]: ...

    def evaluate_sync(self, sample: Any, client: Any, config: Any = None, /) -> Any: ...

    def aevaluate_dataset(self, samples: Any, client: Any, config: Any = None, /) -> Awaitable[tuple[Any, Any]]: ...

    def evaluate_dataset(self, samples: Any, client: Any, config: Any = None, /) -> tuple[Any, Any]: ...


LLM_METHODS = ("evaluate", "evaluate_sync", "aevaluate_dataset", "evaluate_dataset")


MetricFn = Union[RankingMetric, MatrixMetric, MatrixPairMetric, TextPairMetric, TextListMetric, ScoreTransform,
                 ClassificationMetric, SessionMetric, TimingMetric, LLMMetric]

# Per kind: the numbers of required positional data inputs allowed, and how many positional arguments the
# function must accept (a ranking metric is always called as fn(table, k)). Checked at registration.
_ARITY: dict[str, tuple[tuple[int, ...], int]] = {
    "ranking": ((1, 2), 2), "vectors": ((1, 2), 1), "text": ((1, 2), 1), "classification": ((2,), 2),
    "session": ((1,), 1), "timing": ((1,), 1), "estimator": ((3, 4), 3),
}


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class Metric:
    """One registered metric: ``name`` (base name; ``name@k`` when ``needs_k``), ``family``, ``kind`` (the shape of
    its inputs, see the module docstring), ``fn`` (the function; its docstring holds the formula), ``direction``,
    ``value_range`` and ``doc``. Look one up with :func:`get`, list them with :func:`names`."""

    name: str  # base name, e.g. "ndcg"
    family: str  # "retrieval", "embedding", ...
    kind: str  # one of KINDS
    fn: MetricFn
    needs_k: bool
    higher_is_better: bool
    value_range: tuple[float, float]  # (low, high); ±math.inf when unbounded
    doc: str
    aliases: tuple[str, ...] = ()
    computed_by: str | None = None  # import path of the computing function, for declared metrics
    defaults: tuple[str, ...] = ()  # the full names its family reports by default (see :func:`default_names`)

    @property
    def direction(self) -> Direction:
        return "higher" if self.higher_is_better else "lower"

    @property
    def best(self) -> float:
        """The best end of the range (may be ±inf)."""
        return self.value_range[1] if self.higher_is_better else self.value_range[0]


REGISTRY: dict[str, Metric] = {}
ALIASES: dict[str, str] = {}  # alias → base name


def _check_range(name: str, value_range: Any) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value_range)
    except (TypeError, ValueError):
        raise ValueError(f"metric {name!r}: value_range must be (low, high), e.g. (0.0, 1.0) or (0.0, math.inf); "
                         f"got {value_range!r}") from None
    if math.isnan(low) or math.isnan(high) or not low < high:
        raise ValueError(f"metric {name!r}: value_range {value_range!r} needs low < high (use math.inf if unbounded)")
    return low, high


def _check_arity(name: str, kind: str, fn: Any) -> None:
    if kind == "llm":  # an object, not a function: it must have the LLM-metric API
        missing = [m for m in LLM_METHODS if not callable(getattr(fn, m, None))]
        if missing:
            raise ValueError(f"metric {name!r} of kind 'llm' must be an LLM metric object with {LLM_METHODS} "
                             f"(a ragnb.judges.base.LLMMetric); it lacks {missing}")
        return
    params = list(inspect.signature(fn).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    allowed, accepts = _ARITY[kind]
    if len(required) not in allowed or len(positional) < accepts:
        raise ValueError(f"metric {name!r} of kind {kind!r} must take {' or '.join(map(str, allowed))} "
                         f"positional data input(s) (options as keywords with defaults) and accept {accepts}; "
                         f"it requires {len(required)} and accepts {len(positional)}")


def _add(metric: Metric) -> None:
    if not _NAME.match(metric.name) or "@" in metric.name:
        raise ValueError(f"metric name {metric.name!r} must be lower-case letters, digits and _ (no @k: pass "
                         "needs_k=True instead)")
    for n in (metric.name, *metric.aliases):
        if n in REGISTRY or n in ALIASES:
            raise ValueError(f"metric {n!r} is registered twice; a metric (or alias) is declared exactly once")
        if not _NAME.match(n):
            raise ValueError(f"alias {n!r} of {metric.name!r} must be lower-case letters, digits and _")
    REGISTRY[metric.name] = metric
    ALIASES.update({a: metric.name for a in metric.aliases})


def _default_names(name: str, needs_k: bool, default: bool | Sequence[int]) -> tuple[str, ...]:
    """The full names ``default`` asks for: ``(name,)`` for True, ``name@k`` per cut-off for a metric with one."""
    if default is False or default is None:
        return ()
    if not needs_k:
        if default is not True:
            raise ValueError(f"metric {name!r} takes no cut-off: default must be True or False, got {default!r}")
        return (name,)
    cutoffs = () if isinstance(default, bool) else tuple(default)
    if not cutoffs or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in cutoffs):
        raise ValueError(f"metric {name!r} needs a cut-off: give default the cut-offs it is reported at, "
                         f"e.g. default=(5, 10); got {default!r}")
    return tuple(canonical_name(name, k) for k in cutoffs)


def _check_home(name: str, module: str | None) -> None:
    # load_all() imports only METRIC_PACKAGES: a ragnb module elsewhere would register only when something
    # happened to import it, so lookups would depend on import order. (Code outside ragnb — a notebook, a
    # test — registers on purpose and may.) tests/test_reference_docs.py also finds such a call unimported.
    if module and module.partition(".")[0] == "ragnb" and not any(
            module == p or module.startswith(p + ".") for p in METRIC_PACKAGES):
        raise ValueError(f"metric {name!r} is registered by {module}, outside the metric packages "
                         f"{METRIC_PACKAGES}: load_all() never imports it. Register it in ragnb/metrics/ "
                         f"(or declare it there with declare(..., computed_by='{module}:function')).")


def register(name: str, family: str, *, kind: Kind, value_range: tuple[float, float], higher_is_better: bool,
             needs_k: bool = False, aliases: Sequence[str] = (), default: bool | Sequence[int] = False):
    """Decorator: register ``fn`` under the base ``name`` (without ``@k``; ``needs_k=True`` for cut-offs).

    ``kind`` (one of :data:`KINDS`, it fixes the call: see the module docstring), ``value_range`` (low, high)
    with ``math.inf`` for an unbounded end, and ``higher_is_better`` are required. The function's docstring
    must state the formula. ``default``: reported by default wherever its family's default list is read
    (:func:`default_names`; for retrieval: Tier 1, ``ragnb.metrics.retrieval.evaluate``) — True, or for a metric
    with a cut-off the cut-offs, e.g. ``default=(5, 10)``.
    """
    if kind not in KINDS:
        raise ValueError(f"metric {name!r}: kind must be one of {KINDS}, got {kind!r}")
    low_high = _check_range(name, value_range)
    defaults = _default_names(name, needs_k, default)

    def wrap(fn):
        _check_home(name, getattr(fn, "__module__", None))
        _check_arity(name, kind, fn)
        _add(Metric(name, family, kind, fn, bool(needs_k), bool(higher_is_better), low_high,
                    (fn.__doc__ or "").strip(), tuple(aliases), defaults=defaults))
        return fn

    return wrap


class _Deferred:
    """The function of a declared metric, imported from ``computed_by`` (``"pkg.module:attr.attr"``) on use."""

    def __init__(self, computed_by: str, formula: str):
        self.computed_by = computed_by
        self.__doc__ = formula

    def resolve(self) -> Any:
        module, _, attr = self.computed_by.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def __call__(self, *judge_inputs: Any) -> Any:
        return self.resolve()(*judge_inputs)


def declare(name: str, family: str, *, kind: Kind, value_range: tuple[float, float], higher_is_better: bool,
            computed_by: str, formula: str, needs_k: bool = False, aliases: Sequence[str] = ()) -> Metric:
    """Register a metric computed outside ``ragnb.metrics`` (by the LLM judge or a tier), by reference.

    ``computed_by`` = ``"module:function"`` (``"module:Class.method"``) of the function that computes it;
    ``formula`` = its definition (what a registered function's docstring holds).
    """
    if kind not in KINDS:
        raise ValueError(f"metric {name!r}: kind must be one of {KINDS}, got {kind!r}")
    if ":" not in computed_by:
        raise ValueError(f"metric {name!r}: computed_by must be 'module:function', got {computed_by!r}")
    _check_home(name, sys._getframe(1).f_globals.get("__name__"))  # the declaring module
    metric = Metric(name, family, kind, _Deferred(computed_by, formula), bool(needs_k), bool(higher_is_better),
                    _check_range(name, value_range), formula.strip(), tuple(aliases), computed_by)
    _add(metric)
    return metric


# --------------------------------------------------------------------------- lookup


def _known() -> str:
    return ", ".join(sorted(f"{n}@k" if r.needs_k else n for n, r in REGISTRY.items()))


def parse_name(name: str) -> tuple[Metric, int | None]:
    """``"ndcg@10"`` → (the ndcg Metric, 10); an alias resolves to its metric. ValueError naming the fix."""
    load_all()
    m = _NAME.match(name.strip())
    base = m.group("base") if m else None
    base = ALIASES.get(base, base)
    if base not in REGISTRY:
        raise ValueError(f"unknown metric {name!r}; known metrics: {_known()}")
    metric = REGISTRY[base]
    k = int(m.group("k")) if m.group("k") else None
    if metric.needs_k and (k is None or k < 1):
        raise ValueError(f"metric {name!r} needs a cut-off ≥ 1, e.g. '{metric.name}@10'")
    if not metric.needs_k and k is not None:
        raise ValueError(f"metric {metric.name!r} takes no cut-off; write '{metric.name}'")
    return metric, k


def canonical_name(base: str, k: int | None = None) -> str:
    return f"{base}@{k}" if k is not None else base


def get(name: str) -> Metric:
    """The entry of ``name``: a base name or alias (``"ndcg"``, ``"f1_score"``) or a full name (``"ndcg@10"``)."""
    if "@" in name:
        return parse_name(name)[0]
    load_all()
    base = name.strip()
    base = ALIASES.get(base, base)
    if base not in REGISTRY:
        raise ValueError(f"unknown metric {name!r}; known metrics: {_known()}")
    return REGISTRY[base]


def default_names(family: str) -> list[str]:
    """The full names ``family`` reports by default (``["hit_rate@1", …, "ndcg@10"]`` for retrieval), in the
    order they were registered: the one list, declared by ``register(..., default=...)``."""
    load_all()
    return [full for m in REGISTRY.values() if m.family == family for full in m.defaults]


def names(family: str | None = None, kind: str | None = None) -> list[str]:
    """Base names, sorted; only those of ``family`` and/or ``kind`` when given."""
    load_all()
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return sorted(n for n, m in REGISTRY.items()
                  if (family is None or m.family == family) and (kind is None or m.kind == kind))


def resolve(key: str) -> Metric | None:
    """The metric a reported key names (see the module docstring), or None for settings and counts."""
    load_all()
    base = _MODEL_COLUMN.sub("", key.strip()).split("@", 1)[0].casefold()
    for candidate in (base, _PREFIXES.sub("", base)):
        candidate = ALIASES.get(candidate, candidate)
        if candidate in REGISTRY:
            return REGISTRY[candidate]
    return None


def direction(key: str) -> Direction | None:
    """``"higher"`` / ``"lower"`` is better for the metric a reported key names; None if it names none.

    Loads every metric module first (:func:`load_all`), so the answer never depends on import order.
    """
    metric = resolve(key)
    return metric.direction if metric is not None else None


def level(key: str) -> Literal["page", "chunk"] | None:
    """The level a ranking metric judges at: ``"page"`` for the document-level variants (``doc_*``,
    ``docrank_*``: the retrieved chunks are mapped to their source pages first, so their ground truth survives a
    re-chunking), ``"chunk"`` for the other ranking metrics (their relevant ids are chunk ids); None for
    metrics that rank nothing and for keys that name no metric."""
    metric = resolve(key)
    if metric is None or metric.kind != "ranking":
        return None
    return "page" if metric.name.startswith(("doc_", "docrank_")) else "chunk"


def page_level_version(key: str) -> str | None:
    """``"hit_rate@5"`` → ``"doc_hit_rate@5"``, ``"mrr"`` → ``"doc_mrr"``: the page-level metric of a chunk-level
    key, when the registry has one (``"recall@3"`` → ``"doc_recall@3"``); None for any other key."""
    if level(key) != "chunk":
        return None
    candidate = "doc_" + key.strip()
    return candidate if level(candidate) == "page" else None


# --------------------------------------------------------------------------- loading

# Metrics register (or declare) themselves when their module is imported. load_all() imports every module of
# these packages, so a new metric module needs no entry anywhere. The LLM-judged suites register from
# ragnb.judges, a layer above: imported by name, when a lookup first needs the registry, so that
# ragnb.metrics never imports ragnb.llm at import time.
METRIC_PACKAGES: tuple[str, ...] = ("ragnb.metrics", "ragnb.judges")


def metric_modules() -> list[str]:
    """Every module of :data:`METRIC_PACKAGES` (the packages themselves included), in a stable order."""
    found: list[str] = []
    for package in METRIC_PACKAGES:
        path = importlib.import_module(package).__path__
        found += [package, *sorted(m.name for m in pkgutil.walk_packages(path, package + "."))]
    return found


_loaded = False
_loading = False


def load_all() -> dict[str, Metric]:
    """Import every metric module (registration happens at import) and return the full registry.

    Every lookup of this module calls it, so no caller sees a half-filled registry, whatever it imported.
    """
    global _loaded, _loading
    if not (_loaded or _loading):  # _loading: a lookup made while the modules are being imported
        _loading = True
        try:
            for module in metric_modules():
                importlib.import_module(module)
            _loaded = True
        finally:
            _loading = False
    return REGISTRY
