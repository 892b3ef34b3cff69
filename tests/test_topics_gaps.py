"""Topics and knowledge gaps on a bilingual log: language-centred clustering measured against the true subjects
with real multilingual-e5 vectors, c-TF-IDF labels, and the gap signals of a help-desk log with sessions,
scores and cited URLs (tests/helpdesk_log.py) — in the library and through the two notebooks."""

from __future__ import annotations

import json
import math
import os
from collections import Counter

import numpy as np
import pandas as pd
import pytest

import helpdesk_log as hd
from db_env import default_embedded_db
from ragnb.analysis.gaps import follow_ups
from ragnb.analysis.topic_terms import language_mix, question_languages, topic_terms
from ragnb.analysis.topics import cluster_questions
from ragnb.metrics.fallback import script_language

E5 = "multilingual-e5-small"


def _purity(truth, labels) -> float:
    """Σ over clusters of its most frequent true class / n (computed here, independently of language_mix)."""
    total = 0
    for c in set(labels):
        total += Counter(t for t, lab in zip(truth, labels) if lab == c).most_common(1)[0][1]
    return total / len(labels)


def test_script_language():
    assert script_language("Как настроить VPN в GlobalConnect?") == "ru"  # Latin product names in Russian text
    assert script_language("How do I reset my пароль?") == "en"
    assert script_language("Где дашборды в Grafana?") == "ru"
    assert script_language("404?") == "other" and script_language("") == "other"
    assert script_language("VPN впн") == "other"  # as many of each: undecided


def test_topic_terms_hand_computed():
    # topic 0: "vpn", "access" ×2 / "доступ"; topic 1: "password", "reset"; stop-words (how, do, i, my, как) dropped
    questions = ["How do I get VPN access?", "VPN access denied", "Как получить доступ к VPN?",
                 "How do I reset my password?", "Password reset"]
    terms = topic_terms(questions, [0, 0, 0, 1, 1], n_terms=3)
    # topic 0 words: get, vpn ×3, access ×2, denied, получить, доступ (N0 = 9); topic 1: reset ×2, password ×2 (N1 = 4)
    # A = 6.5; every term occurs in one topic only, so w = tf/N · log(1 + 6.5 / tf): vpn 3/9·log(1+6.5/3) = 0.384,
    # access 2/9·log(1+3.25) = 0.322, then the one-off words 1/9·log(7.5) = 0.224 (alphabetical: denied, get, …)
    assert terms[0] == ["vpn", "access", "denied"]
    assert terms[1] == ["password", "reset"]  # equal weights: alphabetical
    # word forms meet on their stem and show as the most frequent written form
    assert topic_terms(["Пароль истёк", "Сбросить пароль", "Забыл пароля"], [0, 0, 0], n_terms=1) == {0: ["пароль"]}
    assert topic_terms(["how do I", "и как"], [0, 1]) == {0: [], 1: []}  # stop-words only
    from ragnb.analysis.source_charts import topic_names

    table = pd.DataFrame({"top_terms": ["vpn, access, denied, get", ""]}, index=pd.Index([0, 1], name="topic_id"))
    assert topic_names(table) == ["topic 0: vpn, access, denied", "topic 1"]  # chart labels: the first three terms
    with pytest.raises(ValueError, match="one label per question"):
        topic_terms(["a"], [0, 1])


def test_language_mix_hand_computed():
    mix = language_mix(["ru", "ru", "en", "en", "en"], [0, 0, 0, 1, 1])
    assert mix["languages"] == {"en": 3, "ru": 2} and mix["per_topic"] == {0: {"ru": 2, "en": 1}, 1: {"en": 2}}
    assert mix["purity"] == pytest.approx(4 / 5) and mix["baseline"] == pytest.approx(3 / 5)
    assert math.isnan(language_mix(["ru", "ru"], [0, 1])["purity"])
    from ragnb.analysis.topics import clustering_note

    info = {"algorithm": "KMeans on unit vectors", "language_mix": {"languages": {"en": 3, "ru": 2}}}
    split = clustering_note({**info, "language_mix": {**info["language_mix"], "purity": 1.0, "baseline": 0.6}})
    assert split.endswith("purity of the topics 1.00 (share of questions in their topic's majority language; 0.60 if "
                          "every topic mixed the languages as the log does, 1.00 if each topic were one language): "
                          "the topics are mostly languages, not subjects.")
    assert "en 3, ru 2" in split
    mixed = clustering_note({**info, "language_mix": {**info["language_mix"], "purity": 0.7, "baseline": 0.6}})
    assert mixed.endswith("the topics mix the languages.")  # 0.7 − 0.6 ≤ half of 1 − 0.6


