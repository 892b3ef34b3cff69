"""How far to trust the offline judge: its agreement with human labels on held-out data of each kind
(docs/metrics.md, Faithfulness — "How far to trust it").

Protocol. Each human-labelled set is split once, deterministically, by a hash of its unit: the first 8 hex digits
of sha256(unit id) read as an integer; odd → *held-out*, even → *tuning*. The unit is the row id for BEGIN
(one response per row) and the claim id for WiCE (a claim appears in ~3 rows with different chunks: its rows
stay on one side, so no claim is seen twice). On the tuning parts the method is chosen (the higher ROC-AUC averaged
over the kinds) and its threshold calibrated on answer grounding, what the tiers score (Youden's J) — one cut for
all data, as the product uses it; on the held-out parts ROC-AUC, accuracy, balanced accuracy and κ at that
threshold are reported with percentile-bootstrap 95% CIs, and
accuracy is compared with the trivial baselines (:mod:`ragnb.metrics.baselines`).

    answer grounding  BEGIN dev (bundled, ragnb/data/begin_groundedness): attributable = 1, not attributable = 0,
                      generic rows dropped.
    claim support     WiCE dev, oracle chunks (../shared/data/wice_claim_support, not bundled): supported = 1,
                      partially / not supported = 0.

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

TABLE_PATH = Path(__file__).resolve().parent.parent / "data" / "fallback_agreement.json"
BEGIN_PATH = Path(__file__).resolve().parent.parent / "data" / "begin_groundedness" / "begin_dev.jsonl.gz"
WICE_FILE = Path("wice_claim_support") / "wice_oracle_dev.jsonl.gz"  # under a shared data folder

KINDS = ("answer_grounding", "claim_support")
KIND_LABEL = {"answer_grounding": "answer grounding", "claim_support": "claim support"}
SOURCES = {"answer_grounding": "BEGIN dev (dialogue responses vs their knowledge snippet; attributable vs not, "
                               "generic rows dropped)",
           "claim_support": "WiCE dev, oracle chunks (a Wikipedia claim vs its evidence chunk; supported vs "
                            "partially/not supported)"}
UNITS = {"answer_grounding": "row id", "claim_support": "claim id"}
# The kind of data the tiers' fallback scores are: a generated answer checked against its retrieved context.
TIER_KIND = "answer_grounding"
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
    from ragnb.metrics.fallback import sentence_overlap_faithfulness, word_overlap_faithfulness

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


def held_out(data: LabelledSet, scores: dict[str, np.ndarray], thresholds: dict[str, float]) -> list[dict]:
    """Per method on the held-out part, at the product's threshold (tuned on answer grounding): ROC-AUC, accuracy,
    balanced accuracy, κ (each with its bootstrap 95% CI), the majority-class accuracy, and the verdict."""
    from ragnb.metrics.classification import binary_report, score_report

    mask, out = data.part("held_out"), []
    for method, s in scores.items():
        y, v = _valid(data.labels[mask], s[mask])
        auc = score_report(y, v, n_boot=N_BOOT, seed=SEED)["roc_auc"]
        rep = binary_report(y, (v >= thresholds[method]).astype(float), n_boot=N_BOOT, seed=SEED, labels=LABELS)
        m, base = rep["metrics"], rep["metrics"]["accuracy"]["baselines"]
        row = {"kind": data.kind, "method": method, "n": int(y.size), "positives": int(y.sum()),
               "threshold": _r(thresholds[method]), "roc_auc": _r(auc["mean"]),
               "roc_auc_ci95": [_r(x) for x in auc["ci95"]]}
        for name in ("accuracy", "balanced_accuracy", "cohen_kappa"):
            row[name], row[f"{name}_ci95"] = _r(m[name]["mean"]), [_r(x) for x in m[name]["ci95"]]
        row["majority_class"], row["beats_baselines"] = _r(base["majority_class"]), base["beats"]
        row["informative"], row["reason"] = verdict(row, base["reason"])
        out.append(row)
    return out


def verdict(row: dict, baselines_reason: str = "") -> tuple[bool, str]:
    """Whether a held-out row says the method is informative for its kind of data, and if not, why.

    Near chance (not informative) when the ROC-AUC's 95% CI reaches 0.5 (its scores do not rank supported above
    unsupported beyond chance), or when accuracy at its threshold does not beat the trivial baselines with its CI
    (answering by the score is no better than always giving the more common answer).
    """
    lo = row["roc_auc_ci95"][0]
    if lo is None:
        return False, "no confidence interval for its ROC-AUC (too few items, or one class only)"
    if lo <= 0.5:
        return False, f"ROC-AUC {row['roc_auc']:.2f} (95% CI from {lo:.2f}) does not exceed chance (0.5)"
    if row["beats_baselines"] is not True:
        return False, baselines_reason or "accuracy does not beat the trivial baselines"
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
                        "held_out (ragnb/metrics/fallback_agreement.py)",
            "n_boot": N_BOOT, "seed": SEED, "split": split, "tuning": tuning, "chosen_method": chosen,
            "held_out": rows}


def load_table(path: Path = TABLE_PATH) -> dict[str, Any]:
    """The stored table (written by benchmarks/measure_fallback_agreement.py)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
