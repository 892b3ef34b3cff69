"""Every registered LLM-judged metric satisfies the one LLM-metric API (ragnb.judges.base.LLMMetric).

Parametrised over the registry (kind ``llm``), as tests/metrics/test_common.py is over every metric: a metric
registered any other way, or lacking the API, fails here. Each metric is run for real, through the
``LLMClient`` over HTTP against the scripted server (tests/llm_server.py), on the same sample fields, with two
judge models — one answering, one whose replies stay unusable — so the same result type, per-item frame and
status / n_failed / n_partial semantics are checked on every metric.
"""

from __future__ import annotations

import inspect
import json
import math
from types import SimpleNamespace

import pytest
from llm_server import completion

from ragnb.llm import LLMClient, LLMSettings, run_sync
from ragnb.judges import JudgeConfig, LLMMetric, Sample, get_llm_metric, llm_metric_names
from ragnb.llm.result import EvaluationResult
from ragnb.metrics import registry

REGISTRY = registry.load_all()
LLM_KIND = sorted(n for n, m in REGISTRY.items() if m.kind == "llm")
# Registered with kind "llm" but not metric objects: statistics over many judgements, declared by reference.
NOT_PER_SAMPLE = {
    "judge_consistency": "agreement of two judging passes over a dataset (Tier Judge), not a score of one sample",
    "error_rate": "share of failed judgements over a dataset (Tier Judge), not a score of one sample",
}
METRICS = [n for n in LLM_KIND if n not in NOT_PER_SAMPLE]

SAMPLE = Sample(user_input="Where is the Eiffel Tower?", response="The Eiffel Tower stands in Paris.",
                reference="It is in Paris.",
                retrieved_contexts=("The Eiffel Tower is a landmark in Paris, France.", "Lyon is a city."))
# One reply every family can read: a direct score, a 0–2 rating, statements, entities, questions and
# per-id verdicts (ids a metric did not send are ignored and counted as extra).
GOOD = json.dumps({
    "score": 1, "explanation": "supported", "rating": 2,
    "statements": ["The Eiffel Tower is in Paris."], "entities": ["Eiffel Tower", "Paris"],
    "questions": ["Where is the Eiffel Tower?", "Which city has the Eiffel Tower?", "Where does the tower stand?"],
    "noncommittal": 0,
    "verdicts": [{"id": i, "verdict": 1, "reason": "r", "contexts": [1]} for i in (1, 2)],
})


def test_every_llm_kind_entry_is_a_metric_object_or_listed():
    """The partition: nothing of kind llm escapes the API checks below without a stated reason."""
    assert set(NOT_PER_SAMPLE) <= set(LLM_KIND)
    for name in LLM_KIND:
        assert isinstance(REGISTRY[name].fn, LLMMetric) != (name in NOT_PER_SAMPLE), name
    assert sorted(llm_metric_names()) == METRICS
    assert {REGISTRY[n].family for n in METRICS} == {"judge", "llm", "nvidia"}


@pytest.mark.parametrize("name", METRICS)
def test_registered_object_has_the_api(name):
    entry = REGISTRY[name]
    metric = entry.fn
    assert metric.result_name() == name and metric.family == entry.family
    assert tuple(metric.value_range) == entry.value_range and metric.higher_is_better == entry.higher_is_better
    assert set(metric.aliases) == set(entry.aliases)
    assert entry.doc == type(metric).__doc__.strip()  # the class docstring is the formula
    for method in ("evaluate", "aevaluate_dataset"):
        assert inspect.iscoroutinefunction(getattr(metric, method)), method
    for method in ("evaluate_sync", "evaluate_dataset", "score", "validate", "settings"):
        assert callable(getattr(metric, method)), method
    assert get_llm_metric(name) is metric
    for alias in entry.aliases:
        assert get_llm_metric(alias) is metric
    options = {k: v for k, v in metric.options().items() if v is not None}
    rebuilt = get_llm_metric(name, **options)  # the registered object's own options: an equal new object
    assert type(rebuilt) is type(metric) and rebuilt.options() == metric.options()
    assert (rebuilt is metric) == (not options)