@pytest.fixture(scope="module")
def e5():
    from ragnb.embeddings.models import get_encoder

    return get_encoder(E5)


def test_language_centred_topics_follow_subject_not_language(e5):
    """48 questions, 8 subjects each asked 3 ways in English and in Russian, real e5 vectors: raw KMeans splits by
    language (measured: language purity 0.77, subject ARI 0.32); language-centred KMeans by subject (language
    purity 0.54 ≈ the 0.5 of mixed topics, subject ARI 0.60)."""
    from sklearn.metrics import adjusted_rand_score

    from ragnb.embeddings.base import encode_queries

    rows = hd.subject_rows()
    texts = [r["question"] for r in rows]
    subject, lang = [r["subject"] for r in rows], [r["language"] for r in rows]
    assert question_languages(texts) == lang  # the script rule tells every question's language
    vectors = encode_queries(e5, texts, batch_size=64)
    raw = cluster_questions(vectors, 8, seed=0, n_init=10).labels
    centred = cluster_questions(vectors, 8, seed=0, n_init=10, languages=question_languages(texts))
    assert centred.space == "language-centred unit vectors"
    raw_ari, centred_ari = adjusted_rand_score(subject, raw), adjusted_rand_score(subject, centred.labels)
    assert _purity(lang, raw) >= 0.75 and _purity(lang, centred.labels) <= 0.6
    assert centred_ari >= raw_ari + 0.2 and centred_ari >= 0.5
    assert _purity(subject, centred.labels) >= 0.75 > 0.65 >= _purity(subject, raw)
    assert language_mix(lang, centred.labels)["purity"] == pytest.approx(_purity(lang, centred.labels))
    # each topic's label names its subject: the majority subject's key word is among its top 5 terms
    key = {"vpn": {"vpn"}, "vacation": {"vacation", "отпуска"}, "deploy": {"deploy", "release", "релиз"},
           "password": {"password", "пароль"}, "expenses": {"taxi", "receipts", "такси", "чеки"},
           "sick": {"sick", "больничного", "больничный", "leave"}, "monitoring": {"grafana", "alert", "дашборды"},
           "office": {"office", "офиса", "wifi"}}
    terms = topic_terms(texts, centred.labels, n_terms=5)
    named = 0
    for t, words in terms.items():
        majority = Counter(s for s, lab in zip(subject, centred.labels) if lab == t).most_common(1)[0][0]
        named += bool(key[majority] & set(words))
    assert named >= 7, terms


def test_follow_up_rule_on_sessions():
    log = pd.DataFrame({"session_id": ["a", "a", "a", "b", None, "c", "c"],
                        "created_at": ["2026-01-01T10:00Z", "2026-01-01T10:05Z", "2026-01-01T10:01Z",
                                       "2026-01-01T09:00Z", None, "2026-01-02T10:00Z", "2026-01-02T10:01Z"]},
                       index=["a1", "a3", "a2", "b1", "x", "c1", "c2"])
    questions = ["How do I request VPN access?", "Is it paid?", "And which client do I install?",
                 "And what about this?", "Is it free?", "How do I reset my password?",
                 "Its expiry, how many days do I have before the reset stops working for everyone?"]
    scores = [5, 4, 2, None, 5, 5, 5]
    follow, exempt = follow_ups(questions, log, scores)
    # a2 follows a1 (scored 5): follow-up, exempt; a3 follows a2 (scored 2): follow-up, not exempt;
    # b1 and x open their session / have none; c2 is longer than 8 words
    assert follow.tolist() == [False, True, True, False, False, False, False]
    assert exempt.tolist() == [False, False, True, False, False, False, False]


# ---------------------------------------------------------------------------------------------
# The help-desk wiki and log through the domain and topics notebooks


@pytest.fixture(scope="module")
def helpdesk_db(tmp_path_factory, e5):
    """The wiki (front-matter URLs) and the log loaded the way the CLI does, embedded with e5; the notebooks read
    it as corpus "db"."""
    from ragnb.store.engine import connect
    from ragnb.store.loaders import load_file
    from ragnb.store.vectors import embed_table

    folder = tmp_path_factory.mktemp("helpdesk")
    name = f"helpdesk_{os.getpid()}"
    with default_embedded_db(name):
        db = connect(database=name)
        load_file(db, "chunks", hd.write_wiki(folder / "wiki"), chunk_size=20, overlap=0)
        load_file(db, "questions", hd.write_log(folder / "log.jsonl"))
        embed_table(db, "chunks", e5, progress=False)
        embed_table(db, "questions", e5, progress=False)
        yield db
        db.dispose()


