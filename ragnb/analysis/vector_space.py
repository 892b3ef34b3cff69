"""Vector-space projection (see docs/metrics.md, Analytics): UMAP 2D/3D of the stored chunk and question vectors, and
the numbers that make the picture checkable.

The projection is a diagnostic, not a metric: it helps to spot outliers, local clusters and empty zones.
Because a 2D picture can mislead, every figure comes with

* **trustworthiness** (Venna & Kaski; ``sklearn.manifold.trustworthiness``) of the 2D (and 3D) embedding:
  1.0 when every point's k nearest neighbours in the picture are also near it in the full space;
* **neighbour preservation**: the share of questions whose nearest chunk in the picture is their nearest
  chunk in the full space (cosine), both among the projected chunks;
* **outliers**: points whose mean cosine distance to their k nearest neighbours in the *full* space lies
  above the 99th percentile — found without UMAP, so the picture can be checked against them.

UMAP runs with a fixed ``random_state``, which makes it deterministic but single-threaded (umap-learn
then forces ``n_jobs=1``). Its numba functions are compiled on first use (~20–40 s in a fresh process);
:func:`ragnb.analysis.umap_cache.enable_jit_cache` keeps the compiled code on disk so that later processes load it instead.
"""

from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.analysis.umap_cache import enable_jit_cache
from ragnb.metrics.stats import aggregate
from ragnb.urls import page_id

COLOR_BY = ("source", "topic", "kind")
KINDS = ("chunk", "question")


# --------------------------------------------------------------------------------------------
# Points
# --------------------------------------------------------------------------------------------


@dataclass
class Points:
    """The vectors to project, one row per chunk or question (``kinds``), with what hover text needs."""

    ids: list[str]
    kinds: np.ndarray  # "chunk" | "question"
    urls: list[str | None]
    texts: list[str]
    vectors: np.ndarray  # float32 (n, dim)
    totals: dict = field(default_factory=dict)  # points available before sampling, per kind

    def __post_init__(self) -> None:
        n = len(self.ids)
        for name, value in (("kinds", self.kinds), ("urls", self.urls), ("texts", self.texts)):
            if len(value) != n:
                raise ValueError(f"Points.{name} has {len(value)} entries for {n} ids; give one per point")
        if self.vectors.ndim != 2 or self.vectors.shape[0] != n:
            raise ValueError(f"Points.vectors must be (n_points, dim) = ({n}, dim), got {self.vectors.shape}")
        bad = sorted(set(np.asarray(self.kinds).tolist()) - set(KINDS))
        if bad:
            raise ValueError(f"Points.kinds has {bad}; each point is 'chunk' or 'question'")

    def take(self, index: np.ndarray) -> "Points":
        return Points([self.ids[i] for i in index], self.kinds[index], [self.urls[i] for i in index],
                      [self.texts[i] for i in index], self.vectors[index], dict(self.totals))


def sample_index(kinds: np.ndarray, limit: int, seed: int = 0) -> np.ndarray:
    """Positions of a deterministic sample of at most ``limit`` points (0: all), in their original order.

    Each kind keeps its share of the sample: chunks get ``round(limit · n_chunks / n)`` places, questions the
    rest, each drawn without replacement by ``numpy.random.default_rng(seed)``.
    """
    if limit < 0:
        raise ValueError(f"limit = {limit}; use 0 for all points or a positive number")
    kinds = np.asarray(kinds)
    n = len(kinds)
    if limit == 0 or limit >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    chunk_pos = np.flatnonzero(kinds == "chunk")
    question_pos = np.flatnonzero(kinds != "chunk")
    n_chunks = min(len(chunk_pos), int(round(limit * len(chunk_pos) / n)))
    n_questions = min(len(question_pos), limit - n_chunks)
    chosen = np.concatenate([rng.choice(chunk_pos, n_chunks, replace=False),
                             rng.choice(question_pos, n_questions, replace=False)])
    return np.sort(chosen)