def test_unknown_or_non_llm_names_are_a_clear_error():
    with pytest.raises(ValueError, match="not an LLM-judged metric; use one of .*judge_faithfulness"):
        get_llm_metric("ndcg")
    with pytest.raises(ValueError, match="not an LLM-judged metric"):
        get_llm_metric("judge_consistency")
    with pytest.raises(ValueError, match="built already"):
        get_llm_metric(get_llm_metric("e2e_score"), strategy="x")


def _metric(name, encoder):
    return get_llm_metric(name, encoder=encoder) if name == "response_relevancy" else get_llm_metric(name)


def _client(server) -> LLMClient:
    return LLMClient(LLMSettings(base_url=server.base_url, api_key="sk-test", cache_dir=None, backoff_initial_s=0.01,
                                 backoff_max_s=0.05, timeout_s=5, max_concurrency=4))


def _serve(server):
    server.set_handler(lambda req: completion(GOOD if req["model"] == "good" else "no json here"))


@pytest.mark.parametrize("name", METRICS)
def test_one_sample_sync_and_async_give_the_same_result(name, llm_server, encoder):
    _serve(llm_server)
    metric, client = _metric(name, encoder), _client(llm_server)
    config = JudgeConfig(models=["good"])
    # The same fields as a Sample, a dict or an object with those attributes.
    r = metric.evaluate_sync(SAMPLE, client, config)
    again = run_sync(metric.evaluate(dict(vars(SAMPLE)), client, {"models": ["good"]}))
    third = metric.evaluate_sync(SimpleNamespace(**vars(SAMPLE)), client, config)
    assert all(isinstance(x, EvaluationResult) for x in (r, again, third))
    assert (r.status, r.method) == ("ok", "llm"), r.reason
    lo, hi = metric.value_range
    assert lo <= r.score <= hi
    assert again.score == third.score == r.score and again.status == third.status == r.status
    assert [m.model for m in r.model_scores] == ["good"]


@pytest.mark.parametrize("name", METRICS)
def test_dataset_frame_and_summary_count_partial_and_failed_juries(name, llm_server, encoder):
    _serve(llm_server)
    metric, client = _metric(name, encoder), _client(llm_server)
    alone = metric.evaluate_sync(SAMPLE, client, JudgeConfig(models=["good"])).score
    items, summary = metric.evaluate_dataset([SAMPLE, SAMPLE], client, JudgeConfig(models=["good", "bad"]),
                                             n_boot=0)
    # A partial jury keeps the answering model's score, is counted in n_partial and in n_valid, never failed.
    assert items["status"].tolist() == ["partial", "partial"]
    assert items["score"].tolist() == [alone, alone]
    assert items["n_models_ok"].tolist() == [1, 1] and items["n_models_failed"].tolist() == [1, 1]
    assert items["score[good]"].tolist() == [alone, alone] and items["score[bad]"].isna().all()
    assert {"sample", "score", "method", "status", "reason", "explanation", "duration_s",
            "llm_requests"} <= set(items.columns)
    agg = summary[name]
    assert (agg["n"], agg["n_valid"], agg["n_failed"], agg["n_partial"]) == (2, 2, 0, 2)
    assert summary["higher_is_better"] is metric.higher_is_better
    assert summary["counts"]["status"] == {"partial": 2}
    # Every judge model failing: NaN, failed, counted — never 0, never dropped.
    items, summary = metric.evaluate_dataset([SAMPLE], client, JudgeConfig(models=["bad"]), n_boot=0)
    assert items["status"].tolist() == ["failed"] and math.isnan(items["score"][0])
    assert (summary[name]["n"], summary[name]["n_failed"], summary[name]["n_partial"]) == (1, 1, 0)


