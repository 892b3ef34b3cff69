"""LLM access for judges and generation: async OpenAI-compatible client, disk cache, usage ledger.

The LLM-judged metrics live in :mod:`ragnb.judges`: one :class:`~ragnb.judges.base.LLMMetric` API
(``get_llm_metric(name).evaluate_sync(sample, client, config)``, ``.evaluate_dataset(samples, client, config)``),
one :class:`~ragnb.judges.sample.Sample`, one :class:`~ragnb.judges.judge_config.JudgeConfig`, one
:class:`~ragnb.llm.result.EvaluationResult`.

Typical use::

    from ragnb.llm import LLMClient, LLMSettings, run_sync

    settings = LLMSettings.from_env(prices={"openai/gpt-4o-mini": {"input_per_1m": 0.15, "output_per_1m": 0.6}})
    if settings.configured:
        client = LLMClient(settings)
        result = run_sync(client.chat([{"role": "user", "content": "Hi"}], model="openai/gpt-4o-mini"))
        client.usage.summary()   # tokens / cost / latency per metric and model
"""

from ragnb.llm.cache import LLMCache, cache_key
from ragnb.llm.client import LLMClient
from ragnb.llm.replies import ChatResult, LLMError, LLMOutputError, LLMPermanentError, LLMTransientError, extract_json
from ragnb.llm.retry import backoff_delay, parse_retry_after
from ragnb.llm.settings import OPENAI_BASE_URL, OPENROUTER_BASE_URL, LLMSettings
from ragnb.llm.sync import SyncView, run_sync
from ragnb.llm.usage import CallRecord, UsageLedger

__all__ = [
    "OPENAI_BASE_URL",
    "OPENROUTER_BASE_URL",
    "CallRecord",
    "ChatResult",
    "LLMCache",
    "LLMClient",
    "LLMError",
    "LLMOutputError",
    "LLMPermanentError",
    "LLMSettings",
    "LLMTransientError",
    "SyncView",
    "UsageLedger",
    "backoff_delay",
    "cache_key",
    "extract_json",
    "parse_retry_after",
    "run_sync",
]
