"""CI gate and run management from the command line: ``ragnb compare``, ``ragnb run --fail-on attention``,
``ragnb runs list | show | delete`` — on synthetic runs whose verdicts are known in advance."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
import team_wiki
from test_compare import CORPUS_200, DS_EN, DS_RU

from ragnb.cli.main import build_cli
from ragnb.io import read_per_item
from ragnb.runs.record import load_runs
from ragnb.runs.build import build_record

A, B = "20250101-000000-aaaa", "20250102-000000-bbbb"
PROV = {"datasets": [DS_RU], "corpora": [CORPUS_200]}


def _runs(out, shift: float, prov_b: dict | None = PROV) -> None:
    """Two Tier 1 runs on 8 items; B's mrr is A's + ``shift`` on every item (exact sign-flip p = 2/2⁸)."""
    from ragnb.metrics.stats import aggregate
    from ragnb.runs.record import append_run_record
    from ragnb.tiers import payload

    ids = [f"i{k}" for k in range(8)]
    for run_id, s, prov in ((A, 0.0, PROV), (B, shift, prov_b)):
        df = pd.DataFrame({"mrr": np.linspace(0.4, 0.75, 8) + s, "hit_rate@1": [1.0, 0, 1, 0, 1, 1, 0, 1]},
                          index=pd.Index(ids))
        metrics = {c: aggregate(df[c].to_numpy(), n_boot=50) for c in df.columns}
        metrics["provenance"] = prov
        payload.write_metrics(out / "runs" / run_id, "tier1_retrieval", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(run_id, {"tier_1_metrics": metrics}, None, None,
                                                                    "mini", {"duration_s": 12.0}, cwd=out))


def _cli(*args: str):
    return CliRunner().invoke(build_cli(), list(args), catch_exceptions=False)


def test_compare_gate_passes_when_b_is_better_and_markdown_is_a_pr_comment(tmp_path):
    out = tmp_path / "out"
    _runs(out, +0.2)
    res = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mrr,hit_rate@*")
    assert res.exit_code == 0, res.output
    md = res.output
    assert md.startswith(f"### ragnb: run `{B}` (B) vs. `{A}` (A)")
    assert "**Gate: pass**" in md and "Comparable: same dataset and corpus" in md
    row = next(line for line in md.splitlines() if "`mrr`" in line)
    # mean A = 0.575 (linspace 0.4…0.75), B = 0.775, Δ = +0.200 on every item; exact sign-flip p = 2/256
    assert "| 0.575 | 0.775 | +0.200" in row and "| 0.008 |" in row and "B better" in row


def test_compare_gate_fails_when_b_is_significantly_worse(tmp_path):
    out = tmp_path / "out"
    _runs(out, -0.2)
    res = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mrr", "--format", "json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["gate"]["outcome"] == "worse" and data["gate"]["metrics"] == ["mrr"]
    mrr = next(r for r in data["metrics"] if r["metric"] == "mrr")
    assert mrr["verdict"] == "B worse" and mrr["delta"] == pytest.approx(-0.2)
    assert mrr["p_holm"] == pytest.approx(2 / 256 * 1)  # hit_rate@1 unchanged on every item: left out of Holm's m
    assert "significantly worse on Tier 1 (retrieval) mrr" in res.stderr
    # without --fail-if-worse the same comparison only reports
    assert _cli("compare", A, B, "--outputs", str(out)).exit_code == 0
    # a gated metric that no run recorded is an error, not a silent pass
    typo = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mmr")
    assert typo.exit_code == 2 and typo.output == (
        "error: --fail-if-worse: unknown metric 'mmr' — no registered metric has that name and neither run recorded "
        "a metric matching it; these runs recorded: hit_rate@1, mrr (shell patterns such as 'hit_rate@*' work)\n")


def test_compare_not_comparable_names_no_winner_and_exits_4(tmp_path):
    out = tmp_path / "out"
    _runs(out, -0.2, prov_b={"datasets": [DS_EN], "corpora": [CORPUS_200]})
    res = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mrr")
    assert res.exit_code == 4
    assert "**Not comparable**" in res.stdout and "different datasets" in res.stdout
    assert "B worse" not in res.stdout and "B better" not in res.stdout
    assert "cannot decide" in res.stderr


def test_compare_defaults_to_latest_pair_and_metrics_filter(tmp_path):
    out = tmp_path / "out"
    _runs(out, -0.2)
    res = _cli("compare", "--outputs", str(out), "--metrics", "hit_rate@*", "--fail-if-worse", "mrr")
    assert res.exit_code == 1  # mrr is gated even though the table shows hit_rate@1 only
    table = [line for line in res.stdout.splitlines() if line.startswith("| Tier")]
    assert len(table) == 1 and "`hit_rate@1`" in table[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _cli("compare", "--outputs", str(empty))
    assert res.exit_code == 2 and "need two runs" in res.output


def test_runs_list_show_delete(tmp_path):
    out = tmp_path / "out"
    _runs(out, 0.1)
    listed = _cli("runs", "list", "--outputs", str(out), "--format", "json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [A, B]
    table = _cli("runs", "list", "--outputs", str(out)).stdout
    assert A in table and "12 s" in table and "2 run(s)" in table
    shown = _cli("runs", "show", A, "--outputs", str(out))
    assert shown.exit_code == 0 and f"run {A}" in shown.stdout
    assert _cli("runs", "show", "nope", "--outputs", str(out)).exit_code == 2
    # without a terminal and without --yes nothing is deleted
    refused = _cli("runs", "delete", A, "--outputs", str(out))
    assert refused.exit_code == 2 and "--yes" in refused.output and (out / "runs" / A).is_dir()
    done = _cli("runs", "delete", A, "--outputs", str(out), "--yes")
    assert done.exit_code == 0, done.output
    assert [r["id"] for r in load_runs(out / "benchmark_runs.json")] == [B]
    assert not (out / "runs" / A).exists() and (out / "runs" / B).is_dir()
    gone = _cli("runs", "delete", A, "--outputs", str(out), "--yes")
    assert gone.exit_code == 2 and "unknown run id" in gone.output


def test_fail_on_attention_uses_the_records_grading():
    from ragnb.cli.run import attention_lines
    from ragnb.metrics.stats import aggregate

    low = aggregate(np.array([0.0, 1.0] * 3 + [0.0] * 6), n_boot=50)  # hit_rate@1 = 0.25 < 0.5: attention
    const = aggregate(np.zeros(12), n_boot=50)  # mrr constant 0: ungraded, must not trip the gate
    record = build_record("20250101-000000-cccc", {"tier_1_metrics": {"hit_rate@1": low, "mrr": const}},
                          None, None, None)
    lines = attention_lines(record)
    assert record["overall_status"] == "attention"
    assert len(lines) == 1 and lines[0].startswith("Tier 1 (retrieval): hit_rate@1 = 0.25") and "< 0.5" in lines[0]
    good = build_record("20250101-000000-dddd", {"tier_1_metrics": {"mrr": const}}, None, None, None)
    assert attention_lines(good) == [] and good["overall_status"] == "no-data"


def test_markdown_keeps_gated_metrics_and_changes_in_view_when_there_are_many():
    from ragnb.runs.gate import SHOW_ALL_UP_TO, _split_rows

    rows = [{"metric": f"m{i}", "verdict": "no significant difference at α = 0.05"} for i in range(10)]
    rows[3]["verdict"], rows[7]["verdict"] = "B worse", "B better (unpaired)"
    shown, rest = _split_rows(rows, {"m0"})
    assert [r["metric"] for r in shown] == ["m0", "m3", "m7"] and len(rest) == 7
    few = rows[:SHOW_ALL_UP_TO]
    assert _split_rows(few, set()) == (few, [])


# --------------------------------------------------------------------------------------------
# The changes a team makes, on its own wiki: a re-chunking and a top_k change, gated on real Tier 1 runs
# --------------------------------------------------------------------------------------------

BASE, RECHUNKED, TOP3 = "20250201-000000-base", "20250202-000000-rech", "20250203-000000-top3"
REL_PAGES = {"rq-w1": team_wiki.WIKI_EXPECTED["ru/ops/vpn.md"][1],  # the page-level truth: front matter url or template
             "rq-w2": team_wiki.WIKI_EXPECTED["ru/hr/отпуск.md"][1],
             "rq-w3": team_wiki.WIKI_EXPECTED["en/dev/deploy.md"][1],
             "rq-w4": team_wiki.WIKI_EXPECTED["en/dev/rollback.markdown"][1],
             "rq-w5": "", "rq-w6": ""}  # w5 cites a page the wiki lacks, w6 cites none: no truth, NaN metrics


@pytest.fixture(scope="module")
def wiki_runs(tmp_path_factory, encoder):
    """Three Tier 1 runs on the bilingual team wiki and its question log (datasets built from the log's cited
    URLs by ``from-real-questions``, as a team does): BASE = 8-word chunks, top_k 10; RECHUNKED = the same
    wiki in 3-word chunks (another database); TOP3 = BASE's corpus and dataset with top_k 3."""
    import os

    from ragnb.datasets import fingerprint
    from ragnb.datasets.corpus import Corpus
    from ragnb.datasets.real_questions import generate_from_real_questions
    from ragnb.runs.record import append_run_record
    from ragnb.store.engine import connect
    from ragnb.store.loaders import load_file
    from ragnb.store.schema import tables
    from ragnb.store.vectors import check_space, embed_table
    from ragnb.tiers.tier1 import run_tier1

    root = tmp_path_factory.mktemp("team")
    out = root / "out"
    corpora = {}
    for words in (8, 3):
        db = connect(database=f"gate{os.getpid()}w{words}")
        load_file(db, "chunks", team_wiki.write_bilingual_wiki(root / f"wiki{words}"), chunk_size=words, overlap=0,
                  url_template=team_wiki.TEMPLATE)
        load_file(db, "questions", team_wiki.write_wiki_log(root / "log.jsonl"))
        embed_table(db, "chunks", encoder, progress=False)
        embed_table(db, "questions", encoder, progress=False)
        corpora[words] = Corpus(db, encoder, "database", check_space(db, tables(db.schema).chunk, encoder))
    datasets = {w: generate_from_real_questions(c, top_k=5).dataset for w, c in corpora.items()}
    for run_id, words, top_k in ((BASE, 8, 10), (RECHUNKED, 3, 10), (TOP3, 8, 3)):
        corpus = corpora[words]
        fingerprint.reset()
        fingerprint.note_dataset(datasets[words])
        fingerprint.note_corpus(corpus.db)
        ids, urls, vectors = corpus.vectors("chunks")
        result = run_tier1(datasets[words], encoder, corpus.retriever("pgvector", "exact", (ids, urls, vectors)),
                           top_k=top_k, chunk_urls=dict(zip(ids, urls)), latency_sample=0, hnsw_check=False, n_boot=50)
        block = json.loads(result.write(out / "runs" / run_id, "tier1_retrieval").read_text(encoding="utf-8"))
        append_run_record(out / "benchmark_runs.json", build_record(
            run_id, {"tier_1_metrics": block}, "from-real-questions.json", "from-real-questions", encoder.name,
            {"params": {"tier1": {"top_k": top_k}}}, cwd=root))
    fingerprint.reset()
    for corpus in corpora.values():
        corpus.db.dispose()
    return out


