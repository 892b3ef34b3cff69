"""Whether two runs measured the same thing, and everything that differs between them.

A difference between two runs means something only when both scored the same questions against the same chunks:
a 200-word and a 60-word chunking give pages different numbers of chunks, so chunk-level recall moves for
reasons that have nothing to do with retrieval quality. Per notebook present in both runs, a comparison is

* **not comparable** (``False``) when the dataset fingerprints differ (question texts, answers, relevant ids or
  item ids — :func:`ragnb.datasets.fingerprint.dataset_fingerprint`), the corpus fingerprints differ (chunk ids
  and texts — ``corpus_fingerprint``; the database URL alone is not compared: the embedded server's port
  changes between sessions), only one run recorded fingerprints, or the per-item files hold different item ids.
  The embedding model is *not* part of this identity: two runs that differ only in the model are exactly the
  comparison a team choosing a model needs, and the model is listed among the differences;
* **unverified** (``None``) when neither run recorded fingerprints (records made before they existed, or a
  notebook that opens neither a dataset nor a corpus) and the item ids — where per-item files exist — agree;
* **comparable** (``True``) otherwise.

A not-comparable notebook gets no test and no verdict (:mod:`ragnb.runs.compare`).

**Per metric family.** The rule above is for the chunk-level and all other metrics of a notebook. The page-level
metrics (``doc_*``, ``docrank_*``: :func:`ragnb.metrics.registry.level`) map the retrieved chunks to their pages
before scoring, so they survive a re-chunking, another corpus build, retriever or embedding model. They are
comparable (paired on the question id) when both per-item files hold the same question ids and, item by item,
the same question text and the same relevant pages (:data:`ragnb.metrics.retrieval.RELEVANT_PAGES`, the
truth the ``doc_*`` metrics were scored against) — whatever the dataset and corpus fingerprints say
(:func:`page_comparability`). A question whose relevant pages differ between the runs (its page missing from one
corpus, another label) makes them not comparable: the runs did not score the same test set.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragnb.config import url_database_name
from ragnb.metrics.retrieval import RELEVANT_PAGES
from ragnb.runs.history import Alignment, align
from ragnb.spec import label_of

# Record fields that describe what a run used (models, data), listed in the differences table.
RECORD_FIELDS = (("model", "embedding_model"), ("model", "judge_model"), ("model", "generation_model"),
                 ("setting", "judge_eval_mode"), ("setting", "consistency_runs"), ("dataset", "dataset_file"),
                 ("dataset", "dataset_type"), ("code", "git_commit_hash"), ("code", "ragnb_version"))
IGNORED_PARAMS = ("output_dir", "outputs")  # differ for every run by construction


def provenance(block: Any) -> dict | None:
    """The ``provenance`` a notebook recorded (``{"datasets": [...], "corpora": [...]}``), else None."""
    p = block.get("provenance") if isinstance(block, dict) else None
    return p if isinstance(p, dict) and (p.get("datasets") or p.get("corpora")) else None


def dataset_keys(p: dict | None) -> list[str]:
    return sorted(str(d.get("sha256")) for d in (p or {}).get("datasets") or [])


def corpus_keys(p: dict | None) -> list[str]:
    # identity = chunk ids and texts; the URL is shown, not compared, and the model is a difference, not a reason
    return sorted(str(c.get("chunks_md5")) for c in (p or {}).get("corpora") or [])


def describe_datasets(p: dict | None) -> str:
    ds = (p or {}).get("datasets") or []
    return "; ".join(f"{d.get('name')} ({d.get('n_items')} items, sha256 {str(d.get('sha256'))[:12]})" for d in ds) or "—"


def describe_corpora(p: dict | None, full: bool = False) -> str:
    """The corpora of a provenance block as a reader names them: ``database ragnb (120 chunks, …)``; ``full``:
    with the (password-free) connection URL, for two corpora that differ only in their server."""
    cs = (p or {}).get("corpora") or []
    return "; ".join(f"{c.get('database') if full else 'database ' + url_database_name(c.get('database'))} "
                     f"({c.get('n_chunks')} chunks, {c.get('n_embedded')} embedded, md5 "
                     f"{str(c.get('chunks_md5'))[:12]}, {c.get('model') or 'model not recorded'})" for c in cs) or "—"


def corpora_texts(pa: dict | None, pb: dict | None) -> tuple[str, str]:
    """How two runs' corpora are shown side by side: by database name, or with the server where only it differs."""
    a, b = describe_corpora(pa), describe_corpora(pb)
    return (a, b) if a != b else (describe_corpora(pa, full=True), describe_corpora(pb, full=True))


def block_comparability(key: str, block_a: dict, block_b: dict, only_a: list[str] | None = None,
                        only_b: list[str] | None = None) -> tuple[bool | None, list[str]]:
    """``(comparable, reasons)`` for one notebook present in both runs (module docstring). ``only_a`` /
    ``only_b``: item ids found in one run's per-item file only."""
    label = label_of(key)
    pa, pb = provenance(block_a), provenance(block_b)
    reasons: list[str] = []
    if (pa is None) != (pb is None):
        which = "A" if pa is None else "B"
        reasons.append(f"{label}: run {which} recorded no dataset/corpus fingerprint, so the two runs cannot be "
                       "shown to have used the same data")
    elif pa is not None:
        if dataset_keys(pa) != dataset_keys(pb):
            reasons.append(f"{label}: different datasets — A: {describe_datasets(pa)}; B: {describe_datasets(pb)}")
        if corpus_keys(pa) != corpus_keys(pb):
            shown_a, shown_b = corpora_texts(pa, pb)
            reasons.append(f"{label}: different corpora — A: {shown_a}; B: {shown_b}")
    if only_a or only_b:
        parts = [f"{len(ids)} only in run {side} ({_shown(ids)})"
                 for side, ids in (("A", only_a), ("B", only_b)) if ids]
        reasons.append(f"{label}: different item ids — {'; '.join(parts)}")
    if reasons:
        return False, reasons
    return (None if pa is None else True), []


