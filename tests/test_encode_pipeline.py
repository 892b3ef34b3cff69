"""The encode pipeline of ``embed_table``: the model encodes the next block while the writer thread saves the
previous one; a writer's error stops the encoding and reaches the caller; the disk cache is filled from the
writer thread with the vectors that were stored."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ragnb.store.encode_pipeline as pipeline
from ragnb.store.encode_pipeline import encode_rows
from ragnb.store.vectors import EmbedStats

DIM = 4


class _Counting:
    """Vectors from each text's length; ``calls`` counts the blocks asked for."""

    name, dim = "m", DIM

    def __init__(self, on_call=None) -> None:
        self.calls, self.on_call = 0, on_call

    def encode(self, texts, batch_size=32, progress=False):
        self.calls += 1
        if self.on_call is not None:
            self.on_call(self.calls)
        return np.stack([np.full(DIM, float(len(t)), dtype=np.float32) for t in texts])


def _rows(n: int) -> list[tuple[str, str]]:
    return [(f"r{i:02d}", "w" * (100 - i)) for i in range(n)]  # longest first = id order


def _stats() -> EmbedStats:
    return EmbedStats("chunk", "m", DIM, 0, 0, 0, 0)


def test_the_next_block_encodes_while_the_writer_is_still_writing(monkeypatch):
    second_block_encoding = threading.Event()
    written: list[list[str]] = []

    def write(ids, vecs):
        # the first write waits until the encoder has started on the second block: without a writer thread of
        # its own this would wait forever (the timeout only keeps a broken build from hanging)
        if not written:
            assert second_block_encoding.wait(timeout=60), "the encoder waited for the write: no overlap"
        written.append(list(ids))

    enc = _Counting(on_call=lambda n: second_block_encoding.set() if n == 2 else None)
    stats = _stats()
    monkeypatch.setattr(pipeline, "WRITE_ROWS", 1)  # a write per block
    encode_rows(_rows(9), enc, "chunks", None, 3, False, stats, write)
    assert written == [["r00", "r01", "r02"], ["r03", "r04", "r05"], ["r06", "r07", "r08"]]
    assert (stats.processed, stats.errors) == (9, 0)


def test_a_writer_error_stops_the_encoder_and_reaches_the_caller(monkeypatch):
    def write(ids, vecs):
        raise ValueError("the database refused the block")

    enc = _Counting()
    monkeypatch.setattr(pipeline, "WRITE_ROWS", 1)
    with pytest.raises(ValueError, match="the database refused the block"):
        encode_rows(_rows(60), enc, "chunks", None, 2, False, _stats(), write)
    # the queue holds at most QUEUE_BLOCKS blocks: the encoder stops a few blocks after the failure, not at 30
    assert enc.calls <= 2 + pipeline.QUEUE_BLOCKS + 2


def test_rows_without_text_count_as_errors_and_the_rest_are_written_longest_first():
    got: list[tuple[list[str], np.ndarray]] = []
    rows = [("a", "xx"), ("b", None), ("c", "xxxx"), ("d", "  \n"), ("e", ""), ("f", "xxx")]
    stats = _stats()
    encode_rows(rows, _Counting(), "chunks", None, 2, False, stats, lambda ids, v: got.append((list(ids), v)))
    assert [i for ids, _ in got for i in ids] == ["c", "f", "a"]
    assert np.concatenate([v for _, v in got])[:, 0].tolist() == [4.0, 3.0, 2.0]
    assert (stats.processed, stats.errors) == (3, 3)


def test_embed_table_fills_the_disk_cache_from_the_writer_with_the_stored_vectors(fresh_db, tmp_path, monkeypatch):
    from ragnb.embeddings.cache import text_key
    from ragnb.embeddings.models import get_encoder
    from ragnb.store.loaders import insert_rows
    from ragnb.store.vectors import embed_table, fetch_vectors

    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    texts = {f"c{i}": f"Абзац {i}: retrieval quality is measured on a fixed set of questions." for i in range(7)}
    insert_rows(fresh_db, "chunks", [{"id": i, "url": "https://wiki.example/p", "text": t} for i, t in texts.items()])
    enc = get_encoder("all-MiniLM-L6-v2")  # shared in the process: count what this test encodes
    before = enc.encoded_texts
    stats = embed_table(fresh_db, "chunks", enc, write_every=3, progress=False)
    assert (stats.processed, enc.encoded_texts - before) == (7, 7)
    ids, _, stored = fetch_vectors(fresh_db)
    cached = enc.cache_for("document").get_many([text_key(texts[i]) for i in ids])
    assert np.array_equal(np.stack([cached[text_key(texts[i])] for i in ids]).view(np.uint32), stored.view(np.uint32))
    # the same vectors as the model gives for those texts on their own (raw sentence-transformers)
    raw = enc.model.encode([texts[i] for i in ids], convert_to_numpy=True)
    assert np.allclose(stored, raw, atol=1e-6)
