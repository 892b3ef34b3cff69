"""Provider fault modes against the local OpenAI-compatible server: reasoning models, truncation, error
objects in 200 replies, refusals, failed calls and the cache, bounded retries, a running failure rate."""

from __future__ import annotations

import warnings

import pytest
from llm_server import Reply, completion, error_in_200, error_reply, persistent_failures, think

from ragnb.llm import LLMClient, LLMOutputError, LLMPermanentError, LLMSettings, LLMTransientError, run_sync
from ragnb.llm.replies import extract_json, reply_problem, strip_reasoning

KEY = "sk-test-SECRET123"
MSGS = [{"role": "user", "content": "Score this."}]


def make_client(server, **overrides) -> LLMClient:
    values = dict(base_url=server.base_url, api_key=KEY, backoff_initial_s=0.001, backoff_max_s=0.01,
                  timeout_s=5, cache_dir=None)
    values.update(overrides)
    return LLMClient(LLMSettings(**values))


def parse_score(obj):
    if not isinstance(obj, dict) or not isinstance(obj.get("score"), int):
        raise ValueError("expected {'score': <int>}")
    return obj["score"]


def score_of(client, messages=MSGS):
    return run_sync(client.chat_json(messages, model="judge-a", parse=parse_score))


# -- reasoning models ---------------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    think('{"score": 1}', '{"score": 5}'),
    think('{"score": 1}', 'Final verdict:\n```json\n{"score": 5}\n```'),
    "<thinking>draft {\"score\": 2}</thinking>\n\nSo the answer is {\"score\": 5}.",
    # chat templates that put <think> in the prompt: only the closing tag reaches the reply
    'draft {"score": 1} ... </think>{"score": 5}',
])
def test_the_verdict_comes_from_the_final_answer_never_from_the_draft(llm_server, reply):
    llm_server.script(completion(reply))
    value, results = score_of(make_client(llm_server))
    assert value == 5 and len(results) == 1


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_separate_reasoning_field_is_never_read(llm_server, field):
    llm_server.script(completion('{"score": 5}', reasoning='draft: {"score": 1}', reasoning_field=field))
    assert score_of(make_client(llm_server))[0] == 5


def test_reasoning_without_a_final_answer_is_reasked_then_failed(llm_server):
    only_thoughts = [completion("", reasoning='{"score": 1} maybe'),
                     completion('<think>{"score": 1} hmm, and then'),  # cut off while thinking
                     completion('<think>{"score": 2}</think>')]
    llm_server.script(*only_thoughts)
    with pytest.raises(LLMOutputError, match="only reasoning|empty"):
        score_of(make_client(llm_server))
    assert len(llm_server.requests) == 3
    # the re-ask does not send the reasoning back
    assert all("score" not in m["content"] for m in llm_server.requests[2].messages if m["role"] == "assistant")


def test_reply_rules():
    assert strip_reasoning('<think>a {"x": 1}</think> B') == "B"
    assert strip_reasoning("<think>never closed {") == ""
    assert extract_json('{"a": 1} then the corrected {"a": 2}') == {"a": 2}
    assert reply_problem("ok", "stop") is None
    assert "cut off" in reply_problem("ok", "length")
    assert "refused" in reply_problem("", "stop", "I can't")
    assert "content filter" in reply_problem("x", "content_filter")


# -- generated answers: reasoning removed, truncation never scored ------------------------------


def test_generated_answer_has_its_reasoning_removed(llm_server):
    llm_server.script(completion(think("Paris?", "The capital is Paris.")))
    r = run_sync(make_client(llm_server).chat_text(MSGS, model="gen"))
    assert r.text == "The capital is Paris."


def test_truncated_answer_fails_with_the_reason(llm_server):
    llm_server.script(completion("The capital of France is", finish_reason="length"))
    with pytest.raises(LLMOutputError, match="cut off.*RAGNB_LLM_RETRY_MAX_TOKENS"):
        run_sync(make_client(llm_server).chat_text(MSGS, model="gen", max_tokens=8))


def test_truncated_answer_is_reasked_with_the_larger_budget(llm_server):
    llm_server.script(completion("The capital of France is", finish_reason="length"),
                      completion("The capital of France is Paris."))
    r = run_sync(make_client(llm_server, retry_max_tokens=64).chat_text(MSGS, model="gen", max_tokens=8))
    assert r.text == "The capital of France is Paris."
    assert [q.body["max_tokens"] for q in llm_server.requests] == [8, 64]


# -- errors inside 200 replies, refusals, redaction ---------------------------------------------


@pytest.mark.parametrize("with_choices", [True, False])
def test_an_error_object_in_a_200_reply_is_retried_not_scored(llm_server, with_choices):
    llm_server.script(error_in_200(with_choices=with_choices), completion('{"score": 4}'))
    value, results = score_of(make_client(llm_server))
    assert value == 4 and results[0].attempts == 2


def test_error_label_does_not_repeat_the_status(llm_server):
    llm_server.script(error_reply(402, "Insufficient credits", code="402"))
    with pytest.raises(LLMPermanentError) as info:
        run_sync(make_client(llm_server).chat(MSGS, model="m"))
    assert "HTTP 402 from" in str(info.value) and "(402)" not in str(info.value)


