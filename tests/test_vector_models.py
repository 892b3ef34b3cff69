"""Several embedding models per table on the real embedded PostgreSQL + pgvector: a second model is added beside
the first, retrieval per model equals exact in-memory retrieval per model, fingerprints and dimensions never mix,
and a production database opened read-only is never written (candidate models go to the vector store)."""

from __future__ import annotations

import hashlib
import os
from itertools import count

import numpy as np
import pytest
import sqlalchemy as sa

from ragnb.rag.retrieval import MemoryRetriever, PgVectorRetriever
from ragnb.rag.index_build import create_hnsw_index, hnsw_indexes
from ragnb.store.engine import connect
from ragnb.store.loaders import insert_rows
from ragnb.store.models import check_space, model_status
from ragnb.store.schema import tables
from ragnb.store.vectors import embed_table, fetch_vectors, fetch_vectors_by_id

_names = count()
WORDS = ("river sea mountain city capital bridge train plane light energy plant cell king war peace music art "
         "stone gold iron salt bread wine school law").split()


class WordEncoder:
    """A small deterministic encoder implementing the encoder interface: each word has a fixed Gaussian vector
    (seeded by its hash), a text is the sum of its words'; documents get an extra 'doc' word, so documents and
    queries differ as they do for models with prompts."""

    backend = "test"
    max_input_tokens = None

    def __init__(self, name: str = "words-16", dim: int = 16, fingerprint: str = "words:v1"):
        self.name, self.dim, self.fingerprint = name, dim, fingerprint

    def _vec(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha1(f"{self.fingerprint}/{word}".encode()).digest()[:8], "little")
        return np.random.default_rng(seed).normal(size=self.dim)

    def _encode(self, texts, extra: tuple[str, ...] = ()) -> np.ndarray:
        rows = [sum((self._vec(w) for w in (*t.lower().split(), *extra)), np.zeros(self.dim)) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), self.dim)

    def encode_queries(self, texts, batch_size=32, progress=False):
        return self._encode(texts)

    def encode_documents(self, texts, batch_size=32, progress=False):
        return self._encode(texts, ("doc",))

    encode = encode_documents

    def describe(self) -> dict:
        return {"name": self.name, "backend": self.backend, "dim": self.dim, "fingerprint": self.fingerprint}


def _corpus(n: int = 80, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"id": f"c{i:03d}", "url": f"https://wiki/p?pageId={i // 3}",
             "text": " ".join(rng.choice(WORDS, size=6))} for i in range(n)]


def _brute_force_ids(ids: list[str], vecs: np.ndarray, queries: np.ndarray, k: int) -> list[list[str]]:
    a = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = q.astype(np.float64) @ a.T.astype(np.float64)
    return [[ids[j] for j in np.argsort(-row, kind="stable")[:k]] for row in sims]


@pytest.fixture
def two_models(fresh_db, encoder):
    rows = _corpus()
    insert_rows(fresh_db, "chunks", rows)
    first = embed_table(fresh_db, "chunks", encoder, progress=False)
    words = WordEncoder()
    second = embed_table(fresh_db, "chunks", words, progress=False)
    return fresh_db, rows, words, first, second


