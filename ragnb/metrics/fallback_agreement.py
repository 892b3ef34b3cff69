"""How far to trust the offline judge: its agreement with human labels on held-out data of each kind
(docs/metrics.md, Faithfulness — "How far to trust it").

Protocol. Each human-labelled set is split once, deterministically, by a hash of its unit: the first 8 hex digits
of sha256(unit id) read as an integer; odd → *held-out*, even → *tuning*. The unit is the row id for BEGIN
(one response per row) and the claim id for WiCE (a claim appears in ~3 rows with different chunks: its rows
stay on one side, so no claim is seen twice). On the tuning parts the method is chosen (the higher ROC-AUC averaged
over the kinds) and its threshold calibrated on answer grounding, what the tiers score (Youden's J) — one cut for
all data, as the product uses it; on the held-out parts ROC-AUC, accuracy, balanced accuracy, κ and accuracy minus
the majority class's are reported at that threshold, each with a 95% CI from a percentile bootstrap over *units*
(a WiCE claim's rows are drawn together: they are not independent, and a bootstrap over rows would give too
narrow an interval).

    answer grounding  BEGIN dev (bundled, ragnb/data/begin_groundedness): attributable = 1, not attributable = 0,
                      generic rows dropped.
    claim support     WiCE dev, oracle chunks (../shared/data/wice_claim_support, not bundled): supported = 1,
                      partially / not supported = 0.

Only the dev splits are in this repository: "held-out" is the half of dev no choice was made on, not the official
test split. A figure is quoted only for its own kind of data (:data:`KIND_OF_METRIC`): the tiers' offline scores
are answer-grounding scores, so their reports quote the answer-grounding row and never the claim-support one.

The table is measured by ``benchmarks/measure_fallback_agreement.py`` and stored in
``ragnb/data/fallback_agreement.json``; a test recomputes it from the data.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ragnb.metrics.fallback import sentence_overlap_faithfulness, word_overlap_faithfulness
from ragnb.metrics.fallback_table import (  # noqa: F401  (the table's names are read from here too)
    HELD_OUT_PART, KIND_LABEL, KIND_OF_METRIC, KINDS, SOURCES, TABLE_PATH, TIER_KIND, UNITS, load_table,
)

BEGIN_PATH = Path(__file__).resolve().parent.parent / "data" / "begin_groundedness" / "begin_dev.jsonl.gz"
WICE_FILE = Path("wice_claim_support") / "wice_oracle_dev.jsonl.gz"  # under a shared data folder
N_BOOT, SEED = 1000, 0
LABELS = ("supported", "not supported")


@dataclass(frozen=True)
class LabelledSet:
    """Aligned answers (or claims), their contexts, human labels (1 supported / 0 not) and split units."""

    kind: str
    answers: list[str]
    contexts: list[list[str]]
    labels: np.ndarray
    units: list[str]

    def part(self, name: str) -> np.ndarray:
        """Boolean mask of the rows in the ``"tuning"`` or ``"held_out"`` part."""
        return np.array([part_of(u) == name for u in self.units], dtype=bool)


def part_of(unit: str) -> str:
    """``"held_out"`` when the first 8 hex digits of sha256(unit) are odd, else ``"tuning"``."""
    return "held_out" if int(hashlib.sha256(unit.encode("utf-8")).hexdigest()[:8], 16) % 2 else "tuning"


def _rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def begin_set(path: Path = BEGIN_PATH) -> LabelledSet:
    rows = [r for r in _rows(path) if r["label"] != "generic"]
    return LabelledSet("answer_grounding", [r["response"] for r in rows], [[r["knowledge"]] for r in rows],
                       np.array([bool(r["grounded"]) for r in rows], dtype=int), [r["id"] for r in rows])


def wice_set(path: Path) -> LabelledSet:
    rows = _rows(path)
    return LabelledSet("claim_support", [r["claim"] for r in rows], [[" ".join(r["evidence_sentences"])] for r in rows],
                       np.array([r["label"] == "supported" for r in rows], dtype=int), [r["claim_id"] for r in rows])


def labelled_sets(shared_data: Path | None) -> dict[str, LabelledSet]:
    """The labelled set of each kind: BEGIN from the package; WiCE from ``shared_data`` (a folder holding
    ``wice_claim_support/``) — absent → only answer grounding."""
    sets = {"answer_grounding": begin_set()}
    if shared_data is not None and (Path(shared_data) / WICE_FILE).is_file():
        sets["claim_support"] = wice_set(Path(shared_data) / WICE_FILE)
    return sets


def lexical_scores(data: LabelledSet) -> dict[str, np.ndarray]:
    """Scores of the methods that need no encoder: ``word_overlap`` (F_wo) and ``sentence_overlap``."""
    return {"word_overlap": np.array([word_overlap_faithfulness(a, c) for a, c in zip(data.answers, data.contexts)]),
            "sentence_overlap": np.array([sentence_overlap_faithfulness(a, c)
                                          for a, c in zip(data.answers, data.contexts)])}


def _valid(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = ~np.isnan(s)
    return y[ok], s[ok]


def _r(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)


def tune(data: LabelledSet, scores: dict[str, np.ndarray]) -> list[dict]:
    """Per method on the tuning part: n, positives, ROC-AUC and the Youden threshold."""
    from ragnb.metrics.classification import roc_auc, youden_threshold

    mask, out = data.part("tuning"), []
    for method, s in scores.items():
        y, v = _valid(data.labels[mask], s[mask])
        out.append({"kind": data.kind, "method": method, "n": int(y.size), "positives": int(y.sum()),
                    "roc_auc": _r(roc_auc(y, v)), "threshold": _r(youden_threshold(y, v)["threshold"])})
    return out


def unit_resamples(units: list[str], n_boot: int = N_BOOT, seed: int = SEED) -> list[np.ndarray]:
    """``n_boot`` bootstrap resamples of row indices, drawn by unit: as many units as there are, with replacement,
    each bringing all its rows (a cluster bootstrap; with one row per unit it is the ordinary one)."""
    groups: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        groups.setdefault(u, []).append(i)
    rows = [np.array(g) for g in groups.values()]
    rng = np.random.default_rng(seed)
    return [np.concatenate([rows[j] for j in rng.integers(0, len(rows), size=len(rows))]) for _ in range(n_boot)]


def _stats(y: np.ndarray, s: np.ndarray, pred: np.ndarray, majority: int) -> np.ndarray:
    """ROC-AUC, accuracy, balanced accuracy, κ and accuracy − majority-class accuracy of one (re)sample."""
    from ragnb.metrics.classification import metrics_from_counts, roc_auc

    tp, fp = np.sum((pred == 1) & (y == 1)), np.sum((pred == 1) & (y == 0))
    fn, tn = np.sum((pred == 0) & (y == 1)), np.sum((pred == 0) & (y == 0))
    m = metrics_from_counts(tp, fp, fn, tn)
    acc = float(m["accuracy"])
    return np.array([roc_auc(y, s), acc, float(m["balanced_accuracy"]), float(m["cohen_kappa"]),
                     acc - float(np.mean(y == majority))])


STATS = ("roc_auc", "accuracy", "balanced_accuracy", "cohen_kappa", "accuracy_minus_majority")


def held_out(data: LabelledSet, scores: dict[str, np.ndarray], thresholds: dict[str, float]) -> list[dict]:
    """Per method on the held-out part, at the product's threshold (tuned on answer grounding): ROC-AUC, accuracy,
    balanced accuracy, κ and accuracy − the majority class's, each with a unit-bootstrap 95% CI, the
    majority-class accuracy, and the verdict."""
    mask, out = data.part("held_out"), []
    for method, s in scores.items():
        ok = mask & ~np.isnan(s)
        y, v = data.labels[ok], s[ok]
        units = [u for u, keep in zip(data.units, ok) if keep]
        pred = (v >= thresholds[method]).astype(int)
        majority = int(y.mean() >= 0.5)  # the more common label on these items (a tie: either scores 0.5)
        point = _stats(y, v, pred, majority)
        boot = np.array([_stats(y[i], v[i], pred[i], majority) for i in unit_resamples(units)])
        row = {"kind": data.kind, "method": method, "data": f"{SOURCES[data.kind]}; {HELD_OUT_PART}",
               "n": int(y.size), "units": len(set(units)), "unit": UNITS[data.kind], "positives": int(y.sum()),
               "threshold": _r(thresholds[method])}
        for j, name in enumerate(STATS):
            col = boot[:, j][~np.isnan(boot[:, j])]
            row[name] = _r(point[j])
            row[f"{name}_ci95"] = [_r(x) for x in np.quantile(col, [0.025, 0.975])] if col.size >= 2 else [None, None]
        row["majority_class"] = _r(max(y.mean(), 1 - y.mean()))
        row["majority_label"] = LABELS[0] if majority else LABELS[1]
        row["informative"], row["reason"] = verdict(row)
        out.append(row)
    return out


def verdict(row: dict) -> tuple[bool, str]:
    """Whether a held-out row says the method is informative for its kind of data, and if not, why.

    Near chance (not informative) when the ROC-AUC's 95% CI reaches 0.5 (its scores do not rank supported above
    unsupported beyond chance), or when the CI of accuracy minus the majority class's reaches 0 (answering by the
    score is no better than always giving the more common answer: κ's CI then reaches 0 too, or nearly).
    """
    lo, d_lo = row["roc_auc_ci95"][0], row["accuracy_minus_majority_ci95"][0]
    if lo is None or d_lo is None:
        return False, "no confidence interval (too few items, or one class only)"
    if lo <= 0.5:
        return False, f"ROC-AUC {row['roc_auc']:.2f} (95% CI from {lo:.2f}) does not exceed chance (0.5)"
    if d_lo <= 0:
        d, d_hi = row["accuracy_minus_majority"], row["accuracy_minus_majority_ci95"][1]
        worse = "is worse than" if d_hi < 0 else "does not beat"
        return False, (f"accuracy {row['accuracy']:.3f} {worse} always answering '{row['majority_label']}' "
                       f"({row['majority_class']:.3f}): difference {d:+.3f}, 95% CI {d_lo:+.3f} to {d_hi:+.3f}, "
                       f"n = {row['n']} ({row['units']} {row['unit']}s)")
    return True, ""


def measure(sets: dict[str, LabelledSet], extra: Callable[[LabelledSet], dict[str, np.ndarray]] | None = None
            ) -> dict[str, Any]:
    """The whole table: split counts, tuning rows, the chosen method, held-out rows. ``extra(set)`` adds the
    scores of methods that need an encoder (the benchmark script passes the embedding method)."""
    tuning, rows, split = [], [], {}
    scores = {}
    for kind, data in sets.items():
        scores[kind] = {**lexical_scores(data), **(extra(data) if extra else {})}
        tuning += tune(data, scores[kind])
        split[kind] = {"source": SOURCES[kind], "unit": UNITS[kind],
                       **{p: {"rows": int(data.part(p).sum()), "units": len({u for u in data.units
                                                                            if part_of(u) == p})}
                          for p in ("tuning", "held_out")}}
    # The product does not know which kind a team's data is: the method is the one with the higher tuning
    # ROC-AUC averaged over the kinds, and its cut the one tuned on answer grounding (what the tiers score).
    methods = list(dict.fromkeys(r["method"] for r in tuning))
    chosen = max(methods, key=lambda m: np.mean([r["roc_auc"] for r in tuning if r["method"] == m]))
    thresholds = {r["method"]: r["threshold"] for r in tuning if r["kind"] == TIER_KIND}
    for kind, data in sets.items():
        rows += held_out(data, scores[kind], thresholds)
    return {"protocol": "sha256(unit)[:8] odd → held_out; method and thresholds chosen on tuning, reported on "
                        "held_out with a bootstrap over units (ragnb/metrics/fallback_agreement.py)",
            "held_out_is": HELD_OUT_PART, "kind_of_metric": KIND_OF_METRIC,
            "n_boot": N_BOOT, "seed": SEED, "split": split, "tuning": tuning, "chosen_method": chosen,
            "held_out": rows}
