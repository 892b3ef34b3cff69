"""Vectors are written with binary COPY (pgvector's psycopg adapter) into a staging table and merged in one
statement; what the database stores is bit-identical to what pgvector's text form stored before."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from ragnb.store.loaders import insert_rows
from ragnb.store.schema import ensure_schema, tables
from ragnb.store.vectors import (_binary_rows, _ensure_store, _insert_vectors, _write_vectors, embed_table,
                                 fetch_vectors, fetch_vectors_by_id, vector_literal)

DIM = 12


def _edge_vectors() -> np.ndarray:
    """float32 rows with the values a text round trip could get wrong: subnormals down to the smallest, -0.0,
    the largest finite values, the smallest normal, values without a short decimal form, and random ones."""
    f = np.float32
    tiny = np.finfo(np.float32).smallest_subnormal
    rows = [
        [tiny, -tiny, f(3) * tiny, f(1e-40), f(-1e-42), np.finfo(np.float32).tiny, f(-0.0), f(0.0),
         np.finfo(np.float32).max, -np.finfo(np.float32).max, f(3.0e38), f(-1.5e38)],
        [f(0.1), f(1 / 3), f(np.pi), f(-np.e), f(1e-7), f(16777217.0), f(2.0 ** -126), f(2.0 ** -149 * 5),
         f(1.0) + np.finfo(np.float32).eps, f(-1.0) - np.finfo(np.float32).eps, f(1e30), f(-1e-30)],
    ]
    rng = np.random.default_rng(7)
    random = rng.normal(size=(30, DIM)).astype(np.float32)
    # random bit patterns, finite only: every exponent, every mantissa
    bits = rng.integers(0, 2 ** 32, size=(30, DIM), dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = np.where(np.isfinite(bits), bits, np.float32(1.25))
    return np.vstack([np.array(rows, dtype=np.float32), random, bits]).astype(np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def _old_text_path(db, table: str, ids: list[str], vecs: np.ndarray) -> None:
    """The store path before binary COPY, kept as the reference: pgvector's text form (``repr`` of each float32
    as a Python float) through a text COPY."""
    with db.engine.begin() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, emb vector({DIM}) NOT NULL)")
            with cur.copy(f"COPY {table} (id, emb) FROM STDIN") as copy:
                for rid, vec in zip(ids, vecs):
                    copy.write_row((rid, vector_literal(vec)))


def _load_chunks(db, ids: list[str]) -> sa.Table:
    insert_rows(db, "chunks", [{"id": i, "url": f"https://wiki.example/{i}", "text": f"Текст {i}"} for i in ids])
    return ensure_schema(db).chunk


def test_binary_copy_stores_the_same_bits_as_the_text_form(fresh_db):
    vecs = _edge_vectors()
    ids = [f"c{i:03d}" for i in range(len(vecs))]
    table = _load_chunks(fresh_db, ids)
    _old_text_path(fresh_db, "ref_text", ids, vecs)
    _write_vectors(fresh_db, table, ids, vecs)  # the table's own column: UPDATE … FROM the stage
    store = fresh_db.vector_store()
    _ensure_store(store)
    with store.engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE side_vec (row_id text PRIMARY KEY, embedding vector({DIM}) NOT NULL)"))
    _insert_vectors(store, "side_vec", ids, vecs)  # a model's vector table: INSERT … ON CONFLICT

    old = dict(_binary_rows(fresh_db, "SELECT id, emb FROM ref_text"))
    got_ids, _, column = fetch_vectors(fresh_db)
    side = dict(_binary_rows(store, "SELECT row_id, embedding FROM side_vec"))
    assert got_ids == ids
    old_mat = np.stack([old[i].to_numpy() for i in ids])
    side_mat = np.stack([side[i].to_numpy() for i in ids])
    # exact bits, so -0.0 differs from 0.0 and every subnormal counts
    assert np.array_equal(_bits(old_mat), _bits(vecs))
    assert np.array_equal(_bits(column), _bits(old_mat))
    assert np.array_equal(_bits(side_mat), _bits(old_mat))
    assert np.array_equal(column, vecs)
    assert _bits(column)[0, 6] == 0x80000000 and _bits(column)[0, 0] == 1  # -0.0 and the smallest subnormal
    # what the server computes with them agrees too: the text form of a stored value is the same either way
    with fresh_db.engine.connect() as conn:
        texts = conn.execute(sa.text("SELECT r.emb::text = c.embedding::text FROM ref_text r JOIN chunk c "
                                     "ON c.id = r.id")).scalars().all()
    assert texts == [True] * len(ids)


def test_a_second_write_overwrites_and_float64_input_is_stored_as_float32(fresh_db):
    ids = ["a", "b", "c"]
    table = _load_chunks(fresh_db, ids)
    first = np.arange(3 * DIM, dtype=np.float32).reshape(3, DIM) + 1
    _write_vectors(fresh_db, table, ids, first)
    second = np.full((2, DIM), 1 / 3, dtype=np.float64)  # float64 in: stored as its float32 rounding
    _write_vectors(fresh_db, table, ["c", "a"], second)
    stored = fetch_vectors_by_id(fresh_db, "chunks", ["a", "b", "c"])
    assert np.array_equal(stored[1], first[1])
    assert np.array_equal(_bits(stored[[0, 2]]), _bits(np.full((2, DIM), np.float32(1 / 3))))


def test_an_id_not_in_the_table_writes_nothing_of_the_block(fresh_db):
    table = _load_chunks(fresh_db, ["a", "b"])
    vecs = np.ones((3, DIM), dtype=np.float32)
    with pytest.raises(ValueError, match=r"chunk: 1 row\(s\) to embed are no longer in the table \(first: "
                                         r"\['gone'\]\).*Nothing of this block was written"):
        _write_vectors(fresh_db, table, ["a", "gone", "b"], vecs)
    with fresh_db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chunk WHERE embedding IS NOT NULL")).scalar_one() == 0


def test_a_repeated_id_or_a_missing_vector_is_refused_before_anything_is_sent(fresh_db):
    table = _load_chunks(fresh_db, ["a", "b"])
    with pytest.raises(ValueError, match="row id 'a' is given twice in one block of vectors"):
        _write_vectors(fresh_db, table, ["a", "b", "a"], np.ones((3, DIM), dtype=np.float32))
    with pytest.raises(ValueError, match="2 row ids but 1 vectors"):
        _write_vectors(fresh_db, table, ["a", "b"], np.ones((1, DIM), dtype=np.float32))
    with fresh_db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chunk WHERE embedding IS NOT NULL")).scalar_one() == 0


def test_a_stage_is_analyzed_so_the_merge_can_use_the_primary_key(fresh_db):
    # Autovacuum never analyzes temporary tables: unanalyzed, a stage of 8,192 vectors was planned as 144,000 rows
    # and merged by a hash join reading the whole table per block (quadratic at 1M chunks). The planner must know
    # the stage's true size, including after the stage is emptied and refilled in the same transaction.
    from ragnb.store.copy import STAGE_VECTORS, stage_vectors

    _load_chunks(fresh_db, ["a"])
    with fresh_db.engine.begin() as conn, conn.connection.driver_connection.cursor() as cur:
        for n in (300, 40):
            stage_vectors(cur, [f"r{i}" for i in range(n)], np.ones((n, DIM), dtype=np.float32))
            cur.execute("SELECT reltuples FROM pg_class WHERE oid = CAST(%s AS regclass)", (STAGE_VECTORS,))
            assert cur.fetchone()[0] == n
            cur.execute("SELECT attname FROM pg_stats WHERE tablename = %s", (STAGE_VECTORS,))
            assert [r[0] for r in cur.fetchall()] == ["id"]  # the join key only: the vectors' stats cost more


class _Precomputed:
    """An encoder that returns vectors fixed in advance for each text (the store path alone, encoder free)."""

    def __init__(self, name: str, table: dict[str, np.ndarray]) -> None:
        self.name, self.dim, self._table = name, DIM, table

    def encode(self, texts, batch_size=32, progress=False):
        return np.stack([self._table[t] for t in texts])


def test_embed_table_stores_an_encoders_exact_bits_in_the_column_and_a_vector_table(fresh_db):
    vecs = _edge_vectors()
    vecs[np.all(vecs == 0, axis=1), 0] = 1.0  # an all-zero vector is refused as unusable, not stored
    ids = [f"c{i:03d}" for i in range(len(vecs))]
    _load_chunks(fresh_db, ids)
    by_text = {f"Текст {i}": v for i, v in zip(ids, vecs)}
    first = embed_table(fresh_db, "chunks", _Precomputed("model-a", by_text), write_every=7, progress=False)
    second = embed_table(fresh_db, "chunks", _Precomputed("model-b", {t: -v for t, v in by_text.items()}),
                         write_every=5, progress=False)
    assert (first.storage, first.processed, second.storage, second.processed) == ("default-table", len(ids),
                                                                                   "table", len(ids))
    _, _, col = fetch_vectors(fresh_db)
    _, _, side = fetch_vectors(fresh_db, model="model-b")
    assert np.array_equal(_bits(col), _bits(vecs)) and np.array_equal(_bits(side), _bits(-vecs))
    meta_table = tables(fresh_db.schema).meta
    with fresh_db.engine.connect() as conn:
        meta = conn.execute(sa.select(meta_table.c.model, meta_table.c.dim)).all()
    assert [tuple(r) for r in meta] == [("model-a", DIM)]


class _FailsAt:
    """Returns fixed vectors, then fails on one text (a model that breaks mid-way)."""

    name, dim = "model-f", DIM

    def __init__(self, bad: str) -> None:
        self.bad, self.calls = bad, 0

    def encode(self, texts, batch_size=32, progress=False):
        self.calls += 1
        if self.bad in texts:
            raise ValueError(f"the model broke on {self.bad!r}")
        return np.stack([np.full(DIM, float(len(t)), dtype=np.float32) for t in texts])


def test_blocks_encoded_before_a_failure_are_written_and_the_model_recorded(fresh_db):
    # texts of decreasing length: rows are encoded longest first, so in id order, four a block
    texts = {f"r{i:02d}": "слово " * (40 - i) for i in range(20)}
    insert_rows(fresh_db, "chunks", [{"id": i, "url": "https://wiki.example/p", "text": x} for i, x in texts.items()])
    enc = _FailsAt(texts["r09"])  # the third block fails
    with pytest.raises(ValueError, match="the model broke on"):
        embed_table(fresh_db, "chunks", enc, write_every=4, progress=False)
    assert enc.calls == 3
    ids, _, stored = fetch_vectors(fresh_db)
    assert ids == [f"r{i:02d}" for i in range(8)]  # the two blocks before the failure, nothing of the third
    assert np.array_equal(stored[:, 0], np.array([len(texts[i]) for i in ids], dtype=np.float32))
    again = embed_table(fresh_db, "chunks", _FailsAt("no such text"), write_every=4, progress=False)
    assert (again.total, again.processed, again.skipped) == (20, 12, 8)


def test_a_production_table_with_integer_ids_and_its_own_column_names(fresh_db):
    from pgvector.sqlalchemy import Vector

    ensure_schema(fresh_db)
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE kb_passage (passage_no bigint PRIMARY KEY, body text, "
                             f"vec vector({DIM}))"))
        conn.execute(sa.text("INSERT INTO kb_passage (passage_no, body) VALUES (1, 'a'), (20, 'b'), (300, 'c')"))
    table = sa.Table("kb_passage", sa.MetaData(), sa.Column("passage_no", sa.BigInteger, key="id", primary_key=True),
                     sa.Column("vec", Vector(), key="embedding"))
    vecs = _edge_vectors()[:3]
    _write_vectors(fresh_db, table, ["300", "1", "20"], vecs)  # ids as ragnb reads them: text
    rows = dict(_binary_rows(fresh_db, "SELECT passage_no, vec FROM kb_passage"))
    assert np.array_equal(_bits(np.stack([rows[300].to_numpy(), rows[1].to_numpy(), rows[20].to_numpy()])),
                          _bits(vecs))
    with pytest.raises(ValueError, match=r"kb_passage: 1 row\(s\) to embed are no longer in the table \(first: "
                                         r"\['7'\]\)"):
        _write_vectors(fresh_db, table, ["7"], vecs[:1])


def _adapter_rows(conn, ids: list[str], vecs: np.ndarray) -> list[bytes]:
    """Each row as pgvector's psycopg adapter writes it in a binary COPY (``set_types`` + ``write_row``): the
    previous writer, the reference for :func:`vector_copy_payload`."""
    from psycopg.copy import Copy

    from ragnb.store.copy import ensure_vector_type

    ensure_vector_type(conn)
    out = []
    with conn.cursor() as cur:
        for rid, vec in zip(ids, vecs):
            fmt = Copy(cur, binary=True).formatter
            fmt.transformer.set_dumper_types([conn.adapters.types["text"].oid, conn.adapters.types["vector"].oid],
                                             __import__("psycopg").pq.Format.BINARY)
            out.append(bytes(fmt.write_row((rid, vec))) + bytes(fmt.end()))
    return out


def _mixed_ids(n: int) -> list[str]:
    """Ids of many byte lengths (ASCII, Cyrillic, emoji; one very long), in no particular order."""
    rng = np.random.default_rng(3)
    pieces = ["a", "ж", "wiki/страница", "😀", "page.md#"]
    ids = [f"{''.join(rng.choice(pieces, size=int(rng.integers(1, 6))))}-{i}" for i in range(n)]
    ids[n // 2] = "x" * 3000 + "-long"
    return ids


@pytest.mark.parametrize("dim", [1, 12, 1536, 16000])
def test_the_numpy_payload_is_byte_for_byte_the_adapters_rows(fresh_db, dim):
    from ragnb.store.copy import PGCOPY_HEADER, vector_copy_payload

    rng = np.random.default_rng(dim)
    n = 40 if dim < 16000 else 6
    vecs = rng.integers(0, 2 ** 32, size=(n, dim), dtype=np.uint64).astype(np.uint32).view(np.float32)
    vecs = np.where(np.isfinite(vecs), vecs, np.float32(-0.0))
    vecs[0, :min(dim, DIM)] = _edge_vectors()[0, :min(dim, DIM)]
    ids = _mixed_ids(n)
    ensure_schema(fresh_db)  # pgvector's type
    with fresh_db.engine.connect() as conn:
        expected = _adapter_rows(conn.connection.driver_connection, ids, vecs)
    assert all(e.startswith(PGCOPY_HEADER) and e.endswith(b"\xff\xff") for e in expected)
    expected_rows = sorted(e[len(PGCOPY_HEADER):-2] for e in expected)
    payload = b"".join(vector_copy_payload([i.encode() for i in ids], vecs))
    # rows come grouped by id length: split them by walking the framing, then compare as sets of exact bytes
    rows, pos = [], 0
    while pos < len(payload):
        id_len = int.from_bytes(payload[pos + 2:pos + 6], "big")
        size = 2 + 4 + id_len + 4 + 4 + 4 * dim
        rows.append(payload[pos:pos + size])
        pos += size
    assert sorted(rows) == expected_rows


def _adapter_copy(db, table: str, ids: list[str], vecs: np.ndarray, dim: int) -> None:
    """The previous store path's COPY: pgvector's adapter, a row at a time."""
    from ragnb.store.copy import ensure_vector_type

    with db.engine.begin() as conn:
        raw = conn.connection.driver_connection
        ensure_vector_type(raw)
        with raw.cursor() as cur:
            cur.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, emb vector({dim}) NOT NULL)")
            with cur.copy(f"COPY {table} (id, emb) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text", "vector"])
                for rid, vec in zip(ids, vecs):
                    copy.write_row((rid, vec))


@pytest.mark.parametrize("dim", [12, 4096])
def test_stored_vectors_are_the_adapter_paths_bits_for_real_model_vectors_and_edge_values(fresh_db, dim):
    from ragnb.embeddings.models import get_encoder

    store = fresh_db.vector_store()
    _ensure_store(store)
    if dim == DIM:
        vecs, ids = _edge_vectors(), _mixed_ids(len(_edge_vectors()))
    else:  # real vectors of the bundled model side by side, widened to a large dimension, and edge values
        enc = get_encoder("all-MiniLM-L6-v2")
        real = enc.encode_uncached([f"Текст {i} about retrieval and vectors" for i in range(11)])
        vecs = np.tile(real, (1, dim // real.shape[1] + 1))[:, :dim].copy()
        vecs[0, :DIM] = _edge_vectors()[0]
        ids = _mixed_ids(len(vecs))
    _adapter_copy(store, "ref_adapter", ids, vecs, dim)
    with store.engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE side_new (row_id text PRIMARY KEY, embedding vector({dim}) NOT NULL)"))
    _insert_vectors(store, "side_new", ids, vecs)
    with store.engine.connect() as conn:
        same = conn.execute(sa.text("SELECT count(*) FROM ref_adapter r JOIN side_new s ON s.row_id = r.id "
                                    "WHERE vector_send(s.embedding) = vector_send(r.emb)")).scalar_one()
    assert same == len(ids)  # the server's own binary form of each stored vector is identical
    got = dict(_binary_rows(store, "SELECT row_id, embedding FROM side_new"))
    assert np.array_equal(_bits(np.stack([got[i].to_numpy() for i in ids])), _bits(vecs))
