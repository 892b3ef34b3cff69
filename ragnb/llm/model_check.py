"""Checking model ids against the endpoint's model list (``GET /v1/models``) before any work starts."""

from __future__ import annotations

import difflib

import openai

from ragnb.config import redact_url
from ragnb.llm.settings import LLMSettings

# Statuses of an endpoint that has no model list (some proxies and self-hosted servers): nothing to check.
_NO_LIST = frozenset({404, 405, 501})


def available_models(settings: LLMSettings) -> list[str] | None:
    """The model ids the endpoint lists, or None when it offers no ``/models`` list. A refused key or an
    unreachable endpoint is a ValueError saying so (every call of the run would fail the same way)."""
    where = redact_url(settings.resolved_base_url)
    client = openai.OpenAI(base_url=settings.resolved_base_url, api_key=settings.api_key or "ragnb-no-key",
                           max_retries=1, timeout=min(settings.timeout_s, 30))
    try:
        return [m.id for m in client.models.list()]
    except openai.APIStatusError as exc:
        if exc.status_code in _NO_LIST:
            return None
        raise ValueError(f"the LLM endpoint {where} refused to list its models (HTTP {exc.status_code}); "
                         "check RAGNB_LLM_API_KEY and RAGNB_LLM_BASE_URL") from None
    except openai.APIConnectionError:
        raise ValueError(f"the LLM endpoint {where} cannot be reached; check RAGNB_LLM_BASE_URL and that the "
                         "server is running") from None
    finally:
        client.close()


def check_models(settings: LLMSettings, models: list[str], what: str = "model ids") -> list[str] | None:
    """ValueError naming every id in ``models`` the endpoint does not list (with the closest listed ids);
    returns the endpoint's list, or None when it has none (then nothing can be checked)."""
    listed = available_models(settings)
    if listed is None:
        return None
    unknown = [m for m in models if m not in set(listed)]
    if unknown:
        hints = []
        for m in unknown:
            close = difflib.get_close_matches(m, listed, n=3, cutoff=0.5)
            hints.append(f"{m!r}" + (f" (did you mean {', '.join(map(repr, close))}?)" if close else ""))
        raise ValueError(f"{what} not offered by {redact_url(settings.resolved_base_url)}: {'; '.join(hints)}. "
                         f"It lists {len(listed)} model(s); fix the id(s) before the run starts.")
    return listed
