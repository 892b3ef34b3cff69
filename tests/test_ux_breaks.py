"""Tier UX's context breaks checked against the pages the turns cite (docs/metrics.md, Tier UX, Breaks)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

from ragnb.datasets.sessions import SessionLog
from ragnb.metrics.ux_breaks import break_threshold_curve, best_break_threshold, page_change_labels, validate_breaks

_A, _B, _C = "https://wiki.example.com/a", "https://wiki.example.com/b", "https://wiki.example.com/c"


def test_page_change_labels_hand_computed():
    pages = ["a", "a", "b", None, "b", "c", "c", " ", "c"]
    sids = ["s1", "s1", "s1", "s1", "s1", "s2", "s2", "s2", "s2"]
    # s1: a→a same, a→b change, b→None unknown, None→b unknown; s2: first turn, c→c same, c→blank, blank→c unknown
    np.testing.assert_array_equal(page_change_labels(pages, sids),
                                  [np.nan, 0, 1, np.nan, np.nan, np.nan, 0, np.nan, np.nan])
    with pytest.raises(ValueError, match="session_ids"):
        page_change_labels(["a"], ["s1", "s1"])


def test_break_curve_and_best_cut_hand_computed():
    sims = [0.2, 0.5, 0.5, 0.9, np.nan, 0.7]
    labels = [1, 1, 0, 0, 1, np.nan]  # the NaN similarity and the NaN label are left out: 4 pairs
    curve = break_threshold_curve(sims, labels)
    # candidates 0.2, 0.5, 0.9 and one just above 0.9; flags "similarity < t"
    assert curve["threshold"].tolist()[:3] == [0.2, 0.5, 0.9] and curve["threshold"].iloc[3] > 0.9
    assert curve["n_flagged"].tolist() == [0, 1, 3, 4]
    assert curve[["tp", "fp", "fn", "tn"]].values.tolist() == [[0, 0, 2, 2], [1, 0, 1, 2], [2, 1, 0, 1], [2, 2, 0, 0]]
    assert curve["agreement"].tolist() == [0.5, 0.75, 0.75, 0.5]
    assert curve["precision"].tolist()[1:] == pytest.approx([1.0, 2 / 3, 0.5]) and math.isnan(curve["precision"][0])
    assert curve["f1"].tolist() == pytest.approx([0.0, 2 / 3, 0.8, 2 / 3])
    # agreement ties (0.5 and 0.9 both agree on 3 of 4): the higher F1 wins
    assert best_break_threshold(curve) == 0.9
    assert best_break_threshold(break_threshold_curve([], [])) is None


def _two_turn_log(sessions: list[tuple[str | None, str | None, float]], answers: bool = False) -> SessionLog:
    """One two-turn session per (url of turn 0, url of turn 1, cosine of the pair): turn 0 = (1, 0), turn 1 =
    (c, √(1 − c²)), so each pair's cosine is c."""
    rows, vecs = [], []
    for k, (u0, u1, c) in enumerate(sessions):
        for n, (url, v) in enumerate(((u0, [1.0, 0.0]), (u1, [c, math.sqrt(1 - c * c)]))):
            rows.append({"id": f"s{k}:{n}", "session_id": f"s{k}", "turn": n, "question": f"q {k}.{n}", "url": url})
            vecs.append(v)
    turns = pd.DataFrame(rows).set_index("id", drop=False)
    return SessionLog(turns, np.asarray(vecs, dtype=np.float64), [])


# 14 follow-ups on the same page and 6 page changes; 5 of the changes are less similar than every same-page pair,
# the sixth (0.72) lies among them. One more pair cites no page on its second turn (cosine 0.3).
_SAME = [0.6, 0.62, 0.65, 0.67, 0.7, 0.75, 0.77, 0.8, 0.82, 0.85, 0.87, 0.9, 0.92, 0.95]
_CHANGE = [0.1, 0.2, 0.3, 0.4, 0.5, 0.72]
SEPARABLE = ([(_A, _A + "/#top", c) for c in _SAME] + [(_A, _B, c) for c in _CHANGE] + [(_B, None, 0.3)])