@pytest.fixture(scope="module")
def helpdesk_run(helpdesk_db, tmp_path_factory):
    from ragnb.runs.runner import run_notebooks

    # the folder the wiki was loaded from: the topics name their pages by its front-matter titles
    wiki = hd.write_wiki(tmp_path_factory.mktemp("wiki"))
    params = {"corpus": "db", "embedding_model": E5, "n_topics": 8, "top_k": 3, "n_boot": 50,
              "topics.source": "log", "pages_dir": str(wiki)}
    result = run_notebooks(["topic_coverage", "domain_analysis"], params, outputs=tmp_path_factory.mktemp("out"),
                           log=lambda *_: None)
    assert result.failures == [], result.reports
    metrics = {s: json.loads((result.run_dir / f"{s}.metrics.json").read_text(encoding="utf-8"))
               for s in ("topic_coverage", "domain_analysis")}
    per_item = {s: pd.read_csv(result.run_dir / f"{s}.per_item.csv", dtype={"item_id": str}).set_index("item_id")
                for s in ("topic_coverage", "domain_analysis")}
    return result, metrics, per_item


# Farther apart than any last-bit difference of an embedding across processors, closer than any real decision.
MARGIN = 1e-4


def _brute_force(db):
    """Top-3 chunks per logged question by cosine over the stored vectors, independently of ragnb's retrievers."""
    from ragnb.store.questions import fetch_question_log
    from ragnb.store.vectors import fetch_vectors

    ids, urls, chunks = fetch_vectors(db, "chunks")
    log, q = fetch_question_log(db, with_vectors=True)
    c = chunks / np.linalg.norm(chunks, axis=1, keepdims=True)
    sims = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float64) @ c.T.astype(np.float64)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :3]
    top_urls = [[urls[j] for j in row] for row in order]
    return log, sims.max(axis=1), top_urls


@pytest.mark.slow
def test_domain_notebook_flags_each_gap_by_its_signals(helpdesk_db, helpdesk_run):
    _, metrics, per_item = helpdesk_run
    m, table = metrics["domain_analysis"], per_item["domain_analysis"]
    rows = {r["id"]: r for r in hd.log_rows()}
    log, top1, top_urls = _brute_force(helpdesk_db)
    table = table.loc[list(log.index)]
    assert len(table) == len(rows) == 57
    flagged = lambda col: sorted(table.index[table[col].astype(bool)])  # noqa: E731
    # signals read from the log, known by construction
    assert flagged("low_score") == ["deploy-en-1", "g1", "g2", "g3", "password-ru-1"]
    assert flagged("no_url") == ["g2", "g3", "g5"]
    assert flagged("url_not_in_corpus") == ["g1", "g4"]
    assert flagged("follow_up") == sorted(f"{s}-{lang}-f" for s, lang, *_ in hd.FOLLOW_UPS)
    assert flagged("follow_up_exempt") == ["sick-en-f", "vacation-ru-f", "vpn-en-f"]  # the previous turn scored ≥ 4
    # low similarity: calibrated on the served questions (cited page in the top 3, score not ≤ 2)
    served = np.array([rows[i]["url"] in top_urls[k] and not (rows[i]["score"] or 5) <= 2
                       for k, i in enumerate(log.index)])
    threshold = np.quantile(top1[served], 0.1)
    assert m["gap"]["method"] == "calibrated" and m["gap"]["n_reference"] == int(served.sum()) >= 40
    assert m["gap"]["threshold"] == pytest.approx(threshold, abs=1e-6)
    # A question whose top-1 similarity lies within float noise of the cut may fall either side of it on another
    # processor (a last-bit difference of the embedding); everything else must agree with the brute force.
    clear = np.abs(top1 - threshold) > MARGIN
    assert clear.sum() >= len(top1) - 2
    assert (table["low_similarity"].astype(bool).to_numpy()[clear] == (top1 < threshold)[clear]).all()
    # every real gap is flagged, and says why
    for gid in ("g1", "g2", "g3", "g4", "g5"):
        assert table.loc[gid, "is_gap"], gid
    assert table.loc["g4", "signals"].startswith("url_not_in_corpus")
    assert table.loc["g5", "signals"].startswith("no_url")
    # a follow-up of a well-answered turn is never flagged on similarity alone
    for fid in ("sick-en-f", "vacation-ru-f", "vpn-en-f"):
        assert not table.loc[fid, "is_gap"], fid
    expected_gap = (table[["low_score", "no_url", "url_not_in_corpus"]].astype(bool).any(axis=1)
                    | (table["low_similarity"].astype(bool) & ~table["follow_up_exempt"].astype(bool)))
    assert table["is_gap"].astype(bool).tolist() == expected_gap.tolist()
    sig = m["gap_signals"]
    assert {k: (sig[k]["n_flagged"], sig[k]["n"]) for k in ("low_score", "no_url", "url_not_in_corpus")} == \
        {"low_score": (5, 55), "no_url": (3, 57), "url_not_in_corpus": (2, 54)}
    assert sig["low_similarity"]["n_flagged"] == int(table["low_similarity"].astype(bool).sum())
    assert sig["low_similarity"]["n"] == 57
    assert sig["any"]["n_flagged"] == int(expected_gap.sum())
    # g1–g3 have two signals by construction (a low score and a missing or unknown URL); g4 may gain a second one on
    # similarity alone, so the list is checked against the table's own counts: most signals first, then the lowest
    # top-1 similarity — never against one processor's rounding of g4's similarity.
    listed = [g["question_id"] for g in m["knowledge_gaps"]]
    assert {"g1", "g2", "g3"} <= set(listed) and all(table.loc[g, "n_signals"] >= 2 for g in ("g1", "g2", "g3"))
    keys = [(-int(table.loc[i, "n_signals"]), float(np.nan_to_num(table.loc[i, "top1_score"], nan=-np.inf)))
            for i in listed]
    assert keys == sorted(keys)
    html = (helpdesk_run[0].run_dir / "domain_analysis.html").read_text(encoding="utf-8")
    assert "url_not_in_corpus" in html and "calibrated" in html


