"""Topic coverage (see docs/metrics.md, Analytics): cluster the questions into topics (KMeans over their embeddings) and
count, per topic, how many distinct chunks and source URLs its questions' top-k retrievals reach.

Language-centred clustering. A multilingual model puts the questions of one language nearer each other than to
the same question in the other language, so KMeans on a Russian/English log splits it by language first. With
``languages`` given, each language's mean vector is subtracted from its questions (then re-normalised) before
KMeans: what is left is the subject.

A topic with many questions but few distinct chunks leans on a narrow slice of the knowledge base (weak
coverage); a skew in ``unique_urls`` shows a topic served by a few sources only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragnb.analysis.topic_pages import page_agreement, question_pages, structure_note, structure_verdict, top_pages
from ragnb.analysis.topic_terms import language_mix, question_languages, topic_terms
from ragnb.tiers.real_users import page_of

# A language with fewer questions than this is centred on the mean of all questions: the mean of a handful of
# questions is their subject as much as their language.
MIN_LANGUAGE_GROUP = 5


@dataclass
class Clustering:
    labels: np.ndarray  # (n,) topic id per question; topic 0 is the largest
    centroids: np.ndarray  # (n_topics, dim) unit-length centroids
    similarity: np.ndarray  # (n,) cosine similarity of each question to its topic centroid
    silhouette: float  # mean silhouette (cosine distance) in the clustered space; NaN when undefined (n_topics = n)
    inertia: float
    space: str = "unit vectors"  # what KMeans clustered: "unit vectors" or "language-centred unit vectors"


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def language_centred(vectors: np.ndarray, languages: Sequence[str]) -> np.ndarray:
    """Unit rows u_i − mean(u_j : language j = language i), re-normalised to unit length. A language with fewer
    than :data:`MIN_LANGUAGE_GROUP` questions (and "other") is centred on the mean of all questions instead."""
    x = _unit(np.asarray(vectors, dtype=np.float64))
    langs = np.asarray(list(languages), dtype=object)
    if len(langs) != len(x):
        raise ValueError(f"{len(langs)} languages for {len(x)} vectors; give one language per question")
    out = x - x.mean(axis=0)
    for lang in set(langs.tolist()) - {"other"}:
        members = langs == lang
        if members.sum() >= MIN_LANGUAGE_GROUP:
            out[members] = x[members] - x[members].mean(axis=0)
    return _unit(out)


def check_n_topics(n_topics: int, n_questions: int) -> None:
    if not isinstance(n_topics, (int, np.integer)) or isinstance(n_topics, bool):
        raise ValueError(f"n_topics = {n_topics!r}; give an integer number of topics")
    if n_topics < 2:
        raise ValueError(f"n_topics = {n_topics}; cluster into at least 2 topics")
    if n_topics > n_questions:
        raise ValueError(f"n_topics = {n_topics} but there are only {n_questions} questions; use at most "
                         f"{n_questions} topics (or more questions)")


def cluster_questions(vectors: np.ndarray, n_topics: int, seed: int = 0, n_init: int = 10,
                      silhouette_sample: int = 5000, languages: Sequence[str] | None = None) -> Clustering:
    """KMeans (scikit-learn, ``random_state=seed``, ``n_init`` restarts) over the unit-normalised vectors, so
    that the clusters follow cosine similarity as retrieval does — over :func:`language_centred` vectors when
    ``languages`` (one per question) is given. Topics are renumbered by size (0 = largest, ties by first
    question), so the numbering does not depend on KMeans's internal order.

    silhouette = mean over questions of (b − a) / max(a, b), a = mean cosine distance to its own topic,
    b = to the nearest other topic (scikit-learn ``silhouette_score``, on a ``silhouette_sample`` sample
    for larger sets); −1…1, higher = better separated topics.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"vectors must be a non-empty (n, dim) matrix, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("vectors contain NaN or inf; re-embed those questions")
    check_n_topics(n_topics, len(x))
    if n_init < 1:
        raise ValueError(f"n_init = {n_init}; KMeans needs at least one initialisation")
    x = _unit(x)
    distinct = len(np.unique(x.round(6), axis=0))
    if distinct < n_topics:
        raise ValueError(f"only {distinct} distinct question vectors for n_topics = {n_topics}; use at most "
                         f"{distinct} topics")
    space = "unit vectors"
    if languages is not None:
        x, space = language_centred(x, languages), "language-centred unit vectors"
    km = KMeans(n_clusters=int(n_topics), random_state=seed, n_init=n_init).fit(x)
    raw = km.labels_
    sizes = np.bincount(raw, minlength=n_topics)
    first = np.array([np.flatnonzero(raw == t)[0] if sizes[t] else len(raw) for t in range(n_topics)])
    order = np.lexsort((first, -sizes))  # new topic i = old topic order[i]
    remap = np.empty(n_topics, dtype=int)
    remap[order] = np.arange(n_topics)
    labels = remap[raw]
    centroids = _unit(km.cluster_centers_[order])
    similarity = np.einsum("ij,ij->i", x, centroids[labels])
    if 2 <= len(np.unique(labels)) <= len(x) - 1:
        sample = min(len(x), silhouette_sample) if len(x) > silhouette_sample else None
        sil = float(silhouette_score(x, labels, metric="cosine", sample_size=sample, random_state=seed))
    else:
        sil = float("nan")
    return Clustering(labels, centroids, similarity, sil, float(km.inertia_), space)