def test_separable_log_picks_the_cut_that_beats_the_majority_baseline():
    from ragnb.tiers.ux import run_tier_ux

    r = run_tier_ux(None, None, None, None, _two_turn_log(SEPARABLE), n_boot=1000, embedding_model="all-MiniLM-L6-v2")
    s, v = r.summary, r.summary["break_validation"]
    # the oracle: 20 labelled pairs, 6 page changes; "https://…/a/#top" is page a
    assert (v["n_pairs"], v["n_page_changes"]) == (20, 6) and v["oracle_break_rate"] == pytest.approx(0.3)
    assert r.per_item["page_change"].sum() == 6 and r.per_item["page_change"].isna().sum() == 22
    # By hand: the cut 0.6 flags the five changes below it and nothing else: agreement 19/20; the cut 0.75 would
    # catch the sixth but flag five follow-ups (15/20). Always "no break" agrees on 14/20.
    assert s["break_threshold"] == pytest.approx(0.6) and v["threshold_chosen_on_oracle"] is True
    at = v["at_threshold"]
    assert at["confusion"] == {"tp": 5, "fp": 0, "fn": 1, "tn": 14}
    assert at["accuracy"]["mean"] == pytest.approx(19 / 20) and v["majority_baseline"] == pytest.approx(14 / 20)
    assert (at["precision"]["mean"], at["recall"]["mean"]) == pytest.approx((1.0, 5 / 6))
    assert at["f1"]["mean"] == pytest.approx(10 / 11)
    # AUC of 1 − similarity: 5 changes below all 14 follow-ups, 0.72 below 9 of them → 79 / 84
    assert v["roc_auc"]["mean"] == pytest.approx(79 / 84) and v["roc_auc"]["ci95"][0] > 0.75
    assert v["beats_majority"] is True and v["separable"] is True and v["reason"] == ""
    assert s["break_threshold_calibrated"] is True and s["break_threshold_validated"] is True
    assert "chosen on the cited pages" in s["break_threshold_source"]
    # the rate: the validated cut applied to every pair, the unlabelled one (0.3 < 0.6) included: 6 of 21
    rate = s["context_break_rate"]
    assert rate["mean"] == pytest.approx(6 / 21) and (rate["n"], rate["n_valid"], rate["n_failed"]) == (21, 21, 0)
    assert sorted(r.breaks.index) == sorted(["s14:1", "s15:1", "s16:1", "s17:1", "s18:1", "s20:1"])
    assert s["sessions"]["n_breaks"] == 6 and r.per_session["n_breaks"].sum() == 6
    # the report: the summary table carries the separability and the agreement; the chart the pairs by oracle
    from ragnb.tiers.ux_figures import break_signal_chart, summary_rows

    table = summary_rows(s).set_index("metric")
    assert table.loc["page_change_auc (question)", "mean"] == pytest.approx(79 / 84)
    assert table.loc["break_agreement (majority baseline 0.700)", "mean"] == pytest.approx(0.95)
    fig = break_signal_chart(r.per_item, s["break_threshold"], s["break_signal"])
    assert len(fig.data) == 1 and sorted(fig.data[0].y) == pytest.approx(sorted(_SAME + _CHANGE + [0.3]))
    assert fig.layout.shapes[0].y0 == pytest.approx(0.6)
    by_kind = pd.Series(np.asarray(fig.data[0].y, dtype=float)).groupby(list(fig.data[0].x)).apply(sorted)
    assert by_kind["cites another page"] == pytest.approx(_CHANGE)
    assert by_kind["cites the same page"] == pytest.approx(_SAME)
    assert by_kind["no cited page on one side"] == pytest.approx([0.3])
    # a given threshold is validated the same way, and not called calibrated
    given = run_tier_ux(None, None, None, None, _two_turn_log(SEPARABLE), n_boot=1000, break_threshold=0.75).summary
    gv = given["break_validation"]
    assert gv["threshold_chosen_on_oracle"] is False and gv["at_threshold"]["confusion"] == {"tp": 6, "fp": 5,
                                                                                           "fn": 0, "tn": 9}
    assert given["break_threshold_calibrated"] is False
    # 15/20 against 14/20: one more right answer does not beat the majority baseline beyond chance — no rate
    assert gv["beats_majority"] is False and given["break_threshold"] is None
    assert math.isnan(given["context_break_rate"]["mean"])


# Same-page and page-change pairs at the same three similarities: nothing separates them (AUC exactly 0.5).
UNSEPARABLE = [(_A, _A, c) for c in (0.2, 0.5, 0.8, 0.2, 0.5, 0.8)] + [(_A, _C, c) for c in (0.2, 0.5, 0.8)]