@pytest.mark.slow
def test_topics_notebook_mixes_languages_and_labels_topics(helpdesk_run):
    _, metrics, per_item = helpdesk_run
    for stem, key in (("topic_coverage", "topic_coverage"), ("domain_analysis", "topics")):
        m = metrics[stem]
        mix = m["clustering"]["language_mix"]
        assert m["clustering"]["algorithm"] == "KMeans on language-centred unit vectors"
        assert mix["languages"] == {"en": 30, "ru": 27}
        table = per_item[stem]
        assert mix["purity"] == pytest.approx(_purity(table["language"].tolist(), table["topic_id"].tolist()))
        assert mix["purity"] <= 0.65  # topics mix the two languages (baseline 30/57 = 0.53)
        entries = m[key]
        assert all(len(e["top_terms"]) == 5 for e in entries)
        assert sum(e["languages"].get("ru", 0) for e in entries) == 27
    html = (helpdesk_run[0].run_dir / "topic_coverage.html").read_text(encoding="utf-8")
    for e in metrics["topic_coverage"]["topic_coverage"]:
        assert ", ".join(e["top_terms"]) in html


@pytest.mark.slow
def test_topics_notebooks_name_topics_by_cited_pages_and_check_them(helpdesk_run):
    """Both reports read one topic function: the same topics, named by the pages their questions cite, with the
    page agreement as scikit-learn computes it from the per-question table, and the structure verdict."""
    import html as html_lib

    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    from ragnb.analysis.topic_stopwords import LABEL_STOPWORDS

    _, metrics, per_item = helpdesk_run
    rows = {r["id"]: r for r in hd.log_rows()}
    topics = {stem: per_item[stem].loc[list(rows), "topic_id"].tolist() for stem in per_item}
    assert topics["topic_coverage"] == topics["domain_analysis"]  # one topic function, same parameters
    for stem, key in (("topic_coverage", "topic_coverage"), ("domain_analysis", "topics")):
        m = metrics[stem]
        assert m["topic_selection"]["rule"] == "silhouette" and m["n_topics"] == m["topic_selection"]["chosen"] <= 8
        cited = [(rows[i]["url"], t) for i, t in zip(rows, topics[stem]) if rows[i]["url"]]
        a = m["page_agreement"]
        assert (a["n_valid"], a["n_failed"]) == (54, 3) and a["source"].startswith("cited")
        assert a["nmi"]["value"] == pytest.approx(normalized_mutual_info_score(*zip(*cited)), abs=1e-12)
        assert a["ari"]["value"] == pytest.approx(adjusted_rand_score(*zip(*cited)), abs=1e-12)
        assert m["topical_structure"]["has_structure"] is True
        # the wiki's own titles ("Доступ к VPN", …); the cited pages missing from it (the gaps) by their URL
        titles = {body.splitlines()[0][2:] for _, body in hd.PAGES.values()} | {"Canteen", "Insurance"}
        for e in m[key]:
            assert e["top_pages"] and all(p.rsplit(" (", 1)[0] in titles for p in e["top_pages"]), e["top_pages"]
            assert not [w for w in e["top_terms"] if w in LABEL_STOPWORDS or not any(c.isalpha() for c in w)]
        page = html_lib.unescape((helpdesk_run[0].run_dir / f"{stem}.html").read_text(encoding="utf-8"))
        assert "Agreement of the topics with the pages" in page and "chosen by silhouette" in page
        assert "No topical structure" not in page


