"""Content fingerprints of datasets and corpora (ragnb.datasets.fingerprint) and their place in the metrics JSON."""

from __future__ import annotations

import hashlib
import json

from ragnb.datasets import fingerprint
from ragnb.datasets.schema import Dataset, DatasetItem, save_dataset


def _ds(questions, name="wiki-questions"):
    return Dataset(name=name, type="synthetic", items=[
        DatasetItem(id=f"q{i}", question=q, relevant_chunk_ids=[f"c{i}"]) for i, q in enumerate(questions)])


def test_dataset_fingerprint_is_the_content_not_the_name():
    a = fingerprint.dataset_fingerprint(_ds(["How do I reset my password?", "Where is the VPN guide?"]))
    renamed = fingerprint.dataset_fingerprint(_ds(["How do I reset my password?", "Where is the VPN guide?"], "x"))
    edited = fingerprint.dataset_fingerprint(_ds(["How do I reset my password?", "Where is the VPN manual?"]))
    fewer = fingerprint.dataset_fingerprint(_ds(["How do I reset my password?"]))
    assert a["sha256"] == renamed["sha256"] and a["n_items"] == 2
    assert len({a["sha256"], edited["sha256"], fewer["sha256"]}) == 3
    # peer: sha256 over the items as written to a file, one JSON line each, keys sorted
    ds = _ds(["How do I reset my password?", "Where is the VPN guide?"])
    text = "".join(json.dumps(it.to_json_dict(), sort_keys=True, ensure_ascii=False) + "\n" for it in ds.items)
    assert a["sha256"] == hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def test_corpus_fingerprint_against_hashlib(fresh_db):
    from ragnb.store.loaders import insert_rows

    empty = fingerprint.corpus_fingerprint(fresh_db)
    assert (empty["n_chunks"], empty["chunks_md5"]) == (0, None) and fresh_db.display_url == empty["database"]
    chunks = [{"id": "vpn-2", "text": "Install the client."}, {"id": "acc-1", "text": "Press Reset — «сброс»."}]
    insert_rows(fresh_db, "chunks", chunks)
    fp = fingerprint.corpus_fingerprint(fresh_db)
    md5 = lambda t: hashlib.md5(t.encode("utf-8")).hexdigest()  # noqa: E731
    expected = md5(",".join(f"{c['id']}:{md5(c['text'])}" for c in sorted(chunks, key=lambda c: c["id"])))
    assert fp["chunks_md5"] == expected and (fp["n_chunks"], fp["n_embedded"], fp["model"]) == (2, 0, None)


def test_opened_data_lands_in_the_metrics_json(tmp_path):
    from ragnb.datasets.corpus import open_dataset
    from ragnb.tiers.result import TierResult

    fingerprint.reset()
    path = save_dataset(_ds(["How do I reset my password?", "Where is the VPN guide?", "Who approves leave?"]),
                        tmp_path / "ds.json")
    ds = open_dataset(str(path), "db", max_questions=2)
    written = json.loads(TierResult(None, {"x": 1}, []).write(tmp_path / "out", "tier1_retrieval").read_text())
    assert written["provenance"] == {"datasets": [fingerprint.dataset_fingerprint(ds)]}
    assert written["provenance"]["datasets"][0]["n_items"] == 2  # what was scored, after max_questions
    again = open_dataset(str(path), "db", max_questions=3)  # a cell re-run with other parameters: the last one counts
    assert fingerprint.opened() == {"datasets": [fingerprint.dataset_fingerprint(again)]}
    fingerprint.reset()
    assert "provenance" not in json.loads(TierResult(None, {"x": 1}, []).write(tmp_path / "o2", "t").read_text())