def test_unseparable_log_gives_no_break_rate_and_nothing_calibrated():
    from ragnb.tiers.ux import run_tier_ux
    from ragnb.tiers.ux_figures import summary_rows

    r = run_tier_ux(None, None, None, None, _two_turn_log(UNSEPARABLE), n_boot=1000, embedding_model="e5-small")
    s, v = r.summary, r.summary["break_validation"]
    assert v["roc_auc"]["mean"] == pytest.approx(0.5) and v["roc_auc"]["ci95"][0] < 0.5 < v["roc_auc"]["ci95"][1]
    assert v["separable"] is False and "not separable" in v["reason"] and "includes 0.5" in v["reason"]
    # the best cut agrees no more often than always "no break" (6 of 9)
    assert v["at_threshold"]["accuracy"]["mean"] == pytest.approx(6 / 9) == v["majority_baseline"]
    assert s["break_threshold"] is None and s["break_threshold_calibrated"] is False
    assert s["break_threshold_validated"] is False and s["break_threshold_source"].startswith("no break rate:")
    rate = s["context_break_rate"]  # NaN over every pair, with the reason — not 0, not dropped
    assert math.isnan(rate["mean"]) and (rate["n"], rate["n_valid"], rate["n_failed"]) == (9, 0, 9)
    assert "not separable" in rate["reason"]
    assert r.per_item["broke_context"].isna().all() and r.breaks.empty and s["sessions"]["n_breaks"] is None
    assert r.per_session["n_breaks"].isna().all()
    assert any("context_break_rate says nothing here" in n for n in r.notes)
    assert not any("calibrated" in n for n in r.notes if "break" in n)
    table = summary_rows(s)
    row = table[(table["scope"] == "all") & (table["metric"] == "context_break_rate")].iloc[0]
    assert math.isnan(row["mean"]) and row["n_valid"] == 0
    from ragnb.tiers.ux_figures import break_signal_chart

    assert not break_signal_chart(r.per_item, s["break_threshold"]).layout.shapes  # no cut drawn: there is none
    # without a bootstrap there is no CI to decide with: no rate either
    none = run_tier_ux(None, None, None, None, _two_turn_log(SEPARABLE), n_boot=0).summary
    assert none["break_validation"]["separable"] is None and none["break_threshold"] is None
    assert "no confidence interval" in none["break_threshold_source"]


def test_validate_breaks_direct():
    sims = np.array([c for *_, c in SEPARABLE[:20]])
    labels = np.array([0.0] * 14 + [1.0] * 6)
    val = validate_breaks(sims, labels, n_boot=200)
    assert val.threshold == pytest.approx(0.6) and val.separable is True
    # a peer: scikit-learn on the flags and scores
    flags = (sims < val.threshold).astype(int)
    assert val.report["at_threshold"]["accuracy"]["mean"] == pytest.approx(accuracy_score(labels, flags))
    assert val.report["at_threshold"]["f1"]["mean"] == pytest.approx(f1_score(labels, flags))
    assert val.report["roc_auc"]["mean"] == pytest.approx(roc_auc_score(labels, 1 - sims))
    empty = validate_breaks([0.5, 0.6], [np.nan, np.nan])
    assert math.isnan(empty.threshold) and empty.separable is None and "no consecutive pair" in empty.reason