# Topic-count rules: "silhouette" tries 2…n_topics topics, "fixed" uses exactly n_topics.
TOPIC_RULES = ("silhouette", "fixed")
# Silhouettes closer than this to the best count as equal, and the fewest topics among them win: fewer topics are
# easier to read, and a last-bit difference of the vectors on another processor cannot pick another count.
SILHOUETTE_TIE = 0.005


def choose_clustering(vectors: np.ndarray, n_topics: int, rule: str = "silhouette", seed: int = 0,
                      n_init: int = 10, languages: Sequence[str] | None = None) -> tuple[Clustering, dict]:
    """The clustering and how its number of topics was chosen: ``{rule, criterion, max_topics, tried, chosen}``.

    rule "fixed": exactly ``n_topics``. rule "silhouette": :func:`cluster_questions` for every k = 2 … ``n_topics``
    (an upper bound; k stops below it when there are fewer distinct question vectors), keeping the fewest topics
    whose silhouette is within :data:`SILHOUETTE_TIE` of the highest; ``tried`` = {k: silhouette}.
    """
    if rule not in TOPIC_RULES:
        raise ValueError(f"n_topics_rule = {rule!r}; use 'silhouette' (choose 2…n_topics topics by silhouette) or "
                         "'fixed' (exactly n_topics)")
    check_n_topics(n_topics, len(vectors))
    if rule == "fixed":
        cl = cluster_questions(vectors, n_topics, seed, n_init, languages=languages)
        return cl, {"rule": "fixed", "criterion": "n_topics as given", "max_topics": int(n_topics),
                    "tried": {int(n_topics): cl.silhouette}, "chosen": int(n_topics)}
    fits: dict[int, Clustering] = {}
    for k in range(2, int(n_topics) + 1):
        try:
            fits[k] = cluster_questions(vectors, k, seed, n_init, languages=languages)
        except ValueError:
            if not fits:  # fewer than 2 distinct vectors: nothing to choose from
                raise
            break  # fewer distinct question vectors than k: larger k cannot be fitted either
    tried = {k: cl.silhouette for k, cl in fits.items()}
    finite = [v for v in tried.values() if np.isfinite(v)]
    best = max(finite) if finite else float("nan")
    chosen = min((k for k, v in tried.items() if np.isfinite(v) and v >= best - SILHOUETTE_TIE), default=min(fits))
    return fits[chosen], {"rule": "silhouette",
                          "criterion": f"fewest topics within {SILHOUETTE_TIE} of the highest silhouette, "
                                       f"2…{int(n_topics)} tried", "max_topics": int(n_topics), "tried": tried,
                          "chosen": int(chosen)}


