"""Agreement of the offline faithfulness methods with human labels, on held-out data of each kind (docs/metrics.md,
Faithfulness — "How far to trust it").

The protocol (a hash split of each labelled set into a tuning and a held-out part; method and threshold chosen on
tuning, figures reported on held-out with CIs from a bootstrap over units) is ragnb.metrics.fallback_agreement. Only
the dev splits are here: "held-out" is the half of each dev split that no choice was made on, not the official test
split. Methods: word overlap
(F_wo), sentence overlap (each answer sentence against its best context sentence) and embedding similarity (the
mean best-match cosine of all-MiniLM-L6-v2, before the sigmoid, which leaves ROC-AUC unchanged).

Usage: PYTHONPATH=$PWD python benchmarks/measure_fallback_agreement.py [SHARED_DATA] [--write]
SHARED_DATA: a folder holding wice_claim_support/ (default ../shared/data); --write stores the table in
ragnb/data/fallback_agreement.json (what reports show; tests/test_fallback_agreement.py recomputes it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from ragnb.io import atomic_write_text
from ragnb.metrics.fallback import best_match_cosines, split_sentences
from ragnb.metrics.fallback_agreement import TABLE_PATH, LabelledSet, labelled_sets, measure
from ragnb.embeddings.models import get_encoder


def embedding_scores(data: LabelledSet) -> dict[str, np.ndarray]:
    """The embedding method's score before its sigmoid: mean_i max_j cos(answer sentence i, context sentence j).
    Every distinct sentence is embedded once, in batches (WiCE's chunks of one claim share most sentences)."""
    answers = [split_sentences(a) for a in data.answers]
    contexts = [[s for c in ctx for s in split_sentences(c)] for ctx in data.contexts]
    distinct = list(dict.fromkeys(s for ss in (*answers, *contexts) for s in ss))
    vecs = get_encoder().encode(distinct)
    row = {s: i for i, s in enumerate(distinct)}
    out = np.full(len(data.answers), np.nan)
    for i, (sa, sc) in enumerate(zip(answers, contexts)):
        if sa and sc:
            out[i] = best_match_cosines(vecs[[row[s] for s in sa]], vecs[[row[s] for s in sc]]).mean()
    return {"embedding": out}


def main(argv: list[str]) -> None:
    write = "--write" in argv
    args = [a for a in argv if a != "--write"]
    shared = Path(args[0]) if args else Path(__file__).resolve().parents[1].parent / "shared" / "data"
    table = measure(labelled_sets(shared), extra=embedding_scores)
    print(f"chosen method: {table['chosen_method']}")
    print("kind              method            n units  pos  thr     ROC-AUC (95% CI)      acc (95% CI)        "
          "κ (95% CI)             majority  informative")
    for r in table["held_out"]:
        print(f"{r['kind']:17} {r['method']:16} {r['n']:4} {r['units']:4} {r['positives']:4}  {r['threshold']:.3f}  "
              f"{r['roc_auc']:.3f} ({r['roc_auc_ci95'][0]:.3f}–{r['roc_auc_ci95'][1]:.3f})  "
              f"{r['accuracy']:.3f} ({r['accuracy_ci95'][0]:.3f}–{r['accuracy_ci95'][1]:.3f})  "
              f"{r['cohen_kappa']:.3f} ({r['cohen_kappa_ci95'][0]:.3f}–{r['cohen_kappa_ci95'][1]:.3f})  "
              f"{r['majority_class']:.3f}   {r['informative']} {r['reason']}")
    if write:
        atomic_write_text(TABLE_PATH, json.dumps(table, indent=1, ensure_ascii=False) + "\n")
        print(f"written: {TABLE_PATH}")


if __name__ == "__main__":
    main(sys.argv[1:])