# w5 and w6 have no truth: 2 of the 6 questions are NaN (counted as failed) in every run, over the gate's 5% default
NO_TRUTH = ("--max-failed", "0.34")


def _per_item(out, run_id: str) -> pd.DataFrame:
    return read_per_item(out / "runs" / run_id / "tier1_retrieval.per_item.csv").set_index("item_id")


def _exact_sign_flip(d: np.ndarray) -> float:
    import itertools

    nz = d[d != 0]
    flips = [abs(np.dot(s, nz)) for s in itertools.product((1, -1), repeat=len(nz))]
    return float(np.mean([f >= abs(nz.sum()) - 1e-12 for f in flips])) if len(nz) else 1.0


def test_rechunking_is_gated_on_page_level_metrics_with_a_paired_test(wiki_runs):
    from scipy import stats

    out = wiki_runs
    a, b = _per_item(out, BASE), _per_item(out, RECHUNKED)
    # the truth both runs scored doc_* against: the cited pages, identical although every chunk id changed
    assert a["relevant_pages"].fillna("").to_dict() == REL_PAGES == b["relevant_pages"].fillna("").to_dict()

    res = _cli("compare", BASE, *NO_TRUTH, RECHUNKED, "--outputs", str(out), "--fail-if-worse", "hit_rate@*,mrr,ndcg@10",
               "--format", "json")
    # 4 questions have a cited page in the wiki: the smallest exact two-sided p is 2/2⁴, so nothing can be significant
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["comparable"] is False and data["partly_comparable"] is True
    assert data["comparable_scope"] == ["Tier 1 (retrieval): the page-level metrics (doc_*) are compared paired on "
                                        "the same 6 question ids, with the same questions and relevant pages in both runs"]
    assert len(data["reasons"]) == 1 and data["reasons"][0].startswith(
        "Tier 1 (retrieval), every metric but the page-level ones: different datasets")
    assert "different corpora" in data["reasons"][0] and "12 chunks" in data["reasons"][0]
    assert "29 chunks" in data["reasons"][0]
    gate_ = data["gate"]
    assert gate_["outcome"] == "pass"
    assert [(s["metric"], s["page_level"]) for s in gate_["page_level_for"]] == [
        ("hit_rate@1", "doc_hit_rate@1"), ("hit_rate@5", "doc_hit_rate@5"), ("hit_rate@10", "doc_hit_rate@10"),
        ("mrr", "doc_mrr"), ("ndcg@10", "doc_ndcg@10")]
    assert gate_["metrics"] == ["doc_hit_rate@1", "doc_hit_rate@10", "doc_hit_rate@5", "doc_mrr", "doc_ndcg@10"]
    rows = {r["metric"]: r for r in data["metrics"]}
    for chunk_level in ("hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr", "ndcg@10", "recall@5"):
        assert rows[chunk_level]["verdict"] == "not comparable" and rows[chunk_level]["p_value"] is None
    valid = [q for q, pages in REL_PAGES.items() if pages]
    for name in gate_["metrics"]:  # each gated row = the paired test recomputed from the two per-item files
        row, xa, xb = rows[name], a.loc[valid, name].to_numpy(), b.loc[valid, name].to_numpy()
        assert row["paired"] is True and row["comparable"] is True
        assert (row["n_pairs"], row["n_nan_pairs"]) == (4, 2)  # w5, w6: NaN in both runs, counted
        assert row["mean_a"] == pytest.approx(xa.mean()) and row["mean_b"] == pytest.approx(xb.mean())
        if set(np.unique(np.r_[xa, xb])) <= {0.0, 1.0}:
            n01, n10 = int(((xa == 0) & (xb == 1)).sum()), int(((xa == 1) & (xb == 0)).sum())
            expected = stats.binomtest(n01, n01 + n10, 0.5).pvalue if n01 + n10 else 1.0
            assert row["test"] == "McNemar exact (binary)" and row["p_value"] == pytest.approx(expected)
        else:
            assert row["test"] == "sign-flip permutation (exact)"
            assert row["p_value"] == pytest.approx(_exact_sign_flip(xb - xa))
        assert row["verdict"] == "no significant difference at α = 0.05"

    md = _cli("compare", BASE, *NO_TRUTH, RECHUNKED, "--outputs", str(out), "--fail-if-worse", "hit_rate@*,mrr,ndcg@10")
    assert md.exit_code == 0
    # the reason is stated once (stdout and stderr together), and the gate says which metrics stood in
    assert md.output.count("different corpora") == 1 and md.output.count("different datasets") == 1
    assert "**Partly comparable**" in md.stdout
    from ragnb.runs.compare import compare_runs, load_runs
    from ragnb.runs.dashboard import comparison_summary

    comp = compare_runs(load_runs(out / "benchmark_runs.json"), out, BASE, RECHUNKED, n_boot=50)
    assert comp.partly and comparison_summary(comp).startswith(
        "PARTLY COMPARABLE — Tier 1 (retrieval): the page-level metrics (doc_*) are compared paired")
    assert ("Tier 1 (retrieval): the chunk-level hit_rate@1, hit_rate@5, hit_rate@10, mrr, ndcg@10 are not comparable "
            "between these runs (why: see the comparability line), so the gate decides on their page-level versions "
            "doc_hit_rate@1, doc_hit_rate@5, doc_hit_rate@10, doc_mrr, doc_ndcg@10") in md.stdout