@dataclass
class Topics:
    """A clustering of questions with what describes it: each question's language, each topic's top terms and
    top pages, the language mix of the topics (:mod:`ragnb.analysis.topic_terms`), how the number of topics was
    chosen, and how well the topics agree with the questions' pages (:mod:`ragnb.analysis.topic_pages`)."""

    clustering: Clustering
    languages: list[str]
    terms: dict[int, list[str]]
    mix: dict
    selection: dict
    pages: dict[int, list[str]]
    agreement: dict
    verdict: dict

    def clustering_info(self, seed: int, n_init: int) -> dict:
        """The summary's ``clustering`` block: how the topics were made and how much they follow language."""
        return {"algorithm": f"KMeans on {self.clustering.space}", "random_state": seed, "n_init": n_init,
                "inertia": self.clustering.inertia, "language_mix": {k: v for k, v in self.mix.items()
                                                                     if k != "per_topic"}}

    def summary_info(self) -> dict:
        """The summary entries both topic reports share: selection, page agreement and the structure verdict."""
        return {"topic_selection": self.selection, "page_agreement": self.agreement,
                "topical_structure": {**self.verdict, "note": structure_note(self.verdict)}}


def find_topics(questions: Sequence[str], vectors: np.ndarray, n_topics: int, seed: int = 0, n_init: int = 10,
                centre_languages: bool = True, n_terms: int = 5, urls: Sequence[str | None] | None = None,
                n_topics_rule: str = "silhouette", n_boot: int = 1000, page_source: str = "cited",
                titles: Mapping[str, str] | None = None) -> Topics:
    """:func:`choose_clustering` (language-centred unless ``centre_languages`` is False; ``n_topics`` an upper
    bound under rule "silhouette", the count under "fixed"), labelled with
    :func:`ragnb.analysis.topic_terms.topic_terms` and, given one page URL (or None) per question in ``urls``, with
    :func:`~ragnb.analysis.topic_pages.top_pages`, checked by :func:`~ragnb.analysis.topic_pages.page_agreement`
    and judged by :func:`~ragnb.analysis.topic_pages.structure_verdict`. The one topic function of the topic
    coverage and domain analysis reports."""
    languages = question_languages(questions)
    if urls is not None and len(urls) != len(questions):
        raise ValueError(f"{len(urls)} page URLs for {len(questions)} questions; give one URL (or None) per question")
    cl, selection = choose_clustering(vectors, n_topics, n_topics_rule, seed, n_init,
                                      languages if centre_languages else None)
    url_list = list(urls) if urls is not None else [None] * len(questions)
    agreement = page_agreement(cl.labels, question_pages(url_list), n_boot=n_boot, seed=seed, source=page_source)
    return Topics(cl, languages, topic_terms(questions, cl.labels, n_terms), language_mix(languages, cl.labels),
                  selection, top_pages(cl.labels, url_list, titles), agreement,
                  structure_verdict(cl.silhouette, agreement))


def coverage_by_topic(
    labels: Sequence[int],
    retrieved: Sequence[Sequence[str]],
    chunk_urls: Mapping[str, str | None],
    low_coverage_factor: float = 0.5,
) -> pd.DataFrame:
    """Per topic: ``question_count``, ``unique_chunks`` (distinct chunks in its questions' top-k lists),
    ``unique_urls`` (distinct source pages among them: URLs compared by :func:`ragnb.urls.page_id`, chunks
    without a URL not counted), ``chunks_per_question`` = unique_chunks / question_count, ``top_urls`` (the
    three most retrieved pages with counts) and ``low_coverage``.

    low_coverage: question_count ≥ median question_count over topics AND chunks_per_question <
    ``low_coverage_factor`` × median chunks_per_question — a large topic that reaches clearly fewer distinct
    chunks per question than a typical topic.
    """
    labels = np.asarray(labels)
    if len(labels) != len(retrieved):
        raise ValueError(f"{len(labels)} topic labels for {len(retrieved)} retrieval lists; give one per question")
    if not 0 <= low_coverage_factor <= 1:
        raise ValueError(f"low_coverage_factor = {low_coverage_factor}; use a share between 0 and 1")
    rows = []
    for t in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == t)
        chunks: set[str] = set()
        urls: Counter[str] = Counter()
        url_of: dict[str, str] = {}
        for i in members:
            for c in retrieved[i]:
                if c not in chunk_urls:
                    raise ValueError(f"retrieved chunk {c!r} (question {i}) is not in chunk_urls; pass the urls of "
                                     "every searchable chunk")
                chunks.add(c)
                p = page_of(chunk_urls[c])
                if p is not None:
                    urls[p] += 1
                    url_of.setdefault(p, chunk_urls[c])
        rows.append({"topic_id": int(t), "question_count": int(len(members)), "unique_chunks": len(chunks),
                     "unique_urls": len(urls), "chunks_per_question": len(chunks) / len(members),
                     "top_urls": [f"{url_of[p]} ({n})" for p, n in urls.most_common(3)]})
    frame = pd.DataFrame(rows)
    big = frame["question_count"] >= frame["question_count"].median()
    thin = frame["chunks_per_question"] < low_coverage_factor * frame["chunks_per_question"].median()
    frame["low_coverage"] = big & thin
    return frame