def test_gap_signals_excuse_follow_ups_of_well_answered_turns_only():
    """Hand inputs: two sessions; both follow-ups fall below the absolute similarity cut 0.5. The one after a
    turn scored 5 is excused, the one after a turn scored 1 is flagged; URL signals read from the log."""
    from ragnb.analysis.gaps import gap_signals

    chunk_urls = {"c1": "https://wiki.example.com/display/OPS/VPN", "c2": "https://wiki.example.com/display/HR/Sick"}
    log = pd.DataFrame({"url": ["https://wiki.example.com/display/OPS/VPN#form", "https://wiki.example.com/display/OPS/VPN",
                                "https://wiki.example.com/display/HR/Sick", None, "https://wiki.example.com/x"],
                        "session_id": ["a", "a", "b", "b", "c"],
                        "created_at": ["2026-01-01T10:00Z", "2026-01-01T10:01Z", "2026-01-01T11:00Z",
                                       "2026-01-01T11:01Z", "2026-01-01T12:00Z"]}, index=list("pqrst"))
    questions = ["How do I request VPN access?", "And which client?", "How is sick leave paid?", "Is it paid in full?",
                 "Where is the canteen menu?"]
    frame, summary = gap_signals(questions, [5, 4, 1, None, 3], [0.9, 0.3, 0.8, 0.2, 0.6], log=log,
                                 chunk_urls=chunk_urls, gap_threshold=0.5)
    assert frame["follow_up"].tolist() == [False, True, False, True, False]
    assert frame["follow_up_exempt"].tolist() == [False, True, False, False, False]
    assert frame["low_similarity"].tolist() == [False, True, False, True, False]
    assert frame["signals"].tolist() == ["", "", "low_score", "no_url; low_similarity", "url_not_in_corpus"]
    assert frame["is_gap"].tolist() == [False, False, True, True, True]
    sig = summary["signals"]
    assert sig["follow_ups_not_flagged"] == 1 and (sig["any"]["n_flagged"], sig["any"]["n"]) == (3, 5)
    assert (sig["url_not_in_corpus"]["n_flagged"], sig["url_not_in_corpus"]["n"]) == (1, 4)
    assert (sig["low_score"]["n_flagged"], sig["low_score"]["n"]) == (1, 4)
    assert summary["similarity"]["method"] == "absolute"
    with pytest.raises(ValueError, match="need chunk_urls"):
        gap_signals(questions, [5] * 5, [0.9] * 5, log=log)
    with pytest.raises(ValueError, match="log has 4 rows for 5 questions"):
        gap_signals(questions, [5] * 5, [0.9] * 5, log=log.iloc[:4], chunk_urls=chunk_urls)


def test_page_titles_of_a_wiki_folder_follow_the_loaders_urls(tmp_path):
    from ragnb.analysis.topic_pages import top_pages, wiki_titles
    from ragnb.store.markdown import folder_titles

    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "vpn.md").write_text("---\nurl: https://wiki.example.com/display/OPS/VPN\ntitle: VPN access\n"
                                             "---\n# Ignored heading\ntext", encoding="utf-8")
    (tmp_path / "ops" / "2fa.md").write_text("intro\n# Two-factor sign-in\ntext", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("no heading at all", encoding="utf-8")
    # without a template a page without front-matter url is its relative path, as `ragnb load chunks` stores it
    assert folder_titles(tmp_path) == {"https://wiki.example.com/display/OPS/VPN": "VPN access",
                                       "ops/2fa.md": "Two-factor sign-in", "notes.txt": "notes"}
    templated = folder_titles(tmp_path, "https://kb.example.com/{path}")
    assert templated["https://kb.example.com/ops/2fa"] == "Two-factor sign-in"
    titles = wiki_titles(str(tmp_path))
    urls = ["https://wiki.example.com/display/OPS/VPN", "https://wiki.example.com/display/OPS/VPN/", "ops/2fa.md"]
    assert top_pages([0, 0, 1], urls, titles) == {0: ["VPN access (2)"], 1: ["Two-factor sign-in (1)"]}
    assert top_pages([0, 0, 1], urls) == {0: ["VPN (2)"], 1: ["2fa (1)"]}  # without the folder: from the URLs
    assert wiki_titles("") is None
    with pytest.raises(ValueError, match="not a folder"):
        folder_titles(tmp_path / "missing")
