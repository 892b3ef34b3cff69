"""Reports on a team's own data: no word about the demo (decided by the stored rows, not a label or a
parameter), notes about the embedding model actually used, each notebook's own inputs in the run summary, and no
``nan``, ``(?)`` or bare path at the end of a report. The demo keeps its note (tests/test_analysis.py)."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from team_wiki import TEMPLATE, WIKI_CHUNK_SIZE, WIKI_LOG, write_bilingual_wiki, write_wiki_log

NO_SERVER = "http://127.0.0.1:9/v1"  # never asked: an input limit is known without a request
DEMO_WORDS = re.compile(r"(?i)simulated|demo\.py|bundled demo|demo log|XQuAD")


def visible_text(page: str) -> str:
    """The text a reader sees: no scripts or styles, tags removed, entities decoded."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


# ---------------------------------------------------------------------------------------------
# The demo is recognised by its rows


def test_simulated_scores_is_decided_by_the_stored_rows(fresh_db, tmp_path):
    from ragnb.datasets import demo
    from ragnb.store.loaders import insert_rows, load_file
    from ragnb.store.schema import tables

    assert demo.simulated_scores(fresh_db) is False  # no question log at all
    load_file(fresh_db, "questions", write_wiki_log(tmp_path / "log.jsonl"))
    assert demo.simulated_scores(fresh_db) is False  # a team's own log
    rows = demo.question_rows("ru")
    insert_rows(fresh_db, "questions", rows)
    assert demo.simulated_scores(fresh_db) is True  # the demo's 612 questions with their simulated scores
    t = tables(fresh_db.schema).question
    first = rows[0]
    with fresh_db.engine.begin() as conn:  # one rating that is not the demo's draw: not the demo's log any more
        conn.execute(sa.update(t).where(t.c.id == first["id"]).values(score=first["score"] % 5 + 1))
    assert demo.simulated_scores(fresh_db) is False


# ---------------------------------------------------------------------------------------------
# One formatter each: model notes, latency, notes, tables, written files


def test_truncation_note_is_about_the_model_used(encoder):
    from ragnb.embeddings.models import get_encoder
    from ragnb.embeddings.endpoint import EndpointEncoder
    from ragnb.tiers.tier0 import input_limit_text, truncation_note

    assert input_limit_text(encoder) == ("all-MiniLM-L6-v2 reads at most 256 tokens: the rest of a longer text is cut "
                                         "before embedding.")
    counted = {"n": 4, "n_truncated": 1, "share_truncated": 0.25, "mean_tokens": 130.4, "max_tokens": 300}
    assert truncation_note(encoder, counted) == (input_limit_text(encoder)
                                                 + " 1 of 4 chunks exceed it (25%); mean length 130 tokens.")
    e5 = get_encoder("multilingual-e5-small")
    assert truncation_note(e5, None) == ("multilingual-e5-small has no input limit: it reads long texts whole (in "
                                         "windows), so nothing is cut.")
    unknown = EndpointEncoder("team-embedder", dim=8, base_url=NO_SERVER)
    assert input_limit_text(unknown) == ("team-embedder: input limit unknown (its openai-compatible backend does not "
                                         "declare one), so the share of cut texts cannot be measured.")
    declared = EndpointEncoder("team-embedder", dim=8, max_input_tokens=8192, base_url=NO_SERVER)
    assert input_limit_text(declared).startswith("team-embedder reads at most 8192 tokens")
    for enc in (e5, unknown, declared):
        assert "MiniLM" not in input_limit_text(enc) and "256" not in input_limit_text(enc)


def test_latency_notes_tables_and_paths_format_for_reading():
    from ragnb.reports import report

    nan = float("nan")
    assert report.latency_text(nan, nan, nan) == "— (no latency recorded)"
    assert report.latency_text(None) == "— (no latency recorded)"
    assert report.latency_text(12.345, 11.0, 20.06) == "mean 12.3 ms, p50 11.0 ms, p95 20.1 ms"
    assert report.latency_text(3.14159, p95=4.0, digits=2) == "mean 3.14 ms, p95 4.00 ms"
    assert report.notes_html(["a <b> & c", "second"]) == (
        '<ul class="ragnb-notes" style="margin:4px 0 8px;padding-left:20px;line-height:1.45">'
        "<li>a &lt;b&gt; &amp; c</li><li>second</li></ul>")
    table = report.table_html(pd.DataFrame({f"column_{i}": [i] for i in range(30)}))
    assert re.search(r'<div class="ragnb-scroll" style="overflow-x:auto;max-width:100%"><table class="ragnb-table"',
                     table) and "</table></div>" in table
    assert report.path_html(Path("/srv/out/runs/r1/real_users.metrics.json")) == (
        '<p style="color:#57606a">metrics JSON: <a href="real_users.metrics.json">real_users.metrics.json</a></p>')
    assert ">file written: <a href=\"a%20b.csv\">a b.csv</a>" in report.path_html("/x/a b.csv")


# ---------------------------------------------------------------------------------------------
# Each notebook's own inputs in the summary


