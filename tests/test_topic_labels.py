"""Topics a person can read: labels without stop-words or numbers, topics named by the pages their questions cite,
agreement with those pages (NMI/ARI as scikit-learn computes them, beside permuted topics), the number of topics
chosen by silhouette, and a log without topical structure said to have none — on the bilingual help-desk log of
tests/helpdesk_log.py with real multilingual-e5 vectors."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

import helpdesk_log as hd
from ragnb.analysis.topic_pages import (CHANCE_P, SILHOUETTE_STRUCTURE, page_agreement, page_title, structure_verdict,
                                        top_pages)
from ragnb.analysis.topic_stopwords import LABEL_STOPWORDS, is_label_word
from ragnb.analysis.topic_terms import question_languages, topic_terms
from ragnb.analysis.topics import SILHOUETTE_TIE, choose_clustering, find_topics

E5 = "multilingual-e5-small"
# Words that labelled topics of a real bilingual wiki log before this list existed (docs/metrics.md, Analytics),
# and the question words of the help-desk log: none may label a topic.
OFFENDERS = {"какие", "какой", "сколько", "где", "как", "что", "нужно", "можно", "ли", "how", "what", "which",
             "where", "who", "should", "do", "does", "my", "i", "is"}


def test_label_words_drop_numbers_question_words_and_auxiliaries():
    assert OFFENDERS <= LABEL_STOPWORDS
    for word in ("2", "2026", "10", "какие", "Сколько", "ещё", "How", "should"):
        assert not is_label_word(word), word
    for word in ("2fa", "vpn", "отпуск", "пароль", "deploy"):
        assert is_label_word(word), word
    # "какие" stems to "как" and "2" is a token: before the list both were label terms of topic 0
    questions = ["Какие дни отпуска в 2026 году?", "Сколько дней отпуска в 2026?", "How many vacation days in 2026?",
                 "How do I reset the password?", "What should I do with an expired password?"]
    terms = topic_terms(questions, [0, 0, 0, 1, 1], n_terms=10)
    # topic 0: отпуска ×2, дни, дней (the crude stemmer keeps them apart), году, vacation, days;
    # topic 1: password ×2, reset, expired — no "какие", "сколько", "how", "many", "2026"
    assert set(terms[0]) == {"отпуска", "дни", "дней", "году", "vacation", "days"} and terms[0][0] == "отпуска"
    assert terms[1][0] == "password" and set(terms[1]) == {"password", "reset", "expired"}


def test_page_title_from_url():
    assert page_title("https://wiki.example.com/display/OPS/VPN#form") == "VPN"
    assert page_title("https://wiki.example.com/en/dev/two-factor_auth.md") == "two factor auth"
    assert page_title("http://www.wiki.example.com/ru/hr/%D0%BE%D1%82%D0%BF%D1%83%D1%81%D0%BA/") == "отпуск"
    assert page_title("https://c.example.com/pages/viewpage.action?pageId=123") == "page 123"
    assert page_title("https://c.example.com/display/OPS/VPN+access") == "VPN access"
    assert page_title("ops/vpn.md") == "vpn" and page_title(None) is None


def test_top_pages_hand_computed():
    vpn, vpn2, pwd = (f"{hd.BASE}/OPS/VPN", f"{hd.BASE}/OPS/VPN/#steps", f"{hd.BASE}/IT/Password")
    urls = [vpn, vpn2, pwd, None, pwd, pwd, vpn]
    # topic 0: VPN ×2 (two URL forms, one page), Password ×1, one question without a URL; topic 1: Password ×2, VPN ×1
    got = top_pages([0, 0, 0, 0, 1, 1, 1], urls)
    assert got == {0: ["VPN (2)", "Password (1)"], 1: ["Password (2)", "VPN (1)"]}
    # a title given for the page (front matter, heading) wins over the URL's last segment
    from ragnb.tiers.real_users import page_of

    titled = top_pages([0, 0, 0, 0, 1, 1, 1], urls, titles={page_of(vpn): "VPN access"}, n=1)
    assert titled == {0: ["VPN access (2)"], 1: ["Password (2)"]}
    with pytest.raises(ValueError, match="one URL"):
        top_pages([0, 1], [vpn])


def test_page_agreement_hand_cases():
    perfect = page_agreement([0] * 4 + [1] * 4 + [2] * 4, ["a"] * 4 + ["b"] * 4 + ["c"] * 4, n_boot=50, n_perm=99)
    assert perfect["nmi"]["value"] == pytest.approx(1.0) and perfect["ari"]["value"] == pytest.approx(1.0)
    # 12 items in 3 groups of 4: a permutation reproduces the grouping with probability 3! / (12! / 4!³) = 1/5775,
    # so none of the 99 does (seed 0) and p = 1 / (1 + 99); ARI of permuted topics averages about 0
    assert perfect["ari"]["p_value"] == pytest.approx(0.01) and abs(perfect["ari"]["chance_mean"]) < 0.1
    assert perfect["nmi"]["chance_p95"] < 1.0
    # every resample of a perfect match is perfect: no shift, a zero-width interval at 1
    assert perfect["ari"]["bootstrap_shift"] == pytest.approx(0.0) and perfect["ari"]["ci95"] == pytest.approx([1, 1])
    missing = page_agreement([0, 1, 0, 1], ["a", None, None, "b"], n_boot=10, n_perm=10)
    assert (missing["n"], missing["n_valid"], missing["n_failed"], missing["n_pages"]) == (4, 2, 2, 2)
    one_page = page_agreement([0, 1, 1], ["a", "a", None])
    assert np.isnan(one_page["nmi"]["value"]) and np.isnan(one_page["ari"]["p_value"]) and one_page["n_failed"] == 1
    with pytest.raises(ValueError, match="one page"):
        page_agreement([0, 1], ["a"])


def test_structure_verdict_rule():
    at_chance = {"ari": {"value": 0.01, "chance_p95": 0.05, "p_value": 0.4}}
    above = {"ari": {"value": 0.4, "chance_p95": 0.05, "p_value": 0.005}}
    assert not structure_verdict(0.01, at_chance)["has_structure"]
    assert structure_verdict(0.01, above)["has_structure"]  # pages say there is structure the vectors blur
    assert structure_verdict(0.2, at_chance)["has_structure"]  # the vectors separate, whatever the pages say
    assert not structure_verdict(0.01, None)["has_structure"]  # no pages: the silhouette alone
    assert "no cited pages" in structure_verdict(0.01, None)["reason"]


@pytest.fixture(scope="module")
def helpdesk():
    """The help-desk log's questions, cited URLs and real e5 vectors."""
    from ragnb.embeddings.models import get_encoder
    from ragnb.embeddings.base import encode_queries

    rows = hd.log_rows()
    texts = [r["question"] for r in rows]
    return rows, texts, [r["url"] for r in rows], encode_queries(get_encoder(E5), texts, batch_size=64)