def test_second_model_is_added_beside_the_first(two_models, encoder):
    db, rows, words, first, second = two_models
    assert (first.storage, first.processed, first.dim) == ("default-table", 80, 384)
    assert (second.storage, second.total, second.processed, second.skipped, second.errors) == ("table", 80, 80, 0, 0)
    ids, urls, mini = fetch_vectors(db)  # default = the column's model, as before
    assert ids == [r["id"] for r in rows] and mini.shape == (80, 384)
    np.testing.assert_allclose(mini, encoder.encode([r["text"] for r in rows]), atol=1e-6)
    w_ids, w_urls, w = fetch_vectors(db, "chunks", model="words-16")
    assert w_ids == ids and w_urls == urls
    # Chunks are documents: the stored vectors are encode_documents', not encode_queries'.
    np.testing.assert_allclose(w, words.encode_documents([r["text"] for r in rows]), atol=1e-6)
    np.testing.assert_allclose(fetch_vectors_by_id(db, "chunks", ["c005", "c001"], model="words-16"), w[[5, 1]],
                               atol=1e-6)
    status = {m["model"]: m for m in model_status(db, "chunks")}
    assert set(status) == {"all-MiniLM-L6-v2", "words-16"}
    assert (status["all-MiniLM-L6-v2"]["dim"], status["all-MiniLM-L6-v2"]["embedded"],
            status["all-MiniLM-L6-v2"]["storage"], status["all-MiniLM-L6-v2"]["default"]) == (384, 80, "default-table",
                                                                                      True)
    assert (status["words-16"]["dim"], status["words-16"]["embedded"], status["words-16"]["storage"],
            status["words-16"]["fingerprint"], status["words-16"]["backend"]) == (16, 80, "table", "words:v1", "test")
    # Both incremental: a new row gets each model's vector once; the existing ones are skipped.
    insert_rows(db, "chunks", [{"id": "c999", "url": "u", "text": "river sea"}])
    again = embed_table(db, "chunks", words, progress=False)
    assert (again.total, again.processed, again.skipped) == (81, 1, 80)
    assert embed_table(db, "chunks", encoder, progress=False).processed == 1
    np.testing.assert_allclose(fetch_vectors(db)[2][:80], mini, atol=1e-6)  # the first model's vectors untouched


def test_retrieval_per_model_equals_exact_in_memory(two_models, encoder):
    db, _, words, _, _ = two_models
    texts = ["river capital city", "music art peace", "iron gold salt", "train plane bridge", "law school king"]
    for model, enc in ((None, encoder), ("all-MiniLM-L6-v2", encoder), ("words-16", words)):
        ids, _, vecs = fetch_vectors(db, model=model)
        q = enc.encode_queries(texts) if hasattr(enc, "encode_queries") else enc.encode(texts)
        ref = _brute_force_ids(ids, vecs, q, 10)
        mem = MemoryRetriever.from_db(db, model=model).search(q, 10)
        pg = PgVectorRetriever(db, mode="exact", model=model).search(q, 10, batch_size=2)
        assert mem.ids == ref and pg.ids == ref, model
        for i in range(len(texts)):
            np.testing.assert_allclose(pg.scores[i], mem.scores[i], atol=1e-5)
    # HNSW per model: an index on words-16's vector table leaves the column without one.
    name = create_hnsw_index(db, m=8, ef_construction=32, model="words-16")
    assert hnsw_indexes(db, model="words-16") == [name] and hnsw_indexes(db) == []
    ann = PgVectorRetriever(db, mode="auto", ef_search=200, model="words-16")
    assert ann.backend == "pgvector-hnsw" and ann.model == "words-16"
    q = words.encode_queries(texts)
    assert ann.search(q, 5).ids == MemoryRetriever.from_db(db, model="words-16").search(q, 5).ids
    assert PgVectorRetriever(db, mode="auto").backend == "pgvector-exact"  # the column has no index
    with pytest.raises(ValueError, match=r"query vectors have shape \(5, 384\); expected \(n, 16\)"):
        PgVectorRetriever(db, model="words-16").search(encoder.encode(texts), 5)


def test_mixing_fingerprints_or_dimensions_is_an_error(two_models, encoder):
    db, rows, words, _, _ = two_models
    chunk = tables(db.schema).chunk
    other_prompts = WordEncoder(fingerprint="words:v2")
    with pytest.raises(ValueError, match=r"model 'words-16' made with fingerprint 'words:v1'.*'words:v2'.*"
                                         r"ragnb embed --model words-16 --replace"):
        embed_table(db, "chunks", other_prompts, progress=False)
    with pytest.raises(ValueError, match=r"16-dimensional vectors; the active encoder 'words-16' makes 8-dimensional"
                                         r".*--replace"):
        embed_table(db, "chunks", WordEncoder(dim=8), progress=False)
    # The default (column) is MiniLM's: comparing words-16 with it is refused, and the message says how to read
    # words-16 by name; asking by name verifies it.
    with pytest.raises(ValueError, match=r"holds vectors of model 'all-MiniLM-L6-v2'.*read it by name"):
        check_space(db, chunk, words)
    assert check_space(db, chunk, words, model="words-16")["storage"] == "table"
    with pytest.raises(ValueError, match=r"fingerprint"):
        check_space(db, chunk, other_prompts, model="words-16")
    with pytest.raises(ValueError, match=r"no vectors of model 'nope'.*ragnb embed --chunks --model nope"):
        fetch_vectors(db, model="nope")
    # --replace re-embeds that model only: all its rows again, the other model's vectors untouched.
    before = fetch_vectors(db)[2]
    redone = embed_table(db, "chunks", other_prompts, replace=True, progress=False)
    assert (redone.processed, redone.skipped, redone.storage) == (80, 0, "table")
    np.testing.assert_allclose(fetch_vectors(db, model="words-16")[2],
                               other_prompts.encode_documents([r["text"] for r in rows]), atol=1e-6)
    np.testing.assert_allclose(fetch_vectors(db)[2], before, atol=0)


