"""Common properties of every registered metric, in the style of scikit-learn's ``tests/metrics/test_common.py``.

Parametrised over the whole registry (:func:`ragnb.metrics.registry.load_all`), whatever module registered a
metric:

* every metric: its name (and every alias) round-trips through ``parse_name``; ``direction`` reads it, also
  as a per-model column (``name[judge-x]``) and with an ``avg_`` prefix; its value range is valid; its
  docstring states a formula; a declared metric's ``computed_by`` path resolves to a function;
* every metric computed inside ``ragnb.metrics`` (kinds ranking, vectors, text, classification, session,
  timing), on inputs generated per kind: values lie in the declared range or are NaN; undefined input
  gives NaN or a ValueError that says why — never a number such as 0; reordering the items (queries, rows,
  pairs, sessions, calls) does not change the value (for ranking: each query keeps its value); a perfect
  input scores the best end of the range where that end is finite.

Not exercised on inputs, only their declared properties: kind ``llm`` (metric objects that need a judge
over HTTP: tests/test_llm_metric_api.py runs every one of them through the common LLM-metric API against the
test server), kind ``estimator`` (the prediction-powered estimators: tests/metrics/test_ppi.py checks them
against the method authors' package ppi-python) and the metrics *declared* by reference (computed by the
judge, the tiers or the analyses: their own tests cover the values). They are listed by name in
``NOT_EXERCISED``, each with its reason: the registry is partitioned into exercised and listed metrics, so a new
metric that nobody classified fails.

Exceptions are listed by name with the reason, as scikit-learn lists metrics without a property.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragnb.metrics import registry
from ragnb.metrics.registry import KINDS, canonical_name, direction, parse_name
from ragnb.metrics.retrieval import rank_gains

REGISTRY = registry.load_all()
ALL = sorted(REGISTRY)
DECLARED = [n for n in ALL if REGISTRY[n].computed_by is not None]

# The registered metrics these tests do not call on generated inputs, each with the reason (scikit-learn's
# partition): every other metric is exercised, so a new metric is either computable here or listed below —
# one that nobody classified fails test_every_metric_is_exercised_or_listed_with_a_reason.
_JUDGE_CALL = "a direct LLM judge score: needs a judge call (tests/test_judge.py, tests/test_generation_tiers.py)"
_RAGAS = "a ragas-style verdict formula over the judge's verdicts, shaped per metric (tests/test_ragas_metrics.py)"
_NVIDIA = "an NVIDIA-style metric over the judge's ratings (tests/test_nvidia_metrics.py)"
NOT_EXERCISED: dict[str, str] = {
    **dict.fromkeys(("judge_faithfulness", "answer_relevance", "answer_correctness", "e2e_score"), _JUDGE_CALL),
    **dict.fromkeys(("faithfulness", "context_recall", "context_precision", "context_entity_recall",
                     "response_relevancy", "noise_sensitivity_relevant", "noise_sensitivity_irrelevant"), _RAGAS),
    **dict.fromkeys(("nv_answer_accuracy", "nv_context_relevance", "nv_response_groundedness"), _NVIDIA),
    "judge_consistency": "declared: two judgements per item from the judge (tests/test_judge.py, test_judge_tiers.py)",
    "error_rate": "declared: the share of failed judge calls (tests/test_judge.py, tests/test_judge_tiers.py)",
    "judge_pipeline_accuracy": "declared: the Judge Pipeline tier's accuracy, over its labelled items "
                               "(tests/test_grades.py, tests/test_runs.py)",
    "majority_class_accuracy": "declared: the Judge Pipeline's trivial baseline, computed with the accuracy it is "
                               "compared with (ragnb.metrics.baselines; tests/test_grades.py)",
    "retrieval_consistency": "declared: needs repeated retrievals from a live retriever (tests/test_compare.py)",
    "context_hit": "declared: Tier 3's per-item check of the system's chunk ids (tests/test_generation_tiers.py)",
    "context_break_rate": "declared: Tier UX validates its threshold on the cited pages (tests/test_ux_breaks.py)",
    "utilization_rate": "declared: the chunk utilization analysis over a whole corpus (tests/test_analysis.py)",
    "low_score_share": "declared: the domain analysis over scored questions (tests/test_analysis.py)",
    "user_score": "declared: the users' own scores, read from the question log (tests/test_rag_suite.py)",
    **dict.fromkeys(("ppi_mean", "ppi_mean_difference", "ppi_stratified_mean"),
                    "an estimator over judge scores and human labels, equal to ppi-python's (tests/metrics/test_ppi.py)"),
}
EXERCISED = [n for n in ALL if n not in NOT_EXERCISED]
GENERATED_KINDS = ("ranking", "vectors", "text", "classification", "session", "timing")  # _compute's kinds
K = 3
SEEDS = range(4)

# A perfect input does not reach the best end of the range.
NO_PERFECT_SCORE = {
    "faithfulness_embedding": "a sigmoid of the mean best-match cosine: σ(1) ≈ 0.98 < 1",
}
# The kind's undefined input is well defined for these.
DEFINED_ON_DEGENERATE_INPUT = {
    "dot_similarity": "the dot product of zero vectors is 0",
    "euclidean_distance": "the distance between zero vectors is 0",
}
# No set of items to reorder, or the order is part of the definition.
ORDER_DEPENDENT = {
    "response_exact_match_rate": "the first response is the one the others are compared with",
    "semantic_similarity": "one pair of vectors",
    "dot_similarity": "one pair of vectors",
    "euclidean_distance": "one pair of vectors",
}

_WORDS = ("paris capital france river seine museum louvre tower eiffel bridge city north south "
          "москва столица россии река кремль музей город").split()


# --------------------------------------------------------------------------- input generators per kind


def _sentence(rng: np.random.Generator, n_min: int = 4, n_max: int = 9) -> str:
    return " ".join(rng.choice(_WORDS, size=int(rng.integers(n_min, n_max)))) + "."


def _ranking(rng: np.random.Generator, perfect: bool = False, undefined: bool = False):
    """(run, qrels) of 6 queries over 12 docs; perfect: each query has exactly K relevant docs, ranked first by
    grade; undefined: a query whose qrels hold no relevant doc."""
    docs = [f"d{i}" for i in range(12)]
    run, qrels = {}, {}
    for q in range(6):
        qid = f"q{q}"
        n_rel = K if perfect else int(rng.integers(1, 5))
        rel = list(rng.choice(docs, size=n_rel, replace=False))
        grades = {d: int(rng.integers(1, 4)) for d in rel}
        judged = dict(grades)
        judged.update({d: 0 for d in rng.choice([d for d in docs if d not in rel], size=2, replace=False)})
        if undefined:
            judged = {d: 0 for d in judged}
        qrels[qid] = judged
        if perfect:
            ranked = sorted(rel, key=lambda d: -grades[d]) + [d for d in docs if d not in rel][:4]
        else:
            ranked = list(rng.permutation(docs)[: int(rng.integers(0, 9))])
        run[qid] = ranked
    return run, qrels


def _call_ranking(metric, run, qrels) -> np.ndarray:
    k = K if metric.needs_k else None
    table, _ = rank_gains(run, qrels, k)
    return np.asarray(metric.fn(table, k), dtype=float)


def _matrix(rng: np.random.Generator, n: int = 8, d: int = 4, perfect: bool = False) -> np.ndarray:
    if perfect:
        return np.tile(rng.normal(size=d) + 0.1, (n, 1))
    return rng.normal(size=(n, d))


def _n_inputs(metric) -> int:
    params = inspect.signature(metric.fn).parameters.values()
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _vectors(metric, rng, perfect=False, undefined=False) -> tuple:
    if _n_inputs(metric) == 1:
        return (_matrix(rng, n=1) if undefined else _matrix(rng, perfect=perfect),)
    if undefined:
        return np.zeros((2, 4)), np.zeros((2, 4))
    a = _matrix(rng, perfect=perfect)
    return a, (a.copy() if perfect else _matrix(rng))


# Text-kind inputs by parameter name: (random, perfect given the first input, undefined). The names of the
# registry's docstring (fn(text, reference), fn(texts), fn(score)) and those the metrics of ragnb.metrics use.
def _text_args(metric, rng, perfect=False, undefined=False) -> tuple:
    names = [p.name for p in inspect.signature(metric.fn).parameters.values()][: _n_inputs(metric)]
    first = _sentence(rng) + " " + _sentence(rng)
    pairs = [(_sentence(rng), _sentence(rng)) for _ in range(5)]
    def responses() -> list[str]:
        return [first] if undefined else ([first] * 3 if perfect else [_sentence(rng) for _ in range(3)])

    def judged() -> float:
        return math.nan if undefined else (1.0 if perfect else float(rng.uniform()))

    make = {
        "text": lambda: "" if undefined else first,
        "prediction": lambda: "" if undefined else first,
        "answer": lambda: "" if undefined else first,
        "reference": lambda: "" if undefined else (first if perfect else _sentence(rng)),
        "contexts": lambda: [] if undefined else ([first] if perfect else [_sentence(rng) for _ in range(3)]),
        "responses": responses,
        "texts": responses,
        "predictions": lambda: [] if undefined else [p for p, _ in pairs],
        "references": lambda: [] if undefined else [p if perfect else r for p, r in pairs],
        "faithfulness": judged,
        "score": judged,
    }
    unknown = [n for n in names if n not in make]
    if unknown:
        raise AssertionError(f"{metric.name}: no text generator for parameter(s) {unknown}; add one to _text_args")
    return tuple(make[n]() for n in names)


def _classification(rng, perfect=False, undefined=False) -> tuple:
    if undefined:
        return [], []
    y = [1, 0] + [int(v) for v in rng.integers(0, 2, size=18)]
    pred = list(y) if perfect else [int(v) for v in rng.integers(0, 2, size=20)]
    return y, pred


def _sessions(rng, perfect=False, undefined=False) -> tuple:
    out = {}
    for s in range(5):
        n_turns = 1 if undefined else int(rng.integers(2, 6))
        out[f"s{s}"] = _matrix(rng, n=n_turns, perfect=perfect)
    return (out,)


def _timing(rng, perfect=False, undefined=False) -> tuple:
    if undefined:
        return ([],)
    return ([0.0] * 10 if perfect else list(rng.exponential(50.0, size=10)),)


def _inputs(metric, rng, perfect=False, undefined=False) -> tuple:
    kind = metric.kind
    if kind == "vectors":
        return _vectors(metric, rng, perfect, undefined)
    if kind == "text":
        return _text_args(metric, rng, perfect, undefined)
    if kind == "classification":
        args = _classification(rng, perfect, undefined)
        return (args[0], [float(v) for v in args[1]]) if metric.name == "roc_auc" else args
    if kind == "session":
        return _sessions(rng, perfect, undefined)
    if kind == "timing":
        return _timing(rng, perfect, undefined)
    raise AssertionError(f"no generator for kind {kind!r}")


def _value(result) -> float:
    if hasattr(result, "value"):
        return float(result.value)
    return float(result)


def _compute(metric, rng, perfect=False, undefined=False):
    """Values of ``metric`` on generated input: an array for ranking (one per query), else one float."""
    if metric.kind == "ranking":
        return _call_ranking(metric, *_ranking(rng, perfect, undefined))
    return _value(metric.fn(*_inputs(metric, rng, perfect, undefined)))


# --------------------------------------------------------------------------- every metric


def test_registry_covers_every_kind_and_is_consistent():
    assert set(REGISTRY) and {m.kind for m in REGISTRY.values()} <= set(KINDS)
    assert not set(registry.ALIASES) & set(REGISTRY), "an alias shadows a metric name"
    assert all(m.name == n for n, m in REGISTRY.items())


def test_every_metric_is_exercised_or_listed_with_a_reason():
    unclassified = [n for n in EXERCISED if REGISTRY[n].kind not in GENERATED_KINDS or REGISTRY[n].computed_by]
    assert not unclassified, (f"{unclassified}: registered metrics the common test cannot call; give them an input "
                              "generator or list them in NOT_EXERCISED with the reason")
    stale = sorted(set(NOT_EXERCISED) - set(ALL))
    assert not stale, f"{stale}: listed in NOT_EXERCISED but not registered; remove them from the list"


@pytest.mark.parametrize("name", ALL)
def test_name_round_trips(name):
    metric = REGISTRY[name]
    full = canonical_name(name, K if metric.needs_k else None)
    parsed, k = parse_name(full)
    assert parsed is metric and canonical_name(parsed.name, k) == full
    assert registry.get(full) is metric and registry.get(name) is metric
    for alias in metric.aliases:
        assert parse_name(alias)[0] is metric and registry.get(alias) is metric
    for key in (full, f"{name}[judge-x]", f"avg_{name}", *metric.aliases):
        assert direction(key) == metric.direction, key


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(ALL), k=st.integers(1, 10_000))
def test_any_cutoff_round_trips_or_is_refused(name, k):
    metric = REGISTRY[name]
    if metric.needs_k:
        assert parse_name(f"{name}@{k}") == (metric, k)
    else:
        with pytest.raises(ValueError, match="takes no cut-off"):
            parse_name(f"{name}@{k}")


@pytest.mark.parametrize("name", ALL)
def test_value_range_and_direction_are_valid(name):
    metric = REGISTRY[name]
    low, high = metric.value_range
    assert not (math.isnan(low) or math.isnan(high)) and low < high
    assert metric.direction in ("higher", "lower")
    assert metric.best == (high if metric.higher_is_better else low)


@pytest.mark.parametrize("name", ALL)
def test_docstring_states_a_formula(name):
    doc = REGISTRY[name].doc
    assert doc, f"{name}: the registered function has no docstring"
    assert any(sym in doc for sym in ("=", "Σ", "/", "·", "max_", "min_")), f"{name}: no formula in {doc!r}"


@pytest.mark.parametrize("name", DECLARED)
def test_declared_metric_points_to_its_function(name):
    metric = REGISTRY[name]
    assert callable(metric.fn.resolve()), f"{name}: {metric.computed_by} does not resolve"


# --------------------------------------------------------------------------- metrics computed in ragnb.metrics


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", EXERCISED)
def test_values_lie_in_range_or_are_nan(name, seed):
    metric = REGISTRY[name]
    values = np.atleast_1d(_compute(metric, np.random.default_rng(seed)))
    low, high = metric.value_range
    ok = np.isnan(values) | ((values >= low - 1e-12) & (values <= high + 1e-12))
    assert ok.all(), f"{name}: {values[~ok]} outside {metric.value_range}"


@pytest.mark.parametrize("name", EXERCISED)
def test_undefined_input_gives_nan_never_a_number(name):
    metric = REGISTRY[name]
    if name in DEFINED_ON_DEGENERATE_INPUT:
        pytest.skip(DEFINED_ON_DEGENERATE_INPUT[name])
    try:
        values = np.atleast_1d(_compute(metric, np.random.default_rng(0), undefined=True))
    except ValueError as exc:  # refusing undefined input with a reason is fine; a silent 0 is not
        assert str(exc)
        return
    assert np.isnan(values).all(), f"{name}: undefined input scored {values}"


def _permuted(args: tuple, rng) -> tuple:
    """The same items in another order: rows of matrices, items of lists, sessions; inputs of the same length
    (pairs such as y_true / y_pred) are permuted together."""
    orders: dict[int, np.ndarray] = {}
    out = []
    for a in args:
        if isinstance(a, (list, np.ndarray)) and len(a) > 1:
            order = orders.setdefault(len(a), rng.permutation(len(a)))
            out.append(a[order] if isinstance(a, np.ndarray) else [a[j] for j in order])
        elif isinstance(a, dict):
            out.append({k: a[k] for k in rng.permutation(list(a))})
        else:
            out.append(a)
    return tuple(out)


@pytest.mark.parametrize("name", EXERCISED)
def test_reordering_items_changes_nothing(name):
    metric = REGISTRY[name]
    if name in ORDER_DEPENDENT:
        pytest.skip(ORDER_DEPENDENT[name])
    rng = np.random.default_rng(1)
    if metric.kind == "ranking":
        run, qrels = _ranking(rng)
        order = [str(q) for q in rng.permutation(list(qrels))]
        base = dict(zip(qrels, _call_ranking(metric, run, qrels)))
        moved = dict(zip(order, _call_ranking(metric, {q: run[q] for q in order}, {q: qrels[q] for q in order})))
        np.testing.assert_allclose([moved[q] for q in qrels], [base[q] for q in qrels], equal_nan=True)
        return
    args = _inputs(metric, rng)
    if not any(isinstance(a, (list, dict, np.ndarray)) for a in args):
        pytest.skip("no items to reorder")
    before = _value(metric.fn(*args))
    after = _value(metric.fn(*_permuted(args, rng)))
    np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", EXERCISED)
def test_perfect_input_scores_the_best_value(name):
    metric = REGISTRY[name]
    if math.isinf(metric.best):
        pytest.skip(f"the best end of {metric.value_range} is unbounded")
    if name in NO_PERFECT_SCORE:
        pytest.skip(NO_PERFECT_SCORE[name])
    values = np.atleast_1d(_compute(metric, np.random.default_rng(2), perfect=True))
    np.testing.assert_allclose(values, metric.best, atol=1e-9, err_msg=name)


# --------------------------------------------------------------------------- the registry's own contract


def test_register_rejects_an_incomplete_or_inconsistent_declaration():
    def one(x):
        """v = x"""
        return x

    with pytest.raises(TypeError, match="kind"):
        registry.register("x_test_metric", "test")(one)
    with pytest.raises(ValueError, match="kind must be one of"):
        registry.register("x_test_metric", "test", kind="nope", value_range=(0, 1), higher_is_better=True)
    with pytest.raises(ValueError, match="low < high"):
        registry.register("x_test_metric", "test", kind="timing", value_range=(1, 0), higher_is_better=False)
    with pytest.raises(ValueError, match="positional data input"):
        registry.register("x_test_metric", "test", kind="classification", value_range=(0, 1),
                          higher_is_better=True)(one)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("mrr", "test", kind="timing", value_range=(0, 1), higher_is_better=True)(one)
    assert "x_test_metric" not in REGISTRY


def test_lookup_errors_name_the_fix():
    with pytest.raises(ValueError, match="known metrics"):
        registry.get("no_such_metric")
    with pytest.raises(ValueError, match="needs a cut-off"):
        parse_name("ndcg")
    with pytest.raises(ValueError, match="takes no cut-off"):
        parse_name("mrr@5")
    for setting in ("top_k", "consistency_runs", "n_items", "k", "seed", "sample_size", "tau"):
        assert direction(setting) is None


def _word_recall(text: str, reference: str) -> float:
    """recall = |words(text) ∩ words(reference)| / |words(reference)|; NaN without reference words."""
    ref = set(reference.split())
    return len(set(text.split()) & ref) / len(ref) if ref else math.nan


def _same_as_first(texts: list) -> float:
    """rate = |{i > 1 : texts_i = texts_1}| / (n − 1); NaN for fewer than two texts."""
    return sum(t == texts[0] for t in texts[1:]) / (len(texts) - 1) if len(texts) > 1 else math.nan


def _doubt(score: float) -> float:
    """doubt = 1 − score"""
    return 1.0 - score


@pytest.mark.parametrize("fn, higher", [(_word_recall, True), (_same_as_first, True), (_doubt, False)])
def test_text_metrics_with_the_parameter_names_of_the_docs_pass_the_common_checks(fn, higher):
    # registry.py's docstring writes the text kind as fn(text, reference), fn(texts), fn(score): a metric written
    # that way is exercised like the registered ones, then taken out of the registry again.
    name = "x_docs_" + fn.__name__.strip("_")
    registry.register(name, "test", kind="text", value_range=(0.0, 1.0), higher_is_better=higher)(fn)
    try:
        for seed in SEEDS:
            test_values_lie_in_range_or_are_nan(name, seed)
        test_undefined_input_gives_nan_never_a_number(name)
        test_perfect_input_scores_the_best_value(name)
    finally:
        del REGISTRY[name]