def representatives(clustering: Clustering, n: int = 3) -> dict[int, list[int]]:
    """Per topic, the indices of its ``n`` questions closest to the centroid (highest cosine similarity;
    ties by question order)."""
    out: dict[int, list[int]] = {}
    for t in range(len(clustering.centroids)):
        members = np.flatnonzero(clustering.labels == t)
        order = members[np.lexsort((members, -clustering.similarity[members]))]
        out[t] = order[:n].tolist()
    return out


def _coverage_entry(row: dict, found: Topics, representative_questions: list[str],
                    representative_ids: list[str]) -> dict:
    """One topic of ``summary["topic_coverage"]`` from its row of :func:`coverage_by_topic`."""
    t, cl = row["topic_id"], found.clustering
    return {
        "topic_id": t, "top_terms": found.terms.get(t, []), "top_pages": found.pages.get(t, []),
        "languages": found.mix["per_topic"].get(t, {}),
        "question_count": row["question_count"], "unique_chunks": row["unique_chunks"],
        "unique_urls": row["unique_urls"], "chunks_per_question": row["chunks_per_question"],
        "low_coverage": bool(row["low_coverage"]), "top_urls": row["top_urls"],
        "mean_centroid_similarity": float(cl.similarity[cl.labels == t].mean()),
        "representative_questions": representative_questions,
        "representative_ids": representative_ids,
    }