def test_helpdesk_topics_are_labelled_by_words_and_page_titles(helpdesk):
    rows, texts, urls, vectors = helpdesk
    found = find_topics(texts, vectors, 8, urls=urls, n_boot=200)
    terms = [w for ws in found.terms.values() for w in ws]
    assert len(terms) == 5 * len(found.terms)
    bad = [w for w in terms if not any(ch.isalpha() for ch in w) or w in LABEL_STOPWORDS or w in OFFENDERS]
    assert bad == [], found.terms
    # every topic names its pages by title, its most cited page first, with the count computed here from the rows
    titles = {hd.page_url(rel): key.split("/")[-1] for rel, (key, _) in hd.PAGES.items()}
    titles |= {f"{hd.BASE}/OFFICE/Canteen": "Canteen", f"{hd.BASE}/HR/Insurance": "Insurance"}
    for t, pages in found.pages.items():
        cited = Counter(titles[r["url"]] for r, lab in zip(rows, found.clustering.labels) if lab == t and r["url"])
        assert pages, t
        for entry in pages:
            m = re.fullmatch(r"(.+) \((\d+)\)", entry)
            assert m and int(m.group(2)) == cited[m.group(1)], (t, pages, cited)
        assert int(re.fullmatch(r".+ \((\d+)\)", pages[0]).group(1)) == max(cited.values())
    # the subjects' pages lead their topics: VPN, Password, Sick and the office guide each lead one
    leaders = {p[0].rsplit(" (", 1)[0] for p in found.pages.values()}
    assert {"VPN", "Password", "Sick", "Guide"} <= leaders


