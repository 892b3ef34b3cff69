"""TREC interop: run/qrels files round-trip, malformed files are named by file and line, and
evaluate_files equals hand-computed values and pytrec_eval on the same files."""

from __future__ import annotations

import json
import math
import re

import pytest

from ragnb.metrics.retrieval import per_query, trec_order
from ragnb.datasets.trec import evaluate_files, read_qrels, read_run, run_lines, write_qrels, write_run

pytrec_eval = pytest.importorskip("pytrec_eval")


def L2(x: float) -> float:
    return math.log2(x)


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Round trips.


def test_ranked_lists_keep_their_order_even_where_the_retriever_tied(tmp_path):
    # The retriever scored a, b, c all 0.5 and returned them in this order; trec_eval would reorder
    # tied docs by doc id descending (c, b, a), so the file must carry scores that keep a, b, c.
    run = {"q1": ["a", "b", "c"], "q2": ["d10", "d9", "d1", "d100"], "q3": []}
    path = write_run(run, tmp_path / "run.txt", tag="bm25")
    assert path.read_text().splitlines()[:3] == ["q1 Q0 a 1 3.0 bm25", "q1 Q0 b 2 2.0 bm25", "q1 Q0 c 3 1.0 bm25"]
    back = read_run(path)
    assert set(back) == {"q1", "q2"}  # a query with no results has no line
    assert {q: trec_order(s) for q, s in back.items()} == {"q1": ["a", "b", "c"], "q2": ["d10", "d9", "d1", "d100"]}
    # and trec_eval reads the same ranking: a (relevant) is rank 1, not rank 3
    qrels = {"q1": {"a": 1}}
    with path.open() as fh:
        assert pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(pytrec_eval.parse_run(fh))["q1"] == {
            "recip_rank": 1.0}
    assert per_query(back, qrels, ["mrr"])[0].loc["q1", "mrr"] == 1.0


def test_score_dicts_round_trip_exactly(tmp_path):
    run = {"q1": {"a": 0.1 + 0.2, "b": 1e-300, "c": -3.5, "d": 0.1 + 0.2, "e": 7},
           "q2": {"x": 0.12345678901234566}}
    path = write_run(run, tmp_path / "sub" / "run.txt")  # the folder is created
    back = read_run(path)
    assert back == run and all(isinstance(s, float) for r in back.values() for s in r.values())
    # lines are written in trec_eval's order: score desc, ties by doc id desc (d before a), ranks 1..n
    q1 = [line.split() for line in path.read_text().splitlines() if line.startswith("q1 ")]
    assert [f[2] for f in q1] == ["e", "d", "a", "b", "c"]
    assert [f[3] for f in q1] == ["1", "2", "3", "4", "5"]


def test_qrels_round_trip(tmp_path):
    qrels = {"q1": {"a": 2, "b": 0, "c": -1}, "q2": {"d": 1}, "q3": {}}
    path = write_qrels(qrels, tmp_path / "qrels.txt")
    assert path.read_text().splitlines()[0] == "q1 0 a 2"
    assert read_qrels(path) == {"q1": {"a": 2, "b": 0, "c": -1}, "q2": {"d": 1}}  # no line for q3


def test_beir_tsv_qrels_with_header(tmp_path):
    path = _write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\nq1\tdoc-1\t1\nq1\tdoc-2\t0\nq2\tdoc-1\t2\n")
    assert read_qrels(path) == {"q1": {"doc-1": 1, "doc-2": 0}, "q2": {"doc-1": 2}}


def test_comments_and_blank_lines_are_ignored(tmp_path):
    qrels = _write(tmp_path / "q.txt", "# judged by A\n\nq1 0 a 1\n   \n# q1 0 b 1\nq1 0 c 0\n")
    assert read_qrels(qrels) == {"q1": {"a": 1, "c": 0}}
    run = _write(tmp_path / "r.txt", "\n# header\nq1 Q0 a 1 2.5 t\n\n#q1 Q0 b 2 1.5 t\nq1 Q0 c 2 1.5 t\n")
    assert read_run(run) == {"q1": {"a": 2.5, "c": 1.5}}


