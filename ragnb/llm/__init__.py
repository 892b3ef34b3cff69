"""LLM access for judges and generation: async OpenAI-compatible client, disk cache, usage ledger.

Typical use::

    from ragnb.llm import LLMClient, LLMSettings, run_sync

    settings = LLMSettings.from_env(prices={"openai/gpt-4o-mini": {"input_per_1m": 0.15, "output_per_1m": 0.6}})
    if settings.configured:
        client = LLMClient(settings)
        result = run_sync(client.chat([{"role": "user", "content": "Hi"}], model="openai/gpt-4o-mini"))
        client.usage.summary()   # tokens / cost / latency per metric and model
"""

from ragnb.llm.cache import LLMCache, cache_key
from ragnb.llm.client import (
    OPENAI_BASE_URL,
    OPENROUTER_BASE_URL,
    ChatResult,
    LLMClient,
    LLMError,
    LLMOutputError,
    LLMPermanentError,
    LLMSettings,
    LLMTransientError,
    backoff_delay,
    extract_json,
    parse_retry_after,
    run_sync,
)
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
    "UsageLedger",
    "backoff_delay",
    "cache_key",
    "extract_json",
    "parse_retry_after",
    "run_sync",
]
