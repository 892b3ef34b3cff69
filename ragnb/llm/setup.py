"""The LLM endpoint a notebook judges and generates with, from the environment — or none (offline)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LLMSetup:
    """The LLM endpoint a notebook judges and generates with — or none (offline fallback)."""

    client: object | None  # ragnb.llm.LLMClient when an endpoint is configured
    backend: str  # "openai-compatible" | "offline-fallback": the metrics JSON's judge_backend
    endpoint: str | None  # base URL with any password hidden; never the key

    def header_info(self) -> dict:
        return {"judge_backend": self.backend, "llm_endpoint": self.endpoint or "none (offline)"}

    def usage(self) -> dict:
        """Tokens, cost and latency per metric and model so far (empty offline)."""
        return self.client.usage.summary() if self.client is not None else {}


def open_llm(prices: dict | None = None, max_concurrency: int = 0, max_retries: int = -1,
             max_wait_s: float = 0) -> LLMSetup:
    """Endpoint and key from the environment (RAGNB_LLM_BASE_URL, RAGNB_LLM_API_KEY / OPENAI_API_KEY /
    OPENROUTER_API_KEY); ``prices``: model → {input_per_1m, output_per_1m} in USD. Nothing configured →
    ``client=None`` and every judged metric uses the offline fallback, which reports say.

    ``max_retries`` (-1) and ``max_wait_s`` (0) — the notebooks' ``llm_max_retries`` / ``llm_max_wait_s`` —
    override ``RAGNB_LLM_MAX_RETRIES`` / ``RAGNB_LLM_MAX_WAIT_S`` when set (-1 / 0: keep the environment's
    or the default: 6 retries, 60 s per call)."""
    from ragnb import config
    from ragnb.llm import LLMClient, LLMSettings

    overrides: dict = {"prices": dict(prices or {})}
    if max_concurrency:
        overrides["max_concurrency"] = int(max_concurrency)
    if max_retries is not None and max_retries >= 0:
        overrides["max_retries"] = max_retries
    if max_wait_s:
        overrides["max_wait_s"] = max_wait_s
    settings = LLMSettings.from_env(**overrides)
    if not settings.configured:
        return LLMSetup(None, settings.backend_label(), None)
    return LLMSetup(LLMClient(settings), settings.backend_label(), config.redact_url(settings.resolved_base_url))
