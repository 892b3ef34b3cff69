"""ragnb.llm against a real OpenAI-compatible HTTP server (tests/llm_server.py) through the real openai SDK."""

from __future__ import annotations

import asyncio
import json
import socket
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import pytest
from llm_server import Reply, completion, completion_body, error_reply

from ragnb.llm import (
    OPENAI_BASE_URL,
    OPENROUTER_BASE_URL,
    LLMClient,
    LLMOutputError,
    LLMPermanentError,
    LLMSettings,
    LLMTransientError,
    backoff_delay,
    extract_json,
    parse_retry_after,
    run_sync,
)

KEY = "sk-test-SECRET123"
MSGS = [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": "Score this."}]


def make_client(server, **overrides) -> LLMClient:
    values = dict(base_url=server.base_url, api_key=KEY, backoff_initial_s=0.001, backoff_max_s=0.05,
                  timeout_s=5, cache_dir=None)
    values.update(overrides)
    return LLMClient(LLMSettings(**values))


def chat(client: LLMClient, messages=MSGS, **kw):
    kw.setdefault("model", "judge-a")
    return run_sync(client.chat(messages, **kw))


def chat_json(client: LLMClient, parse, messages=MSGS, **kw):
    kw.setdefault("model", "judge-a")
    return run_sync(client.chat_json(messages, parse=parse, **kw))


def parse_score(obj):
    if not isinstance(obj, dict) or not isinstance(obj.get("score"), int):
        raise ValueError("expected {'score': <int>}")
    return obj["score"]


# --------------------------------------------------------------------------------------------
# Normal calls, accounting
# --------------------------------------------------------------------------------------------


def test_normal_call_reports_tokens_cost_and_sends_the_request(llm_server):
    llm_server.script(completion("The answer is 4.", prompt_tokens=1200, completion_tokens=340, model="judge-a-0613"))
    client = make_client(llm_server, prices={"judge-a": {"input_per_1m": 3.0, "output_per_1m": 15.0}})
    r = chat(client, temperature=0.0, max_tokens=77, seed=7, metric="faithfulness")

    assert r.text == "The answer is 4."
    assert r.finish_reason == "stop"
    assert r.model == "judge-a-0613"
    assert (r.tokens_in, r.tokens_out) == (1200, 340)
    # 1200 * 3 / 1e6 + 340 * 15 / 1e6 = 0.0036 + 0.0051
    assert r.cost_usd == pytest.approx(0.0087)
    assert r.cached is False and r.attempts == 1 and r.latency_s > 0

    [req] = llm_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["model"] == "judge-a"
    assert req.body["messages"] == MSGS
    assert (req.body["temperature"], req.body["max_tokens"], req.body["seed"]) == (0.0, 77, 7)
    assert req.body.get("stream") in (None, False)

    total = client.usage.summary()["total"]
    assert (total["calls"], total["http_requests"], total["tokens_in"], total["tokens_out"]) == (1, 1, 1200, 340)
    assert total["cost_usd"] == pytest.approx(0.0087)
    assert total["unpriced_calls"] == 0


def test_model_without_price_has_no_cost_and_is_counted_unpriced(llm_server):
    client = make_client(llm_server, prices={"other": {"input_per_1m": 1.0, "output_per_1m": 1.0}})
    r = chat(client, model="judge-a")
    assert r.cost_usd is None
    total = client.usage.summary()["total"]
    assert total["unpriced_calls"] == 1 and total["cost_usd"] == 0.0


def test_keyless_local_endpoint_works(llm_server):
    client = make_client(llm_server, api_key=None)
    assert chat(client).text == "ok"
    assert llm_server.requests[0].headers["authorization"].startswith("Bearer ")
    assert client.settings.api_key is None


def test_usage_summary_sums_per_metric_and_model(llm_server):
    llm_server.set_handler(lambda req: completion(
        "x", prompt_tokens=100 if req["model"] == "judge-a" else 1000, completion_tokens=10))
    prices = {"judge-a": {"input_per_1m": 1.0, "output_per_1m": 2.0},
              "judge-b": {"input_per_1m": 10.0, "output_per_1m": 20.0}}
    client = make_client(llm_server, prices=prices)

    async def run():
        await asyncio.gather(
            client.chat(MSGS, model="judge-a", metric="faithfulness"),
            client.chat(MSGS + [{"role": "user", "content": "2"}], model="judge-a", metric="faithfulness"),
            client.chat(MSGS, model="judge-b", metric="faithfulness"),
            client.chat(MSGS, model="judge-a", metric="answer_relevancy"),
        )

    run_sync(run())
    s = client.usage.summary()
    cost_a = 100 * 1.0 / 1e6 + 10 * 2.0 / 1e6  # 0.00012
    cost_b = 1000 * 10.0 / 1e6 + 10 * 20.0 / 1e6  # 0.0102
    assert s["by_model"]["judge-a"]["calls"] == 3
    assert s["by_model"]["judge-a"]["tokens_in"] == 300
    assert s["by_model"]["judge-a"]["cost_usd"] == pytest.approx(3 * cost_a)
    assert s["by_model"]["judge-b"]["tokens_in"] == 1000
    assert s["by_model"]["judge-b"]["cost_usd"] == pytest.approx(cost_b)
    assert s["by_metric"]["faithfulness"]["calls"] == 3
    assert s["by_metric"]["faithfulness"]["tokens_in"] == 1200
    assert s["by_metric"]["faithfulness"]["cost_usd"] == pytest.approx(2 * cost_a + cost_b)
    assert s["by_metric"]["answer_relevancy"]["tokens_out"] == 10
    assert s["total"]["calls"] == 4 and s["total"]["http_requests"] == 4
    assert s["total"]["tokens_out"] == 40
    assert s["total"]["cost_usd"] == pytest.approx(3 * cost_a + cost_b)
    assert s["total"]["latency_s_mean"] == pytest.approx(s["total"]["latency_s_total"] / 4)
    json.dumps(s)  # JSON-able for the metrics file


# --------------------------------------------------------------------------------------------
# Retries
# --------------------------------------------------------------------------------------------


def test_429_with_retry_after_is_honoured(llm_server):
    llm_server.script(
        error_reply(429, "Rate limit reached", type_="requests", code="rate_limit_exceeded", retry_after=0.2),
        completion("fine"),
    )
    # The computed backoff would be ~1 ms: the client must wait the 0.2 s the server asked for.
    client = make_client(llm_server, backoff_initial_s=0.001, backoff_max_s=5)
    r = chat(client)
    assert r.text == "fine" and r.attempts == 2
    assert client.retry_waits_s == [0.2]
    assert client.usage.summary()["total"]["http_requests"] == 2


def test_retry_after_longer_than_backoff_max_is_capped(llm_server):
    llm_server.script(error_reply(429, "slow down", retry_after=3600), completion("fine"))
    client = make_client(llm_server, backoff_max_s=0.05)
    assert chat(client).attempts == 2 and client.retry_waits_s == [0.05]


def test_500_500_then_success(llm_server):
    llm_server.script(error_reply(500, "boom", type_="server_error"), error_reply(502, "bad gateway"),
                      completion("ok3"))
    client = make_client(llm_server)
    r = chat(client)
    assert (r.text, r.attempts, len(llm_server.requests)) == ("ok3", 3, 3)


def test_timeout_then_success(llm_server):
    llm_server.script(completion("too late", delay_s=3), completion("in time"))
    client = make_client(llm_server, timeout_s=0.3)
    r = chat(client)
    assert (r.text, r.attempts, len(llm_server.requests)) == ("in time", 2, 2)


@pytest.mark.parametrize("bad_body", [
    {"error": {"message": "upstream overloaded", "code": 502}},  # OpenRouter relays upstream failures as 200
    "<html>proxy error</html>",
])
def test_200_with_a_malformed_body_is_retried(llm_server, bad_body):
    llm_server.script(Reply(200, bad_body), completion("ok"))
    r = chat(make_client(llm_server))
    assert (r.text, r.attempts) == ("ok", 2)


def test_minimal_compatible_reply_without_usage(llm_server):
    # Some local servers omit usage/id/model: tokens are 0 and the cost is unknown, not invented.
    llm_server.script(Reply(200, {"choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "hi"}}]}))
    r = chat(make_client(llm_server, prices={"judge-a": {"input_per_1m": 1.0, "output_per_1m": 1.0}}))
    assert (r.text, r.tokens_in, r.tokens_out, r.cost_usd, r.model) == ("hi", 0, 0, None, "judge-a")


def test_retries_exhausted_raise_transient_error(llm_server):
    llm_server.set_handler(lambda req: error_reply(503, "overloaded", type_="server_error"))
    client = make_client(llm_server, max_retries=3)
    with pytest.raises(LLMTransientError) as info:
        chat(client, metric="faithfulness")
    assert len(llm_server.requests) == 4
    assert info.value.attempts == 4 and info.value.status == 503
    assert "overloaded" in str(info.value)
    total = client.usage.summary()["total"]
    assert (total["calls"], total["failed_calls"], total["http_requests"]) == (0, 1, 4)


def test_connection_refused_is_transient():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = LLMClient(LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=2,
                                   backoff_initial_s=0.001, backoff_max_s=0.01, cache_dir=None))
    with pytest.raises(LLMTransientError) as info:
        chat(client)
    assert info.value.attempts == 3
    assert "connection" in str(info.value).lower()


def test_401_fails_at_once_with_provider_message_and_no_key(llm_server):
    llm_server.script(error_reply(401, f"Incorrect API key provided: {KEY}. Find your key at example.org",
                                  code="invalid_api_key"))
    client = make_client(llm_server)
    with pytest.raises(LLMPermanentError) as info:
        chat(client)
    err = info.value
    assert len(llm_server.requests) == 1
    assert err.status == 401 and err.code == "invalid_api_key" and err.attempts == 1
    assert "Incorrect API key provided" in str(err)
    assert KEY not in str(err) and KEY not in repr(err) and KEY not in err.provider_message
    assert err.__cause__ is None and err.__suppress_context__  # the SDK error (with headers) is not chained


def test_insufficient_quota_is_permanent_despite_429(llm_server):
    llm_server.script(error_reply(429, "You exceeded your current quota, please check your plan and billing details.",
                                  type_="insufficient_quota", code="insufficient_quota", retry_after=1))
    with pytest.raises(LLMPermanentError) as info:
        chat(make_client(llm_server))
    assert len(llm_server.requests) == 1
    assert info.value.status == 429 and info.value.code == "insufficient_quota"
    assert "exceeded your current quota" in str(info.value)


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_other_client_errors_are_permanent(llm_server, status):
    llm_server.script(error_reply(status, f"provider says {status}"))
    with pytest.raises(LLMPermanentError, match=f"provider says {status}"):
        chat(make_client(llm_server))
    assert len(llm_server.requests) == 1


def test_backoff_schedule_doubles_from_2_to_30_seconds_with_jitter():
    s = LLMSettings(base_url="http://127.0.0.1:1/v1", cache_dir=None)
    assert [backoff_delay(n, s, rand=lambda: 0.5) for n in range(1, 8)] == [2, 4, 8, 16, 30, 30, 30]
    assert backoff_delay(1, s, rand=lambda: 0.0) == pytest.approx(1.6)  # -20 %
    assert backoff_delay(2, s, rand=lambda: 1.0) == pytest.approx(4.8)  # +20 %
    assert backoff_delay(5, s, rand=lambda: 1.0) == 30  # jitter never exceeds the cap
    assert backoff_delay(1, s, retry_after=7.5) == 7.5
    assert backoff_delay(1, s, retry_after=120) == 30


def test_parse_retry_after_forms():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    header = format_datetime(now + timedelta(seconds=12), usegmt=True)
    assert parse_retry_after({"retry-after": header}, now=now.timestamp()) == pytest.approx(12.0)
    assert parse_retry_after({"retry-after": format_datetime(now - timedelta(seconds=5), usegmt=True)},
                             now=now.timestamp()) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# --------------------------------------------------------------------------------------------
# JSON replies and re-asks
# --------------------------------------------------------------------------------------------


def test_chat_json_accepts_fenced_json(llm_server):
    llm_server.script(completion('Sure! Here it is:\n```json\n{"score": 2, "reason": "grounded"}\n```\nHope it helps.'))
    value, results = chat_json(make_client(llm_server), parse_score)
    assert value == 2 and len(results) == 1 and len(llm_server.requests) == 1


def test_extract_json_variants():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('The verdicts are: [{"id": 1, "v": "yes"}] as requested') == [{"id": 1, "v": "yes"}]
    assert extract_json('Reasoning {not json}. Result: {"score": 1}') == {"score": 1}
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("I can't help with that.")
    with pytest.raises(ValueError, match="cut off"):
        extract_json('{"score": 1}', "length")
    with pytest.raises(ValueError, match="malformed"):
        extract_json('{"score": 1,,}')


def test_malformed_json_then_valid_after_reask(llm_server):
    llm_server.script(completion('{"score": 2,, "reason": }'), completion('{"score": 1}'))
    value, results = chat_json(make_client(llm_server), parse_score)
    assert value == 1 and len(results) == 2
    first, second = llm_server.requests
    assert first.messages == MSGS
    assert second.messages[:2] == MSGS
    assert second.messages[2] == {"role": "assistant", "content": '{"score": 2,, "reason": }'}
    assert second.messages[3]["role"] == "user"
    assert "could not be used" in second.messages[3]["content"]
    assert "malformed" in second.messages[3]["content"]


def test_truncated_reply_triggers_reask(llm_server):
    llm_server.script(completion('{"score": 2, "reason": "the context says that the Eiff', finish_reason="length"),
                      completion('{"score": 2}'))
    value, results = chat_json(make_client(llm_server), parse_score, max_tokens=20)
    assert value == 2
    assert [r.finish_reason for r in results] == ["length", "stop"]
    assert "cut off" in llm_server.requests[1].messages[-1]["content"]


def test_wrong_structure_triggers_reask(llm_server):
    llm_server.script(completion('{"score": "high"}'), completion('{"score": 0}'))
    value, _ = chat_json(make_client(llm_server), parse_score)
    assert value == 0
    assert "expected {'score': <int>}" in llm_server.requests[1].messages[-1]["content"]


def test_refusals_exhaust_the_reask_budget(llm_server):
    llm_server.set_handler(lambda req: completion("I'm sorry, but I can't help with that."))
    client = make_client(llm_server, reask_budget=2, prices={"judge-a": {"input_per_1m": 1.0, "output_per_1m": 1.0}})
    with pytest.raises(LLMOutputError) as info:
        chat_json(client, parse_score, metric="faithfulness")
    err = info.value
    assert len(llm_server.requests) == 3  # 1 + reask_budget
    assert len(err.results) == 3 and err.raw_text == "I'm sorry, but I can't help with that."
    assert "no JSON" in err.reason
    # the re-asks accumulate in the conversation
    assert [len(r.messages) for r in llm_server.requests] == [2, 4, 6]
    assert client.usage.summary()["by_metric"]["faithfulness"]["calls"] == 3


def test_null_content_refusal_field_is_unparseable(llm_server):
    llm_server.script(completion(None, refusal="I cannot assist.", finish_reason="stop"), completion('{"score": 1}'))
    value, results = chat_json(make_client(llm_server), parse_score)
    assert value == 1 and results[0].text == "" and results[0].refusal == "I cannot assist."


def test_zero_reask_budget_fails_after_one_request(llm_server):
    llm_server.set_handler(lambda req: completion("nope"))
    with pytest.raises(LLMOutputError):
        chat_json(make_client(llm_server, reask_budget=0), parse_score)
    assert len(llm_server.requests) == 1


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


def _evaluation(client: LLMClient):
    async def run():
        a = await client.chat(MSGS, model="judge-a", metric="m1")
        b, _ = await client.chat_json(MSGS + [{"role": "user", "content": "json please"}], model="judge-a",
                                      parse=parse_score, metric="m2")
        return a.text, b

    return run_sync(run())


def test_second_run_with_the_same_cache_sends_zero_requests(llm_server, tmp_path):
    llm_server.script(completion("first answer", prompt_tokens=100, completion_tokens=20),
                      completion("not json", prompt_tokens=50, completion_tokens=5),
                      completion('{"score": 2}', prompt_tokens=80, completion_tokens=6))
    prices = {"judge-a": {"input_per_1m": 1.0, "output_per_1m": 10.0}}
    cold = make_client(llm_server, cache_dir=tmp_path / "cache", prices=prices)
    assert _evaluation(cold) == ("first answer", 2)
    assert len(llm_server.requests) == 3
    spent = cold.usage.summary()["total"]["cost_usd"]
    assert spent == pytest.approx((100 + 50 + 80) / 1e6 + (20 + 5 + 6) * 10 / 1e6)

    warm = make_client(llm_server, cache_dir=tmp_path / "cache", prices=prices)
    assert _evaluation(warm) == ("first answer", 2)
    assert len(llm_server.requests) == 3  # zero new requests
    records = warm.usage.records
    assert len(records) == 3 and all(r.cached and r.attempts == 0 for r in records)
    total = warm.usage.summary()["total"]
    assert (total["calls"], total["cached_calls"], total["http_requests"]) == (3, 3, 0)
    assert (total["tokens_in"], total["cost_usd"]) == (0, 0.0)  # nothing spent now
    assert total["cached_tokens_in"] == 230
    assert total["cached_cost_usd"] == pytest.approx(spent)  # what it originally cost


def test_cache_misses_on_different_parameters_and_skips_errors(llm_server, tmp_path):
    client = make_client(llm_server, cache_dir=tmp_path / "c")
    chat(client)
    chat(client)
    assert len(llm_server.requests) == 1
    chat(client, temperature=0.7)
    chat(client, model="judge-b")
    chat(client, seed=1)
    chat(client, max_tokens=5)
    chat(client, messages=MSGS[:1] + [{"role": "user", "content": "Score that."}])
    assert len(llm_server.requests) == 6
    chat(client, cache=False)
    assert len(llm_server.requests) == 7
    # a different endpoint is a different cache namespace
    other = LLMClient(LLMSettings(base_url=llm_server.base_url.replace("127.0.0.1", "localhost"), api_key=KEY,
                                  cache_dir=tmp_path / "c"))
    chat(other)
    assert len(llm_server.requests) == 8

    # errors are not cached: the same request is sent again after a failure
    llm_server.script(error_reply(400, "bad"))
    with pytest.raises(LLMPermanentError):
        chat(client, model="judge-c")
    assert chat(client, model="judge-c").text == "ok"
    assert len(llm_server.requests) == 10


def test_cache_disabled_always_calls(llm_server):
    client = make_client(llm_server, cache_dir=None)
    chat(client)
    chat(client)
    assert len(llm_server.requests) == 2


# --------------------------------------------------------------------------------------------
# Concurrency, sync bridge
# --------------------------------------------------------------------------------------------


def test_concurrency_bound_holds(llm_server):
    llm_server.set_handler(lambda req: completion(req["messages"][-1]["content"], delay_s=0.05))
    client = make_client(llm_server, max_concurrency=4)

    async def run():
        return await asyncio.gather(*[
            client.chat([{"role": "user", "content": f"q{i}"}], model="judge-a") for i in range(40)
        ])

    results = run_sync(run())
    assert [r.text for r in results] == [f"q{i}" for i in range(40)]
    assert len(llm_server.requests) == 40
    assert llm_server.max_in_flight == 4


def test_run_sync_inside_a_running_loop_and_across_loops(llm_server):
    client = make_client(llm_server)

    async def notebook_cell():  # Jupyter runs cells inside an event loop
        return run_sync(client.chat(MSGS, model="judge-a")).text

    assert asyncio.run(notebook_cell()) == "ok"
    assert chat(client).text == "ok"  # a second, fresh loop reuses the client
    with pytest.raises(ValueError, match="coroutine"):
        run_sync(lambda: None)


# --------------------------------------------------------------------------------------------
# Secrets and settings
# --------------------------------------------------------------------------------------------


def test_api_key_appears_in_no_file_and_no_repr(llm_server, tmp_path):
    cache_dir = tmp_path / "cache"
    client = make_client(llm_server, cache_dir=cache_dir, max_retries=1)
    llm_server.script(completion("hello"), completion("no json"), completion("still none"), completion("nope"),
                      error_reply(401, f"bad key {KEY}"), error_reply(503, f"down for {KEY}"),
                      error_reply(503, f"down for {KEY}"))
    chat(client, model="judge-0")
    errors = []
    for call in (lambda: chat_json(client, parse_score),
                 lambda: chat(client, model="judge-x"),
                 lambda: chat(client, model="judge-y")):
        with pytest.raises((LLMOutputError, LLMPermanentError, LLMTransientError)) as info:
            call()
        errors.append(info.value)
    assert [type(e) for e in errors] == [LLMOutputError, LLMPermanentError, LLMTransientError]
    # the key did reach the server...
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in llm_server.requests)
    # ...but nowhere else
    texts = [repr(client.settings), str(client.settings), repr(client), str(client),
             json.dumps(client.usage.summary()), repr(client.usage.records), repr(client.cache)]
    texts += [repr(e) for e in errors] + [str(e) for e in errors] + [str(vars(e)) for e in errors]
    for text in texts:
        assert KEY not in text
    files = [p for p in cache_dir.rglob("*") if p.is_file()]
    assert files, "the cache wrote nothing"
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p


def test_settings_from_env(monkeypatch, tmp_path):
    for name in ("RAGNB_LLM_BASE_URL", "RAGNB_LLM_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "OPENAI_BASE_URL",
                 "RAGNB_LLM_MAX_CONCURRENCY", "RAGNB_LLM_TIMEOUT_S", "RAGNB_LLM_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    s = LLMSettings.from_env()
    assert (s.configured, s.backend_label(), s.base_url, s.api_key) == (False, "offline-fallback", None, None)
    assert s.cache_dir is not None and s.cache_dir.name == "llm_cache"
    with pytest.raises(ValueError, match="RAGNB_LLM_BASE_URL"):
        LLMClient(s)

    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-1")
    s = LLMSettings.from_env()
    assert (s.base_url, s.api_key, s.backend_label()) == (OPENROUTER_BASE_URL, "sk-or-1", "openai-compatible")

    monkeypatch.setenv("OPENAI_API_KEY", "sk-oa-2")
    s = LLMSettings.from_env()
    assert (s.base_url, s.api_key) == (OPENAI_BASE_URL, "sk-oa-2")

    monkeypatch.setenv("RAGNB_LLM_API_KEY", "sk-rg-3")
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", "http://localhost:8000/v1/")
    monkeypatch.setenv("RAGNB_LLM_MAX_CONCURRENCY", "3")
    monkeypatch.setenv("RAGNB_LLM_CACHE_DIR", "off")
    s = LLMSettings.from_env(timeout_s=5)
    assert (s.base_url, s.api_key, s.max_concurrency, s.cache_dir, s.timeout_s) == (
        "http://localhost:8000/v1", "sk-rg-3", 3, None, 5)
    assert "sk-rg-3" not in repr(s)

    monkeypatch.delenv("RAGNB_LLM_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENROUTER_API_KEY")
    s = LLMSettings.from_env()  # local vLLM/Ollama: endpoint without a key
    assert s.configured and s.api_key is None

    monkeypatch.setenv("RAGNB_LLM_MAX_CONCURRENCY", "many")
    with pytest.raises(ValueError, match="RAGNB_LLM_MAX_CONCURRENCY"):
        LLMSettings.from_env()


@pytest.mark.parametrize("kwargs, field", [
    ({"max_concurrency": 0}, "max_concurrency"),
    ({"max_retries": -1}, "max_retries"),
    ({"reask_budget": 1.5}, "reask_budget"),
    ({"timeout_s": 0}, "timeout_s"),
    ({"backoff_initial_s": 5, "backoff_max_s": 1}, "backoff_max_s"),
    ({"backoff_multiplier": 0.5}, "backoff_multiplier"),
    ({"base_url": "localhost:8000"}, "base_url"),
    ({"prices": {"m": {"input_per_1m": 1}}}, "prices"),
    ({"prices": {"m": {"input_per_1m": -1, "output_per_1m": 1}}}, "input_per_1m"),
])
def test_settings_validation_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        LLMSettings(base_url=kwargs.pop("base_url", "http://127.0.0.1:1/v1"), cache_dir=None, **kwargs)
    with pytest.raises(ValueError, match="unknown LLM setting"):
        LLMSettings.from_env(max_concurency=2)


def test_request_validation(llm_server):
    client = make_client(llm_server)
    with pytest.raises(ValueError, match="messages"):
        chat(client, messages=[{"content": "no role"}])
    with pytest.raises(ValueError, match="model"):
        chat(client, model="")
    with pytest.raises(ValueError, match="temperature"):
        chat(client, temperature=3)
    with pytest.raises(ValueError, match="max_tokens"):
        chat(client, max_tokens=0)
    assert llm_server.requests == []


def test_completion_body_helper_matches_openai_shape():
    body = completion_body("x", prompt_tokens=3, completion_tokens=4)
    assert body["usage"]["total_tokens"] == 7 and body["choices"][0]["message"]["content"] == "x"
