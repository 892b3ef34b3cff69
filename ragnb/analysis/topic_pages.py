"""Topics named by their pages, and checked against them (see docs/metrics.md, Analytics: topics).

Terms alone rarely tell a person what a topic is; the pages its questions cite (the log's ``url``) or, without a
log, retrieve first, do: "top pages: VPN (5), Password (2)". The same pages are an oracle for the clustering:
:func:`page_agreement` compares the topic of each question with its page by normalised mutual information and the
adjusted Rand index (scikit-learn), with a bootstrap CI and the same figure for randomly permuted topic labels as
the chance level. :func:`structure_verdict` says when a log has no topical structure to show.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from urllib.parse import unquote_plus, urlsplit

import numpy as np

from ragnb.tiers.real_users import page_of

# Below this silhouette the topics barely separate: random 384-d vectors give 0.00–0.01 for 2–9 topics, the
# help-desk log of tests/helpdesk_log.py (8 subjects, e5, language-centred) 0.09–0.18.
SILHOUETTE_STRUCTURE = 0.05
# Page agreement counts as above chance when fewer than this share of the permuted labellings reach it.
CHANCE_P = 0.05
_SUFFIX = re.compile(r"\.(md|markdown|txt|html?|aspx|php)$", re.IGNORECASE)


def page_title(url: str | None) -> str | None:
    """A readable name of a page from its URL: the last path segment, percent-decoded, without a file suffix,
    '-', '_' and '+' as spaces ("…/display/OPS/VPN" → "VPN", "…/en/dev/deploy.md" → "deploy"). A Confluence
    ``viewpage.action?pageId=N`` → "page N"; None for a missing URL."""
    if not isinstance(url, str) or not url.strip():
        return None
    parts = urlsplit(url.strip() if "//" in url else "//" + url.strip())
    segments = [s for s in parts.path.split("/") if s]
    last = _SUFFIX.sub("", unquote_plus(segments[-1])) if segments else ""
    if not last or last.endswith(".action"):
        pid = page_of(url)
        return f"page {pid}" if pid and pid.isdigit() else (parts.netloc or url.strip())
    return re.sub(r"[-_+\s]+", " ", last).strip() or last


def titles_by_page(url_titles: Mapping[str, str]) -> dict[str, str]:
    """page id (:func:`ragnb.tiers.real_users.page_of`) → title, from url → title (e.g.
    :func:`ragnb.store.markdown.folder_titles`): the keys :func:`top_pages` reads."""
    return {pid: title for url, title in url_titles.items() if (pid := page_of(url)) is not None}


def wiki_titles(pages_dir: str, url_template: str = "") -> dict[str, str] | None:
    """page id → title of the wiki folder ``pages_dir`` was loaded from (front-matter title or first heading,
    :func:`ragnb.store.markdown.folder_titles`); None for "" (the pages are then named from their URLs)."""
    if not pages_dir:
        return None
    from ragnb.store.markdown import folder_titles

    return titles_by_page(folder_titles(pages_dir, url_template or None))


def question_pages(urls: Sequence[str | None]) -> list[str | None]:
    """The page id (:func:`ragnb.tiers.real_users.page_of`) of each question's URL; None without one."""
    return [page_of(u) for u in urls]


def top_pages(labels: Sequence[int], urls: Sequence[str | None], titles: Mapping[str, str] | None = None,
              n: int = 3) -> dict[int, list[str]]:
    """Per topic, its ``n`` most frequent pages as "title (count)" (ties: the title, alphabetically). The title of
    a page is ``titles[page id]`` when given (front matter, a heading), else :func:`page_title` of the first URL
    seen for it. Questions without a URL are not counted; a topic without any gets []."""
    labels = np.asarray(labels)
    if len(labels) != len(urls):
        raise ValueError(f"{len(labels)} topic labels for {len(urls)} page URLs; give one URL (or None) per question")
    titles = titles or {}
    name: dict[str, str] = {}
    counts: dict[int, Counter[str]] = {int(t): Counter() for t in sorted(set(labels.tolist()))}
    for t, u in zip(labels.tolist(), urls):
        p = page_of(u)
        if p is None:
            continue
        name.setdefault(p, titles.get(p) or page_title(u) or p)
        counts[int(t)][p] += 1
    return {t: [f"{name[p]} ({k})" for p, k in sorted(c.items(), key=lambda pk: (-pk[1], name[pk[0]]))[:n]]
            for t, c in counts.items()}


