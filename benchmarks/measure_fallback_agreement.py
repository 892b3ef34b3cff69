"""Agreement of the offline faithfulness fallback methods with human labels (docs/metrics.md, Faithfulness).

Measures, per method (embedding similarity: the mean best-match cosine; word overlap: F_wo) and per dev set:
ROC-AUC against the human label, the Youden threshold (max TPR − FPR) on that set, and the balanced accuracy at
the threshold calibrated on BEGIN dev (the bundled set) — on WiCE dev that is an out-of-sample check.

    BEGIN dev  ragnb/data/begin_groundedness (bundled): attributable = 1, not_attributable = 0, generic dropped.
    WiCE dev   the oracle-chunk version, not bundled (path as argument): supported = 1, partially/not = 0.

Usage: PYTHONPATH=$PWD python benchmarks/measure_fallback_agreement.py [path/to/wice_oracle_dev.jsonl.gz]
The printed table is what ragnb.metrics.fallback.AGREEMENT records.
"""

from __future__ import annotations

import gzip
import json
import sys

import numpy as np
from sklearn.metrics import balanced_accuracy_score, roc_auc_score, roc_curve

from ragnb.metrics.fallback import best_match_cosines, split_sentences, word_overlap_faithfulness
from ragnb.rag.embeddings import get_encoder

BEGIN = "ragnb/data/begin_groundedness/begin_dev.jsonl.gz"


def _rows(path: str) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def begin_pairs() -> tuple[list[str], list[list[str]], np.ndarray]:
    rows = [r for r in _rows(BEGIN) if r["label"] != "generic"]
    return [r["response"] for r in rows], [[r["knowledge"]] for r in rows], np.array([r["grounded"] for r in rows])


def wice_pairs(path: str) -> tuple[list[str], list[list[str]], np.ndarray]:
    rows = _rows(path)
    return ([r["claim"] for r in rows], [[" ".join(r["evidence_sentences"])] for r in rows],
            np.array([r["label"] == "supported" for r in rows]))


def mean_cosines(answers: list[str], contexts: list[list[str]], encoder) -> np.ndarray:
    """The embedding method's score before its sigmoid (monotone, so the same ROC-AUC): mean_i max_j cos."""
    out = np.full(len(answers), np.nan)
    for i, (a, ctx) in enumerate(zip(answers, contexts)):
        sa, sc = split_sentences(a), [s for c in ctx for s in split_sentences(c)]
        if sa and sc:
            v = encoder.encode(sa + sc)
            out[i] = best_match_cosines(v[: len(sa)], v[len(sa):]).mean()
    return out


def youden(y: np.ndarray, s: np.ndarray) -> float:
    fpr, tpr, thr = roc_curve(y, s)
    return float(thr[np.argmax(tpr - fpr)])


def main(wice: str | None) -> None:
    enc = get_encoder()
    sets = {"begin_dev": begin_pairs()}
    if wice:
        sets["wice_dev"] = wice_pairs(wice)
    scores = {}
    for name, (answers, contexts, y) in sets.items():
        scores[name] = (y, {"embedding": mean_cosines(answers, contexts, enc),
                            "word_overlap": np.array([word_overlap_faithfulness(a, c) for a, c in zip(answers, contexts)])})
    calibrated = {m: youden(*_valid(scores["begin_dev"][0], s)) for m, s in scores["begin_dev"][1].items()}
    print("set        method        n     pos   roc_auc  youden_t  bal_acc@begin_t")
    for name, (y, by_method) in scores.items():
        for m, s in by_method.items():
            yy, ss = _valid(y, s)
            auc = roc_auc_score(yy, ss)
            ba = balanced_accuracy_score(yy, ss >= calibrated[m])
            print(f"{name:10} {m:12} {len(yy):5} {int(yy.sum()):5}  {auc:.4f}   {youden(yy, ss):.4f}    {ba:.4f}")
    print("thresholds calibrated on begin_dev (Youden):", {m: round(t, 4) for m, t in calibrated.items()})


def _valid(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = ~np.isnan(s)
    return y[ok].astype(int), s[ok]


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