def _block(**over):
    return {"mrr": {"mean": 0.7, "ci95": [0.6, 0.8], "n": 40}, **over}


DB = "postgresql+psycopg://postgres:@/ragnb?host=/tmp/pgdata"
CORPUS = {"database": DB, "n_chunks": 42, "n_embedded": 42, "chunks_md5": "7c3d3a1b6f9aaf2b", "model": "e5", "dim": 384}


def test_summary_names_each_notebooks_own_inputs():
    from ragnb.runs.pages import index_html
    from ragnb.runs.summary import executive_summary
    from ragnb.runs.summary import run_inputs

    rec = {
        "dataset_file": "samples.json",  # what rag_metrics reported first: not Tier 2's or Tier 3's dataset
        "tier_1_metrics": _block(embedding_model="e5", provenance={
            "datasets": [{"name": "team_questions", "n_items": 67, "sha256": "a"}], "corpora": [CORPUS]}),
        "tier_2_metrics": _block(embedding_model="e5", provenance={
            "datasets": [{"name": "team_fixed_context", "n_items": 20, "sha256": "b"}]}),
        "tier_3_metrics": _block(embedding_model="e5", provenance={
            "datasets": [{"name": "team_questions", "n_items": 67, "sha256": "a"}], "corpora": [CORPUS]}),
        "other_metrics": {"rag_metrics": _block(dataset_file="/data/team/samples.json", embedding_model="e5")},
    }
    lines = executive_summary(rec).splitlines()
    assert "samples.json" not in lines[0]
    # one short line of the distinct inputs; which notebook used which is the index page's table
    assert lines[1] == ("Inputs: datasets team_questions (67 items), team_fixed_context (20 items), samples.json; "
                        "corpus ragnb: 42 chunks (md5 7c3d3a1b); model e5 — which notebook used which: the Inputs table.")
    assert run_inputs(rec)["tier_2_metrics"] == {"dataset": "team_fixed_context (20 items)", "embedding_model": "e5"}
    page = index_html(".", {**rec, "id": "r", "overall_status": "good", "executive_summary": "\n".join(lines)}, [])
    inputs = page.split("<h2>Inputs</h2>")[1].split("</table>")[0]
    assert ("<tr><td>Tier 2 (generation)</td><td>team_fixed_context (20 items)</td><td>—</td><td>e5</td></tr>"
            in inputs)
    assert "<th>dataset</th><td>samples.json</td>" not in page  # no run-wide dataset row


# ---------------------------------------------------------------------------------------------
# A run on a team's own bilingual wiki and log


@pytest.fixture(scope="module")
def team_run(tmp_path_factory):
    """The bilingual wiki (front matter, subfolders) and its log loaded into a database of their own, embedded
    with multilingual-e5-small, then Tier 0, Tier 1, real users, domain analysis and rag_metrics run on it as a
    team would run them (``corpus db``, their own dataset files)."""
    import os

    from ragnb.datasets.corpus import open_corpus
    from ragnb.datasets.real_questions import generate_from_real_questions
    from ragnb.datasets.schema import save_dataset
    from ragnb.embeddings.models import get_encoder
    from ragnb.runs.runner import run_notebooks
    from ragnb.store.engine import connect
    from ragnb.store.loaders import load_file
    from ragnb.store.vectors import embed_table

    tmp = tmp_path_factory.mktemp("team")
    name = f"team_{os.getpid()}"
    mp = pytest.MonkeyPatch()
    mp.setenv("RAGNB_EMBEDDED_DB", name)  # the notebooks' kernels read "the configured database" from here
    db = connect(database=name)
    load_file(db, "chunks", write_bilingual_wiki(tmp / "wiki"), chunk_size=WIKI_CHUNK_SIZE, overlap=0,
              url_template=TEMPLATE)
    load_file(db, "questions", write_wiki_log(tmp / "log.jsonl"))
    e5 = get_encoder("multilingual-e5-small")
    for which in ("chunks", "questions"):
        embed_table(db, which, e5, progress=False)
    dataset = generate_from_real_questions(open_corpus("db", embedding_model="multilingual-e5-small"), backend="memory")
    ds_path = save_dataset(dataset.dataset, tmp / "team_questions.json")
    samples = [{"question": "Как получить доступ к VPN?", "retrieved_contexts": ["Заявку на VPN подают через портал."],
                "response": "Через портал.", "reference": "Заявку подают через портал сервис-деска."},
               {"question": "How do I roll back?", "retrieved_contexts": ["Roll back with the previous image tag."],
                "response": "Use the previous image tag.", "reference": "Roll back with the previous image tag."}]
    samples_path = tmp / "samples.json"
    samples_path.write_text(json.dumps(samples, ensure_ascii=False), encoding="utf-8")
    params = {"corpus": "db", "embedding_model": "multilingual-e5-small", "n_boot": 50,
              "tier1.dataset_path": str(ds_path), "rag_metrics.dataset_path": str(samples_path),
              "domain.n_topics": 2, "domain.n_init": 2}
    try:
        result = run_notebooks(["tier0", "tier1", "real_users", "domain", "rag_metrics"], params,
                               outputs=tmp / "out", log=lambda *_: None)
    finally:
        mp.undo()
        db.dispose()
    return result