def test_identical_duplicate_judgments_are_accepted_and_floats_like_2_point_0_are_grades(tmp_path):
    assert read_qrels(_write(tmp_path / "q.txt", "q1 0 a 1\nq1 0 a 1\nq1 0 b 2.0\n")) == {"q1": {"a": 1, "b": 2}}


# ---------------------------------------------------------------------------------------------
# Malformed files: ValueError naming the file and the line.


@pytest.mark.parametrize("reader, text, line, message", [
    (read_run, "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0\n", 2, r"expected 6 columns .* found 5"),
    (read_run, "q1 Q0 a 1 2.0 t\n\n# c\nq1 Q0 b 2 high t\n", 4, r"field 'score': 'high' is not a finite number"),
    (read_run, "q1 Q0 a 1 nan t\n", 1, r"'nan' is not a finite number"),
    (read_run, "q1 Q0 a 1 inf t\n", 1, r"'inf' is not a finite number"),
    (read_run, "q1 Q0 a 1 2.0 t\nq2 Q0 a 1 2.0 t\nq1 Q0 a 2 1.0 t\n", 3, r"query 'q1' retrieves 'a' twice"),
    (read_qrels, "q1 0 a 1\nq1 0 b\n", 2, r"expected 4 columns .* found 3"),
    (read_qrels, "q1 0 a 1 extra\n", 1, r"expected 4 columns .* found 5"),
    (read_qrels, "q1 0 a 1\nq1 0 b 1.5\n", 2, r"field 'relevance': '1.5' is not an integer relevance grade"),
    (read_qrels, "q1 0 a yes\n", 1, r"'yes' is not an integer relevance grade"),
    (read_qrels, "q1 0 a 1\nq2 0 a 0\nq1 0 a 2\n", 3, r"judges 'a' twice with different grades \(1 and 2\)"),
    (read_qrels, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t1\t0\n", 3, r"expected 3 columns"),
    (read_qrels, "query-id\tcorpus-id\tscore\nq1\td1\tx\n", 2, r"field 'score': 'x'"),
])  # fmt: skip
def test_malformed_files_name_the_file_and_line(tmp_path, reader, text, line, message):
    path = _write(tmp_path / "bad file.txt", text)
    with pytest.raises(ValueError, match=re.escape(f"{path}: line {line}") + ".*" + message):
        reader(path)


@pytest.mark.parametrize("reader", [read_run, read_qrels])
def test_missing_empty_and_non_utf8_files(tmp_path, reader):
    missing = tmp_path / "nope.txt"
    with pytest.raises(ValueError, match=re.escape(str(missing)) + ": file not found"):
        reader(missing)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path)) + ": file not found"):  # a folder
        reader(tmp_path)
    for name, text in [("empty.txt", ""), ("comments.txt", "# nothing yet\n\n")]:
        path = _write(tmp_path / name, text)
        with pytest.raises(ValueError, match=re.escape(str(path)) + ": no (results|judgments) found"):
            reader(path)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("q1 0 caf\xe9 1\n".encode("latin-1"))
    with pytest.raises(ValueError, match=re.escape(str(latin1)) + ": not UTF-8"):
        reader(latin1)


@pytest.mark.parametrize("run", [
    {"q 1": ["a"]}, {"q1": ["a", "b c"]}, {"q1": ["a\tb"]}, {"q1": {"a": 1.0, "b\nc": 0.5}}, {"": ["a"]},
    {"q1": ["a"], "q2": ["b", "x y"]},  # the bad id comes after good lines: still nothing written
])  # fmt: skip
def test_ids_with_whitespace_are_rejected_on_write_and_no_file_is_left(tmp_path, run):
    with pytest.raises(ValueError, match="whitespace"):
        write_run(run, tmp_path / "run.txt")
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temp file


def test_bad_tag_and_bad_qrels_are_rejected_on_write(tmp_path):
    with pytest.raises(ValueError, match=r"run tag 'my run'"):
        write_run({"q1": ["a"]}, tmp_path / "run.txt", tag="my run")
    with pytest.raises(ValueError, match="whitespace"):
        write_qrels({"q1": {"a": 1}, "q2": {"d 1": 1}}, tmp_path / "qrels.txt")
    with pytest.raises(ValueError, match="not an integer grade"):
        write_qrels({"q1": {"a": 1.5}}, tmp_path / "qrels.txt")
    with pytest.raises(ValueError, match="lists a doc twice"):
        write_run({"q1": ["a", "b", "a"]}, tmp_path / "run.txt")
    assert list(tmp_path.iterdir()) == []


