"""The default model's chunk vectors in their vector table (``ragnb_vectors_chunk``): written without touching the
chunk rows, read everywhere through ``locate``, moved there once from an older database's column bit for bit (its
HNSW index rebuilt with the same options), and dropped with a changed text."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from ragnb.store.default_table import deletion_mark, write_default
from ragnb.store.loaders import count_rows
from ragnb.store.models import default_table, locate, model_status
from ragnb.store.schema import tables
from ragnb.store.upsert import merge_rows
from ragnb.store.vectors import _record_space, _write_vectors, embed_table, fetch_vectors
from test_store_copy import DIM, _bits, _edge_vectors, _load_chunks, _Precomputed


def _column_count(db) -> int:
    with db.engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM chunk WHERE embedding IS NOT NULL")).scalar_one()


def _old_database(db, n: int = 20):
    """A database as ragnb left it before the default vector table: vectors in chunk.embedding, an HNSW index on
    it, the model recorded."""
    vecs = _edge_vectors()[:n]
    vecs[np.all(vecs == 0, axis=1), 0] = 1.0
    ids = [f"c{i:03d}" for i in range(n)]
    table = _load_chunks(db, ids)
    enc = _Precomputed("model-a", {f"Текст {i}": v for i, v in zip(ids, vecs)})
    with db.engine.begin() as conn:
        conn.execute(sa.text(f"ALTER TABLE chunk ALTER COLUMN embedding TYPE vector({DIM})"))
        _record_space(db, tables(db.schema), table, enc, conn)
    _write_vectors(db, table, ids, vecs)
    with db.engine.begin() as conn:
        conn.execute(sa.text("CREATE INDEX chunk_embedding_hnsw_idx ON chunk USING hnsw (embedding vector_cosine_ops) "
                             "WITH (m = 8, ef_construction = 32)"))
    return table, ids, vecs, enc


def test_an_older_databases_column_is_read_then_moved_once_bit_for_bit(fresh_db):
    table, ids, vecs, enc = _old_database(fresh_db)
    assert locate(fresh_db, "chunks").storage == "column"  # read where it is, before any write
    before_ids, _, before = fetch_vectors(fresh_db)
    assert before_ids == ids and np.array_equal(_bits(before), _bits(vecs))

    stats = embed_table(fresh_db, "chunks", enc, progress=False)  # nothing to encode: every row has its vector
    assert (stats.storage, stats.processed, stats.skipped) == ("default-table", 0, len(ids))
    loc = locate(fresh_db, "chunks")
    assert (loc.storage, loc.model, loc.dim, loc.table) == ("default-table", "model-a", DIM, "ragnb_vectors_chunk")
    after_ids, _, after = fetch_vectors(fresh_db)
    assert after_ids == ids and np.array_equal(_bits(after), _bits(vecs))
    assert _column_count(fresh_db) == 0  # the column gave them up in the same transaction
    with fresh_db.engine.connect() as conn:
        idx = conn.execute(sa.text("SELECT tablename, indexdef FROM pg_indexes WHERE indexdef ILIKE '%hnsw%'")).all()
    assert [r[0] for r in idx] == ["ragnb_vectors_chunk"]
    assert "m='8'" in idx[0][1] and "ef_construction='32'" in idx[0][1]
    status = {m["model"]: m for m in model_status(fresh_db, "chunks")}
    assert (status["model-a"]["embedded"], status["model-a"]["default"]) == (len(ids), True)
    assert count_rows(fresh_db, "chunks") == {"rows": len(ids), "embedded": len(ids)}


def test_a_fresh_table_takes_vectors_without_touching_chunk_rows(fresh_db):
    vecs = _edge_vectors()[:10]
    vecs[np.all(vecs == 0, axis=1), 0] = 1.0
    ids = [f"c{i:03d}" for i in range(10)]
    _load_chunks(fresh_db, ids)
    with fresh_db.engine.connect() as conn:
        xmin = conn.execute(sa.text("SELECT array_agg(xmin::text ORDER BY id) FROM chunk")).scalar_one()
    enc = _Precomputed("model-a", {f"Текст {i}": v for i, v in zip(ids, vecs)})
    assert embed_table(fresh_db, "chunks", enc, write_every=3, progress=False).processed == 10
    with fresh_db.engine.connect() as conn:  # no chunk row was rewritten (an UPDATE gives a row a new xmin)
        assert conn.execute(sa.text("SELECT array_agg(xmin::text ORDER BY id) FROM chunk")).scalar_one() == xmin
    assert np.array_equal(_bits(fetch_vectors(fresh_db)[2]), _bits(vecs)) and _column_count(fresh_db) == 0


def test_a_changed_text_loses_its_default_vector_and_is_embedded_again(fresh_db):
    ids = ["a", "b", "c"]
    table = _load_chunks(fresh_db, ids)
    vec = {f"Текст {i}": np.full(DIM, k + 1, dtype=np.float32) for k, i in enumerate(ids)}
    vec["new text"] = np.full(DIM, 9, dtype=np.float32)
    enc = _Precomputed("model-a", vec)
    embed_table(fresh_db, "chunks", enc, progress=False)
    merge_rows(fresh_db, "chunks", [{"id": "b", "url": "u", "text": "new text"}], on_changed="update")
    assert count_rows(fresh_db, "chunks") == {"rows": 3, "embedded": 2}
    again = embed_table(fresh_db, "chunks", enc, progress=False)
    assert (again.processed, again.skipped) == (1, 2)
    got_ids, _, got = fetch_vectors(fresh_db)
    assert got_ids == ids and got[:, 0].tolist() == [1.0, 9.0, 3.0]


class _DeletingWhileEncoding(_Precomputed):
    """Deletes chunk rows (another connection, committed) while its first block is being encoded: between the
    moment ``embed_table`` read the ids and the moment it writes their vectors."""

    def __init__(self, name, table, db, sql):
        super().__init__(name, table)
        self.db, self.sql = db, sql

    def encode(self, texts, batch_size=32, progress=False):
        if self.sql:
            with self.db.engine.begin() as conn:
                conn.execute(sa.text(self.sql))
            self.sql = None
        return super().encode(texts)


@pytest.mark.parametrize("sql", ["DELETE FROM chunk WHERE id = 'b'", "TRUNCATE chunk"])
def test_rows_deleted_while_embedding_get_no_vector(fresh_db, sql):
    """The writer skips the per-id check while the deletion counter has not moved since the ids were read; a
    delete or truncate in between moves it, the block is checked and refused whole."""
    table = _load_chunks(fresh_db, ["a", "b", "c"])
    vt = default_table(table)
    enc = _Precomputed("model-a", {f"Текст {i}": np.ones(DIM, np.float32) for i in "abc"})
    embed_table(fresh_db, "chunks", enc, progress=False)  # makes the vector table and its counter
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {vt.name}"))  # every row to embed again; the chunk rows stay
    before = deletion_mark(fresh_db, vt)
    assert isinstance(before, int)
    deleting = _DeletingWhileEncoding("model-a", enc._table, fresh_db, sql)
    with pytest.raises(ValueError, match=r"row\(s\) to embed are no longer in the table.*Nothing of this block"):
        embed_table(fresh_db, "chunks", deleting, progress=False)
    assert deletion_mark(fresh_db, vt) == before + 1  # one statement, one step, whatever it deleted
    with fresh_db.engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT count(*) FROM {vt.name}")).scalar_one() == 0


def test_the_deletion_counter_moves_only_with_delete_statements(fresh_db):
    table = _load_chunks(fresh_db, ["a", "b"])
    vt = default_table(table)
    embed_table(fresh_db, "chunks", _Precomputed("model-a", {f"Текст {i}": np.ones(DIM, np.float32) for i in "ab"}),
                progress=False)
    start = deletion_mark(fresh_db, vt)
    merge_rows(fresh_db, "chunks", [{"id": "c", "url": "u", "text": "Текст c"}], on_changed="update")
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.update(table).where(table.c.id == "a").values(url="https://wiki.example/v"))
    assert deletion_mark(fresh_db, vt) == start  # inserts and updates leave every id in place
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chunk WHERE id = 'zz'"))  # deletes nothing: still a step (checked, not trusted)
        conn.execute(sa.text("DELETE FROM chunk WHERE id = 'a'"))
    assert deletion_mark(fresh_db, vt) == start + 2
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text(f"DROP SEQUENCE {vt.name}_deletes"))
    assert deletion_mark(fresh_db, vt) is None  # no counter (a table from before it): every block is checked
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chunk WHERE id = 'b'"))  # the trigger goes on without it
    assert count_rows(fresh_db, "chunks") == {"rows": 1, "embedded": 0}


def test_an_id_not_in_the_chunk_table_writes_nothing_of_the_block(fresh_db):
    table = _load_chunks(fresh_db, ["a", "b"])
    enc = _Precomputed("model-a", {"Текст a": np.ones(DIM, np.float32), "Текст b": np.ones(DIM, np.float32)})
    embed_table(fresh_db, "chunks", enc, progress=False)
    vt = default_table(table)
    with pytest.raises(ValueError, match=r"chunk: 1 row\(s\) to embed are no longer in the table \(first: "
                                         r"\['gone'\]\).*Nothing of this block was written"):
        with fresh_db.engine.begin() as conn:
            write_default(fresh_db, table, vt, ["a", "gone"], np.zeros((2, DIM), np.float32), conn)
    assert fetch_vectors(fresh_db)[2][:, 0].tolist() == [1.0, 1.0]


def test_replace_keeps_the_table_and_index_for_the_same_dimension(fresh_db):
    table, ids, vecs, enc = _old_database(fresh_db)
    embed_table(fresh_db, "chunks", enc, progress=False)
    flipped = _Precomputed("model-a", {f"Текст {i}": -v for i, v in zip(ids, vecs)})
    assert embed_table(fresh_db, "chunks", flipped, replace=True, progress=False).processed == len(ids)
    assert np.array_equal(_bits(fetch_vectors(fresh_db)[2]), _bits(-vecs))
    with fresh_db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pg_indexes WHERE tablename = 'ragnb_vectors_chunk' "
                                    "AND indexdef ILIKE '%hnsw%'")).scalar_one() == 1


def test_a_second_write_of_the_same_rows_overwrites_them(fresh_db):
    table = _load_chunks(fresh_db, ["a", "b", "c"])
    enc = _Precomputed("model-a", {f"Текст {i}": np.full(DIM, 1, np.float32) for i in "abc"})
    embed_table(fresh_db, "chunks", enc, progress=False)
    with fresh_db.engine.begin() as conn:  # "c" and "a" have vectors: the COPY conflicts, the merge overwrites
        write_default(fresh_db, table, default_table(table), ["c", "a"], np.full((2, DIM), 1 / 3), conn)
    got = fetch_vectors(fresh_db)[2]
    assert np.array_equal(_bits(got[[0, 2]]), _bits(np.full((2, DIM), np.float32(1 / 3)))) and got[1, 0] == 1.0
    with pytest.raises(ValueError, match=r"row id 'a' is given twice in one block"):
        with fresh_db.engine.begin() as conn:
            write_default(fresh_db, table, default_table(table), ["a", "a"], np.zeros((2, DIM)), conn)


def test_a_deleted_or_truncated_chunk_row_takes_its_vector_with_it(fresh_db):
    _load_chunks(fresh_db, ["a", "b", "c"])
    enc = _Precomputed("model-a", {f"Текст {i}": np.full(DIM, 1, np.float32) for i in "abc"})
    embed_table(fresh_db, "chunks", enc, progress=False)
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chunk WHERE id = 'b'"))
    assert fetch_vectors(fresh_db)[0] == ["a", "c"]
    with fresh_db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT array_agg(row_id ORDER BY row_id) FROM ragnb_vectors_chunk")
                            ).scalar_one() == ["a", "c"]
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE chunk"))
    with fresh_db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM ragnb_vectors_chunk")).scalar_one() == 0
    # the table dropped by hand (a benchmark's reset): deletes still work, and the next embed makes it again
    _load_chunks(fresh_db, ["a"])
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE ragnb_vectors_chunk"))
        conn.execute(sa.text("DELETE FROM chunk WHERE id = 'zz'"))
    assert embed_table(fresh_db, "chunks", enc, progress=False).storage == "default-table"
    assert fetch_vectors(fresh_db)[0] == ["a"]


def test_a_second_first_embed_finds_the_table_the_first_one_made(fresh_db):
    """Two first embeds at once: the one that waits on the creation lock finds the vector table made meanwhile and
    goes on with it (moving nothing), instead of failing on CREATE TABLE."""
    import threading

    from ragnb.store.default_table import creation_lock_key, move_column_to_table

    table = _load_chunks(fresh_db, ["a", "b"])
    vt = default_table(table)
    outcome = {}
    with fresh_db.engine.connect() as other:  # the first embed: holds the lock while it creates the table
        other.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": creation_lock_key(fresh_db, vt)})

        def second():
            try:
                outcome["moved"] = move_column_to_table(fresh_db, table, vt, DIM)
            except Exception as exc:  # noqa: BLE001 — reported by the assertion below
                outcome["error"] = exc

        waiting = threading.Thread(target=second)
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive()  # the second waits for the first
        other.execute(sa.text(f"CREATE TABLE {vt.name} (row_id text PRIMARY KEY, embedding vector({DIM}) NOT NULL)"))
        other.execute(sa.text(f"COMMENT ON TABLE {vt.name} IS 'made by the first'"))
        other.commit()
        waiting.join(timeout=60)
    assert outcome == {"moved": 0}
    with fresh_db.engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT obj_description('{vt.name}'::regclass)")).scalar_one() == "made by the first"
    stats = embed_table(fresh_db, "chunks", _Precomputed("model-a", {f"Текст {i}": np.ones(DIM, np.float32)
                                                                      for i in "ab"}), progress=False)
    assert (stats.storage, stats.processed) == ("default-table", 2)


class _Sized(_Precomputed):
    def __init__(self, name, table, dim):
        super().__init__(name, table)
        self.dim = dim


def test_the_space_is_checked_on_the_vector_tables_declared_dimension(fresh_db):
    """Before any vector is written the vector table is made with the recorded dimension (not the refused
    encoder's); without a recorded model the check reads the table's declared dimension (no scan of the column)."""
    from ragnb.store.schema import column_dimension

    table = _load_chunks(fresh_db, ["a", "b"])
    vt = default_table(table)
    right = _Precomputed("model-a", {f"Текст {i}": np.ones(DIM, np.float32) for i in "ab"})
    with fresh_db.engine.begin() as conn:
        _record_space(fresh_db, tables(fresh_db.schema), table, right, conn)  # recorded, nothing stored yet
    wrong = _Sized("model-a", {f"Текст {i}": np.ones(8, np.float32) for i in "ab"}, 8)
    with pytest.raises(ValueError, match=rf"holds {DIM}-dimensional vectors of model 'model-a'"):
        embed_table(fresh_db, "chunks", wrong, progress=False)
    assert column_dimension(fresh_db, vt) == DIM
    assert embed_table(fresh_db, "chunks", right, progress=False).processed == 2
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.delete(tables(fresh_db.schema).meta))  # vectors kept, no model recorded
    with pytest.raises(ValueError, match=rf"ragnb_vectors_chunk holds {DIM}-dimensional vectors but model 'other' "
                                         r"makes 8-dimensional ones"):
        embed_table(fresh_db, "chunks", _Sized("other", wrong._table, 8), progress=False)