def test_column_fingerprint_is_checked(fresh_db):
    insert_rows(fresh_db, "chunks", _corpus(10))
    assert embed_table(fresh_db, "chunks", WordEncoder(), progress=False).storage == "default-table"
    with pytest.raises(ValueError, match=r"ragnb_vectors_chunk \(the default vectors of chunk\) holds vectors of model 'words-16' made with fingerprint"):
        embed_table(fresh_db, "chunks", WordEncoder(fingerprint="words:v2"), progress=False)
    with pytest.raises(ValueError, match=r"of chunk\) holds 16-dimensional vectors of model 'words-16'; the "
                                         r"active encoder of that name makes 8-dim.*ragnb embed --chunks --model "
                                         r"words-16 --replace"):
        embed_table(fresh_db, "chunks", WordEncoder(dim=8), progress=False)
    redone = embed_table(fresh_db, "chunks", WordEncoder(dim=8), replace=True, progress=False)
    assert (redone.storage, redone.processed, redone.dim) == ("default-table", 10, 8)
    assert fetch_vectors(fresh_db)[2].shape == (10, 8)


# ------------------------------------------------------------------------- read-only production database


def _snapshot(db) -> dict:
    """Everything a write could change: the tables (in any schema) and the content of the production tables."""
    with db.engine.connect() as conn:
        rels = conn.execute(sa.text(
            "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1")).scalars().all()
        content = {t: conn.execute(sa.text(f"SELECT md5(string_agg(CAST(x AS text), '|' ORDER BY x.id)) FROM {t} x"))
                   .scalar() for t in ("chunk", "question_answer")}
    return {"relations": rels, "content": content}


@pytest.fixture
def production(fresh_db, monkeypatch):
    """A 'production' database on the embedded server whose chunk.embedding holds an outside model's 8-dim
    vectors, opened through a role that may only read, with its model declared by environment variables."""
    rows = _corpus(40, seed=3)
    insert_rows(fresh_db, "chunks", rows)
    insert_rows(fresh_db, "questions", [{"id": "q1", "question": "river sea", "url": "u"}])
    prod_vecs = np.random.default_rng(7).normal(size=(40, 8)).astype(np.float32)
    t = tables(fresh_db.schema).chunk
    role = f"ragnb_reader_{os.getpid()}_{next(_names)}"
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE chunk ALTER COLUMN embedding TYPE vector(8)"))
        for r, v in zip(rows, prod_vecs):
            conn.execute(sa.update(t).where(t.c.id == r["id"]).values(embedding=v))
        conn.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"'))
    url = fresh_db.engine.url.set(username=role).render_as_string(hide_password=False)
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_MODEL", "prod-embed-8")
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_BACKEND", "openai")
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_DIM", "8")
    monkeypatch.setenv("RAGNB_VECTOR_STORE_DB", f"store_{os.getpid()}_{next(_names)}")
    yield fresh_db, url, rows, prod_vecs
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text(f'DROP OWNED BY "{role}"'))
        conn.execute(sa.text(f'DROP ROLE "{role}"'))