@pytest.mark.slow
def test_reports_on_a_teams_data_say_nothing_of_the_demo_and_end_cleanly(team_run):
    assert team_run.failures == []
    pages = {p.name: p.read_text(encoding="utf-8") for p in sorted(team_run.run_dir.glob("*.html"))}
    assert set(pages) == {"index.html", "tier0_embeddings.html", "tier1_retrieval.html", "real_users.html",
                          "domain_analysis.html", "rag_metrics.html"}
    for name, page in pages.items():
        text = visible_text(page)
        assert not DEMO_WORDS.search(text), (name, DEMO_WORDS.search(text))
        assert not re.search(r"\bnan\b", text, flags=re.I), name
        assert "(?)" not in text, name
        assert "MiniLM" not in text and "256 tokens" not in text, name  # MiniLM was not used here
        assert "postgresql" not in text, name  # a database by its name; the URL is in the metrics JSON only
    for stem in ("tier0_embeddings", "tier1_retrieval", "real_users", "domain_analysis", "rag_metrics"):
        page = pages[f"{stem}.html"]
        # the report ends with a labelled link to its metrics file, not a filesystem path
        last = [" ".join(line.split()) for line in visible_text(page).splitlines() if line.strip()][-1]
        assert last == f"metrics JSON: {stem}.metrics.json", (stem, last)
        assert f'<a href="{stem}.metrics.json">{stem}.metrics.json</a>' in page
        assert str(team_run.run_dir) not in last
    assert "from the question log" in visible_text(pages["real_users.html"])
    domain = visible_text(pages["domain_analysis.html"])
    n_log = json.loads((team_run.run_dir / "domain_analysis.metrics.json").read_text())["total_questions"]
    assert f"question log: {n_log} questions, database team_{os.getpid()}" in domain
    metrics = {s: json.loads((team_run.run_dir / f"{s}.metrics.json").read_text()) for s in ("real_users", "domain_analysis")}
    assert metrics["real_users"]["scores_simulated"] is False and metrics["domain_analysis"]["scores_simulated"] is False
    tier0 = visible_text(pages["tier0_embeddings.html"])
    assert "multilingual-e5-small has no input limit: it reads long texts whole (in windows), so nothing is cut." in tier0
    # notes are a wrapped list, not preformatted lines
    assert '<ul class="ragnb-notes"' in pages["real_users.html"]
    assert "1 of 6 questions have no logged URL: excluded from the metrics." in visible_text(pages["real_users.html"])


@pytest.mark.slow
def test_the_summary_names_each_notebooks_own_inputs_on_a_teams_run(team_run):
    record = team_run.record
    own = {}
    for key, stem in (("tier_0_metrics", "tier0_embeddings"), ("tier_1_metrics", "tier1_retrieval"),
                      ("real_user_metrics", "real_users"), ("domain_analysis_metrics", "domain_analysis"),
                      ("other:rag_metrics", "rag_metrics")):
        own[key] = json.loads((team_run.run_dir / f"{stem}.metrics.json").read_text(encoding="utf-8"))
    # Tier 1 scored the team's dataset; rag_metrics its samples file; the others the log and the corpus only
    assert own["tier_1_metrics"]["provenance"]["datasets"][0]["name"] == "from-real-questions"
    n_items = own["tier_1_metrics"]["provenance"]["datasets"][0]["n_items"]
    corpus = own["tier_1_metrics"]["provenance"]["corpora"][0]
    assert corpus["n_chunks"] > 0 and corpus["model"] == "multilingual-e5-small"
    corpus_text = f"ragnb: {corpus['n_chunks']} chunks (md5 {corpus['chunks_md5'][:8]})".replace(
        "ragnb", corpus["database"].split("?")[0].rsplit("/", 1)[1])
    assert record["inputs"] == {
        "tier_0_metrics": {"corpus": corpus_text, "embedding_model": "multilingual-e5-small"},
        "tier_1_metrics": {"dataset": f"from-real-questions ({n_items} items)", "corpus": corpus_text,
                           "embedding_model": "multilingual-e5-small"},
        "real_user_metrics": {"corpus": corpus_text, "embedding_model": "multilingual-e5-small"},
        "domain_analysis_metrics": {"corpus": corpus_text, "embedding_model": "multilingual-e5-small"},
        "other:rag_metrics": {"dataset": "samples.json", "embedding_model": "multilingual-e5-small"},
    }
    lines = record["executive_summary"].splitlines()
    assert lines[1] == (f"Inputs: datasets from-real-questions ({n_items} items), samples.json; corpus {corpus_text}; "
                        "model multilingual-e5-small — which notebook used which: the Inputs table.")
    assert "samples.json" not in lines[0]  # the record's first dataset_file is not Tier 1's
