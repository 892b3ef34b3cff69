"""ragnb on trec_eval's own test files (tests/fixtures/trec_eval, copied unchanged): the run with text after the
sixth column is read as trec_eval reads it, and the relevance level (trec_eval's -l) gives trec_eval's values —
compared with pytrec_eval per query and with the numbers trec_eval itself printed (out.test.aqc, out.test.aql)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from db_env import cli_on_new_db
from ragnb.datasets.trec import evaluate_files, read_qrels, read_run
from ragnb.metrics.retrieval import per_query

pytrec_eval = pytest.importorskip("pytrec_eval")

FILES = Path(__file__).parent / "fixtures" / "trec_eval"
# ragnb metric → trec_eval measure (the per-query keys of pytrec_eval and of trec_eval's output)
MEASURES = {
    "hit_rate@1": "success_1", "hit_rate@5": "success_5", "hit_rate@10": "success_10", "mrr": "recip_rank",
    "precision@5": "P_5", "precision@10": "P_10", "precision@100": "P_100",
    "recall@5": "recall_5", "recall@10": "recall_10", "recall@100": "recall_100",
    "ndcg@5": "ndcg_cut_5", "ndcg@10": "ndcg_cut_10", "ndcg@100": "ndcg_cut_100",
}  # fmt: skip
PYTREC_MEASURES = {"success.1,5,10", "recip_rank", "P.5,10,100", "recall.5,10,100", "ndcg_cut.5,10,100"}


def trec_eval_printed(name: str) -> dict[tuple[str, str], float]:
    """(measure, query id or 'all') → the value trec_eval printed (4 decimals) in its expected-output file."""
    out = {}
    for line in (FILES / name).read_text().splitlines():
        measure, qid, value = line.split()
        if measure in MEASURES.values():
            out[(measure, qid)] = float(value)
    return out


def test_run_file_with_text_after_the_sixth_column_is_read_as_trec_eval_reads_it():
    notes: list[str] = []
    run = read_run(FILES / "results.trunc", notes)
    # the file's first five lines end in "more junk at / end of lines. / reserved for / future / expansion"
    lines = (FILES / "results.trunc").read_text().splitlines()
    assert [n for n, line in enumerate(lines, 1) if len(line.split()) > 6] == [1, 2, 3, 4, 5]
    assert notes == [f"{FILES / 'results.trunc'}: 5 line(s) have text after the sixth column (first: line 1); it is "
                     "ignored, as trec_eval ignores it"]
    expected: dict[str, dict[str, float]] = {}
    for line in lines:
        qid, _, doc, _, score = line.split()[:5]
        expected.setdefault(qid, {})[doc] = float(score)
    assert run == expected and run["301"]["FBIS3-27619"] == 2.138276 and set(run) == {"301", "303"}
    assert read_run(FILES / "results.test", notes) and len(notes) == 1  # a clean file adds no note


def test_truncated_run_equals_what_trec_eval_printed_with_c():
    # trec_eval -c averages over every judged query, a query missing from the run counting 0 — ragnb's rule.
    printed = trec_eval_printed("out.test.aqc")
    summary = evaluate_files(FILES / "results.trunc", FILES / "qrels.test", list(MEASURES), n_boot=50)
    assert summary["_info"]["n_missing_from_run"] == 1  # topic 302 is not in results.trunc
    for name, measure in MEASURES.items():
        assert summary[name]["mean"] == pytest.approx(printed[(measure, "all")], abs=5e-5), name
    frame, _ = per_query(read_run(FILES / "results.trunc"), read_qrels(FILES / "qrels.test"), list(MEASURES))
    for (measure, qid), value in printed.items():
        if qid != "all":
            name = next(n for n, m in MEASURES.items() if m == measure)
            assert frame.loc[qid, name] == pytest.approx(value, abs=5e-5), (name, qid)


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_relevance_level_equals_pytrec_eval_on_graded_qrels(level):
    qrels = read_qrels(FILES / "qrels.rel_level")  # grades -1 .. 4
    run = read_run(FILES / "results.test")
    ref = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES, relevance_level=level).evaluate(run)
    frame, info = per_query(run, qrels, list(MEASURES), relevance_level=level)
    n_rel = {q: sum(g >= level for g in judged.values()) for q, judged in qrels.items()}
    compared = 0
    for qid in qrels:
        for name, measure in MEASURES.items():
            if n_rel[qid]:
                assert frame.loc[qid, name] == pytest.approx(ref[qid][measure], abs=1e-12), (level, qid, name)
                compared += 1
            else:  # no grade ≥ level: undefined in ragnb (trec_eval: 0, and nDCG still from the lower grades)
                assert math.isnan(frame.loc[qid, name])
    assert info["n_no_relevant"] == sum(n == 0 for n in n_rel.values())
    # the levels really change the relevant sets: 97 docs at ≥ 2, 83 at ≥ 3, 6 at 4 (counted from the file)
    assert sum(n_rel.values()) == {1: 559, 2: 97, 3: 83, 4: 6}[level]
    assert compared == len(MEASURES) * sum(n > 0 for n in n_rel.values()) > 0


def test_level_2_equals_what_trec_eval_printed_with_l2():
    printed = trec_eval_printed("out.test.aql")
    summary = evaluate_files(FILES / "results.test", FILES / "qrels.rel_level", list(MEASURES), n_boot=50,
                             relevance_level=2)
    assert summary["_info"]["relevance_level"] == 2 and summary["_info"]["n_no_relevant"] == 0
    for name, measure in MEASURES.items():
        assert summary[name]["mean"] == pytest.approx(printed[(measure, "all")], abs=5e-5), name
    # What the level changes, on topic 301: its first grade-1 document is at rank 6, its first grade ≥ 2 one at
    # rank 307 (trec_eval's recip_rank 0.0033); its two grade-1 documents in the top 10 stop counting. nDCG keeps
    # the grade-1 gains at any level, as trec_eval's does.
    run, qrels = read_run(FILES / "results.test"), read_qrels(FILES / "qrels.rel_level")
    names = ["mrr", "precision@10", "ndcg@10"]
    one, two = (per_query(run, qrels, names, relevance_level=level)[0].loc["301"].tolist() for level in (1, 2))
    assert one[:2] == [1 / 6, 0.2] and two[:2] == [1 / 307, 0.0] and one[2] == two[2] == pytest.approx(0.0439, abs=5e-5)


@pytest.fixture
def cli():
    return cli_on_new_db("trecfiles")


def test_cli_relevance_level_and_note(cli):
    res = cli("metrics", "retrieval", "--run", str(FILES / "results.test"), "--qrels", str(FILES / "qrels.rel_level"),
              "--metrics", "mrr,ndcg@10,precision@10", "--relevance-level", "2")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    printed = trec_eval_printed("out.test.aql")
    assert out["mrr"]["mean"] == pytest.approx(printed[("recip_rank", "all")], abs=5e-5)  # 0.3520
    assert out["precision@10"]["mean"] == pytest.approx(printed[("P_10", "all")], abs=5e-5)  # 0.2333
    assert out["_info"]["relevance_level"] == 2 and out["_info"]["notes"] == []
    res = cli("metrics", "retrieval", "--run", str(FILES / "results.trunc"), "--qrels", str(FILES / "qrels.test"),
              "--metrics", "mrr", "-l", "1")
    assert res.exit_code == 0
    assert res.stderr == (f"note: {FILES / 'results.trunc'}: 5 line(s) have text after the sixth column (first: "
                          "line 1); it is ignored, as trec_eval ignores it\n")
    assert json.loads(res.stdout)["mrr"]["mean"] == pytest.approx(0.1667, abs=5e-5)