def test_read_only_production_is_never_written(production):
    owner, url, _, prod_vecs = production
    before = _snapshot(owner)
    prod = connect(url=url)
    assert not prod.writable and not prod.embedded
    words = WordEncoder()
    stats = embed_table(prod, "chunks", words, progress=False)
    assert (stats.storage, stats.total, stats.processed) == ("table", 40, 40)
    q_stats = embed_table(prod, "questions", words, progress=False)
    assert (q_stats.storage, q_stats.processed) == ("table", 1)
    assert _snapshot(owner) == before  # no table added, no row changed in the production database
    # The candidate's vectors landed in the vector store (an embedded database of ragnb's own).
    store = prod.vector_store()
    assert store is not prod and store.embedded and store.writable
    with store.engine.connect() as conn:
        cat = conn.execute(sa.text("SELECT source_table, model, dim, vector_table FROM ragnb_embedding_model "
                                   "ORDER BY source_table")).all()
        assert [(r[0], r[1], r[2]) for r in cat] == [("chunk", "words-16", 16), ("question_answer", "words-16", 16)]
        assert conn.execute(sa.text(f"SELECT count(*) FROM {cat[0][3]}")).scalar() == 40
    # The production column reads as the declared model; the candidate by name; each searched exactly.
    ids, _, col = fetch_vectors(prod)
    np.testing.assert_allclose(col, prod_vecs, atol=1e-6)
    status = {m["model"]: m for m in model_status(prod, "chunks")}
    assert (status["prod-embed-8"]["storage"], status["prod-embed-8"]["backend"], status["prod-embed-8"]["dim"],
            status["prod-embed-8"]["embedded"]) == ("column", "openai", 8, 40)
    assert (status["words-16"]["storage"], status["words-16"]["embedded"]) == ("table", 40)
    q8 = np.random.default_rng(9).normal(size=(4, 8)).astype(np.float32)
    assert PgVectorRetriever(prod, mode="exact").search(q8, 5).ids == _brute_force_ids(ids, prod_vecs, q8, 5)
    qw = words.encode_queries(["river sea", "gold iron"])
    w_ids, _, w = fetch_vectors(prod, model="words-16")
    assert PgVectorRetriever(prod, mode="exact", model="words-16").search(qw, 5).ids == \
        MemoryRetriever.from_db(prod, model="words-16").search(qw, 5).ids == _brute_force_ids(w_ids, w, qw, 5)
    assert create_hnsw_index(prod, model="words-16")  # the index goes to the store, too
    assert _snapshot(owner) == before
    # The production model's own column is not ragnb's to fill on a read-only database.
    with pytest.raises(ValueError, match="read-only.*prod-embed-8.*--write"):
        embed_table(prod, "chunks", WordEncoder(name="prod-embed-8", dim=8), progress=False)
    # And the role itself cannot write, whatever ragnb did.
    with pytest.raises(sa.exc.DBAPIError, match="permission denied"), \
            connect(url=url, write=True).engine.begin() as conn:
        conn.execute(sa.text("UPDATE chunk SET text = 'x'"))
    prod.dispose()


def test_production_column_declared_with_wrong_dimension_or_model(production, monkeypatch):
    _, url, _, _ = production
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_DIM", "1024")
    prod = connect(url=url)
    with pytest.raises(ValueError, match=r"chunk.embedding holds 8-dimensional vectors, but its model 'prod-embed-8' "
                                         r"is declared with dim 1024.*RAGNB_PRODUCTION_EMBEDDING_DIM"):
        fetch_vectors(prod)
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_DIM", "8")
    prod = connect(url=url)
    # A query encoder of another model than the declared one is refused.
    with pytest.raises(ValueError, match=r"holds vectors of model 'prod-embed-8' \(dim 8\); the active model is "
                                         r"'words-16'"):
        check_space(prod, tables(prod.schema).chunk, WordEncoder())
    assert check_space(prod, tables(prod.schema).chunk, WordEncoder("prod-embed-8", 8))["verified"] is True
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_DIM", "eight")
    with pytest.raises(ValueError, match="embedding_model.dim = 'eight'"):
        connect(url=url)