def load_points(db, limit: int = 0, seed: int = 0, include_questions: bool = True,
                models: dict[str, str | None] | None = None) -> Points:
    """The stored chunk (and question) vectors of ``db`` — never re-encoded — sampled to ``limit`` points.
    ``models``: whose vectors per table (``{"chunks": name, "questions": name}``; default: each table's column)."""
    from ragnb.store.vectors import fetch_texts, fetch_vectors

    parts = []
    for which, kind in (("chunks", "chunk"), ("questions", "question")):
        if kind == "question" and not include_questions:
            continue
        ids, urls, vectors = fetch_vectors(db, which, model=(models or {}).get(which))
        if ids:
            texts = fetch_texts(db, which)
            parts.append((ids, urls, vectors, [texts.get(i) or "" for i in ids], kind))
    if not parts:
        raise ValueError(f"{db.display_url}: no stored vectors; run `ragnb embed --chunks` (and --questions) first")
    dims = {p[2].shape[1] for p in parts}
    if len(dims) > 1:
        raise ValueError(f"chunk and question vectors have different dimensions {sorted(dims)}; re-embed with one model")
    points = Points(
        ids=[i for p in parts for i in p[0]],
        kinds=np.array([p[4] for p in parts for _ in p[0]]),
        urls=[u for p in parts for u in p[1]],
        texts=[t for p in parts for t in p[3]],
        vectors=np.concatenate([p[2] for p in parts]).astype(np.float32, copy=False),
        totals={f"n_{p[4]}s_total": len(p[0]) for p in parts},
    )
    return points.take(sample_index(points.kinds, limit, seed))


