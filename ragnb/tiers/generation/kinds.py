"""What differs between Tier 2 (a fixed context) and Tier 3 (retrieved through the system): one small
declaration per tier; everything else in :mod:`ragnb.tiers.generation` is shared."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from ragnb.datasets.schema import DatasetItem
from ragnb.llm import run_sync
from ragnb.rag.system import Context
from ragnb.tiers.generation.answering import retrieve_block
from ragnb.metrics.stats import latency_summary

TIER2_JUDGED = ("faithfulness", "answer_relevance", "answer_correctness")
TIER3_JUDGED = ("faithfulness", "e2e_score")


class Tier2:
    """Tier 2: the dataset's ``chunk_text`` is the one context of its question."""

    tier = "tier_2"
    judged = TIER2_JUDGED

    def check_system(self, system: Any) -> None:
        if not callable(getattr(system, "answer", None)):
            raise ValueError("system must have answer(question, contexts); build it with ragnb.rag.system.load_system")

    def contexts(self, system: Any, items: dict[str, DatasetItem], top_k: int, concurrency: int) -> dict[str, dict]:
        """Per item key: ``{"contexts": [...]}`` or the stage and error that left the item without any."""
        out = {}
        for key, item in items.items():
            if (item.chunk_text or "").strip():
                out[key] = {"contexts": [Context(item.chunk_text, item.chunk_id, item.confluence_url)]}
            else:
                out[key] = {"stage": "context", "error": "the dataset item has no chunk_text: Tier 2 needs the fixed "
                                                         "context (use a dataset with chunk_text, or Tier 3)"}
        return out

    def top_k(self, top_k: int) -> int | None:
        """The ``top_k`` the run depends on (none: the context is fixed)."""
        return None

    def hit_names(self, top_k: int) -> list[str]:
        """Names of the retrieval-hit metrics (none: nothing is retrieved)."""
        return []

    def hit_columns(self, items: list[DatasetItem], records: list[dict], top_k: int) -> dict[str, np.ndarray]:
        return {}

    def timing_columns(self, records: list[dict]) -> dict[str, list[float]]:
        return {}

    def latency_blocks(self, frame: Any, records: list[dict]) -> dict[str, dict]:
        return {}

    def info(self, top_k: int) -> dict:
        return {"context": "dataset chunk_text (fixed)"}

    def notes(self, summary: dict, top_k: int) -> list[str]:
        return []


class Tier3(Tier2):
    """Tier 3: the system retrieves ``top_k`` contexts per question (timed), then answers."""

    tier = "tier_3"
    judged = TIER3_JUDGED

    def check_system(self, system: Any) -> None:
        if not callable(getattr(system, "answer", None)) or not callable(getattr(system, "retrieve", None)):
            raise ValueError("system must have answer(question, contexts) and retrieve(question, k); build it with "
                             "ragnb.rag.system.load_system")

    def contexts(self, system: Any, items: dict[str, DatasetItem], top_k: int, concurrency: int) -> dict[str, dict]:
        questions = [it.question for it in items.values()]
        out = {}
        for key, (contexts, error, ms, mode) in zip(items, run_sync(retrieve_block(system, questions, top_k,
                                                                                    concurrency))):
            out[key] = {"retrieve_ms": ms, "retrieve_mode": mode}
            if contexts is None:
                out[key].update(stage="retrieval", error=f"retrieval failed: {error}")
            else:
                out[key]["contexts"] = contexts
        return out

    def top_k(self, top_k: int) -> int | None:
        return top_k

    def hit_names(self, top_k: int) -> list[str]:
        return [f"context_hit@{top_k}"]

    def hit_columns(self, items: list[DatasetItem], records: list[dict], top_k: int) -> dict[str, np.ndarray]:
        """``context_hit@k``: 1 if a retrieved chunk id is among the item's relevant ones; NaN when undefined."""
        hits = np.full(len(records), math.nan)
        for i, (item, r) in enumerate(zip(items, records)):
            relevant = {cid for cid, g in item.grades().items() if g > 0}
            ids = [c["id"] for c in r["contexts"]]
            if r["stage"] == "retrieval" or not relevant or not ids or any(c is None for c in ids):
                continue  # undefined: retrieval failed, nothing is relevant, or the system gives no chunk ids
            hits[i] = float(any(c in relevant for c in ids[:top_k]))
        return {self.hit_names(top_k)[0]: hits}

    def timing_columns(self, records: list[dict]) -> dict[str, list[float]]:
        return {"retrieve_ms": [math.nan if r["retrieve_ms"] is None else float(r["retrieve_ms"]) for r in records]}

    def latency_blocks(self, frame: Any, records: list[dict]) -> dict[str, dict]:
        modes = Counter(r.get("retrieve_mode") for r in records if r.get("retrieve_mode"))
        mode = modes.most_common(1)[0][0] if modes else "n/a"
        return {"latency_retrieve_ms": {**latency_summary(frame["retrieve_ms"]), "mode": mode}}

    def info(self, top_k: int) -> dict:
        return {"context": f"retrieved top-{top_k}", "top_k": top_k}

    def notes(self, summary: dict, top_k: int) -> list[str]:
        hit = self.hit_names(top_k)[0]
        if summary[hit]["n_valid"] == 0:
            return [f"{hit} is undefined for every item: the system returned contexts without chunk ids, or the "
                    "dataset items list no relevant_chunk_ids."]
        return []
