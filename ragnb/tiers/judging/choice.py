"""Which judge a notebook uses — LLM models or the offline fallback — and where its item log lives."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnb.io import comma_list
from ragnb.metrics.fallback import OFFLINE_LABEL, agreement_note

# The metrics JSON's judge_backend: an OpenAI-compatible endpoint, or the offline fallback chain
# (see docs/metrics.md, Faithfulness).
LLM_BACKEND = "openai-compatible"
OFFLINE_BACKEND = "offline-fallback"


def parse_list(value: str | Sequence[str] | None) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` → ``["a", "b"]`` (blanks dropped, order kept, repeats rejected)."""
    out = comma_list(value if value is None or isinstance(value, str) else list(value))
    dupes = sorted(k for k, c in Counter(out).items() if c > 1)
    if dupes:
        raise ValueError(f"{dupes} listed more than once in {value!r}")
    return out


@dataclass
class JudgeChoice:
    """The judge a notebook uses: an LLM client with model ids, or the offline fallback (client None)."""

    client: Any | None
    models: list[str]
    backend: str  # the metrics JSON's judge_backend: "openai-compatible" | "offline-fallback"
    endpoint: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def judge_model(self) -> str:
        return ",".join(self.models) if self.client is not None else OFFLINE_BACKEND

    def header_info(self) -> dict:
        return {"judge_backend": self.backend, "llm_endpoint": self.endpoint or "none (offline)",
                "judge_models": ", ".join(self.models) if self.client is not None else
                f"none: offline fallback ({OFFLINE_LABEL})"}


def choose_judge(llm: Any, judge_models: str | Sequence[str]) -> JudgeChoice:
    """From :func:`ragnb.datasets.corpus.open_llm`'s setup and the ``judge_models`` parameter: the LLM judge
    when an endpoint is configured *and* models are named, else the offline fallback (with a note why)."""
    models = parse_list(judge_models)
    if getattr(llm, "client", None) is None:
        notes = [f"No LLM endpoint is configured: the judge is the offline fallback ({OFFLINE_LABEL}, "
                 f"{agreement_note()}), not an LLM."]
        if models:
            notes.append(f"judge_models {models} were not used: set RAGNB_LLM_BASE_URL and/or an API key "
                         "(RAGNB_LLM_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY) to judge with them.")
        return JudgeChoice(None, [], OFFLINE_BACKEND, None, notes)
    if not models:
        return JudgeChoice(None, [], OFFLINE_BACKEND, llm.endpoint,
                           ["An LLM endpoint is configured but judge_models is empty: the offline fallback judges "
                            "instead. Name judge models (comma-separated) to evaluate an LLM judge."])
    return JudgeChoice(llm.client, models, llm.backend, llm.endpoint, [])


def item_log_path(output_dir: str | Path, stem: str, resume: bool = True) -> Path:
    """``<output_dir>/<stem>.items.jsonl``; with ``resume=False`` an existing log is moved aside
    (``.items.jsonl.old``) so every item is judged again."""
    path = Path(output_dir) / f"{stem}.items.jsonl"
    if not resume and path.exists():
        path.replace(path.with_name(path.name + ".old"))
    return path