def test_existing_file_is_replaced_not_appended(tmp_path):
    path = write_run({"q1": ["a", "b"]}, tmp_path / "run.txt")
    write_run({"q2": ["c"]}, path)
    assert read_run(path) == {"q2": {"c": 1.0}}
    assert run_lines({"q2": ["c"]}) == ["q2 Q0 c 1 1.0 ragnb"]


# ---------------------------------------------------------------------------------------------
# evaluate_files: by hand and against pytrec_eval on the same files.

QRELS = """\
q1 0 d1 2
q1 0 d2 0
q1 0 d3 1
q2 0 d4 1
q2 0 d5 3
"""
# q2: d6 and d4 tie at 2.5 and the rank column says d4 first; trec_eval (and ragnb) ignore the rank
# column and break the tie by doc id descending → d6 before d4. q9 is not judged.
RUN = """\
q1 Q0 d2 1 9.0 sys
q1 Q0 d1 2 8.0 sys
q1 Q0 d9 3 7.0 sys
q1 Q0 d3 4 6.0 sys
q2 Q0 d5 1 3.5 sys
q2 Q0 d4 2 2.5 sys
q2 Q0 d6 3 2.5 sys
q9 Q0 d1 1 1.0 sys
"""
METRICS = ["hit_rate@1", "mrr", "recall@1", "recall@3", "precision@3", "precision@10", "ndcg@3", "ndcg@10"]
PYTREC = {"hit_rate@1": "success_1", "mrr": "recip_rank", "recall@1": "recall_1", "recall@3": "recall_3",
          "precision@3": "P_3", "precision@10": "P_10", "ndcg@3": "ndcg_cut_3", "ndcg@10": "ndcg_cut_10"}

# q1 ranking: d2 (0), d1 (2), d9 (unjudged), d3 (1); relevant {d1, d3}
# q2 ranking: d5 (3), d6 (unjudged), d4 (1);          relevant {d4, d5}
HAND = {
    "hit_rate@1": (0 + 1) / 2,
    "mrr": (1 / 2 + 1 / 1) / 2,  # 0.75
    "recall@1": (0 / 2 + 1 / 2) / 2,  # 0.25
    "recall@3": (1 / 2 + 2 / 2) / 2,  # 0.75
    "precision@3": (1 / 3 + 2 / 3) / 2,  # 0.5
    "precision@10": (2 / 10 + 2 / 10) / 2,  # 0.2: short lists still divided by 10
    # q1: DCG@3 = 0 + 2/log2(3) + 0 = 1.26186; IDCG@3 = 2 + 1/log2(3) = 2.63093 → 0.47962
    # q2: DCG@3 = 3 + 0 + 1/log2(4) = 3.5;     IDCG@3 = 3 + 1/log2(3) = 3.63093 → 0.96394
    "ndcg@3": ((2 / L2(3)) / (2 + 1 / L2(3)) + 3.5 / (3 + 1 / L2(3))) / 2,  # 0.72178
    # q1 at 10 adds d3 at rank 4: + 1/log2(5) = 0.43068 → 1.69254 / 2.63093 = 0.64332
    "ndcg@10": ((2 / L2(3) + 1 / L2(5)) / (2 + 1 / L2(3)) + 3.5 / (3 + 1 / L2(3))) / 2,  # 0.80363
}


