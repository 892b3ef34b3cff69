"""``ragnb dataset …`` end to end (see docs/datasets.md): synthetic against the scripted LLM server, real questions on a
tiny corpus in the embedded database, annotation export/import, the judge-pipeline dataset, and bad inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from llm_server import completion, think

from ragnb.cli.main import build_cli
from ragnb.datasets.schema import Dataset, DatasetItem, load_dataset, save_dataset
from ragnb.datasets.synthetic import sample_positions
from ragnb.store.loaders import insert_rows
from ragnb.store.vectors import embed_table

# Nine embedded chunks; c1 and c2 are the same Confluence page (id 100) written in two url forms.
CHUNKS = [
    {"id": "c1", "text": "Paris is the capital of France.", "url": "https://wiki.example.com/pages/viewpage.action?pageId=100"},
    {"id": "c2", "text": "The Eiffel Tower in Paris was completed in 1889.", "url": "https://wiki.example.com/display/TRAVEL/Paris?pageId=100"},
    {"id": "c3", "text": "The Nile is the longest river in Africa.", "url": "https://wiki.example.com/pages/200/Nile"},
    {"id": "c4", "text": "Mount Everest is the highest mountain on Earth.", "url": "http://wiki.example.com/pages/300/Everest/"},
    {"id": "c5", "text": "Photosynthesis converts light energy into chemical energy in plants.", "url": "https://wiki.example.com/pages/400/Photo"},
    {"id": "c6", "text": "The Amazon rainforest produces a large share of the world's oxygen.", "url": "https://wiki.example.com/pages/500/Amazon"},
    {"id": "c7", "text": "Python is a programming language created by Guido van Rossum.", "url": "https://wiki.example.com/pages/600/Python"},
    {"id": "c8", "text": "The Great Wall of China is thousands of kilometres long.", "url": "https://wiki.example.com/pages/700/Wall"},
    {"id": "c9", "text": "Bananas are rich in potassium.", "url": None},
]
# Loaded after embedding: no vector, so neither retrievable nor relevant.
LATE_CHUNK = {"id": "c10", "text": "The Colosseum is in Rome.", "url": "https://wiki.example.com/pages/800/Rome"}
QUESTIONS = [
    {"id": "q1", "question": "What is the capital of France?", "answer": "Paris.",
     "url": "https://wiki.example.com/pages/100/Paris", "score": 5},
    {"id": "q2", "question": "Which river is the longest in Africa?", "answer": "The Nile.",
     "url": "https://wiki.example.com/pages/viewpage.action?pageId=200", "score": 4},
    {"id": "q3", "question": "Who created the Python programming language?", "answer": "Guido van Rossum.",
     "url": "https://wiki.example.com/pages/300/Everest", "score": 5},  # logged url names the wrong page
    {"id": "q4", "question": "Are bananas healthy?", "answer": "Yes.", "url": None, "score": 5},
    {"id": "q5", "question": "Where is the Colosseum?", "answer": "In Rome.",
     "url": "https://wiki.example.com/pages/800/Rome", "score": 3},  # its page's only chunk has no vector
    {"id": "q6", "question": "What is the highest mountain on Earth?", "answer": None,
     "url": "https://WIKI.example.com/pages/300/Everest#top", "score": 5},
]
LATE_QUESTION = {"id": "q7", "question": "How long is the Great Wall?", "answer": "Very long.",
                 "url": "https://wiki.example.com/pages/700/Wall", "score": 5}

FAKE_KEY = "-".join(("test", "key"))  # assembled at run time: no key-like literal in the sources


@pytest.fixture(scope="module")
def corpus_db(encoder):
    """The tiny corpus + question log in its own database (module scope: embedding it once is enough)."""
    from ragnb.store.engine import connect

    name = "dsmodes_corpus"
    db = connect(database=name)
    insert_rows(db, "chunks", CHUNKS)
    insert_rows(db, "questions", QUESTIONS)
    embed_table(db, "chunks", encoder, progress=False)
    embed_table(db, "questions", encoder, progress=False)
    insert_rows(db, "chunks", [LATE_CHUNK])
    insert_rows(db, "questions", [LATE_QUESTION])
    yield name, db
    db.dispose()


def _invoke(args: list[str], env: dict | None = None):
    return CliRunner().invoke(build_cli(), ["dataset", *args], env=env or {}, catch_exceptions=False)


def _report(output: str) -> dict:
    """The JSON report a command printed last."""
    return json.loads(output[output.rindex("\n{") + 1:])


def _written(res) -> Path:
    m = re.search(r"^wrote (.+)$", res.stdout, re.M)
    assert m, res.output
    return Path(m.group(1))


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*")) if folder.exists() else []


# --------------------------------------------------------------------------------------------
# from-real-questions / from-real-questions-score-5
# --------------------------------------------------------------------------------------------


def _peer_top(encoder, question: str, k: int) -> tuple[list[str], list[float]]:
    """Exact cosine top-k computed independently with numpy over the embedded chunks."""
    ids = [c["id"] for c in CHUNKS]
    m = encoder.encode([c["text"] for c in CHUNKS])
    q = encoder.encode([question])[0]
    sims = m @ q / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    order = sorted(range(len(ids)), key=lambda i: (-sims[i], ids[i]))[:k]
    return [ids[i] for i in order], [float(sims[i]) for i in order]


def test_from_real_questions_end_to_end(corpus_db, encoder, tmp_path):
    name, _ = corpus_db
    res = _invoke(["from-real-questions", "--max-questions", "0", "--corpus", "db", "--out-dir", str(tmp_path)],
                  {"RAGNB_EMBEDDED_DB": name})
    assert res.exit_code == 0, res.output
    path = _written(res)
    assert re.fullmatch(r"dataset_from_real_questions_\d{8}_\d{6}\.json", path.name)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["type"] == "real-users" and raw["name"] == path.stem
    meta = raw["metadata"]
    assert meta["mode"] == "from-real-questions" and meta["embedding_model"] == "all-MiniLM-L6-v2"
    assert name in meta["source_db"] and meta["retrieval"] == {"backend": "pgvector-exact", "top_k": 5}
    items = {it["id"]: it for it in raw["items"]}
    assert list(items) == ["rq-q1", "rq-q2", "rq-q3", "rq-q4", "rq-q5", "rq-q6"]  # q7 has no vector

    # Retrieval agrees with an independent numpy cosine top-5 (pgvector returns float32 similarities).
    for q in QUESTIONS:
        ids, sims = _peer_top(encoder, q["question"], 5)
        it = items["rq-" + q["id"]]
        assert it["retrieved_chunk_ids"] == ids
        assert it["retrieved_similarities"] == pytest.approx(sims, abs=1e-4)

    # Relevant ids: every embedded chunk of the logged page, whatever the url form.
    assert items["rq-q1"]["relevant_chunk_ids"] == ["c1", "c2"]
    assert items["rq-q2"]["relevant_chunk_ids"] == ["c3"]
    assert items["rq-q3"]["relevant_chunk_ids"] == ["c4"]
    assert items["rq-q4"]["relevant_chunk_ids"] == []  # no url: kept, marked
    assert items["rq-q5"]["relevant_chunk_ids"] == []  # the page's only chunk is not embedded
    assert items["rq-q6"]["relevant_chunk_ids"] == ["c4"]
    # The capital / the Nile / Everest questions find their page at rank 1.
    for qid in ("rq-q1", "rq-q2", "rq-q6"):
        assert items[qid]["is_relevant_chunk_matched"] is True and items[qid]["relevant_rank"] == 1
    text = {c["id"]: c["text"] for c in CHUNKS}
    # The fixed context (Tier 2) is the logged page's chunks, never the retrieval's pick.
    assert items["rq-q1"]["chunk_text"] == text["c1"] + "\n\n" + text["c2"] and items["rq-q1"]["chunk_id"] == "c1"
    assert items["rq-q1"]["context_chunk_ids"] == ["c1", "c2"] and items["rq-q1"]["relevance_unit"] == "page"
    assert items["rq-q2"]["chunk_text"] == text["c3"] and items["rq-q6"]["chunk_text"] == text["c4"]
    assert items["rq-q4"]["is_relevant_chunk_matched"] is None
    assert items["rq-q5"]["is_relevant_chunk_matched"] is False
    # q3 (Python question, Everest page): retrieval's top-1 is the Python chunk, the fixed context is Everest's.
    peer_ids, _ = _peer_top(encoder, QUESTIONS[2]["question"], 5)
    assert items["rq-q3"]["is_relevant_chunk_matched"] is ("c4" in peer_ids) and peer_ids[0] == "c7"
    assert items["rq-q3"]["chunk_id"] == "c4" and items["rq-q3"]["chunk_text"] == text["c4"]
    for qid in ("rq-q4", "rq-q5"):  # no relevant chunk: no fixed context
        assert "chunk_id" not in items[qid] and "chunk_text" not in items[qid]
    # Logged fields.
    assert items["rq-q1"]["ground_truth_answer"] == "Paris." and items["rq-q1"]["user_score"] == 5
    assert items["rq-q1"]["question_answer_id"] == "q1" and items["rq-q1"]["confluence_url"] == QUESTIONS[0]["url"]
    assert "ground_truth_answer" not in items["rq-q6"] and "confluence_url" not in items["rq-q4"]
    assert items["rq-q1"]["source"] == "question_log" and items["rq-q1"]["question_source"] == "user"

    matched = 3 + ("c4" in peer_ids)
    expected = {"items": 6, "matched": matched, "not_matched": 5 - matched, "matched_rate": matched / 5,
                "without_url": 1, "url_not_in_corpus": 1, "without_fixed_context": 2, "without_answer": 1,
                "skipped_without_embedding": 1,
                "chunks_with_embeddings": 9}
    assert meta["counts"] == expected
    assert {k: v for k, v in _report(res.stdout).items() if k not in ("path", "type")} == expected
    assert "1 question(s) have no logged url" in res.stderr
    err = " ".join(res.stderr.split())  # q5's page has no embedded chunk: how many matched, both sides, the fix
    assert "4 of 5 logged question URLs match a chunk URL; e.g. logged 'https://wiki.example.com/pages/800/Rome'" in err
    assert "--url-template" in err

    # Loads back; Tier 1's qrels: the url-less and not-in-corpus questions have no relevant chunk (undefined).
    ds = load_dataset(path)
    qrels = ds.qrels()
    assert qrels["rq-q1"] == {"c1": 1, "c2": 1} and qrels["rq-q4"] == {} and qrels["rq-q5"] == {}
    from ragnb.datasets.corpus import open_dataset

    assert [it.id for it in open_dataset(str(path), "db", max_questions=2).items] == ["rq-q1", "rq-q2"]


def test_score_5_filter_limit_top_k_and_memory_backend(corpus_db, tmp_path):
    name, _ = corpus_db
    env = {"RAGNB_EMBEDDED_DB": name}
    res = _invoke(["from-real-questions-score-5", "--max-questions", "0", "--out-dir", str(tmp_path)], env)
    assert res.exit_code == 0, res.output
    path = _written(res)
    assert path.name.startswith("dataset_from_real_questions_score_5_")
    raw = json.loads(path.read_text(encoding="utf-8"))
    # Score 5 with a vector: q1, q3, q4, q6 (q7 also scores 5 but has no vector; q2 = 4, q5 = 3).
    assert [it["id"] for it in raw["items"]] == ["rq-q1", "rq-q3", "rq-q4", "rq-q6"]
    assert all(it["user_score"] == 5 for it in raw["items"])
    assert raw["metadata"]["mode"] == "from-real-questions-score-5" and raw["metadata"]["exact_score"] == 5
    assert raw["metadata"]["counts"]["skipped_without_embedding"] == 1
    assert raw["metadata"]["counts"]["without_url"] == 1

    # --max-questions keeps the first N by id; --top-k 1 makes q3 certainly unmatched (top-1 is the Python chunk).
    out = tmp_path / "top1.json"
    res = _invoke(["from-real-questions", "--max-questions", "3", "--top-k", "1", "--backend", "memory",
                   "--output", str(out)], env)
    assert res.exit_code == 0, res.output
    raw = json.loads(out.read_text(encoding="utf-8"))
    assert [it["id"] for it in raw["items"]] == ["rq-q1", "rq-q2", "rq-q3"]
    assert [it["retrieved_chunk_ids"] for it in raw["items"]] == [["c1"], ["c3"], ["c7"]]
    assert [it["is_relevant_chunk_matched"] for it in raw["items"]] == [True, True, False]
    assert raw["items"][2]["chunk_id"] == "c4" and raw["items"][2]["relevant_rank"] is None
    assert raw["metadata"]["retrieval"] == {"backend": "memory-exact", "top_k": 1}
    assert raw["metadata"]["counts"]["matched_rate"] == pytest.approx(2 / 3)


# --------------------------------------------------------------------------------------------
# synthetic
# --------------------------------------------------------------------------------------------


def _chunk_of(request_body: dict) -> str:
    prompt = request_body["messages"][0]["content"]
    return next(c["id"] for c in CHUNKS if c["text"] in prompt)


def _scripted(body: dict):
    cid = _chunk_of(body)
    turn = len(body["messages"])  # 1 = first ask, 3 = first re-ask, 5 = second re-ask
    if cid == "c3" or (cid == "c2" and turn == 1):
        return completion("Sure! Here is a good question about the text.")
    if cid == "c4":  # a reasoning model: the draft inside <think> is never the item
        return completion(think(json.dumps({"question": "Draft?", "answer": "Draft."}),
                                json.dumps({"question": f"Question about {cid}?", "answer": f"Answer from {cid}."})))
    return completion(json.dumps({"question": f"Question about {cid}?", "answer": f"Answer from {cid}."}))


@pytest.fixture
def llm_env(llm_server, monkeypatch, corpus_db):
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("RAGNB_LLM_API_KEY", FAKE_KEY)
    monkeypatch.setenv("RAGNB_LLM_CACHE_DIR", "off")
    monkeypatch.setenv("RAGNB_EMBEDDED_DB", corpus_db[0])
    monkeypatch.delenv("RAGNB_GENERATION_MODEL", raising=False)
    monkeypatch.delenv("RAGNB_JUDGE_MODELS", raising=False)
    llm_server.set_handler(_scripted)
    return llm_server


def test_synthetic_end_to_end(llm_env, tmp_path):
    res = _invoke(["synthetic", "--max-questions", "20", "--language", "en", "--model", "gen-model",
                   "--corpus", "db", "--out-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    path = _written(res)
    assert re.fullmatch(r"dataset_synthetic_\d{8}_\d{6}\.json", path.name)
    raw = json.loads(path.read_text(encoding="utf-8"))
    # All nine embedded chunks (20 ≥ 9), c10 has no vector; c3 never got JSON → failed, listed, not an item.
    ids = [it["id"] for it in raw["items"]]
    assert ids == ["syn-c1", "syn-c2", "syn-c4", "syn-c5", "syn-c6", "syn-c7", "syn-c8", "syn-c9"]
    c2 = raw["items"][1]
    assert c2 == {"id": "syn-c2", "question": "Question about c2?", "ground_truth_answer": "Answer from c2.",
                  "chunk_id": "c2", "chunk_text": CHUNKS[1]["text"], "confluence_url": CHUNKS[1]["url"],
                  "relevant_chunk_ids": ["c2"], "source": "synthetic", "question_source": "llm",
                  "generation_model": "gen-model"}
    assert "confluence_url" not in raw["items"][-1]  # c9 has no url
    meta = raw["metadata"]
    assert meta["mode"] == "synthetic" and meta["generation_model"] == "gen-model" and meta["language"] == "en"
    assert meta["llm_endpoint"] == llm_env.base_url and FAKE_KEY not in path.read_text(encoding="utf-8")
    # re-asks: 1 for c2 (recovered) + 2 for c3 (failed) — every re-ask counted
    assert meta["counts"] == {"chunks_with_embeddings": 9, "chunks_selected": 9, "items": 8, "failed": 1, "reasks": 3}
    assert raw["items"][2]["question"] == "Question about c4?" and "Draft" not in path.read_text(encoding="utf-8")
    assert [f["chunk_id"] for f in meta["failures"]] == ["c3"] and "no usable JSON" in meta["failures"][0]["reason"]
    assert "1 of 9 chunks got no usable question" in res.stderr

    # Requests: 7 chunks × 1, c2 × 2 (one re-ask), c3 × 3 (first ask + reask_budget 2).
    reqs = llm_env.chat_requests
    assert len(reqs) == 12 and meta["llm_usage"]["http_requests"] == 12
    per_chunk = {}
    for r in reqs:
        per_chunk.setdefault(_chunk_of(r.body), []).append(r)
        assert r.body["model"] == "gen-model" and r.body["temperature"] == 0.0
        assert r.headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert {k: len(v) for k, v in per_chunk.items()} == {"c1": 1, "c2": 2, "c3": 3, "c4": 1, "c5": 1, "c6": 1,
                                                         "c7": 1, "c8": 1, "c9": 1}
    first = per_chunk["c1"][0].body["messages"]
    assert len(first) == 1 and first[0]["role"] == "user"
    assert "write the question and the answer in English" in first[0]["content"]
    assert "<<<\n" + CHUNKS[0]["text"] + "\n>>>" in first[0]["content"]
    reask = max(per_chunk["c2"], key=lambda r: len(r.body["messages"])).body["messages"]
    assert [m["role"] for m in reask] == ["user", "assistant", "user"]
    assert reask[1]["content"] == "Sure! Here is a good question about the text."
    assert load_dataset(path).qrels()["syn-c2"] == {"c2": 1}


def test_synthetic_seeded_sample_russian_prompt_and_env_model(llm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_JUDGE_MODELS", "judge-a, judge-b")  # no --model: the first judge model
    outs = []
    for n, seed in enumerate((7, 7, 8)):
        out = tmp_path / f"s{n}.json"
        res = _invoke(["synthetic", "--max-questions", "3", "--seed", str(seed), "--language", "ru", "--corpus", "db",
                       "--output", str(out)])
        assert res.exit_code == 0, res.output
        outs.append(json.loads(out.read_text(encoding="utf-8")))
    ids = sorted(c["id"] for c in CHUNKS)  # the sample is drawn from the sorted embedded chunk ids
    expected = [f"syn-{ids[i]}" for i in sample_positions(9, 3, 7)]
    chosen = [[it["id"] for it in o["items"]] + [f"syn-{f['chunk_id']}" for f in o["metadata"]["failures"]] for o in outs]
    assert sorted(chosen[0]) == sorted(expected) and chosen[0] == chosen[1]
    assert sorted(chosen[2]) != sorted(chosen[0])  # another seed, another sample
    assert sorted(np.random.default_rng(7).choice(9, 3, replace=False).tolist()) == sample_positions(9, 3, 7)
    assert all(o["metadata"]["generation_model"] == "judge-a" for o in outs)
    assert all(r.body["model"] == "judge-a" for r in llm_env.chat_requests)
    assert "пиши вопрос и ответ на русском языке" in llm_env.chat_requests[0].body["messages"][0]["content"]


def test_synthetic_without_endpoint_stops_and_writes_nothing(monkeypatch, tmp_path):
    for name in ("RAGNB_LLM_BASE_URL", "RAGNB_LLM_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    out_dir = tmp_path / "out"
    res = _invoke(["synthetic", "--max-questions", "2", "--model", "m", "--out-dir", str(out_dir)])
    assert res.exit_code == 2
    assert "RAGNB_LLM_BASE_URL" in res.stderr and "RAGNB_LLM_API_KEY" in res.stderr
    assert _files(out_dir) == []


def test_synthetic_without_model_name(llm_env, tmp_path):
    res = _invoke(["synthetic", "--max-questions", "2", "--out-dir", str(tmp_path)])
    assert res.exit_code == 2 and "--model" in res.stderr and "RAGNB_GENERATION_MODEL" in res.stderr
    assert _files(tmp_path) == [] and llm_env.chat_requests == []


# --------------------------------------------------------------------------------------------
# export-annotation / import-annotation
# --------------------------------------------------------------------------------------------


def _item(i: int, **kw) -> DatasetItem:
    base = {"id": f"a{i}", "question": f"Question {i}?", "ground_truth_answer": f"Answer {i}.", "chunk_id": f"k{i}",
            "chunk_text": f"Text {i}.", "confluence_url": f"https://wiki/pages/{i}", "relevant_chunk_ids": [f"k{i}"]}
    return DatasetItem.model_validate({**base, **kw})


@pytest.fixture
def source_dataset(tmp_path) -> Path:
    items = [_item(i) for i in range(1, 10)]
    items[3] = _item(4, relevant_chunk_ids=["k4", "k5"])
    # a9 in the original layout: no relevant_chunk_ids, its chunk_id is the relevant chunk.
    items[8] = DatasetItem(id="a9", question="Question 9?", ground_truth_answer="Answer 9.", chunk_id="k9",
                           chunk_text="Text 9.")
    ds = Dataset(name="src", type="synthetic", items=items, metadata={"mode": "synthetic", "counts": {"items": 9}})
    return save_dataset(ds, tmp_path / "src.json")


def _export(path: Path, out_dir: Path) -> tuple[Path, dict]:
    res = _invoke(["export-annotation", "--dataset", str(path), "--out-dir", str(out_dir)])
    assert res.exit_code == 0, res.output
    ann = _written(res)
    return ann, json.loads(ann.read_text(encoding="utf-8"))


REVIEW = {  # item → review values and in-place corrections
    "a1": {"is_question_ok": False},
    "a2": {"is_question_ok": True, "is_answer_ok": False},
    "a3": {"is_answer_ok": False, "ground_truth_answer": "Corrected answer 3."},
    "a4": {"is_chunk_ok": False},  # k4 leaves [k4, k5]
    "a5": {"is_chunk_ok": False, "notes": "wrong chunk"},  # nothing left → dropped
    "a6": {"is_question_ok": True, "is_answer_ok": True, "is_chunk_ok": True, "is_confluence_url_ok": False},
    # a7: not reviewed
    # a8: ids other items exported (an id that neither the file nor the corpus has is refused)
    "a8": {"is_chunk_ok": False, "relevant_chunk_ids": ["k9", "k7"], "is_confluence_url_ok": False,
           "confluence_url": "https://wiki/pages/80"},
    "a9": {"is_question_ok": True, "is_answer_ok": True, "is_chunk_ok": True, "is_confluence_url_ok": True},
}


def _reviewed(ann: Path, raw: dict) -> Path:
    for it in raw["items"]:
        it.update(REVIEW.get(it["id"], {}))
    ann.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    return ann


def test_export_annotation_adds_review_fields(source_dataset, tmp_path):
    ann, raw = _export(source_dataset, tmp_path / "ann")
    assert re.fullmatch(r"dataset_export_annotation_\d{8}_\d{6}\.json", ann.name) and raw["type"] == "annotation"
    for it in raw["items"]:
        assert [it[f] for f in ("is_question_ok", "is_answer_ok", "is_chunk_ok", "is_confluence_url_ok")] == [None] * 4
        assert it["notes"] == ""
    # a9 had no relevant_chunk_ids: its effective one (the chunk_id) is written out so a reviewer can edit it.
    assert raw["items"][8]["relevant_chunk_ids"] == ["k9"] and raw["items"][3]["relevant_chunk_ids"] == ["k4", "k5"]
    meta = raw["metadata"]
    assert meta["mode"] == "export-annotation" and meta["source_type"] == "synthetic"
    assert meta["source_dataset"] == str(source_dataset) and meta["source_metadata"]["mode"] == "synthetic"
    assert meta["review_baseline"]["a3"] == {"ground_truth_answer": "Answer 3.", "relevant_chunk_ids": ["k3"],
                                             "confluence_url": "https://wiki/pages/3", "chunk_id": "k3"}
    assert meta["counts"] == {"items": 9, "already_reviewed": 0}
    assert load_dataset(ann).qrels() == load_dataset(source_dataset).qrels()

    # Re-exporting a half-reviewed file keeps the review values and the original baseline.
    _reviewed(ann, raw)
    ann2, raw2 = _export(ann, tmp_path / "ann2")
    assert raw2["items"][0]["is_question_ok"] is False and raw2["items"][2]["ground_truth_answer"] == "Corrected answer 3."
    assert raw2["metadata"]["review_baseline"]["a3"]["ground_truth_answer"] == "Answer 3."
    assert raw2["metadata"]["counts"]["already_reviewed"] == 8
    assert raw2["metadata"]["source_dataset"] == str(source_dataset)


def test_import_annotation_applies_the_review(source_dataset, tmp_path):
    ann, raw = _export(source_dataset, tmp_path / "ann")
    _reviewed(ann, raw)
    res = _invoke(["import-annotation", "--annotation", str(ann), "--out-dir", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    path = _written(res)
    assert re.fullmatch(r"dataset_import_annotation_\d{8}_\d{6}\.json", path.name)
    report = _report(res.stdout)
    expected = {
        "annotation": str(ann), "items_in": 9, "kept": 6, "dropped": 3,
        "dropped_by_reason": {"answer_rejected": 1, "chunk_rejected": 1, "question_rejected": 1},
        "dropped_items": [{"id": "a1", "index": 0, "reasons": ["question_rejected"]},
                          {"id": "a2", "index": 1, "reasons": ["answer_rejected"]},
                          {"id": "a5", "index": 4, "reasons": ["chunk_rejected"]}],
        "status": {"accepted": 1, "adjusted": 2, "fixed": 2, "unreviewed": 1},
        "fixed": {"confluence_url": 1, "ground_truth_answer": 1, "relevant_chunk_ids": 1}, "fixed_items": ["a3", "a8"],
        "adjusted": {"chunk_removed": 1, "chunk_text_cleared": 2, "url_cleared": 1}, "unreviewed": 1,
        "removed_from_file": [],
    }
    assert {k: report[k] for k in expected} == expected
    raw_out = json.loads(path.read_text(encoding="utf-8"))
    assert raw_out["type"] == "manual" and raw_out["metadata"]["counts"] == expected
    items = {it["id"]: it for it in raw_out["items"]}
    assert list(items) == ["a3", "a4", "a6", "a7", "a8", "a9"]
    assert items["a3"]["ground_truth_answer"] == "Corrected answer 3." and items["a3"]["review_status"] == "fixed"
    assert items["a4"]["relevant_chunk_ids"] == ["k5"] and items["a4"]["chunk_id"] == "k5"
    assert "chunk_text" not in items["a4"] and items["a4"]["review_status"] == "adjusted"
    assert "confluence_url" not in items["a6"] and items["a6"]["review_status"] == "adjusted"
    assert items["a7"]["review_status"] == "unreviewed" and items["a7"]["is_question_ok"] is None
    assert items["a8"]["relevant_chunk_ids"] == ["k9", "k7"] and items["a8"]["chunk_id"] == "k9"
    assert items["a8"]["confluence_url"] == "https://wiki/pages/80" and "chunk_text" not in items["a8"]
    assert items["a9"]["review_status"] == "accepted" and items["a9"]["chunk_text"] == "Text 9."
    qrels = load_dataset(path).qrels()
    assert qrels["a4"] == {"k5": 1} and qrels["a8"] == {"k9": 1, "k7": 1} and qrels["a9"] == {"k9": 1}


def test_import_keep_rejected_and_drop_unreviewed(source_dataset, tmp_path):
    ann, raw = _export(source_dataset, tmp_path / "ann")
    _reviewed(ann, raw)
    res = _invoke(["import-annotation", "--annotation", str(ann), "--keep-rejected", "--output", str(tmp_path / "k.json")])
    assert res.exit_code == 0, res.output
    items = {it["id"]: it for it in json.loads((tmp_path / "k.json").read_text(encoding="utf-8"))["items"]}
    assert len(items) == 9 and _report(res.stdout)["status"]["rejected"] == 3
    assert items["a1"]["review_status"] == "rejected" and items["a1"]["review_reasons"] == ["question_rejected"]
    assert items["a5"]["relevant_chunk_ids"] == [] and items["a5"]["notes"] == "wrong chunk"
    assert load_dataset(tmp_path / "k.json").qrels()["a5"] == {}

    res = _invoke(["import-annotation", "--annotation", str(ann), "--drop-unreviewed", "--output", str(tmp_path / "d.json")])
    assert res.exit_code == 0, res.output
    report = _report(res.stdout)
    assert report["kept"] == 5 and report["dropped_by_reason"]["unreviewed"] == 1
    assert {"id": "a7", "index": 6, "reasons": ["unreviewed"]} in report["dropped_items"]


# --------------------------------------------------------------------------------------------
# judge-pipeline
# --------------------------------------------------------------------------------------------


def test_judge_pipeline_from_csv_loads_in_the_notebook_loader(tmp_path, encoder):
    from ragnb.tiers import judging

    src = tmp_path / "pairs.csv"
    src.write_text(
        "question,answer,ground_truth_show,context\n"
        "Where is Paris?,Paris is in France.,yes,Paris is the capital of France.\n"
        "Who wrote Python?,\"Bananas, probably.\",No,Python was created by Guido van Rossum.\n"
        "How long is the Nile?,About 6650 km.,1,The Nile is about 6650 km long.\n"
        "What is 2+2?,Five.,FALSE,\n", encoding="utf-8")
    res = _invoke(["judge-pipeline", "--from", str(src), "--out-dir", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    path = _written(res)
    assert re.fullmatch(r"dataset_judge_pipeline_\d{8}_\d{6}\.json", path.name)
    assert {k: v for k, v in _report(res.stdout).items() if k not in ("path", "type")} == \
        {"items": 4, "show": 2, "no_show": 2, "without_context": 1}
    assert "1 item(s) have no context" in res.stderr

    ds = judging.open_judge_dataset(str(path))  # exactly what the notebook's dataset_path does
    assert [it.id for it in ds.items] == ["item-1", "item-2", "item-3", "item-4"]
    assert [it.ground_truth_show for it in ds.items] == [True, False, True, False]
    assert ds.items[1].answer == "Bananas, probably." and ds.items[3].context is None
    assert ds.items[0].contexts() == ["Paris is the capital of France."] and ds.name == path.stem
    assert load_dataset(path).type == "judge_pipeline"
    # And the tier runs on all of it (offline fallback): the item without a context is counted as not scored.
    result = judging.run_tier_judge_pipeline(ds, "baseline", encoder=encoder, n_boot=20)
    assert list(result.per_item["ground_truth_show"]) == [True, False, True, False]
    assert result.per_item["outcome"].tolist()[3] == "not scored"
    assert (result.summary["n"], result.summary["n_not_scored"]) == (3, 1)


def test_judge_pipeline_from_jsonl(tmp_path):
    src = tmp_path / "pairs.jsonl"
    rows = [{"id": 7, "question": "Q1?", "answer": "A1.", "ground_truth_show": "true", "context": ["p1", "p2"]},
            {"id": "x", "question": "Q2?", "answer": "A2.", "ground_truth_show": 0, "label": "not_attributable"}]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out = tmp_path / "jp.json"
    res = _invoke(["judge-pipeline", "--from", str(src), "--output", str(out)])
    assert res.exit_code == 0, res.output
    items = json.loads(out.read_text(encoding="utf-8"))["items"]
    assert items == [{"id": "7", "question": "Q1?", "answer": "A1.", "ground_truth_show": True, "context": ["p1", "p2"]},
                     {"id": "x", "question": "Q2?", "answer": "A2.", "ground_truth_show": False,
                      "label": "not_attributable"}]


def test_judge_pipeline_from_annotation(tmp_path):
    items = [
        _item(1, source="question_log", user_score=5, question_answer_id="1"),
        _item(2, source="question_log", user_score=2, question_answer_id="2"),
        _item(3, source="question_log", user_score=4, question_answer_id="3"),
        _item(4, source="question_log", user_score=1, question_answer_id="4", ground_truth_answer=None),
        _item(5, source="question_log", user_score=3, question_answer_id="5"),
    ]
    src = save_dataset(Dataset(name="rq", type="real-users", items=items, metadata={"mode": "from-real-questions"}),
                       tmp_path / "rq.json")
    ann, raw = _export(src, tmp_path / "ann")
    review = {"a1": {"is_answer_ok": True}, "a2": {"is_answer_ok": False, "notes": "wrong"},
              "a3": {"is_answer_ok": False, "ground_truth_answer": "A better answer."},  # label is about the logged answer
              "a4": {"is_answer_ok": True}}  # no logged answer → skipped; a5 unreviewed → skipped
    for it in raw["items"]:
        it.update(review.get(it["id"], {}))
    ann.write_text(json.dumps(raw), encoding="utf-8")
    out = tmp_path / "jp.json"
    res = _invoke(["judge-pipeline", "--from-annotation", str(ann), "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert {k: v for k, v in _report(res.stdout).items() if k not in ("path", "type")} == \
        {"items": 3, "show": 1, "no_show": 2, "without_context": 0, "unreviewed_skipped": 1, "without_answer_skipped": 1}
    from ragnb.tiers.judging import load_judge_dataset

    ds = load_judge_dataset(out)
    assert [(it.id, it.answer, it.ground_truth_show, it.context) for it in ds.items] == [
        ("a1", "Answer 1.", True, "Text 1."), ("a2", "Answer 2.", False, "Text 2."), ("a3", "Answer 3.", False, "Text 3.")]
    assert ds.items[1].model_extra["notes"] == "wrong" and ds.items[0].model_extra["user_score"] == 5


# --------------------------------------------------------------------------------------------
# Bad inputs: clear errors, nothing written
# --------------------------------------------------------------------------------------------


def _fails(args: list[str], out_dir: Path, *needles: str, env: dict | None = None) -> None:
    res = _invoke([*args, "--out-dir", str(out_dir)], env)
    assert res.exit_code == 2, res.output
    for needle in needles:
        assert needle in res.stderr, (needle, res.stderr)
    assert _files(out_dir) == []


def test_bad_annotation_values(source_dataset, tmp_path):
    ann, raw = _export(source_dataset, tmp_path / "ann")
    out = tmp_path / "out"
    raw["items"][2]["is_answer_ok"] = "yes"
    ann.write_text(json.dumps(raw), encoding="utf-8")
    _fails(["import-annotation", "--annotation", str(ann)], out, str(ann), "item 2 (id 'a3')", "'is_answer_ok'",
           "use true, false, or null")
    raw["items"][2]["is_answer_ok"] = None
    raw["items"][4]["is_answr_ok"] = True
    ann.write_text(json.dumps(raw), encoding="utf-8")
    _fails(["import-annotation", "--annotation", str(ann)], out, "item 4 (id 'a5')", "'is_answr_ok'", "is_answer_ok")
    del raw["items"][4]["is_answr_ok"]
    raw["items"][0]["notes"] = 5
    ann.write_text(json.dumps(raw), encoding="utf-8")
    _fails(["import-annotation", "--annotation", str(ann)], out, "item 0 (id 'a1')", "'notes'")
    _fails(["judge-pipeline", "--from-annotation", str(ann)], out, "'notes'")
    raw["items"][0]["notes"] = ""
    raw["items"][1]["question"] = ""
    ann.write_text(json.dumps(raw), encoding="utf-8")
    _fails(["import-annotation", "--annotation", str(ann)], out, "item 1 (id 'a2')", "'question'")
    # A dataset that was never exported for review; a file that is not JSON; every item rejected.
    _fails(["import-annotation", "--annotation", str(source_dataset)], out, "no item has review fields",
           "export-annotation")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    _fails(["import-annotation", "--annotation", str(bad)], out, str(bad), "invalid JSON at line 1")
    _fails(["export-annotation", "--dataset", str(tmp_path / "missing.json")], out, "missing.json", "not found")
    raw["items"][1]["question"] = "Q?"
    for it in raw["items"]:
        it["is_question_ok"] = False
    ann.write_text(json.dumps(raw), encoding="utf-8")
    _fails(["import-annotation", "--annotation", str(ann)], out, "every item was dropped", "--keep-rejected")


def test_bad_judge_pipeline_files(tmp_path):
    out = tmp_path / "out"
    csv_file = tmp_path / "p.csv"
    csv_file.write_text("question,answer,ground_truth_show\nQ1?,A1.,yes\nQ2?,A2.,maybe\n", encoding="utf-8")
    _fails(["judge-pipeline", "--from", str(csv_file)], out, str(csv_file), "row 2 (line 3)", "'ground_truth_show'",
           "yes/no")
    csv_file.write_text("question;answer;ground_truth_show\r\nQ1?;A1.;да\r\nQ2?;A2.;может\r\n", encoding="utf-8-sig")
    _fails(["judge-pipeline", "--from", str(csv_file)], out, "row 2 (line 3)", "'ground_truth_show'", "'может'")
    csv_file.write_text("question;answer;ground_truth_show\nQ1?;A1;2;да\n", encoding="utf-8")
    _fails(["judge-pipeline", "--from", str(csv_file)], out, "row 1 (line 2)", "more values than header columns")
    csv_file.write_text("question,answer\nQ1?,A1.\n", encoding="utf-8")
    _fails(["judge-pipeline", "--from", str(csv_file)], out, "missing column(s) ['ground_truth_show']")
    csv_file.write_text("question,answer,ground_truth_show\n,A1.,yes\n", encoding="utf-8")
    _fails(["judge-pipeline", "--from", str(csv_file)], out, "row 1 (line 2)", "'question'")
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"question": "Q1?", "answer": "A", "ground_truth_show": true}\n{"question": "Q2?", "answer": "B"}\n',
                  encoding="utf-8")
    _fails(["judge-pipeline", "--from", str(jl)], out, f"{jl}:2", "'ground_truth_show'")
    txt = tmp_path / "p.txt"
    txt.write_text("x", encoding="utf-8")
    _fails(["judge-pipeline", "--from", str(txt)], out, "use .csv, .json or .jsonl")
    _fails(["judge-pipeline"], out, "exactly one of --from FILE or --from-annotation FILE")
    _fails(["judge-pipeline", "--from", str(jl), "--from-annotation", str(jl)], out, "exactly one of")


def test_bad_generation_arguments(corpus_db, source_dataset, tmp_path, fresh_db):
    env = {"RAGNB_EMBEDDED_DB": corpus_db[0]}
    out = tmp_path / "out"
    _fails(["from-real-questions", "--max-questions", "-1"], out, "max_questions = -1", env=env)
    _fails(["from-real-questions", "--max-questions", "2", "--corpus", "wiki"], out, "--corpus 'wiki'", env=env)
    _fails(["from-real-questions", "--max-questions", "2", "--backend", "faiss"], out, "backend = 'faiss'", env=env)
    _fails(["from-real-questions", "--max-questions", "2", "--language", "de"], out, "--language 'de'", env=env)
    # An empty database: a clear message, not an SQL error.
    _fails(["from-real-questions", "--max-questions", "2"], out, "no embedded chunks", "ragnb load chunks",
           env={"RAGNB_EMBEDDED_DB": fresh_db.engine.url.database})
    res = _invoke(["export-annotation", "--dataset", str(source_dataset), "--output", str(tmp_path / "x.txt")])
    assert res.exit_code == 2 and "name it *.json" in res.stderr
    res = _invoke(["export-annotation", "--dataset", str(source_dataset), "--output", str(source_dataset)])
    assert res.exit_code == 2 and "is the input file" in res.stderr


def test_real_questions_fixed_context_is_the_logged_page(fresh_db, encoder, tmp_path):
    """A Markdown wiki + question log: Tier 2's fixed context is the logged page's chunks in reading order,
    even when retrieval's top-1 is another page; items without a relevant chunk have none, and Tier 2 fails
    them at the context stage instead of using a retrieved chunk."""
    import team_wiki

    from ragnb.datasets.corpus import Corpus
    from ragnb.datasets.real_questions import generate_from_real_questions
    from ragnb.store.schema import tables
    from ragnb.store.vectors import check_space
    from ragnb.tiers.generation.kinds import Tier2

    team_wiki.load_wiki(fresh_db, tmp_path, encoder)
    corpus = Corpus(fresh_db, encoder, "database", check_space(fresh_db, tables(fresh_db.schema).chunk, encoder))
    result = generate_from_real_questions(corpus, top_k=3)
    items = {it.id: it for it in result.dataset.items}
    assert list(items) == ["rq-" + r["id"] for r in team_wiki.QUESTION_LOG]
    other_page_first = 0
    for row in team_wiki.QUESTION_LOG:
        it = items["rq-" + row["id"]]
        if row["url"] not in team_wiki.PAGES:
            assert it.chunk_text is None and it.chunk_id is None and it.relevant_chunk_ids == []
            continue
        texts = team_wiki.page_chunks(row["url"])
        ids = [f"{row['url']}#{n}" for n in range(len(texts))]
        assert it.relevant_chunk_ids == ids and it.model_extra["context_chunk_ids"] == ids
        assert it.chunk_text == "\n\n".join(texts) and it.chunk_id == ids[0]
        other_page_first += not it.model_extra["retrieved_chunk_ids"][0].startswith(row["url"] + "#")
    assert len(team_wiki.page_chunks("ops/vpn.md")) > 10  # natural order checked: #10 after #9
    assert other_page_first >= 1  # the fixed context is not the retrieval's top-1 for some item
    assert result.report["without_fixed_context"] == 2
    notes = " ".join(result.dataset.metadata["notes"])
    assert "2 item(s) have no relevant chunk" in notes and "logged page's chunks" in notes

    contexts = Tier2().contexts(None, items, 1, 1)
    assert [c.text for c in contexts["rq-s2-1"]["contexts"]] == [items["rq-s2-1"].chunk_text]
    for key in ("rq-s3-1", "rq-s3-2"):
        assert contexts[key]["stage"] == "context" and "contexts" not in contexts[key]
