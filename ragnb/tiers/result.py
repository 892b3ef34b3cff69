"""What every tier and analysis returns, and the one writer of its metrics JSON and per-item file.

A notebook's last cell is one call::

    result.write(output_dir, "tier1_retrieval", extra={"llm_usage": llm.usage()})

which writes ``<output_dir>/tier1_retrieval.metrics.json`` (``lead`` keys, the ``summary``, ``notes``, the
``meta`` keys that describe the run, then ``extra``) and ``tier1_retrieval.per_item.csv``
through :func:`ragnb.tiers.payload.write_metrics`, so every notebook's payload has the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragnb.datasets.fingerprint import opened
from ragnb.io import atomic_write
from ragnb.tiers.payload import with_item_ids, write_metrics


@dataclass
class TierResult:
    """One tier's (or analysis') outcome.

    ``per_item``: one row per evaluated unit (question, item, turn, vector…), written as the per-item file;
    ``summary``: metric name → value or aggregate (``{mean, ci95, n, n_valid, n_failed}``), plus ``info``;
    ``notes``: what was not computed and why (None: this result writes no ``notes`` key);
    ``lead``: keys written before the summary (e.g. ``{"tier": "tier_1"}``);
    ``meta``: keys describing the run, written after the notes (dataset, embedding model, judge backend…);
    ``tables``: other tables written next to the per-item file as ``<name>.<key>.csv``.
    """

    per_item: pd.DataFrame | None
    summary: dict
    notes: list[str] | None = field(default_factory=list)
    lead: dict = field(default_factory=dict, kw_only=True)
    meta: dict = field(default_factory=dict, kw_only=True)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict, kw_only=True)

    def add_notes(self, notes: list[str], first: bool = True) -> None:
        """Add notes made outside the tier function (e.g. why no LLM judge was built), first by default."""
        current = self.notes or []
        self.notes = [*notes, *current] if first else [*current, *notes]

    def metrics(self, extra: dict | None = None) -> dict:
        """The metrics payload: ``lead``, ``summary``, ``notes``, ``meta``, then ``extra`` (later keys win)."""
        if extra is not None and not isinstance(extra, dict):
            raise ValueError(f"extra must be a dict of name → value, got {type(extra).__name__}")
        out: dict[str, Any] = {**self.lead, **self.summary}
        if self.notes is not None:
            out["notes"] = list(self.notes)
        return {**out, **self.meta, **(extra or {})}

    def item_table(self) -> pd.DataFrame | None:
        """The per-item table as written (a result whose index is its item id may name that column)."""
        return self.per_item

    def write(self, output_dir: str | Path, name: str, extra: dict | None = None) -> Path:
        """Write the other tables, the per-item file and, last, ``<name>.metrics.json`` (its presence marks a
        finished notebook). Returns the JSON path."""
        payload = self.metrics(extra)
        provenance = opened()
        if provenance and "provenance" not in payload:
            # what this notebook scored and searched (content fingerprints): runs are compared only on equal ones
            payload["provenance"] = provenance
        for key, table in self.tables.items():
            atomic_write(Path(output_dir) / f"{name}.{key}.csv",
                         lambda p, t=with_item_ids(table): t.to_csv(p, index=False))
        return write_metrics(output_dir, name, payload, per_item=self.item_table())


def encoder_meta(encoder: Any) -> dict:
    """``{"encoder": describe()}`` (backend, model, prompts, dimension, fingerprint — no secrets) for the
    metrics JSON and so the run record; ``{}`` for an encoder without ``describe`` (a test double)."""
    describe = getattr(encoder, "describe", None)
    return {"encoder": describe()} if callable(describe) else {}


def analysis_result(per_item: pd.DataFrame | None, summary: dict, notes: list[str] | None = None, *,
                    analysis: str | None = None, questions: Any = None, retrieval: Any = None,
                    encoder: Any = None) -> TierResult:
    """An analysis notebook's outcome (its functions return a table and a summary) as a :class:`TierResult`:
    ``analysis`` leads the payload; the question source (``questions.source``/``.label``), the retrieval
    ``backend`` and the ``embedding_model`` describe the run when given."""
    meta: dict[str, Any] = {}
    if questions is not None:
        meta.update(source=questions.source, questions=questions.label)
    if retrieval is not None:
        meta["backend"] = retrieval.backend
    if encoder is not None:
        meta.update(embedding_model=encoder.name, **encoder_meta(encoder))
    return TierResult(per_item, dict(summary), notes, lead={"analysis": analysis} if analysis else {}, meta=meta)