def test_helpdesk_page_agreement_equals_scikit_learn_and_beats_chance(helpdesk):
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    rows, texts, urls, vectors = helpdesk
    found = find_topics(texts, vectors, 8, urls=urls, n_boot=200)
    a = found.agreement
    cited = [(u, lab) for u, lab in zip(urls, found.clustering.labels) if u]
    assert (a["n"], a["n_valid"], a["n_failed"], a["n_pages"]) == (57, 54, 3, 10)  # g2, g3, g5 cite nothing
    pages, labels = [u for u, _ in cited], [lab for _, lab in cited]  # one URL form per page in this log
    assert a["nmi"]["value"] == pytest.approx(normalized_mutual_info_score(pages, labels), abs=1e-12)
    assert a["ari"]["value"] == pytest.approx(adjusted_rand_score(pages, labels), abs=1e-12)
    for m in ("nmi", "ari"):
        lo, hi = a[m]["ci95"]
        assert lo <= a[m]["value"] <= hi and a[m]["p_value"] < CHANCE_P
        assert a[m]["bootstrap_shift"] > 0  # repeated questions agree with themselves: resamples score higher
        assert a[m]["value"] > a[m]["chance_p95"] + 0.1  # measured: NMI 0.69 vs 0.36, ARI 0.43 vs 0.05
    assert found.verdict["has_structure"] and found.clustering.silhouette > SILHOUETTE_STRUCTURE


def test_helpdesk_number_of_topics_by_silhouette(helpdesk):
    from sklearn.metrics import silhouette_score

    from ragnb.analysis.topics import language_centred

    _, texts, _, vectors = helpdesk
    langs = question_languages(texts)
    cl, sel = choose_clustering(vectors, 6, "silhouette", languages=langs)
    assert sel["rule"] == "silhouette" and sorted(sel["tried"]) == [2, 3, 4, 5, 6] and sel["max_topics"] == 6
    x = language_centred(vectors, langs)
    for k, value in sel["tried"].items():  # each value is the silhouette of that clustering (scikit-learn)
        labels = choose_clustering(vectors, k, "fixed", languages=langs)[0].labels
        assert value == pytest.approx(silhouette_score(x, labels, metric="cosine"), abs=1e-9)
    best = max(sel["tried"].values())
    assert sel["chosen"] == min(k for k, v in sel["tried"].items() if v >= best - SILHOUETTE_TIE)
    assert len(set(cl.labels.tolist())) == sel["chosen"] and cl.silhouette == sel["tried"][sel["chosen"]]
    fixed, fsel = choose_clustering(vectors, 4, "fixed", languages=langs)
    assert fsel["chosen"] == 4 and list(fsel["tried"]) == [4] and len(set(fixed.labels.tolist())) == 4
    with pytest.raises(ValueError, match="n_topics_rule"):
        choose_clustering(vectors, 4, "elbow")


def test_a_log_without_topical_structure_is_reported_as_such(helpdesk):
    """Random vectors (no subjects) and the cited pages shuffled across the questions: the silhouette is near 0
    and the topics agree with the pages no better than permuted topics — the verdict says so."""
    from ragnb.analysis.topic_pages import structure_note

    _, texts, urls, vectors = helpdesk
    rng = np.random.default_rng(7)
    noise = rng.normal(size=vectors.shape)
    shuffled = list(np.asarray(urls, dtype=object)[rng.permutation(len(urls))])
    found = find_topics(texts, noise, 8, urls=shuffled, n_boot=100)
    assert found.clustering.silhouette < SILHOUETTE_STRUCTURE / 2  # measured ≈ 0.01
    assert found.agreement["ari"]["p_value"] >= CHANCE_P
    assert not found.verdict["has_structure"]
    assert structure_note(found.verdict).startswith("No topical structure: silhouette")
    info = found.summary_info()
    assert info["topical_structure"]["has_structure"] is False and "say nothing" in info["topical_structure"]["note"]
    # the real vectors with the shuffled pages still separate: structure in the questions, not in the pages
    real = find_topics(texts, vectors, 8, urls=shuffled, n_boot=100)
    assert real.agreement["ari"]["p_value"] >= CHANCE_P and real.verdict["has_structure"]
