"""The stored agreement table of the offline judge (``ragnb/data/fallback_agreement.json``) and the names its rows
use: the kinds of data, their sources, which kind each product score is.

Measuring the table (:mod:`ragnb.metrics.fallback_agreement`) runs the offline methods of
:mod:`ragnb.metrics.fallback`; the methods' reports quote the table. Both read it from here, below both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).resolve().parent.parent / "data" / "fallback_agreement.json"

KINDS = ("answer_grounding", "claim_support")
KIND_LABEL = {"answer_grounding": "answer grounding", "claim_support": "claim support"}
SOURCES = {"answer_grounding": "BEGIN dev (dialogue responses vs their knowledge snippet; attributable vs not, "
                               "generic rows dropped)",
           "claim_support": "WiCE dev, oracle chunks (a Wikipedia claim vs its evidence chunk; supported vs "
                            "partially/not supported)"}
# What "held-out" is for every kind here: the official test splits are not in this repository.
HELD_OUT_PART = "the held-out half of the dev split (hash of the unit); no method or threshold was chosen on it"
# The kind of data each product score is, so a report quotes the agreement row of that kind and no other. The tiers'
# offline scores are an answer checked against its context: answer grounding. No product score is a claim-support
# score; that row is documentation (docs/metrics.md), not quoted in reports.
KIND_OF_METRIC = {"fallback_faithfulness": "answer_grounding", "hallucination_rate": "answer_grounding"}
UNITS = {"answer_grounding": "row id", "claim_support": "claim id"}
# The kind of data the tiers' fallback scores are: a generated answer checked against its retrieved context.
TIER_KIND = KIND_OF_METRIC["fallback_faithfulness"]


def load_table(path: Path = TABLE_PATH) -> dict[str, Any]:
    """The stored table (written by benchmarks/measure_fallback_agreement.py)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
