"""Vector-space projection: sampling, neighbour preservation, trustworthiness, outliers, UMAP determinism,
numba cache wiring, and the notebook end to end on a small corpus."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest
from numba.core.caching import NullCache
from sklearn.manifold import trustworthiness as sk_trustworthiness

from db_env import default_embedded_db
from ragnb.analysis import vector_space as vs


@pytest.fixture(scope="module", autouse=True)
def _persistent_numba_cache(request, tmp_path_factory):
    """UMAP compiles for ~30 s in a fresh process; keep the compiled code in pytest's cache folder so that later
    test sessions (and the notebook kernel, which inherits the variable) load it instead."""
    before = os.environ.get("NUMBA_CACHE_DIR")
    if not before:
        cache = getattr(request.config, "cache", None)  # absent with -p no:cacheprovider
        os.environ["NUMBA_CACHE_DIR"] = str(cache.mkdir("numba") if cache else tmp_path_factory.mktemp("numba"))
    yield
    if not before:
        os.environ.pop("NUMBA_CACHE_DIR", None)


def clustered(n: int, dim: int = 16, centres: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim))
    return (c[rng.integers(0, centres, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)


# --------------------------------------------------------------------------------------------
# Sampling and labels
# --------------------------------------------------------------------------------------------


def test_sample_keeps_kind_shares_and_is_deterministic():
    kinds = np.array(["chunk"] * 30 + ["question"] * 70)
    idx = vs.sample_index(kinds, 10, seed=3)
    assert len(idx) == 10 and list(idx) == sorted(idx)
    assert (kinds[idx] == "chunk").sum() == 3  # round(10 · 30/100)
    assert (kinds[idx] == "question").sum() == 7
    assert np.array_equal(idx, vs.sample_index(kinds, 10, seed=3))
    assert not np.array_equal(idx, vs.sample_index(kinds, 10, seed=4))
    assert np.array_equal(vs.sample_index(kinds, 0), np.arange(100))
    assert np.array_equal(vs.sample_index(kinds, 500), np.arange(100))
    with pytest.raises(ValueError, match="limit"):
        vs.sample_index(kinds, -1)


def test_source_labels_keep_the_most_frequent_pages():
    urls = ["https://x.org/a", "http://x.org/a/", "https://x.org/b", "https://x.org/b", "https://x.org/b",
            "https://x.org/c", None]
    assert vs.source_labels(urls, max_sources=2) == [
        "x.org/a", "x.org/a", "x.org/b", "x.org/b", "x.org/b", "other", "(no url)"]


def test_hover_text_is_escaped():
    frame = pd.DataFrame({"kind": ["chunk"], "source": ["<b>s</b>"], "text": ['<script>alert("x")</script> & co']},
                         index=pd.Index(["id<1>"], name="id"))
    label = vs.hover_text(frame)[0]
    assert "<script>" not in label and "&lt;script&gt;" in label and "&amp; co" in label
    assert "id&lt;1&gt;" in label and "&lt;b&gt;s&lt;/b&gt;" in label
    assert vs.short_text("a  b\n c" + "x" * 300, 10) == "a b cxxxx…"


def test_points_reject_mismatched_fields():
    with pytest.raises(ValueError, match="kinds"):
        vs.Points(["a", "b"], np.array(["chunk"]), [None, None], ["", ""], np.zeros((2, 3)))
    with pytest.raises(ValueError, match="'chunk' or 'question'"):
        vs.Points(["a"], np.array(["doc"]), [None], [""], np.zeros((1, 3)))


# --------------------------------------------------------------------------------------------
# The numbers that check the picture
# --------------------------------------------------------------------------------------------


def test_neighbour_preservation_on_a_hand_made_case():
    # full space: q0 is nearest to c0, q1 to c1 (cosine)
    X = np.array([[1, 0, 0], [0, 1, 0], [0.9, 0.1, 0], [0.1, 0.9, 0]], dtype=float)
    kinds = np.array(["chunk", "chunk", "question", "question"])
    # picture: q0 sits next to c0 (kept), q1 also next to c0 (its nearest chunk c1 is far away)
    emb = np.array([[0, 0], [10, 0], [1, 0], [2, 0]], dtype=float)
    assert vs.neighbour_preservation(X, emb, kinds, 1).tolist() == [1.0, 0.0]
    assert vs.neighbour_preservation(X, emb, kinds, 2).tolist() == [1.0, 1.0]
    table = vs.nearest_chunks(X, emb, kinds, 1)
    assert table["nearest_full"].tolist() == [0, 1] and [e[0] for e in table["nearest_embedded"]] == [0, 0]
    assert len(vs.neighbour_preservation(X[:2], emb[:2], kinds[:2])) == 0  # no questions: nothing to score


def _trustworthiness_by_formula(X: np.ndarray, E: np.ndarray, k: int) -> float:
    """T(k) = 1 − 2/(n·k·(2n − 3k − 1)) Σ_i Σ_{j ∈ U_i} (r(i, j) − k), full space by cosine distance."""
    n = len(X)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    full = 1 - U @ U.T
    emb = ((E[:, None, :] - E[None, :, :]) ** 2).sum(-1)
    penalty = 0.0
    for i in range(n):
        others = [j for j in range(n) if j != i]
        full_rank = {j: r + 1 for r, j in enumerate(sorted(others, key=lambda j: (full[i, j], j)))}
        emb_nn = sorted(others, key=lambda j: (emb[i, j], j))[:k]
        penalty += sum(full_rank[j] - k for j in emb_nn if full_rank[j] > k)
    return 1 - 2.0 / (n * k * (2 * n - 3 * k - 1)) * penalty


def test_trustworthiness_equals_sklearn_and_the_formula():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(14, 6))
    E = X[:, :2] + 0.5 * rng.normal(size=(14, 2))
    ours = vs.trustworthiness(X, E, k=3)
    assert ours == pytest.approx(sk_trustworthiness(X, E, n_neighbors=3, metric="cosine"), abs=1e-12)
    assert ours == pytest.approx(_trustworthiness_by_formula(X, E, 3), abs=1e-12)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert vs.trustworthiness(X, U, k=3) == pytest.approx(1.0)  # unit vectors: Euclidean order = cosine order
    with pytest.raises(ValueError, match="trust_k"):
        vs.trustworthiness(X, E, k=7)  # needs k < n/2


def test_knn_distance_and_outliers_on_known_angles():
    angles = np.array([0.0, 0.1, 0.3, 0.6, math.pi / 2])
    X = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    d = vs.knn_distance(X, k=1)
    expected = [1 - math.cos(a) for a in (0.1, 0.1, 0.2, 0.3, math.pi / 2 - 0.6)]
    assert d == pytest.approx(expected, abs=1e-12)
    mask, threshold = vs.outliers(d, 0.75)  # 0.75 quantile of 5 values = the 4th smallest
    assert mask.tolist() == [False, False, False, False, True] and threshold == pytest.approx(1 - math.cos(0.3))
    far = ((1 - math.cos(math.pi / 2 - 0.6)) + (1 - math.cos(math.pi / 2 - 0.3))) / 2
    assert vs.knn_distance(X, k=2)[4] == pytest.approx(far)
    with pytest.raises(ValueError, match="quantile"):
        vs.outliers(d, 1.0)
    with pytest.raises(ValueError, match="outlier_k"):
        vs.knn_distance(X, k=5)


def test_exact_knn_equals_brute_force_cosine():
    from sklearn.metrics import pairwise_distances

    X = clustered(37, seed=5)
    idx, dist = vs.exact_knn(X, 6, block=8)  # several row blocks
    D = pairwise_distances(X, metric="cosine")
    np.fill_diagonal(D, -1.0)  # self first
    expected = np.argsort(D, axis=1, kind="stable")[:, :6]
    assert np.array_equal(idx, expected) and idx.dtype == np.int32
    np.fill_diagonal(D, 0.0)
    assert np.allclose(dist, np.take_along_axis(D, expected, axis=1), atol=1e-6)
    assert (dist[:, 0] == 0).all()


def test_topics_are_kmeans_on_unit_vectors():
    from sklearn.cluster import KMeans

    X = clustered(40)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    expected = KMeans(n_clusters=4, n_init=10, random_state=7).fit_predict(U)
    assert np.array_equal(vs.topic_labels(X, 4, seed=7), expected)
    with pytest.raises(ValueError, match="n_topics"):
        vs.topic_labels(X, 41)


# --------------------------------------------------------------------------------------------
# UMAP and the numba cache
# --------------------------------------------------------------------------------------------


def umap_dispatchers() -> list:
    import sys

    from numba.core.dispatcher import Dispatcher

    found = {id(o): o for name, m in list(sys.modules.items()) if m is not None and name.split(".")[0] == "umap"
             for o in vars(m).values() if isinstance(o, Dispatcher)}
    return list(found.values())


def test_jit_cache_folder_and_dispatchers():
    from ragnb import config

    from ragnb.analysis import umap_cache

    assert umap_cache.jit_cache_dir() == config.ragnb_home() / "numba_cache"
    info = umap_cache.enable_jit_cache()
    assert info["cache_dir"] == os.environ["NUMBA_CACHE_DIR"]
    assert umap_cache.enable_jit_cache() == info  # idempotent
    # umap-learn caches almost none of its numba functions itself; ragnb switched caching on for all of them
    dispatchers = umap_dispatchers()
    assert len(dispatchers) > 50
    assert all(not isinstance(d._cache, NullCache) for d in dispatchers)


def test_umap_is_deterministic_and_shaped():
    X = clustered(60)
    a, _ = vs.project(X, 2, random_state=0, n_neighbors=8)
    b, _ = vs.project(X, 2, random_state=0, n_neighbors=8)
    c3, _ = vs.project(X, 3, random_state=0, n_neighbors=8)
    assert a.shape == (60, 2) and c3.shape == (60, 3)
    assert np.array_equal(a, b)
    # the layout code was loaded from (hit) or compiled into (miss) the disk cache, not compiled uncached
    served = sum(sum(d.stats.cache_hits.values()) + sum(d.stats.cache_misses.values()) for d in umap_dispatchers())
    assert served >= 1
    with pytest.raises(ValueError, match="n_neighbors"):
        vs.project(X[:8], 2, n_neighbors=8)
    with pytest.raises(ValueError, match="2D or 3D"):
        vs.project(X, 4)


def test_run_vector_space_numbers_match_independent_computations():
    X = clustered(50, seed=2)
    kinds = np.array(["chunk"] * 20 + ["question"] * 30)
    urls = [f"https://w.org/p{i % 3}" for i in range(50)]
    points = vs.Points([f"id{i}" for i in range(50)], kinds, urls, [f"text {i} <i>" for i in range(50)], X)
    res = vs.run_vector_space(points, color_by="topic", n_topics=3, n_neighbors=8, trust_k=4, outlier_k=3,
                              outlier_quantile=0.9, n_boot=50)
    s, f = res.summary, res.per_item
    assert (s["n_points"], s["n_chunks"], s["n_questions"], s["dims"]) == (50, 20, 30, 16)
    E2, E3 = f[["x2", "y2"]].to_numpy(), f[["x3", "y3", "z3"]].to_numpy()
    assert s["trustworthiness"] == pytest.approx(sk_trustworthiness(X, E2, n_neighbors=4, metric="cosine"))
    assert s["trustworthiness_3d"] == pytest.approx(sk_trustworthiness(X, E3, n_neighbors=4, metric="cosine"))
    # nearest chunk by brute force
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    full = np.argmax(U[20:] @ U[:20].T, axis=1)
    pic = np.argmin(((E2[20:, None] - E2[None, :20]) ** 2).sum(-1), axis=1)
    assert s["neighbour_preservation"]["mean"] == pytest.approx(np.mean(full == pic))
    assert s["neighbour_preservation"]["n"] == 30
    assert f["nearest_chunk_full"].iloc[20:].tolist() == [f"id{j}" for j in full]
    # outliers: mean cosine distance to 3 nearest others above the 90th percentile
    D = 1 - U @ U.T
    np.fill_diagonal(D, np.inf)
    knn = np.sort(D, axis=1)[:, :3].mean(axis=1)
    assert s["n_outliers"] == int((knn > np.quantile(knn, 0.9)).sum()) == int(f["outlier"].sum())
    assert set(f["topic"]) == {"topic 0", "topic 1", "topic 2"}
    for dims in (2, 3):
        fig = vs.scatter(f, "topic", dims)
        shown = sum(len(t.x) for t in fig.data if t.name != "outlier (full-space kNN distance)")
        assert shown == 50
        assert all("<i>" not in h for t in fig.data for h in t.hovertext)
    with pytest.raises(ValueError, match="color_by"):
        vs.run_vector_space(points, color_by="colour")


# --------------------------------------------------------------------------------------------
# Notebook end to end
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_corpus_db():
    """A database with 20 demo paragraphs and their questions, embedded; the notebook reads it as corpus "db"."""
    from ragnb.datasets import demo
    from ragnb.embeddings.models import get_encoder
    from ragnb.store.engine import connect
    from ragnb.store.loaders import insert_rows
    from ragnb.store.vectors import embed_table

    name = f"vs_nb_{os.getpid()}"
    with default_embedded_db(name):
        db = connect(database=name)
        chunks = demo.chunk_rows("ru")[:20]
        urls = {c["url"] for c in chunks}
        questions = [q for q in demo.question_rows("ru") if q["url"] in urls][:60]
        insert_rows(db, "chunks", chunks)
        insert_rows(db, "questions", questions)
        encoder = get_encoder()
        embed_table(db, "chunks", encoder, progress=False)
        embed_table(db, "questions", encoder, progress=False)
        yield db
        db.dispose()


@pytest.mark.slow
def test_notebook_runs_and_its_numbers_check_out(small_corpus_db, tmp_path):
    from ragnb.runs.runner import run_notebooks
    from ragnb.store.vectors import fetch_vectors

    params = {"corpus": "db", "limit": 0, "color_by": "source", "n_neighbors": 10, "trust_k": 5, "outlier_k": 3,
              "n_boot": 50}
    result = run_notebooks(["vector_space"], params, outputs=tmp_path, log=lambda *_: None)
    assert result.failures == [], result.reports
    run_dir = result.run_dir
    metrics = json.loads((run_dir / "vector_space.metrics.json").read_text(encoding="utf-8"))
    assert result.record["other_metrics"]["vector_space"]["n_points"] == metrics["n_points"]
    c_ids, _, C = fetch_vectors(small_corpus_db, "chunks")
    q_ids, _, Q = fetch_vectors(small_corpus_db, "questions")
    assert (metrics["n_chunks"], metrics["n_questions"], metrics["dims"]) == (20, len(q_ids), 384)
    assert metrics["n_points"] == 20 + len(q_ids)
    per = pd.read_csv(run_dir / "vector_space.per_item.csv").set_index("item_id")
    ids = c_ids + q_ids
    X = np.concatenate([C, Q])
    E2 = per.loc[ids, ["x2", "y2"]].to_numpy()
    assert metrics["trustworthiness"] == pytest.approx(sk_trustworthiness(X, E2, n_neighbors=5, metric="cosine"), abs=1e-6)
    preserved = per.loc[q_ids, "nearest_chunk_preserved"].to_numpy()
    assert metrics["neighbour_preservation"]["mean"] == pytest.approx(preserved.mean())
    assert 0.0 <= metrics["trustworthiness"] <= 1.0 and metrics["n_outliers"] == int(per["outlier"].sum())
    html = (run_dir / "vector_space.html").read_text(encoding="utf-8")
    assert "scatter3d" in html and "scattergl" in html


@pytest.mark.slow
def test_background_warm_up_compiles_everything_the_map_needs(tmp_path, monkeypatch):
    """The warm-up a run starts for the vector-space notebook runs at the lowest priority, and afterwards a new
    process drawing 2D and 3D maps of another size and dimension compiles nothing (the cache is unchanged)."""
    import subprocess
    import sys

    from ragnb.analysis import umap_cache, umap_warmup

    cache = tmp_path / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))
    assert not umap_cache.is_warm()
    proc = umap_warmup.warm_in_background()
    assert proc is not None
    if os.name == "posix":
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == 19
    assert proc.wait(timeout=600) == 0
    assert umap_cache.is_warm() and umap_warmup.warm_in_background() is None

    def files() -> set:
        return {(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in cache.rglob("*") if p.is_file()}

    compiled = files()
    assert len(compiled) > 20
    code = ("import numpy as np\nfrom ragnb.analysis import vector_space\n"
            "x = np.random.default_rng(1).normal(size=(150, 48))\n"
            "for dims in (2, 3):\n    vector_space.project(x, dims)\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})
    assert files() == compiled
