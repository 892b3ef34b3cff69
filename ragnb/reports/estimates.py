"""What a notebook shows of human labels: judge-only, human-only and PPI++ estimates side by side (docs/ppi.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragnb.reports import report

if TYPE_CHECKING:
    from ragnb.tiers.human_labels import LabelledMetric


def show_estimates(found: list[LabelledMetric]) -> None:
    """The notebook's display: one table per labelled metric and the sentence saying which estimate to quote."""
    if not found:
        print("No human labels (human_labels is empty): the judged metrics above are the judges' own means. "
              "To correct them with a few labels: `ragnb dataset label-plan` (docs/ppi.md).")
        return
    for labelled in found:
        report.show_table(labelled.frame(), max_rows=3)
        print(labelled.sentence())