def _scores(topics: np.ndarray, pages: np.ndarray) -> tuple[float, float]:
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    return float(normalized_mutual_info_score(pages, topics)), float(adjusted_rand_score(pages, topics))


def page_agreement(labels: Sequence[int], pages: Sequence[str | None], n_boot: int = 1000, n_perm: int = 200,
                   seed: int = 0, source: str = "cited") -> dict:
    """How well the topics follow the pages: ``{nmi, ari, n, n_valid, n_failed, n_pages, source}``.

    Over the questions with a page (the others counted in ``n_failed``): ``nmi`` / ``ari`` =
    ``{value, ci95, chance_mean, chance_p95, p_value}`` with value = scikit-learn's
    ``normalized_mutual_info_score`` (arithmetic mean normalisation) / ``adjusted_rand_score`` of (page, topic);
    ci95 = percentile bootstrap over questions (``n_boot`` resamples; the statistic is not a mean of per-question
    values, so :func:`ragnb.metrics.stats.bootstrap_ci` does not apply), re-centred on the value: a resample drawn
    with replacement repeats questions, a repeated question agrees with itself, and that lifts every resample's
    NMI and ARI (demo log: resamples average 0.19 for an NMI of 0.155, and the plain percentile interval missed
    the value) — so the interval is the resamples' 2.5–97.5% percentiles minus their mean plus the value, and
    ``bootstrap_shift`` = their mean minus the value is reported; chance = the statistic for the topic labels
    permuted at random ``n_perm`` times (mean and 95th percentile: NMI grows with the number of topics even for
    noise, ARI's chance level is about 0); p_value = (1 + #permutations ≥ value) / (1 + n_perm). All NaN when
    fewer than 2 questions have a page or they name one page only.
    """
    labels = np.asarray(labels)
    if len(labels) != len(pages):
        raise ValueError(f"{len(labels)} topic labels for {len(pages)} pages; give one page (or None) per question")
    if n_boot < 0 or n_perm < 0:
        raise ValueError(f"n_boot = {n_boot}, n_perm = {n_perm}; use 0 (none) or a positive number of resamples")
    keep = np.array([p is not None for p in pages], dtype=bool)
    topics, pg = labels[keep], np.asarray([p for p in pages if p is not None], dtype=object)
    out = {"n": int(len(labels)), "n_valid": int(keep.sum()), "n_failed": int((~keep).sum()),
           "n_pages": int(len(set(pg.tolist()))), "source": source}
    nan = {"value": float("nan"), "bootstrap_shift": float("nan"), "ci95": [float("nan")] * 2,
           "chance_mean": float("nan"), "chance_p95": float("nan"), "p_value": float("nan")}
    if keep.sum() < 2 or out["n_pages"] < 2:
        return {**out, "nmi": dict(nan), "ari": dict(nan)}
    rng = np.random.default_rng(seed)
    value = _scores(topics, pg)
    # one resample's indices at a time: n_boot × n at once would be 800 MB for 100k questions
    draws = (rng.integers(0, len(pg), size=len(pg)) for _ in range(n_boot))
    boot = np.array([_scores(topics[i], pg[i]) for i in draws])
    perm = np.array([_scores(rng.permutation(topics), pg) for _ in range(n_perm)])
    for j, name in enumerate(("nmi", "ari")):
        b, p = boot.reshape(-1, 2)[:, j], perm.reshape(-1, 2)[:, j]
        shift = float(b.mean() - value[j]) if n_boot else float("nan")
        out[name] = {"value": value[j], "bootstrap_shift": shift,
                     "ci95": [float(x - shift) for x in np.quantile(b, [0.025, 0.975])] if n_boot else nan["ci95"],
                     "chance_mean": float(p.mean()) if n_perm else float("nan"),
                     "chance_p95": float(np.quantile(p, 0.95)) if n_perm else float("nan"),
                     "p_value": float((1 + (p >= value[j]).sum()) / (1 + n_perm)) if n_perm else float("nan")}
    return out