def topic_coverage(
    question_ids: Sequence[str],
    questions: Sequence[str],
    vectors: np.ndarray,
    retrieved: Sequence[Sequence[str]],
    chunk_urls: Mapping[str, str | None],
    n_topics: int = 10,
    seed: int = 0,
    n_init: int = 10,
    n_representatives: int = 3,
    low_coverage_factor: float = 0.5,
    centre_languages: bool = True,
    n_terms: int = 5,
    question_urls: Sequence[str | None] | None = None,
    n_topics_rule: str = "silhouette",
    n_boot: int = 1000,
    titles: Mapping[str, str] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Cluster the questions (:func:`find_topics`: language-centred unless ``centre_languages`` is False, labelled
    with ``n_terms`` top terms and the top pages; ``n_topics`` an upper bound under ``n_topics_rule``
    "silhouette") and measure each topic's reach (:func:`coverage_by_topic`). The pages that name and check the
    topics are ``question_urls`` (the log's cited URLs) when given, else each question's top-1 retrieved chunk's.

    Returns (per-question frame indexed by question id: ``question``, ``topic_id``, ``centroid_similarity``,
    ``representative``, ``retrieved``; summary with the original fields ``n_topics`` (the number chosen),
    ``total_questions``,
    ``avg_chunks_per_topic`` (mean unique_chunks over topics) and ``topic_coverage`` — a list of
    ``{topic_id, question_count, unique_chunks, unique_urls, chunks_per_question, low_coverage, top_urls,
    representative_questions, representative_ids}`` — plus per topic ``top_terms`` and ``languages``, and
    ``silhouette``, ``avg_urls_per_topic``, ``low_coverage_topics``, ``top_k`` and ``clustering`` with the
    language mix), ``topic_selection``, ``page_agreement`` and ``topical_structure`` (:meth:`Topics.summary_info`)
    and per topic ``top_pages``).
    """
    ids = [str(q) for q in question_ids]
    if not (len(ids) == len(questions) == len(vectors) == len(retrieved)):
        raise ValueError(f"{len(ids)} ids, {len(questions)} questions, {len(vectors)} vectors and {len(retrieved)} "
                         "retrieval lists: give one of each per question")
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique")
    if n_representatives < 1:
        raise ValueError(f"n_representatives = {n_representatives}; show at least one question per topic")
    if question_urls is None:
        urls, source = [chunk_urls.get(r[0]) if len(r) else None for r in retrieved], "retrieved (top-1 chunk's page)"
    else:
        urls, source = list(question_urls), "cited (the log's url)"
    found = find_topics(questions, vectors, n_topics, seed, n_init, centre_languages, n_terms, urls=urls,
                        n_topics_rule=n_topics_rule, n_boot=n_boot, page_source=source, titles=titles)
    cl = found.clustering
    topics = coverage_by_topic(cl.labels, retrieved, chunk_urls, low_coverage_factor)
    reps = representatives(cl, n_representatives)
    rep_set = {i for idx in reps.values() for i in idx}

    per_q = pd.DataFrame({
        "question": list(questions), "topic_id": cl.labels.astype(int), "language": found.languages,
        "centroid_similarity": cl.similarity,
        "representative": [i in rep_set for i in range(len(ids))],
        "retrieved": [" ".join(r) for r in retrieved],
    }, index=pd.Index(ids, name="question_id"))

    entries = [_coverage_entry(row, found, [str(questions[i]) for i in reps[row["topic_id"]]],
                               [ids[i] for i in reps[row["topic_id"]]]) for row in topics.to_dict("records")]
    summary = {
        "n_topics": found.selection["chosen"],
        "total_questions": len(ids),
        "avg_chunks_per_topic": float(topics["unique_chunks"].mean()),
        "avg_urls_per_topic": float(topics["unique_urls"].mean()),
        "topic_coverage": entries,
        "silhouette": cl.silhouette,
        "low_coverage_topics": [e["topic_id"] for e in entries if e["low_coverage"]],
        "low_coverage_rule": f"question_count >= median and chunks_per_question < {low_coverage_factor} x median",
        "top_k": max((len(r) for r in retrieved), default=0),
        "clustering": found.clustering_info(seed, n_init),
        **found.summary_info(),
    }
    return per_q, summary


def topics_frame(summary: dict) -> pd.DataFrame:
    """The summary's ``topic_coverage`` list as a table (terms, pages and representative questions joined)."""
    rows = [{**e, "top_terms": ", ".join(e["top_terms"]), "top_pages": ", ".join(e["top_pages"]),
             "languages": languages_text(e["languages"]),
             "representative_questions": " | ".join(e["representative_questions"]),
             "top_urls": ", ".join(e["top_urls"])} for e in summary["topic_coverage"]]
    return pd.DataFrame(rows).drop(columns=["representative_ids"]).set_index("topic_id")


def languages_text(counts: Mapping[str, int]) -> str:
    """{"ru": 5, "en": 3} → "ru 5, en 3" (a topic's languages in a report table)."""
    return ", ".join(f"{lang} {n}" for lang, n in counts.items())


def clustering_note(clustering: Mapping) -> str:
    """One sentence for a report: what was clustered and how much the topics follow language."""
    mix = clustering["language_mix"]
    langs = languages_text(mix["languages"])
    if not np.isfinite(mix["purity"]):
        return f"{clustering['algorithm']}; questions in one language ({langs})."
    # more than half-way from the mixed baseline to one language per topic
    by_language = mix["purity"] - mix["baseline"] > 0.5 * (1 - mix["baseline"])
    verdict = "the topics are mostly languages, not subjects" if by_language else "the topics mix the languages"
    return (f"{clustering['algorithm']}; languages by script: {langs}. Language purity of the topics "
            f"{mix['purity']:.2f} (share of questions in their topic's majority language; {mix['baseline']:.2f} if "
            f"every topic mixed the languages as the log does, 1.00 if each topic were one language): {verdict}.")