@pytest.mark.parametrize("name", METRICS)
def test_every_sample_is_validated_before_any_call(name, llm_server, encoder):
    _serve(llm_server)
    with pytest.raises(ValueError, match=r"sample 1: "):
        _metric(name, encoder).evaluate_dataset([SAMPLE, {"id": "empty"}], _client(llm_server),
                                                JudgeConfig(models=["good"]))
    assert llm_server.request_count == 0


def test_the_documented_example_runs(llm_server, monkeypatch, tmp_path, capsys):
    """docs/llm-judges.md, "The LLM-metric API": its example, against the test server via the environment."""
    from pathlib import Path

    from embeddings_server import isolate_provider_env

    text = (Path(__file__).resolve().parents[1] / "docs" / "llm-judges.md").read_text(encoding="utf-8")
    section = text.split("## The LLM-metric API", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    isolate_provider_env(monkeypatch, tmp_path)
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("RAGNB_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("RAGNB_LLM_CACHE_DIR", "off")
    llm_server.set_handler(lambda req: completion(GOOD))
    namespace: dict = {}
    exec(compile(code, "docs/llm-judges.md", "exec"), namespace)  # noqa: S102 - the documented example
    out = capsys.readouterr().out
    assert "judge_faithfulness 1.0 ok" in out and "nv_response_groundedness 1.0 ok" in out
    assert namespace["summary"]["context_precision"]["n_valid"] == 2
    assert namespace["items"]["status"].tolist() == ["ok", "ok"]


def test_the_llm_metric_api_is_public():
    import ragnb
    from ragnb.judges import base

    assert ragnb.get_llm_metric is base.get_llm_metric and ragnb.LLMMetric is LLMMetric
    assert ragnb.Sample is Sample and ragnb.JudgeConfig is JudgeConfig and ragnb.EvaluationResult is EvaluationResult
    assert ragnb.llm_metric_names() == METRICS
    assert all(getattr(ragnb, n).__doc__ for n in ("LLMMetric", "Sample", "JudgeConfig", "EvaluationResult",
                                                  "get_llm_metric", "llm_metric_names"))


def test_the_old_names_warn_and_give_the_one_apis_objects():
    # kept one release: the suite-level helpers and the Judge method whose name the ragas statement ratio holds
    from ragnb.judges import nvidia, ragas
    from ragnb.judges.scores import Judge

    for module, name in ((ragas, "faithfulness"), (ragas, "noise_sensitivity_irrelevant"),
                         (nvidia, "nv_answer_accuracy")):
        with pytest.deprecated_call(match=r"get_metric is deprecated.*get_llm_metric"):
            old, new = module.get_metric(name), get_llm_metric(name)
            assert type(old) is type(new) and old.options() == new.options(), (old, new)
    with pytest.deprecated_call(match="evaluate_dataset is deprecated"), pytest.raises(ValueError, match="nv_"):
        nvidia.evaluate_dataset("faithfulness", [], None)  # still only its own suite's names
    with pytest.deprecated_call(match="evaluate_dataset is deprecated"), pytest.raises(ValueError):
        ragas.evaluate_dataset("faithfulness", [], None)
    assert get_llm_metric("faithfulness").name == "faithfulness"  # the statement ratio
    assert get_llm_metric("judge_faithfulness") is get_llm_metric("faithfulness_llm")
    assert "faithfulness" in Judge.faithfulness.__doc__ and "Deprecated" in Judge.faithfulness.__doc__


def test_the_old_judge_method_warns_and_scores_as_the_new_one(llm_server):
    from ragnb.judges.scores import Judge

    llm_server.set_handler(lambda body: completion(json.dumps({"score": 0.5, "reason": "partly"})))
    judge = Judge(LLMClient(LLMSettings(base_url=llm_server.base_url, api_key="sk-test", cache_dir=None)),
                  JudgeConfig(models=["m1"]))
    new = judge.sync.judge_faithfulness("q?", "an answer", "a context")
    with pytest.deprecated_call(match="Judge.faithfulness is deprecated"):
        old = judge.sync.faithfulness("q?", "an answer", "a context")
    assert (old.score, old.metric) == (new.score, new.metric) == (0.5, "faithfulness")
