"""The RAG metric suite over a dataset: offline part, LLM part over HTTP (resumable), inputs, notebook."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import team_wiki
from llm_server import completion

from ragnb.llm import LLMClient, LLMSettings
from ragnb.metrics.fallback import context_utilization, faithfulness_fallback
from ragnb.metrics.text import rouge
from ragnb.tiers.rag_suite import load_rag_dataset, run_rag_suite

SAMPLES = [
    {"id": "a", "user_input": "Where is the Eiffel Tower?", "response": "The Eiffel Tower is in Paris.",
     "retrieved_contexts": ["The Eiffel Tower is a landmark in Paris, France.", "Paris is the capital of France."],
     "reference": "It is in Paris."},
    {"id": "b", "user_input": "What is the capital of Peru?", "response": "The capital of Peru is Madrid.",
     "retrieved_contexts": ["Lima is the capital and largest city of Peru."], "reference": "Lima."},
    {"id": "c", "user_input": "Who wrote War and Peace?", "response": "Leo Tolstoy wrote it.",
     "retrieved_contexts": ["War and Peace is a novel by Leo Tolstoy."], "reference": None},
]


def test_offline_part_equals_the_metric_functions(encoder):
    res = run_rag_suite(SAMPLES, encoder, n_boot=200)
    f = res.per_item
    for s in SAMPLES:
        ref = faithfulness_fallback(s["response"], s["retrieved_contexts"], encoder=encoder)
        assert f.loc[s["id"], "fallback_faithfulness"] == pytest.approx(ref["score"])
        assert f.loc[s["id"], "fallback_faithfulness_method"] == "word_overlap"
        assert f.loc[s["id"], "hallucination_rate"] == pytest.approx(1 - ref["score"])
        assert f.loc[s["id"], "context_utilization"] == context_utilization(s["response"], s["retrieved_contexts"])
    # ROUGE only where a reference exists; "c" has none → NaN, counted.
    assert f.loc["a", "rouge1"] == pytest.approx(rouge(SAMPLES[0]["response"], "It is in Paris.")["rouge1"])
    assert math.isnan(f.loc["c", "rouge1"])
    assert res.summary["rouge1"]["n_failed"] == 1 and res.summary["fallback_faithfulness"]["n_valid"] == 3
    assert res.summary["methods"]["fallback_faithfulness"] == {"word_overlap": 3}
    assert any("not computed" in n for n in res.notes)
    with pytest.raises(ValueError, match="unknown suite metric"):
        run_rag_suite(SAMPLES, encoder, metrics=["faithfulnes"])


def _handler(body):
    prompt = body["messages"][0]["content"]
    first = prompt.splitlines()[0]
    if first.startswith("# Statement extraction"):
        statements = {"Madrid": ["The capital of Peru is Madrid."],
                      "Eiffel": ["The Eiffel Tower is in Paris."]}
        key = "Madrid" if "Madrid" in prompt else "Eiffel"
        return completion(json.dumps({"statements": statements[key]}))
    if first.startswith("# Statement verification"):
        verdict = 0 if "Madrid" in prompt else 1
        return completion(json.dumps({"verdicts": [{"id": 1, "reason": "r", "verdict": verdict}]}))
    return completion("{}")


def test_llm_part_over_http_is_resumable(encoder, llm_server, tmp_path):
    llm_server.set_handler(_handler)
    client = LLMClient(LLMSettings(base_url=llm_server.base_url, api_key="sk-test", cache_dir=None))
    two = SAMPLES[:2]
    res = run_rag_suite(two, encoder, client=client, metrics=["faithfulness"], models=["judge-a"],
                        log_dir=tmp_path, n_boot=200)
    # a: 1 statement supported → 1.0; b: 1 statement, not supported → 0.0; mean 0.5
    assert res.per_item.loc["a", "faithfulness"] == 1.0 and res.per_item.loc["b", "faithfulness"] == 0.0
    assert res.summary["faithfulness"]["mean"] == pytest.approx(0.5)
    assert res.summary["methods"]["faithfulness"] == {"ok": 2}
    sent = len(llm_server.requests)
    assert sent == 4  # 2 calls (statements + verification) per sample
    again = run_rag_suite(two, encoder, client=client, metrics=["faithfulness"], models=["judge-a"],
                          log_dir=tmp_path, n_boot=200)
    assert len(llm_server.requests) == sent  # finished items are read from the log: no new request
    assert again.per_item["faithfulness"].tolist() == res.per_item["faithfulness"].tolist()
    # Another judge model is another fingerprint: scored anew, not reused.
    run_rag_suite(two, encoder, client=client, metrics=["faithfulness"], models=["judge-b"], log_dir=tmp_path)
    assert len(llm_server.requests) == sent + 4


def test_dataset_files(tmp_path):
    good = tmp_path / "s.jsonl"
    good.write_text("\n".join(json.dumps(s) for s in SAMPLES) + "\n")
    assert [s["id"] for s in load_rag_dataset(good)] == ["a", "b", "c"]
    arr = tmp_path / "s.json"
    arr.write_text(json.dumps([{"question": "q?", "contexts": ["c"], "answer": "x", "ground_truth": "y"}]))
    assert load_rag_dataset(arr) == [{"id": "0", "user_input": "q?", "retrieved_contexts": ["c"],
                                      "response": "x", "reference": "y"}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(SAMPLES[0]) + "\n" + json.dumps({**SAMPLES[1], "retrieved_contexts": "one"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: field 'retrieved_contexts'"):
        load_rag_dataset(bad)
    bad.write_text(json.dumps(SAMPLES[0]) + "\n" + json.dumps(SAMPLES[0]) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: field 'id': 'a' is repeated \(first at .*bad.jsonl:1\)"):
        load_rag_dataset(bad)
    bad.write_text(json.dumps({**SAMPLES[0], "response": ""}) + "\n")
    with pytest.raises(ValueError, match=r":1: field 'response'"):
        load_rag_dataset(bad)


@pytest.mark.slow
def test_notebook_offline_on_a_dataset_file(tmp_path):
    from ragnb.runs.runner import run_notebooks

    data = tmp_path / "samples.jsonl"
    data.write_text("\n".join(json.dumps(s) for s in SAMPLES) + "\n")
    result = run_notebooks(["rag_metrics"], {"dataset_path": str(data), "n_boot": 100}, outputs=tmp_path / "out",
                           log=lambda *_: None)
    assert result.failures == []
    metrics = json.loads((result.run_dir / "rag_metrics.metrics.json").read_text())
    assert metrics["judge_backend"] == "offline-fallback"
    assert metrics["fallback_faithfulness"]["n"] == 3 and "faithfulness" not in metrics
    assert metrics["methods"]["fallback_faithfulness"] == {"word_overlap": 3}
    html = (result.run_dir / "rag_metrics.html").read_text()
    assert "offline-fallback" in html
    assert np.isfinite(metrics["hallucination_rate"]["mean"])


def test_answer_model_uses_the_llm_or_says_why_not(llm_server, monkeypatch):
    from ragnb.llm import LLMClient, LLMSettings
    from ragnb.tiers.rag_suite import answer_model

    monkeypatch.delenv("RAGNB_GENERATION_MODEL", raising=False)
    client = LLMClient(LLMSettings(base_url=llm_server.base_url, cache_dir=None))
    assert answer_model(client, "gen-x") == ("gen-x", None)
    model, note = answer_model(client, "")
    assert model == "" and "no generation model was given" in note and "RAGNB_GENERATION_MODEL" in note
    monkeypatch.setenv("RAGNB_GENERATION_MODEL", "gen-env")
    assert answer_model(client, "") == ("gen-env", None)
    model, note = answer_model(None, "gen-x")
    assert model == "" and "no LLM endpoint is configured" in note


# --------------------------------------------------------------------------------------------
# A team's own questions: corpus "db" without a samples file
# --------------------------------------------------------------------------------------------

# The bilingual wiki's log with the answers production gave (w5, w6: none logged — no reference).
ANSWERED_LOG = [{**row, "answer": answer} for row, answer in zip(team_wiki.WIKI_LOG, [
    "Заявку подают через портал сервис-деска.", "Двадцать восемь дней.", "Merge to the main branch.",
    "Roll back with the previous image tag.", None, None])]


@pytest.fixture
def team_db(encoder, tmp_path, monkeypatch):
    """The bilingual team wiki and its question log in a database of their own, which the notebook's kernel reads
    as the configured database (``corpus db``)."""
    import os

    from ragnb.store.engine import connect
    from ragnb.store.loaders import load_file
    from ragnb.store.vectors import embed_table

    name = f"rqlog_{os.getpid()}_{tmp_path.name[-12:].replace('-', '_')}"
    monkeypatch.setenv("RAGNB_EMBEDDED_DB", name)
    db = connect(database=name)
    load_file(db, "chunks", team_wiki.write_bilingual_wiki(tmp_path / "wiki"), chunk_size=team_wiki.WIKI_CHUNK_SIZE,
              overlap=0, url_template=team_wiki.TEMPLATE)
    load_file(db, "questions", team_wiki.write_log(tmp_path / "log.jsonl", ANSWERED_LOG))
    embed_table(db, "chunks", encoder, progress=False)  # the baseline retrieves over the chunks
    embed_table(db, "questions", encoder, progress=False)  # for `ragnb dataset from-real-questions`; rag_metrics needs none
    yield db
    db.dispose()


def test_question_log_dataset_names_items_as_from_real_questions(team_db):
    from ragnb.datasets.real_questions import question_log_dataset

    ds = question_log_dataset(team_db)
    assert [it.id for it in ds.items] == [f"rq-w{k}" for k in range(1, 7)]
    assert [it.question for it in ds.items] == [r["question"] for r in ANSWERED_LOG]
    assert [it.ground_truth_answer for it in ds.items] == [r["answer"] for r in ANSWERED_LOG]
    assert ds.items[0].confluence_url == team_wiki.WIKI_LOG[0]["url"] and ds.items[5].confluence_url is None
    assert ds.items[0].model_extra == {"question_answer_id": "w1", "user_score": 5}
    assert ds.metadata["counts"] == {"questions": 6, "without_question": 0, "without_answer": 2}
    assert [it.id for it in question_log_dataset(team_db, 2).items] == ["rq-w1", "rq-w2"]
    with pytest.raises(ValueError, match="max_questions"):
        question_log_dataset(team_db, -1)


@pytest.mark.slow
def test_notebook_scores_the_databases_questions(team_db, tmp_path):
    from ragnb.runs.runner import run_notebooks

    result = run_notebooks(["rag_metrics"], {"corpus": "db", "max_items": 0, "n_boot": 50}, outputs=tmp_path / "out",
                           log=lambda *_: None)
    assert result.failures == [], result.reports
    metrics = json.loads((result.run_dir / "rag_metrics.metrics.json").read_text(encoding="utf-8"))
    per_item = pd.read_csv(result.run_dir / "rag_metrics.per_item.csv")
    # every logged question answered by the extractive baseline and scored
    assert per_item["id"].tolist() == [f"rq-w{k}" for k in range(1, 7)]
    for name in ("fallback_faithfulness", "hallucination_rate", "context_utilization"):
        assert (metrics[name]["n"], metrics[name]["n_valid"], metrics[name]["n_failed"]) == (6, 6, 0), name
    # extractive answers are context sentences: fully supported (word overlap) and contained in the context
    assert per_item["fallback_faithfulness"].tolist() == [1.0] * 6
    assert per_item["context_utilization"].tolist() == [1.0] * 6
    assert metrics["methods"]["fallback_faithfulness"] == {"word_overlap": 6}
    # the reference is the logged answer: 4 rows have one, the 2 without are counted, not dropped
    assert (metrics["rouge1"]["n"], metrics["rouge1"]["n_valid"], metrics["rouge1"]["n_failed"]) == (6, 4, 2)
    assert per_item.set_index("id")["rouge1"].isna().tolist() == [False] * 4 + [True] * 2
    assert any("answer logged in production" in n and "4 question(s)" in n for n in metrics["notes"])
    assert any("extractive" in n for n in metrics["notes"])
    assert metrics["provenance"]["datasets"][0]["name"] == "question_log"
    assert metrics["provenance"]["datasets"][0]["n_items"] == 6
    html = (result.run_dir / "rag_metrics.html").read_text(encoding="utf-8")
    assert "question_log (6 questions)" in html and "Как получить доступ к VPN?" in html


    # What `ragnb dataset from-real-questions` writes is answered the same way (questions_path)
    from click.testing import CliRunner

    from ragnb.cli.main import build_cli

    written = tmp_path / "rq.json"
    res = CliRunner().invoke(build_cli(), ["dataset", "from-real-questions", "--corpus", "db", "--max-questions", "3",
                                           "--output", str(written)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    again = run_notebooks(["rag_metrics"], {"corpus": "db", "questions_path": str(written), "n_boot": 50},
                          outputs=tmp_path / "out2", log=lambda *_: None)
    assert again.failures == [], again.reports
    rq = json.loads((again.run_dir / "rag_metrics.metrics.json").read_text(encoding="utf-8"))
    assert pd.read_csv(again.run_dir / "rag_metrics.per_item.csv")["id"].tolist() == ["rq-w1", "rq-w2", "rq-w3"]
    assert (rq["fallback_faithfulness"]["n"], rq["rouge1"]["n_valid"]) == (3, 3)
    assert rq["provenance"]["datasets"][0]["name"] == "rq" and rq["provenance"]["datasets"][0]["n_items"] == 3


def test_partial_jury_is_counted_in_n_partial(encoder, llm_server, tmp_path):
    """judge-b fails on sample b (no usable reply after the re-asks), judge-a answers: b is a partial jury."""
    def handler(body):
        if body["model"] == "judge-b" and "Madrid" in body["messages"][0]["content"]:
            return completion("no json here")
        return _handler(body)

    llm_server.set_handler(handler)
    client = LLMClient(LLMSettings(base_url=llm_server.base_url, api_key="sk-test", cache_dir=None))
    res = run_rag_suite(SAMPLES[:2], encoder, client=client, metrics=["faithfulness"],
                        models=["judge-a", "judge-b"], n_boot=0)
    # a: both models 1.0 → 1.0 (ok); b: judge-a 0.0, judge-b failed → 0.0 (partial, kept)
    assert res.per_item["faithfulness"].tolist() == [1.0, 0.0]
    assert res.per_item["faithfulness_status"].tolist() == ["ok", "partial"]
    s = res.summary["faithfulness"]
    assert (s["n"], s["n_valid"], s["n_failed"], s["n_partial"]) == (2, 2, 0, 1)
    assert res.summary["methods"]["faithfulness"] == {"ok": 1, "partial": 1}
    written = json.loads(res.write(tmp_path, "rag_metrics").read_text(encoding="utf-8"))  # the metrics JSON
    assert written["faithfulness"]["n_partial"] == 1