def test_evaluate_files_by_hand_and_equal_to_pytrec_eval(tmp_path):
    run_path, qrels_path = _write(tmp_path / "run.txt", RUN), _write(tmp_path / "qrels.txt", QRELS)
    summary = evaluate_files(run_path, qrels_path, METRICS, n_boot=200)
    assert HAND["ndcg@3"] == pytest.approx(0.72178, abs=1e-5) and HAND["ndcg@10"] == pytest.approx(0.80363, abs=1e-5)
    for name, value in HAND.items():
        assert summary[name]["mean"] == pytest.approx(value, abs=1e-12), name
        assert (summary[name]["n"], summary[name]["n_valid"], summary[name]["n_failed"]) == (2, 2, 0)
    assert summary["_info"] == {"n_queries": 2, "n_unjudged_run_queries": 1, "n_missing_from_run": 0,
                                "n_no_relevant": 0, "run": str(run_path), "qrels": str(qrels_path),
                                "relevance_level": 1, "notes": []}

    with run_path.open() as r, qrels_path.open() as q:
        ref = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(q), {"success.1", "recip_rank", "recall.1,3",
                                             "P.3,10", "ndcg_cut.3,10"}).evaluate(pytrec_eval.parse_run(r))
    assert set(ref) == {"q1", "q2"}  # q9 is not judged there either
    for name, measure in PYTREC.items():
        mean = (ref["q1"][measure] + ref["q2"][measure]) / 2
        assert summary[name]["mean"] == pytest.approx(mean, abs=1e-12), name


def test_evaluate_files_missing_and_unanswerable_queries(tmp_path):
    qrels_path = _write(tmp_path / "qrels.txt", QRELS + "q3 0 d7 0\nq4 0 d8 1\n")  # q3: no relevant; q4: not run
    run_path = _write(tmp_path / "run.txt", RUN + "q3 Q0 d7 1 1.0 sys\n")
    summary = evaluate_files(run_path, qrels_path, ["mrr"], n_boot=200)
    # mean over q1, q2, q4 (0); q3 is NaN → failed
    assert summary["mrr"]["mean"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert (summary["mrr"]["n"], summary["mrr"]["n_valid"], summary["mrr"]["n_failed"]) == (4, 3, 1)
    assert summary["_info"]["n_missing_from_run"] == 1 and summary["_info"]["n_no_relevant"] == 1
    lo, hi = summary["mrr"]["ci95"]
    assert lo <= summary["mrr"]["mean"] <= hi


def test_evaluate_files_with_beir_qrels_and_a_written_run(tmp_path):
    qrels_path = _write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\nq1\tb\t1\nq2\tz\t2\n")
    run_path = write_run({"q1": ["a", "b", "c"], "q2": {"y": 0.5, "z": 0.5}}, tmp_path / "run.txt")
    summary = evaluate_files(run_path, qrels_path, ["mrr"], n_boot=50)
    assert summary["mrr"]["mean"] == pytest.approx((1 / 2 + 1 / 1) / 2)  # q2: tie → z before y


# ---------------------------------------------------------------------------------------------
# What trec_eval reads: extra columns, relevance levels (trec_eval's own files: test_trec_eval_files.py).


def test_text_after_the_sixth_column_is_ignored_with_a_note(tmp_path):
    path = _write(tmp_path / "run.txt", "q1 Q0 a 1 2.0 t extra words\nq1 Q0 b 2 1.0 t\nq2 Q0 c 1 0.5 t # x\n")
    notes: list[str] = []
    assert read_run(path, notes) == {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 0.5}}
    assert notes == [f"{path}: 2 line(s) have text after the sixth column (first: line 1); it is ignored, as "
                     "trec_eval ignores it"]
    with pytest.raises(ValueError, match=re.escape(f"{path}: line 1: expected 6 columns") + ".*found 5"):
        read_run(_write(path, "q1 Q0 a 1 2.0\n"))  # too few is still an error: which column is missing?


GRADED = {"q1": {"a": 1, "b": 2, "c": 3, "d": 0}, "q2": {"e": 1, "f": -1}}