def _shown(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")


def page_comparability(key: str, a: pd.DataFrame, b: pd.DataFrame, alignment: Alignment) -> tuple[bool | None, str]:
    """``(comparable, text)`` for the page-level metrics of notebook ``key`` from the two per-item tables
    (module docstring): True with what the comparison rests on, False with the reason, None with what is
    missing when the tables do not say (no ``relevant_pages`` column in both: older runs) — then the notebook's
    rule applies."""
    label = label_of(key)
    if alignment.only_a or alignment.only_b:
        return False, ""  # the notebook's reason already names the item ids
    lacking = [side for side, t in (("A", a), ("B", b)) if RELEVANT_PAGES not in t.columns]
    if lacking:
        return None, (f"{label}: whether its page-level metrics compare across the two runs cannot be checked: the "
                      f"per-item file of run {' and run '.join(lacking)} has no {RELEVANT_PAGES} column (written by "
                      "newer versions of ragnb; run it again)")
    columns = [RELEVANT_PAGES] + (["question"] if "question" in a.columns and "question" in b.columns else [])
    merged = align(a, b, columns).merged
    key_col = alignment.key[0]
    for col, what in ((c, "relevant pages" if c == RELEVANT_PAGES else "question texts") for c in columns):
        va, vb = merged[f"{col}_a"].fillna("").astype(str), merged[f"{col}_b"].fillna("").astype(str)
        differ = merged.loc[va != vb, key_col].astype(str).tolist()
        if differ:
            first = differ[0]
            row = merged[merged[key_col].astype(str) == first].iloc[0]
            return False, (f"{label}: the page-level metrics are not comparable either — {len(differ)} question(s) "
                           f"have other {what} in the two runs ({_shown(differ)}; e.g. {first}: A {row[f'{col}_a']!r}, "
                           f"B {row[f'{col}_b']!r})")
    return True, (f"{label}: the page-level metrics (doc_*) are compared paired on the same {len(merged)} question "
                  "ids, with the same " + ("questions and " if "question" in columns else "") + "relevant pages in "
                  "both runs")


def overall(flags: list[bool | None]) -> bool | None:
    """False if any notebook is not comparable, None if any is unverified, True if all are comparable."""
    if any(f is False for f in flags):
        return False
    if any(f is None for f in flags) or not flags:
        return None
    return True


def _text(value: Any) -> str:
    return "—" if value is None or value == "" else str(value)


def differences(a: dict, b: dict, blocks_a: dict, blocks_b: dict) -> pd.DataFrame:
    """Every parameter, model, dataset and database that differs between run records ``a`` and ``b``: one row
    each (``kind``, ``name``, ``run A``, ``run B``); values only one run has are shown against "—"."""
    rows = []
    for kind, field in RECORD_FIELDS:
        if _text(a.get(field)) != _text(b.get(field)):
            rows.append((kind, field, _text(a.get(field)), _text(b.get(field))))
    params_a, params_b = a.get("params") or {}, b.get("params") or {}
    for nb in sorted(set(params_a) | set(params_b)):
        pa, pb = params_a.get(nb) or {}, params_b.get(nb) or {}
        for name in sorted((set(pa) | set(pb)) - set(IGNORED_PARAMS)):
            va = pa.get(name) if name in pa else None
            vb = pb.get(name) if name in pb else None
            if _text(va) != _text(vb):
                rows.append(("parameter", f"{nb}.{name}", _text(va), _text(vb)))
    for key in sorted(set(blocks_a) | set(blocks_b), key=str):
        prov_a = provenance(blocks_a[key][1]) if key in blocks_a else None
        prov_b = provenance(blocks_b[key][1]) if key in blocks_b else None
        stem = (blocks_a.get(key) or blocks_b.get(key))[0] or key
        if describe_datasets(prov_a) != describe_datasets(prov_b):
            rows.append(("dataset", f"{stem}: dataset", describe_datasets(prov_a), describe_datasets(prov_b)))
        if describe_corpora(prov_a, full=True) != describe_corpora(prov_b, full=True):
            rows.append(("database", f"{stem}: corpus", *corpora_texts(prov_a, prov_b)))
    return pd.DataFrame(rows, columns=["kind", "name", "run A", "run B"])


def series_label(block: Any) -> str:
    """The trend line a block belongs to: its dataset(s) and corpus/corpora (one line per dataset + corpus)."""
    p = provenance(block)
    if p is None:
        return "dataset and corpus not recorded"
    ds = ", ".join(f"{d.get('name')} #{str(d.get('sha256'))[:8]}" for d in p.get("datasets") or []) or "no dataset"
    cs = ", ".join(f"{c.get('n_chunks')} chunks #{str(c.get('chunks_md5'))[:8]}" for c in p.get("corpora") or [])
    return f"{ds} · {cs or 'no corpus'}"
