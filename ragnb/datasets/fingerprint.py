"""What a run measured on: content fingerprints of the datasets and corpora a notebook opened.

Two runs are comparable only when they scored the same questions against the same chunks
(see :mod:`ragnb.runs.compare`); a file name or a database URL says neither (a file is edited in place, the
embedded server's port changes between sessions), so the fingerprints hash the content:

* dataset: ``sha256`` over the items as written to a file (``DatasetItem.to_json_dict``, keys sorted), in
  order — question texts, answers, relevant chunk ids and item ids all count; ``name`` and ``n_items`` are
  recorded for display. A ``max_questions`` cut is applied first, so the fingerprint is of what was scored.
* corpus: ``chunks_md5`` = md5 of the chunk ids and the md5 of each chunk's text, in id order, computed in the
  database (one pass, no text leaves it); ``n_chunks``, ``n_embedded`` and the embedding ``model``/``dim``
  recorded for the chunk vectors. ``database`` (the display URL, password redacted) is recorded for the
  comparison table but is not part of the identity.

The notebook's process keeps the dataset and the corpus it opened last (:func:`note_dataset`,
:func:`note_corpus`, called by :func:`ragnb.datasets.corpus.open_corpus` / ``open_dataset``) — the last, so that
re-running a cell with other parameters in a live kernel does not record both; :meth:`ragnb.tiers.result.TierResult.write`
adds them to the metrics JSON as ``provenance``, so the run record carries them per notebook.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import aggregate_order_by

_OPENED: dict[str, dict[str, dict]] = {"datasets": {}, "corpora": {}}


def dataset_fingerprint(dataset: Any) -> dict:
    """``{name, n_items, sha256}`` of a :class:`ragnb.datasets.schema.Dataset` (module docstring)."""
    h = hashlib.sha256()
    for item in dataset.items:
        h.update(json.dumps(item.to_json_dict(), sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        h.update(b"\n")
    return {"name": dataset.name, "n_items": len(dataset.items), "sha256": h.hexdigest()[:32]}


def corpus_fingerprint(db: Any) -> dict:
    """``{database, n_chunks, n_embedded, chunks_md5, model, dim}`` of a database's chunk table (module
    docstring); a database without a chunk table has ``n_chunks`` 0 and ``chunks_md5`` None."""
    from ragnb.store.schema import table_exists, tables
    from ragnb.store.models import has_default_vector
    from ragnb.store.vectors import recorded_space

    t = tables(db.schema)
    out: dict[str, Any] = {"database": db.display_url, "n_chunks": 0, "n_embedded": 0, "chunks_md5": None,
                           "model": None, "dim": None}
    if not table_exists(db, t.chunk):
        return out
    c = t.chunk
    entry = sa.func.concat(sa.cast(c.c.id, sa.Text), ":", sa.func.md5(sa.func.coalesce(c.c.text, "")))
    joined = sa.func.string_agg(entry, aggregate_order_by(sa.literal_column("','"), sa.cast(c.c.id, sa.Text)))
    embedded = sa.func.count().filter(has_default_vector(db, c))
    stmt = sa.select(sa.func.count(), embedded, sa.func.md5(sa.func.coalesce(joined, "")))
    with db.engine.connect() as conn:
        n, n_embedded, digest = conn.execute(stmt).one()
    space = recorded_space(db, t, c)
    out.update(n_chunks=int(n), n_embedded=int(n_embedded), chunks_md5=digest if n else None,
               model=space["model"] if space else None, dim=space["dim"] if space else None)
    return out


def note_dataset(dataset: Any) -> dict:
    """Remember that this process scores ``dataset`` (replacing an earlier one); returns its fingerprint."""
    fp = dataset_fingerprint(dataset)
    _OPENED["datasets"] = {fp["sha256"]: fp}
    return fp


def note_corpus(db: Any, model: str | None = None, dim: int | None = None) -> dict:
    """Remember that this process searches ``db``'s chunks (replacing an earlier corpus); returns its fingerprint.
    ``model`` / ``dim``: the vectors searched, when they are not the chunk column's (another model's table)."""
    fp = corpus_fingerprint(db)
    if model is not None:
        fp.update(model=model, dim=dim)
    _OPENED["corpora"] = {f"{fp['chunks_md5']}|{fp['database']}": fp}
    return fp


def opened() -> dict:
    """``{"datasets": [...], "corpora": [...]}`` opened so far by this process (empty lists are left out)."""
    return {k: list(v.values()) for k, v in _OPENED.items() if v}


def reset() -> None:
    """Forget what was opened (a new notebook in the same process, or a test)."""
    for v in _OPENED.values():
        v.clear()