def _unit(m) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _peer_best_cut(sims: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Brute force with scikit-learn: every cut "similarity < t" at an observed similarity or above them all; the
    most agreement, then the highest F1, then the lowest t."""
    cuts = sorted(set(sims.tolist())) + [float(np.nextafter(sims.max(), np.inf))]
    key = [(accuracy_score(labels, sims < t), f1_score(labels, sims < t, zero_division=0.0), -t) for t in cuts]
    t = cuts[max(range(len(cuts)), key=lambda i: key[i])]
    return t, sims < t


@pytest.mark.slow
def test_dialogue_log_with_the_multilingual_model(monkeypatch):
    """The help-desk wiki's dialogues (tests/helpdesk_log.py, DIALOGUES) in the configured database, embedded with
    multilingual-e5-small: questions alone cannot tell an elliptical follow-up from a topic change, so they give no
    break rate; the logged answers can, and the cut chosen on the cited pages beats the majority baseline. Every
    figure is checked against scikit-learn on the model's own vectors and the oracle written by hand."""
    import helpdesk_log as hd

    from ragnb.metrics.ux_thresholds import unrelated_pair_similarities
    from ragnb.embeddings.models import get_encoder
    from ragnb.store.engine import connect
    from ragnb.store.loaders import insert_rows
    from ragnb.store.vectors import embed_table
    from ragnb.tiers.ux import load_inputs, run_tier_ux

    monkeypatch.setenv("RAGNB_EMBEDDED_DB", "ux_dialogue_breaks")
    e5 = get_encoder("multilingual-e5-small")
    rows = hd.dialogue_rows()
    keep = ("id", "session_id", "user_id", "question", "answer", "url", "score", "created_at")
    db = connect()
    insert_rows(db, "questions", [{k: r[k] for k in keep} for r in rows])
    embed_table(db, "questions", e5, progress=False)
    inputs = load_inputs(corpus="db", sessions="db", embedding_model="multilingual-e5-small")
    assert inputs.sessions.turns.index.tolist() == [r["id"] for r in rows]
    assert inputs.sessions.context_vectors is not None and any("logged answer (45 of 45" in n for n in inputs.notes)
    args = (inputs.queries, inputs.query_vectors, inputs.cache, inputs.cache_vectors, inputs.sessions,
            inputs.annotations)
    r = run_tier_ux(*args, n_boot=1000, embedding_model=inputs.embedding_model)
    s, v = r.summary, r.summary["break_validation"]

    # the oracle, by hand: 36 consecutive pairs, 35 labelled (the canteen turn cites no page), 12 page changes
    oracle = hd.dialogue_breaks()
    labelled = [i for i, y in oracle.items() if not math.isnan(y)]
    y = np.array([oracle[i] for i in labelled])
    assert (len(oracle), len(labelled), int(y.sum())) == (36, 35, 12)
    assert r.per_item.loc[labelled, "page_change"].astype(float).tolist() == y.tolist()
    assert (v["n_pairs"], v["n_page_changes"], v["majority_baseline"]) == (35, 12, pytest.approx(23 / 35))

    # peers on the model's vectors: consecutive cosines of the questions and of the answers (as passages)
    pos = {row["id"]: k for k, row in enumerate(rows)}
    Q = _unit(e5.encode_queries([row["question"] for row in rows]))
    A = _unit(e5.encode_documents([row["answer"] for row in rows]))
    q_sim = np.array([Q[pos[i] - 1] @ Q[pos[i]] for i in labelled])
    a_sim = np.array([A[pos[i] - 1] @ A[pos[i]] for i in labelled])
    for sims in (q_sim, a_sim):  # no two similarities within float noise: ranks and cuts cannot flip
        assert np.diff(np.sort(sims)).min() > 1e-5
    q_auc, a_auc = roc_auc_score(y, 1 - q_sim), roc_auc_score(y, 1 - a_sim)
    assert s["break_signal"] == v["signal"] == "answer"
    assert v["signals"]["question"]["mean"] == pytest.approx(q_auc, abs=1e-6)
    assert v["signals"]["answer"]["mean"] == v["roc_auc"]["mean"] == pytest.approx(a_auc, abs=1e-6)
    # the trap of DESIGN.md §7: the questions' cosines of follow-ups and topic changes overlap
    lo, hi = v["signals"]["question"]["ci95"]
    assert lo < 0.45 and hi > 0.55 and a_auc > q_auc + 0.3 and v["roc_auc"]["ci95"][0] > 0.7

    t, flags = _peer_best_cut(a_sim, y)
    assert np.abs(a_sim[a_sim != t] - t).min() > 1e-5  # the cut is not within float noise of another pair
    at = v["at_threshold"]
    assert s["break_threshold"] == pytest.approx(t, abs=1e-6)
    assert at["confusion"] == {"tp": int((flags & (y == 1)).sum()), "fp": int((flags & (y == 0)).sum()),
                               "fn": int((~flags & (y == 1)).sum()), "tn": int((~flags & (y == 0)).sum())}
    assert at["accuracy"]["mean"] == pytest.approx(accuracy_score(y, flags))
    assert at["f1"]["mean"] == pytest.approx(f1_score(y, flags))
    assert at["accuracy"]["mean"] > v["majority_baseline"] + 0.15 and v["beats_majority"] is True
    assert s["break_threshold_calibrated"] is True and s["break_threshold_validated"] is True
    # the rate: that cut over all 36 pairs (the answer of the unlabelled canteen turn included)
    all_pairs = [row["id"] for row in rows if pos[row["id"]] and rows[pos[row["id"]] - 1]["session_id"]
                 == row["session_id"]]
    a_all = np.array([A[pos[i] - 1] @ A[pos[i]] for i in all_pairs])
    assert s["context_break_rate"]["mean"] == pytest.approx(float((a_all < t).mean()))
    assert s["context_break_rate"]["n"] == 36 and sorted(r.breaks.index) == sorted(np.array(all_pairs)[a_all < t])

    # The seed's rule on the questions — the 90% quantile of turns of different sessions — flags most turns and
    # agrees with the oracle less often than always answering "no break".
    q_turn = _unit(inputs.sessions.vectors)
    old_cut = np.quantile(unrelated_pair_similarities(q_turn, inputs.sessions.turns["session_id"].tolist()), 0.9)
    old = q_sim < old_cut
    assert old.sum() > 25 and accuracy_score(y, old) < 23 / 35 - 0.15

    # Without the answers only the questions are left: not separable, so no break rate and nothing calibrated.
    inputs.sessions.context_vectors = None
    q = run_tier_ux(*args, n_boot=1000, embedding_model=inputs.embedding_model)
    qs = q.summary
    assert qs["break_signal"] == "question" and list(qs["break_validation"]["signals"]) == ["question"]
    assert qs["break_validation"]["separable"] is False and "not separable" in qs["break_threshold_source"]
    assert qs["break_threshold"] is None and qs["break_threshold_calibrated"] is False
    assert math.isnan(qs["context_break_rate"]["mean"]) and qs["context_break_rate"]["n_failed"] == 36
    assert not any("calibrated" in n for n in q.notes if "break" in n)
    db.dispose()