def test_the_key_is_redacted_from_echoed_replies(llm_server, tmp_path):
    llm_server.script(completion(f"You sent the key {KEY}."))
    client = make_client(llm_server, cache_dir=tmp_path)
    assert KEY not in run_sync(client.chat(MSGS, model="m")).text
    assert KEY not in run_sync(client.chat(MSGS, model="m")).text  # from the cache too


# -- the cache never stores a failure -----------------------------------------------------------


@pytest.mark.parametrize("bad", [
    completion('{"score": 3', finish_reason="length"),
    completion(None, refusal="I cannot help with that."),
    completion("no json here, sorry"),
    completion('<think>{"score": 1}</think>'),
])
def test_failed_json_calls_are_not_cached_and_a_later_run_asks_again(llm_server, tmp_path, bad):
    llm_server.set_handler(lambda body: bad)
    with pytest.raises(LLMOutputError):
        score_of(make_client(llm_server, cache_dir=tmp_path))
    sent = len(llm_server.requests)
    llm_server.set_handler(lambda body: completion('{"score": 4}'))  # the provider recovered
    assert score_of(make_client(llm_server, cache_dir=tmp_path))[0] == 4
    assert len(llm_server.requests) == sent + 1
    assert score_of(make_client(llm_server, cache_dir=tmp_path))[0] == 4  # now cached
    assert len(llm_server.requests) == sent + 1


def test_transient_failures_and_truncated_text_are_not_cached(llm_server, tmp_path):
    llm_server.set_handler(lambda body: error_in_200())
    with pytest.raises(LLMTransientError):
        run_sync(make_client(llm_server, cache_dir=tmp_path, max_retries=1).chat(MSGS, model="m"))
    llm_server.set_handler(lambda body: completion("cut", finish_reason="length"))
    client = make_client(llm_server, cache_dir=tmp_path)
    run_sync(client.chat(MSGS, model="m"))
    run_sync(client.chat(MSGS, model="m"))
    assert len(client.cache) == 0 and len(llm_server.requests) == 4


# -- bounded retries and the running failure rate -----------------------------------------------


def test_retry_budget_and_deadline_come_from_the_environment(monkeypatch, llm_server):
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("RAGNB_LLM_MAX_RETRIES", "2")
    monkeypatch.setenv("RAGNB_LLM_MAX_WAIT_S", "7.5")
    s = LLMSettings.from_env(cache_dir=None, backoff_initial_s=0.001, backoff_max_s=0.01)
    assert (s.max_retries, s.max_wait_s) == (2, 7.5)
    llm_server.set_handler(lambda body: error_reply(503, "down", type_="server_error"))
    with pytest.raises(LLMTransientError, match="after 3 requests.*max_retries=2"):
        run_sync(LLMClient(s).chat(MSGS, model="m"))
    monkeypatch.setenv("RAGNB_LLM_MAX_WAIT_S", "soon")
    with pytest.raises(ValueError, match="RAGNB_LLM_MAX_WAIT_S"):
        LLMSettings.from_env()


def test_the_deadline_stops_retries_before_the_budget(llm_server):
    # Retry-After asks for 0.3 s each time; a 1 s deadline allows 3 waits, not the 50 retries of the budget.
    llm_server.set_handler(lambda body: error_reply(503, "busy", type_="server_error", retry_after=0.3))
    client = make_client(llm_server, max_retries=50, max_wait_s=1.0, backoff_max_s=1.0)
    with pytest.raises(LLMTransientError, match="max_wait_s=1 would pass"):
        run_sync(client.chat(MSGS, model="m"))
    assert sum(client.retry_waits_s) < 1.0 and len(llm_server.requests) <= 4


def test_default_policy_waits_at_most_a_minute_per_call():
    s = LLMSettings()
    assert s.max_wait_s <= 60
    # even without the deadline, backoff alone: 2 + 4 + 8 + 16 + 30 + 30 (+20% jitter) > 60, so the
    # deadline is what bounds a call
    assert s.max_wait_s < sum(min(s.backoff_initial_s * 2 ** i, s.backoff_max_s) for i in range(s.max_retries))


def test_a_share_of_persistent_failures_is_reported_early(llm_server):
    llm_server.set_handler(persistent_failures(0.3, lambda body: completion('{"score": 3}')))
    client = make_client(llm_server, max_retries=2)

    async def many():
        import asyncio

        async def one(i):
            try:
                return await client.chat_json([{"role": "user", "content": f"item {i}"}], model="m",
                                              parse=parse_score)
            except LLMTransientError:
                return None
        return await asyncio.gather(*(one(i) for i in range(40)))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run_sync(many())
    failed = sum(r is None for r in results)
    assert 0 < failed < 40
    assert client.failures.alert is not None and "requests failed" in client.failures.alert
    assert client.failure_note() == client.failures.alert  # what the tiers add to their notes
    assert any("requests failed" in str(w.message) for w in caught)
    assert client.failures.failed == 3 * failed  # each failed item: 1 request + 2 retries


def test_models_endpoint_is_served_when_asked(llm_server):
    llm_server.models = ["judge-a"]
    import openai
    oai = openai.OpenAI(base_url=llm_server.base_url, api_key="k")
    assert [m.id for m in oai.models.list()] == ["judge-a"]
    assert Reply  # keep the import used