# --------------------------------------------------------------------------------------------
# Projection and the numbers that check it
# --------------------------------------------------------------------------------------------


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def exact_knn(vectors: np.ndarray, k: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours by cosine distance, each point first in its own list (distance 0), as UMAP
    expects: (indices int32 (n, k), distances float32 (n, k)), ties broken by position. Computed in row blocks
    of ``block`` so memory stays O(block · n)."""
    U = _unit(vectors).astype(np.float32)
    n = len(U)
    if not 1 <= k <= n:
        raise ValueError(f"k = {k} with {n} points; need 1 ≤ k ≤ number of points")
    idx = np.empty((n, k), dtype=np.int32)
    dist = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, block):
        sims = U[start:start + block] @ U.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = np.inf  # the point itself comes first whatever the rounding
        part = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (len(rows), 1))
        order = np.lexsort((part, -np.take_along_axis(sims, part, axis=1)), axis=1)
        top = np.take_along_axis(part, order, axis=1)
        d = 1.0 - np.take_along_axis(sims, top, axis=1)
        d[:, 0] = 0.0
        idx[start:start + block] = top
        dist[start:start + block] = np.clip(d, 0.0, 2.0)
    return idx, dist


def project(vectors: np.ndarray, n_components: int = 2, random_state: int = 0, n_neighbors: int = 15,
            min_dist: float = 0.1) -> tuple[np.ndarray, float]:
    """UMAP embedding (n, n_components) and the seconds the fit took (compilation included on first use).

    UMAP gets the *exact* cosine k-nearest-neighbour graph (:func:`exact_knn`), at every size: umap-learn would
    switch to pynndescent's approximate search from 4,096 points on, whose numba code takes the distance
    function as an argument and so is recompiled in every process whatever the disk cache holds (~20 s).
    With ``random_state`` fixed umap-learn runs single-threaded and returns the same embedding for the same
    input on the same machine.
    """
    import warnings

    n = len(vectors)
    if n_components not in (2, 3):
        raise ValueError(f"n_components = {n_components}; the projection is 2D or 3D")
    if not 2 <= n_neighbors < n:
        raise ValueError(f"n_neighbors = {n_neighbors} with {n} points; UMAP needs 2 ≤ n_neighbors < number of "
                         "points — lower n_neighbors or project more points (limit)")
    if n <= n_components + 1:
        raise ValueError(f"{n} points cannot be laid out in {n_components}D; project more points")
    enable_jit_cache()
    import umap

    start = time.perf_counter()
    knn = exact_knn(vectors, n_neighbors)
    reducer = umap.UMAP(n_components=n_components, n_neighbors=n_neighbors, min_dist=min_dist, metric="cosine",
                        random_state=random_state, n_jobs=1, precomputed_knn=knn)
    with warnings.catch_warnings():
        # no NNDescent index is kept (ragnb never calls transform), which umap-learn warns about
        warnings.filterwarnings("ignore", message=".*knn_search_index.*")
        embedding = reducer.fit_transform(np.asarray(vectors, dtype=np.float32))
    return np.asarray(embedding, dtype=np.float64), time.perf_counter() - start


def trustworthiness(vectors: np.ndarray, embedding: np.ndarray, k: int = 10, metric: str = "cosine") -> float:
    """Trustworthiness T(k) of ``embedding`` (Euclidean) against ``vectors`` (``metric``), via scikit-learn:

    T(k) = 1 − 2 / (n·k·(2n − 3k − 1)) · Σ_i Σ_{j ∈ U_i^k} (r(i, j) − k),

    U_i^k = the k nearest neighbours of i in the embedding that are not among its k nearest in the full
    space, r(i, j) = rank of j among i's neighbours in the full space. Needs k < n / 2.
    """
    from sklearn.manifold import trustworthiness as sk_trustworthiness

    n = len(vectors)
    if k < 1 or k >= n / 2:
        raise ValueError(f"trustworthiness k = {k} with {n} points; it needs 1 ≤ k < n/2 — lower trust_k")
    return float(sk_trustworthiness(vectors, embedding, n_neighbors=k, metric=metric))


def nearest_chunks(vectors: np.ndarray, embedding: np.ndarray, kinds: np.ndarray, k: int = 5) -> pd.DataFrame:
    """For each question: its nearest chunk in the full space (highest cosine) and its ``k`` nearest chunks in
    the embedding (Euclidean), as positions into the points. Ties go to the lower position."""
    kinds = np.asarray(kinds)
    chunk_pos, question_pos = np.flatnonzero(kinds == "chunk"), np.flatnonzero(kinds == "question")
    if len(chunk_pos) == 0 or len(question_pos) == 0:
        return pd.DataFrame(columns=["position", "nearest_full", "nearest_embedded"])
    sims = _unit(vectors[question_pos]) @ _unit(vectors[chunk_pos]).T
    full = chunk_pos[np.argmax(sims, axis=1)]
    d2 = ((embedding[question_pos][:, None, :] - embedding[chunk_pos][None, :, :]) ** 2).sum(axis=2)
    order = np.argsort(d2, axis=1, kind="stable")[:, :k]
    return pd.DataFrame({"position": question_pos, "nearest_full": full,
                         "nearest_embedded": [chunk_pos[row].tolist() for row in order]})


def neighbour_preservation(vectors: np.ndarray, embedding: np.ndarray, kinds: np.ndarray, k: int = 1) -> np.ndarray:
    """Per question: 1.0 if its nearest chunk in the full space (cosine) is among its ``k`` nearest chunks in
    the embedding (Euclidean), else 0.0. The mean is the share of questions whose picture does not lie about
    their best chunk (k = 1: the nearest chunk is the same). Chance level for k = 1 is 1 / n_chunks."""
    table = nearest_chunks(vectors, embedding, kinds, k)
    return np.array([float(full in emb[:k]) for full, emb in zip(table["nearest_full"], table["nearest_embedded"])])


def knn_distance(vectors: np.ndarray, k: int = 5) -> np.ndarray:
    """Mean cosine distance (1 − cos) from each point to its ``k`` nearest other points, in the full space."""
    from sklearn.neighbors import NearestNeighbors

    n = len(vectors)
    if not 1 <= k < n:
        raise ValueError(f"outlier k = {k} with {n} points; need 1 ≤ k < number of points — lower outlier_k")
    nn = NearestNeighbors(n_neighbors=k, metric="cosine", algorithm="brute").fit(vectors)
    dist, _ = nn.kneighbors()  # no X: each point's neighbours exclude the point itself
    return dist.mean(axis=1)


def outliers(distances: np.ndarray, quantile: float = 0.99) -> tuple[np.ndarray, float]:
    """(mask, threshold): points whose kNN distance is strictly above its ``quantile`` (linear interpolation)."""
    if not 0 < quantile < 1:
        raise ValueError(f"outlier quantile = {quantile}; use a share between 0 and 1, e.g. 0.99 for the top 1%")
    threshold = float(np.quantile(distances, quantile))
    return distances > threshold, threshold


def topic_labels(vectors: np.ndarray, n_topics: int, seed: int = 0) -> np.ndarray:
    """KMeans clusters of the unit-normalised vectors (Euclidean on unit vectors ranks as cosine)."""
    from sklearn.cluster import KMeans

    if not 1 <= n_topics <= len(vectors):
        raise ValueError(f"n_topics = {n_topics} with {len(vectors)} points; use 1 ≤ n_topics ≤ number of points")
    return KMeans(n_clusters=n_topics, n_init=10, random_state=seed).fit_predict(_unit(vectors))


def source_labels(urls: list[str | None], max_sources: int = 20) -> list[str]:
    """The page of each URL (``ragnb.urls.page_id``); only the ``max_sources`` most frequent pages keep their
    name, the rest become ``"other"``; a missing URL is ``"(no url)"``."""
    pages = [page_id(u) for u in urls]
    counts = pd.Series([p for p in pages if p is not None], dtype=object).value_counts(sort=True)
    keep = set(counts.index[:max_sources])
    return [("(no url)" if p is None else p if p in keep else "other") for p in pages]


def short_text(text: str | None, max_chars: int = 160) -> str:
    """The start of ``text`` on one line, cut to ``max_chars`` (raw: escape it where it is rendered)."""
    flat = " ".join((text or "").split())
    return flat[: max_chars - 1] + "…" if len(flat) > max_chars else flat


def hover_text(frame: pd.DataFrame) -> np.ndarray:
    """Hover labels: kind, id, source and text, every value HTML-escaped (plotly renders tags in hover text)."""
    esc = lambda v: html.escape(str(v))  # noqa: E731
    return np.array([f"<b>{esc(k)}</b> {esc(i)}<br>{esc(src)}<br>{esc(t)}"
                     for k, i, src, t in zip(frame["kind"], frame.index, frame["source"], frame["text"])], dtype=object)


# --------------------------------------------------------------------------------------------
# One call for the notebook
# --------------------------------------------------------------------------------------------


@dataclass
class VectorSpaceResult:
    per_item: pd.DataFrame  # one row per point: kind, url, labels, short text, coordinates, kNN distance, outlier
    summary: dict
    notes: list[str]


def _project_all(X: np.ndarray, dims: tuple[int, ...], frame: pd.DataFrame, random_state: int, n_neighbors: int,
                 min_dist: float, trust_k: int) -> tuple[dict[int, np.ndarray], dict[str, float], dict[str, float]]:
    """UMAP to each of ``dims`` (coordinates added to ``frame`` as x2, y2, x3 …): the embeddings, fit seconds
    and trustworthiness per dimension."""
    fit_seconds: dict[str, float] = {}
    trust: dict[str, float] = {}
    embeddings: dict[int, np.ndarray] = {}
    for d in sorted(set(dims)):
        emb, seconds = project(X, d, random_state, n_neighbors, min_dist)
        embeddings[d] = emb
        fit_seconds[f"{d}d"] = round(seconds, 3)
        for axis, name in zip(range(d), "xyz"):
            frame[f"{name}{d}"] = emb[:, axis]
        trust[f"{d}d"] = trustworthiness(X, emb, trust_k)
    return embeddings, fit_seconds, trust


def _nearest_chunk_columns(frame: pd.DataFrame, ids: list[str], nn: pd.DataFrame, preserved: np.ndarray) -> None:
    """Each question's nearest chunk in the full space and in the projection, and whether they agree."""
    frame["nearest_chunk_full"] = None
    frame["nearest_chunk_projected"] = None
    frame["nearest_chunk_preserved"] = np.nan
    if len(nn):
        rows = nn["position"].to_numpy()
        frame.iloc[rows, frame.columns.get_loc("nearest_chunk_full")] = [ids[i] for i in nn["nearest_full"]]
        projected = [ids[e[0]] for e in nn["nearest_embedded"]]
        frame.iloc[rows, frame.columns.get_loc("nearest_chunk_projected")] = projected
        frame.iloc[rows, frame.columns.get_loc("nearest_chunk_preserved")] = preserved


def run_vector_space(points: Points, *, color_by: str = "source", n_topics: int = 10, max_sources: int = 20,
                     n_neighbors: int = 15, min_dist: float = 0.1, random_state: int = 42, trust_k: int = 10,
                     outlier_k: int = 5, outlier_quantile: float = 0.99, dims: tuple[int, ...] = (2, 3),
                     n_boot: int = 1000) -> VectorSpaceResult:
    """Project ``points`` to 2D and 3D with UMAP (cosine) and compute trustworthiness, neighbour preservation
    and full-space outliers. ``color_by``: "source" (page of the URL), "topic" (KMeans) or "kind"."""
    if color_by not in COLOR_BY:
        raise ValueError(f"color_by = {color_by!r}; use one of {list(COLOR_BY)}")
    if not dims or any(d not in (2, 3) for d in dims):
        raise ValueError(f"dims = {dims}; use (2,), (3,) or (2, 3)")
    X = points.vectors
    kinds = np.asarray(points.kinds)
    notes: list[str] = []
    frame = pd.DataFrame({"kind": kinds, "url": points.urls,
                          "source": source_labels(points.urls, max_sources),
                          "text": [short_text(t) for t in points.texts]},
                         index=pd.Index(points.ids, name="id"))
    if color_by == "topic":
        frame["topic"] = [f"topic {t}" for t in topic_labels(X, n_topics, random_state)]
    jit = enable_jit_cache()
    embeddings, fit_seconds, trust = _project_all(X, dims, frame, random_state, n_neighbors, min_dist, trust_k)

    base = embeddings[min(embeddings)]
    preserved = neighbour_preservation(X, base, kinds, 1)
    preserved5 = neighbour_preservation(X, base, kinds, 5)
    if len(preserved) == 0:
        notes.append("Neighbour preservation needs both chunks and questions among the projected points: not computed.")
    _nearest_chunk_columns(frame, points.ids, nearest_chunks(X, base, kinds, 1), preserved)

    dist = knn_distance(X, outlier_k)
    mask, threshold = outliers(dist, outlier_quantile)
    frame["knn_distance"] = dist
    frame["outlier"] = mask

    n_chunks, n_questions = int((kinds == "chunk").sum()), int((kinds == "question").sum())
    summary = {
        "analysis": "vector_space",
        "n_points": len(points.ids), "n_chunks": n_chunks, "n_questions": n_questions,
        **points.totals,
        "dims": int(X.shape[1]),
        "trustworthiness": trust.get("2d", trust.get("3d")),
        "trustworthiness_3d": trust.get("3d"),
        "trust_k": trust_k,
        "neighbour_preservation": aggregate(preserved, n_boot=n_boot),
        "neighbour_preservation@5": aggregate(preserved5, n_boot=n_boot),
        "neighbour_preservation_chance": (1.0 / n_chunks) if n_chunks else math.nan,
        "neighbour_preservation_space": f"{min(embeddings)}d",
        "n_outliers": int(mask.sum()),
        "outliers": {"k": outlier_k, "quantile": outlier_quantile, "threshold_cosine_distance": threshold,
                     "chunks": int((mask & (kinds == "chunk")).sum()),
                     "questions": int((mask & (kinds == "question")).sum())},
        "color_by": color_by,
        "umap": {"metric": "cosine", "n_neighbors": n_neighbors, "min_dist": min_dist,
                 "random_state": random_state, "n_jobs": 1},
        "fit_seconds": fit_seconds,  # informational: includes numba compilation on a process's first fit
        "jit_cache": jit,
    }
    notes.append("UMAP runs with a fixed random_state: deterministic on this machine, and single-threaded.")
    return VectorSpaceResult(frame, summary, notes)


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def scatter(frame: pd.DataFrame, color_by: str, dims: int = 2, title: str | None = None):
    """Interactive plotly scatter of a :func:`run_vector_space` frame: one trace per colour group, chunks as
    circles and questions as diamonds, hover = kind, id, source and the escaped text preview. Outliers are
    circled in black (their own legend entry, so they can be hidden)."""
    import plotly.graph_objects as go

    if color_by not in COLOR_BY:
        raise ValueError(f"color_by = {color_by!r}; use one of {list(COLOR_BY)}")
    cols = [f"{a}{dims}" for a in "xyz"[:dims]]
    missing = [c for c in cols + [color_by] if c not in frame.columns]
    if missing:
        raise ValueError(f"frame has no column(s) {missing}; run run_vector_space with dims including {dims}"
                         + (" and color_by='topic'" if "topic" in missing else ""))
    hover = hover_text(frame)
    symbols = {"chunk": "circle", "question": "diamond"}
    fig = go.Figure()
    groups = frame[color_by].astype(str).to_numpy()
    kinds = frame["kind"].to_numpy()
    labels = sorted(set(groups.tolist()), key=lambda g: (g in ("other", "(no url)"), g))
    colours = _colours(labels)
    for label in labels:
        shown = False
        for kind in KINDS:
            sel = (groups == label) & (kinds == kind)
            if not sel.any():
                continue
            sub = frame[sel]
            marker = dict(size=6 if dims == 2 else 3, symbol=symbols[kind], opacity=0.8, color=colours[label])
            name = label if len(label) <= 48 else "…" + label[-47:]
            common = dict(mode="markers", name=name, legendgroup=label, showlegend=not shown,
                          hovertext=hover[sel], hoverinfo="text", marker=marker)
            shown = True
            if dims == 2:
                fig.add_trace(go.Scattergl(x=sub[cols[0]], y=sub[cols[1]], **common))
            else:
                fig.add_trace(go.Scatter3d(x=sub[cols[0]], y=sub[cols[1]], z=sub[cols[2]], **common))
    ringed = frame["outlier"].to_numpy(dtype=bool) if "outlier" in frame else np.zeros(len(frame), dtype=bool)
    ring = frame[ringed]
    if len(ring):
        common = dict(mode="markers", name="outlier (full-space kNN distance)", hovertext=hover[ringed],
                      hoverinfo="text", marker=dict(size=11 if dims == 2 else 6, symbol="circle-open",
                                                    color="black", line=dict(width=2)))
        if dims == 2:
            fig.add_trace(go.Scattergl(x=ring[cols[0]], y=ring[cols[1]], **common))
        else:
            fig.add_trace(go.Scatter3d(x=ring[cols[0]], y=ring[cols[1]], z=ring[cols[2]], **common))
    fig.update_layout(title=title or f"UMAP {dims}D, coloured by {color_by} (circles: chunks, diamonds: questions)",
                      height=620 if dims == 2 else 720, legend=dict(itemsizing="constant"))
    return fig


def _colours(labels: list[str]) -> dict[str, str]:
    """One fixed colour per label, so a label's chunks and questions match; "other" and "(no url)" are grey."""
    from plotly.colors import qualitative

    palette = qualitative.Dark24 + qualitative.Light24 + qualitative.Alphabet
    fixed = {"other": "#b0b0b0", "(no url)": "#dedede", "chunk": "#1f77b4", "question": "#ff7f0e"}
    free = [lab for lab in labels if lab not in fixed]
    out = {lab: palette[i % len(palette)] for i, lab in enumerate(free)}
    out.update({lab: fixed[lab] for lab in labels if lab in fixed})
    return out