def test_relevance_level_by_hand():
    run = {"q1": ["a", "d", "b", "c"], "q2": ["e", "f"]}
    names = ["hit_rate@1", "mrr", "recall@3", "precision@3", "ndcg@4"]
    one = per_query(run, GRADED, names)[0]
    two = per_query(run, GRADED, names, relevance_level=2)[0]
    # level 1: q1 relevant {a, b, c}; a at rank 1
    assert one.loc["q1"].tolist()[:4] == [1.0, 1.0, 2 / 3, 2 / 3]
    # level 2: q1 relevant {b, c}; a (grade 1) no longer counts: first relevant b at rank 3
    assert two.loc["q1"].tolist()[:4] == [0.0, 1 / 3, 1 / 2, 1 / 3]
    # nDCG's gains are the grades at any level (trec_eval's ndcg_cut ignores -l):
    # DCG = 1/log2(2) + 0 + 2/log2(4) + 3/log2(5); IDCG = 3 + 2/log2(3) + 1/log2(4)
    ndcg = (1 + 2 / 2 + 3 / L2(5)) / (3 + 2 / L2(3) + 1 / 2)
    assert one.loc["q1", "ndcg@4"] == pytest.approx(ndcg, abs=1e-12) and two.loc["q1", "ndcg@4"] == pytest.approx(ndcg, abs=1e-12)
    # q2 has no grade ≥ 2: undefined at level 2 on every metric (trec_eval would say 0)
    assert one.loc["q2"].tolist() == [1.0, 1.0, 1.0, 1 / 3, 1.0] and two.loc["q2"].isna().all()


@pytest.mark.parametrize("level", [0, -1, 1.5, True, "2"])
def test_relevance_level_must_be_an_integer_from_1(tmp_path, level):
    with pytest.raises(ValueError, match=re.escape(f"relevance level {level!r}: give an integer ≥ 1")):
        per_query({"q1": ["a"]}, GRADED, ["mrr"], relevance_level=level)
    with pytest.raises(ValueError, match=re.escape(f"relevance level {level!r}")):
        evaluate_files(_write(tmp_path / "r.txt", RUN), _write(tmp_path / "q.txt", QRELS), ["mrr"], relevance_level=level)


def test_qrels_without_a_relevant_grade_are_refused_with_the_reason(tmp_path):
    run = _write(tmp_path / "run.txt", "q1 Q0 a 1 2.0 t\nq2 Q0 b 1 1.0 t\n")
    negative = _write(tmp_path / "neg.txt", "q1 0 a -1\nq1 0 b 0\nq2 0 b -2\n")
    with pytest.raises(ValueError) as err:
        evaluate_files(run, negative, ["mrr"])
    assert str(err.value) == (
        f"{negative}: no relevance grade ≥ 1 in 3 judgment(s) (grades -2 to 0), so no query has a relevant document "
        "and every metric is undefined; a grade ≥ the relevance level (1, --relevance-level; trec_eval's -l) marks a "
        "relevant document — check the grade column: relevant documents need a positive grade")
    ones = _write(tmp_path / "ones.txt", "q1 0 a 1\nq2 0 b 1\n")
    with pytest.raises(ValueError, match=r"no relevance grade ≥ 3 in 2 judgment\(s\) \(grades 1 to 1\).*— lower "
                                         r"--relevance-level$"):
        evaluate_files(run, ones, ["mrr"], relevance_level=3)
    assert evaluate_files(run, ones, ["mrr"], n_boot=10)["mrr"]["mean"] == 1.0


def test_cli_says_why_instead_of_printing_nan(tmp_path):
    from click.testing import CliRunner

    from ragnb.cli.main import build_cli

    run = _write(tmp_path / "run.txt", "q1 Q0 a 1 2.0 t\n")
    negative = _write(tmp_path / "neg.txt", "q1 0 a -1\n")
    res = CliRunner().invoke(build_cli(), ["metrics", "retrieval", "--run", str(run), "--qrels", str(negative)],
                             catch_exceptions=False)
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith(f"error: {negative}: no relevance grade ≥ 1 in 1 judgment(s) (grades -1 to -1)")
    res = CliRunner().invoke(build_cli(), ["metrics", "retrieval", "--run", str(run), "--qrels", str(negative),
                                           "--relevance-level", "0"], catch_exceptions=False)
    assert res.exit_code == 2 and "relevance level 0: give an integer ≥ 1" in res.stderr


def test_json_output_never_holds_a_bare_nan(capsys):
    from ragnb.cli.common import print_json

    class Opaque:  # an object JSON has no form for is printed as its text, as before
        def __str__(self) -> str:
            return "<obj>"

    print_json({"mean": float("nan"), "ci95": [float("-inf"), 1.5], "x": Opaque()})
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out
    assert json.loads(out) == {"mean": None, "ci95": [None, 1.5], "x": "<obj>"}