def test_database_from_before_several_models_keeps_working(fresh_db):
    """A ragnb_embedding_space without backend/fingerprint (older ragnb) reads as before, read-only too, and the
    next write adds the columns."""
    insert_rows(fresh_db, "chunks", _corpus(12))
    words = WordEncoder()
    embed_table(fresh_db, "chunks", words, progress=False)
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE ragnb_embedding_space DROP COLUMN backend, DROP COLUMN fingerprint"))
    ro = connect(url=fresh_db.engine.url.render_as_string(hide_password=False))
    space = check_space(ro, tables(ro.schema).chunk, WordEncoder(fingerprint="anything"))
    assert (space["model"], space["dim"], space["verified"], space["fingerprint"]) == ("words-16", 16, True, None)
    assert fetch_vectors(ro)[2].shape == (12, 16)
    ro.dispose()
    insert_rows(fresh_db, "chunks", [{"id": "new", "url": "u", "text": "gold"}])
    assert embed_table(fresh_db, "chunks", words, progress=False).processed == 1
    assert model_status(fresh_db, "chunks")[0]["fingerprint"] == "words:v1"


def test_column_model_declared_in_the_schema_map(tmp_path, monkeypatch):
    from ragnb.config import ColumnModel, load_schema_map

    for var in ("MODEL", "BACKEND", "DIM"):
        monkeypatch.delenv(f"RAGNB_PRODUCTION_EMBEDDING_{var}", raising=False)
    f = tmp_path / "schema.yaml"
    f.write_text("chunk: {table: kb.chunks}\nembedding_model: {name: text-embedding-3-small, backend: openai, dim: 1024}\n")
    assert load_schema_map(f).column_model == ColumnModel("text-embedding-3-small", 1024, "openai")
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_MODEL", "qwen3-embedding-8b")  # the variables win
    monkeypatch.setenv("RAGNB_PRODUCTION_EMBEDDING_DIM", "4096")
    assert load_schema_map(f).column_model == ColumnModel("qwen3-embedding-8b", 4096, "")
    monkeypatch.delenv("RAGNB_PRODUCTION_EMBEDDING_MODEL")
    with pytest.raises(ValueError, match="RAGNB_PRODUCTION_EMBEDDING_MODEL is not"):
        load_schema_map(f)
    monkeypatch.delenv("RAGNB_PRODUCTION_EMBEDDING_DIM")
    f.write_text("embedding_model: {name: m, dims: 8}\n")
    with pytest.raises(ValueError, match=r"schema.yaml: unknown field\(s\) \['dims'\] under embedding_model"):
        load_schema_map(f)
    f.write_text("embedding_model: {dim: 8}\n")
    with pytest.raises(ValueError, match="embedding_model.name is missing"):
        load_schema_map(f)
    assert load_schema_map(None).column_model is None


def test_vector_store_in_a_named_database_and_schema(production, monkeypatch):
    owner, url, _, _ = production
    store_name = f"teamstore_{os.getpid()}_{next(_names)}"
    store_url = connect(database=store_name).engine.url.render_as_string(hide_password=False)
    monkeypatch.setenv("RAGNB_VECTOR_STORE_URL", store_url)
    monkeypatch.setenv("RAGNB_VECTOR_STORE_SCHEMA", "ragnb_vectors")
    before = _snapshot(owner)
    prod = connect(url=url)
    words = WordEncoder()
    assert embed_table(prod, "chunks", words, progress=False).processed == 40
    assert _snapshot(owner) == before
    store = prod.vector_store()
    assert store.engine.url.database == store_name and store.store_schema == "ragnb_vectors"
    with store.engine.connect() as conn:
        tables_in_schema = conn.execute(sa.text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'ragnb_vectors' ORDER BY 1")).scalars().all()
    assert tables_in_schema[0] == "ragnb_embedding_model" and tables_in_schema[1].startswith("ragnb_vec_")
    name = create_hnsw_index(prod, m=8, ef_construction=32, model="words-16")
    assert hnsw_indexes(prod, model="words-16") == [name]
    qw = words.encode_queries(["river sea", "gold iron", "law school"])
    assert PgVectorRetriever(prod, mode="hnsw", ef_search=100, model="words-16").search(qw, 5).ids == \
        MemoryRetriever.from_db(prod, model="words-16").search(qw, 5).ids
    prod.dispose()