def structure_verdict(silhouette: float, agreement: Mapping | None) -> dict:
    """``{has_structure, reason}``. No topical structure when the silhouette is below :data:`SILHOUETTE_STRUCTURE`
    AND the topics agree with the pages no better than chance (ARI's permutation p ≥ :data:`CHANCE_P`) — or, with
    no pages to compare (none cited, or one page only), on the silhouette alone."""
    sil_low = not (np.isfinite(silhouette) and silhouette >= SILHOUETTE_STRUCTURE)
    ari = (agreement or {}).get("ari", {})
    p = ari.get("p_value", float("nan"))
    sil_text = (f"silhouette {silhouette:.3f} ({'<' if sil_low else '≥'} {SILHOUETTE_STRUCTURE})"
                if np.isfinite(silhouette) else "silhouette undefined (one question per topic)")
    if not np.isfinite(p):
        reason = f"{sil_text}; no cited pages to compare with"
        return {"has_structure": not sil_low, "reason": reason}
    chance = p >= CHANCE_P
    page_text = (f"page agreement ARI {ari['value']:.3f} vs {ari['chance_p95']:.3f} for permuted topics "
                 f"(p = {p:.3f}: {'chance' if chance else 'above chance'})")
    return {"has_structure": not (sil_low and chance), "reason": f"{sil_text}; {page_text}"}


def structure_note(verdict: Mapping) -> str:
    """One sentence for a report and the summary's notes."""
    if verdict["has_structure"]:
        return f"Topics have structure: {verdict['reason']}."
    return (f"No topical structure: {verdict['reason']}. The topics are an arbitrary split of the questions; "
            "per-topic figures (scores, coverage) say nothing about subjects.")


def page_agreement_note(agreement: Mapping) -> str:
    """One sentence for a report: NMI and ARI with their CIs beside the chance level, and what they were
    measured on."""
    nmi, ari = agreement["nmi"], agreement["ari"]
    counted = (f"{agreement['n_valid']} of {agreement['n']} questions with a page ({agreement['source']}), "
               f"{agreement['n_pages']} pages")
    if not np.isfinite(nmi["value"]):
        return f"Page agreement not measured: {counted} (needs at least 2 questions and 2 pages)."

    def one(name: str, s: Mapping) -> str:
        return (f"{name} {s['value']:.3f} (95% CI {s['ci95'][0]:.3f}–{s['ci95'][1]:.3f}; permuted topics "
                f"{s['chance_mean']:.3f}, 95th percentile {s['chance_p95']:.3f}, p = {s['p_value']:.3f})")
    return f"Agreement of the topics with the pages over {counted}: {one('NMI', nmi)}, {one('ARI', ari)}."


def selection_note(selection: Mapping) -> str:
    """One sentence for a report: how the number of topics was chosen, with the values tried."""
    tried = ", ".join(f"{k}: {v:.3f}" for k, v in selection["tried"].items())
    if selection["rule"] == "fixed":
        return f"{selection['chosen']} topics as given (n_topics_rule 'fixed'; silhouette {tried})."
    return (f"{selection['chosen']} topics chosen by silhouette ({selection['criterion']}); silhouette per number of "
            f"topics: {tried}.")