def test_rechunking_with_other_page_truth_is_not_comparable(wiki_runs, tmp_path):
    """One question labelled with another page in run B: the page-level metrics no longer score the same test set,
    so the gate cannot decide (exit 4) and says which question differs."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(wiki_runs, out)
    per_item = _per_item(out, RECHUNKED)
    per_item.loc["rq-w4", "relevant_pages"] = REL_PAGES["rq-w3"]
    folder = out / "runs" / RECHUNKED
    per_item.reset_index().to_parquet(folder / "tier1_retrieval.per_item.parquet", index=False)
    per_item.reset_index().to_csv(folder / "tier1_retrieval.per_item.csv", index=False)
    res = _cli("compare", BASE, *NO_TRUTH, RECHUNKED, "--outputs", str(out), "--fail-if-worse", "hit_rate@*,mrr")
    assert res.exit_code == 4, res.output
    assert ("Tier 1 (retrieval): the page-level metrics are not comparable either — 1 question(s) have other relevant "
            f"pages in the two runs (rq-w4; e.g. rq-w4: A '{REL_PAGES['rq-w4']}', B '{REL_PAGES['rq-w3']}')") in res.stdout
    assert "**Not comparable**" in res.stdout and "B worse" not in res.stdout and "B better" not in res.stdout
    assert "the gate cannot decide on Tier 1 (retrieval) hit_rate@1 (its page-level version doc_hit_rate@1 is not " \
           "comparable either)" in res.stderr
    assert res.output.count("different corpora") == 1
    # a run made before the per-item files recorded the relevant pages: not comparable, and the reason says why
    per_item.drop(columns="relevant_pages").reset_index().to_parquet(folder / "tier1_retrieval.per_item.parquet",
                                                                      index=False)
    old = _cli("compare", BASE, *NO_TRUTH, RECHUNKED, "--outputs", str(out), "--fail-if-worse", "mrr")
    assert old.exit_code == 4
    assert ("Tier 1 (retrieval): whether its page-level metrics compare across the two runs cannot be checked: the "
            "per-item file of run B has no relevant_pages column") in old.stdout


def test_top_k_change_fails_the_gate_with_the_reason_unless_allow_missing(wiki_runs):
    out = wiki_runs
    narrowed = _cli("compare", BASE, *NO_TRUTH, TOP3, "--outputs", str(out), "--fail-if-worse", "hit_rate@*,mrr")
    assert narrowed.exit_code == 1, narrowed.output
    assert "❌ **Gate: missing**" in narrowed.stdout and "Comparable: same dataset and corpus" in narrowed.stdout
    for k in (5, 10):
        line = f"Tier 1 (retrieval): run B's top_k = 3 cannot report hit_rate@{k} (run A reports it)"
        assert narrowed.stdout.count(line) == 1 and narrowed.stderr.count(line) == 1
    readme = _cli("compare", BASE, *NO_TRUTH, TOP3, "--outputs", str(out), "--fail-if-worse", "hit_rate@*,mrr,ndcg@10",
                  "--format", "json")
    assert readme.exit_code == 1
    data = json.loads(readme.stdout)
    assert data["comparable"] is True and data["gate"]["outcome"] == "missing"
    assert data["gate"]["missing"] == [
        f"Tier 1 (retrieval): run B's top_k = 3 cannot report {m} (run A reports it)"
        for m in ("hit_rate@5", "hit_rate@10", "ndcg@10")]
    assert {(r["metric"], r["run"]) for r in data["one_sided"]} >= {("hit_rate@5", "A"), ("ndcg@10", "A")}
    allowed = _cli("compare", BASE, *NO_TRUTH, TOP3, "--outputs", str(out), "--fail-if-worse", "hit_rate@*,mrr,ndcg@10",
                   "--allow-missing", "--format", "json")
    assert allowed.exit_code == 0, allowed.output
    gate_ = json.loads(allowed.stdout)["gate"]
    assert gate_["outcome"] == "pass" and gate_["metrics"] == ["hit_rate@1", "mrr"]
    assert gate_["message"].startswith("not gated (--allow-missing): Tier 1 (retrieval): run B's top_k = 3 cannot "
                                       "report hit_rate@5 (run A reports it)")
    # --allow-missing with nothing left to gate does not pass: nothing would have been checked
    empty = _cli("compare", BASE, *NO_TRUTH, TOP3, "--outputs", str(out), "--fail-if-worse", "ndcg@10", "--allow-missing")
    assert empty.exit_code == 1 and "no gated metric is left to decide on, so the gate fails" in empty.stderr
    # the other way round, B reports what A cannot: also a metric missing from a run
    wider = _cli("compare", TOP3, *NO_TRUTH, BASE, "--outputs", str(out), "--fail-if-worse", "ndcg@10")
    assert wider.exit_code == 1 and "run A's top_k = 3 cannot report ndcg@10 (run B reports it)" in wider.stderr


def test_unknown_metric_names_are_usage_errors(tmp_path):
    out = tmp_path / "out"
    _runs(out, +0.2)
    for option, value in (("--metrics", "foo@5"), ("--fail-if-worse", "foo"), ("--metrics", "hit_rte@*")):
        res = _cli("compare", A, B, "--outputs", str(out), option, value)
        assert res.exit_code == 2 and res.stdout == "", (option, value)
        assert res.stderr.startswith(f"error: {option}: unknown metric {value!r} — no registered metric has that name")
        assert "these runs recorded: hit_rate@1, mrr" in res.stderr
    for option in ("--metrics", "--fail-if-worse"):
        empty = _cli("compare", A, B, "--outputs", str(out), option, ",")
        assert empty.exit_code == 2 and empty.stderr == f"error: {option} ',' names no metric: give names or " \
                                                         "patterns such as 'hit_rate@*,mrr'\n"
    # a registered metric that neither run recorded: shown as nothing compared, and gating on it fails with why
    shown = _cli("compare", A, B, "--outputs", str(out), "--metrics", "faithfulness")
    assert shown.exit_code == 0 and "Nothing compared: no metric that both runs recorded matches" in shown.stdout
    assert "Comparability not verified" not in shown.stdout
    gated = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "faithfulness")
    assert gated.exit_code == 1 and "missing from a run: neither run recorded faithfulness" in gated.stderr
