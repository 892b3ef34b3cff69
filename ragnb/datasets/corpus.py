"""The corpus a tier or a dataset mode works on: the database (bundled demo or configured) and the encoder
that matches its stored vectors, and the dataset of questions that goes with it.

Several embedding models side by side: :func:`open_corpora` opens one database once and returns one
:class:`Corpus` per model — each searches its own stored vectors (``model``), so two models are never mixed
in one search."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragnb.datasets import demo
from ragnb.datasets.build import check_language
from ragnb.datasets.fingerprint import note_corpus, note_dataset
from ragnb.datasets.schema import Dataset, load_dataset
from ragnb.io import check_unique, comma_list
from ragnb import config
from ragnb.config import url_database_name
from ragnb.embeddings.models import Encoder, canonical_model_name, get_encoder, options_for, parse_model_options
from ragnb.embeddings.base import limit_text, setting_text
from ragnb.store.engine import Database, connect
from ragnb.store.models import catalogue_rows, column_vectors
from ragnb.store.schema import tables
from ragnb.store.vectors import check_space

CORPORA = ("demo", "db")


@dataclass
class Corpus:
    db: Database
    encoder: Encoder
    label: str  # what the report header shows (no secrets)
    space: dict  # the verified (model, dim) of the stored vectors
    model: str | None = None  # whose stored vectors are read (None: the chunk column's, no model declared)

    def header_info(self) -> dict:
        # the database by name: its URL (host, user) is in the metrics JSON's provenance, not in the report
        return {"corpus": self.label, "database": url_database_name(self.db.display_url),
                "embedding_model": self.encoder.name,
                "encoder": encoder_text(self.encoder.describe()), "vectors_verified": self.space.get("verified", False)}

    def vectors(self, which: str = "chunks") -> tuple[list[str], list[str | None], Any]:
        """(ids, urls, float32 matrix) of this model's stored vectors of ``which``."""
        from ragnb.store.vectors import fetch_vectors

        return fetch_vectors(self.db, which, model=self.model)

    def model_for(self, which: str) -> str | None:
        """Whose stored vectors of ``which`` ("chunks" or "questions") belong to this corpus's encoder."""
        return self.model if which == "chunks" else stored_model(self.db, self.encoder, which)

    def retriever(self, backend: str, index_mode: str = "auto", chunks: tuple | None = None) -> Any:
        """The retriever over this model's chunk vectors (``chunks``: as :meth:`vectors` returned them)."""
        from ragnb.rag.retrieval import build_retriever

        return build_retriever(backend, self.db, dim=self.encoder.dim, index_mode=index_mode, chunks=chunks,
                               model=self.model)


def encoder_text(d: dict) -> str:
    """One line of an encoder's ``describe()`` for a report header: backend, dimension, prompts, fingerprint."""
    prompts = (f"query prompt {d.get('query_prompt')!r}, document prompt {d.get('document_prompt')!r}"
               if d.get("query_prompt") or d.get("document_prompt") else "no prompts")
    sent = [f"input_type {setting_text('input_type', d['input_type'])}"] if d.get("input_type") else []
    asked = [f"dimensions {d['dimensions']} requested"] if d.get("dimensions") else []
    parts = [f"{d.get('backend')}", f"{d.get('dim')}-d", prompts, *sent, *asked,
             f"input limit {limit_text(d)}", *device_text(d), f"fingerprint {str(d.get('fingerprint'))[:12]}"]
    return " · ".join(parts)


def device_text(d: dict) -> list[str]:
    """Where a local model encoded, as a header shows it (``on cuda:0 in float16``); nothing for an endpoint (or a
    record from before devices were recorded)."""
    if "device" not in d:
        return []
    if not d.get("device"):
        return ["model not loaded (nothing encoded in this notebook)"]
    precision = d.get("dtype")
    return [f"on {d['device']}" + (f" in {precision}" if precision and precision != "float32" else "")]


def model_list(embedding_models: str = "", embedding_model: str = "") -> list[str]:
    """The models a notebook compares: ``embedding_models`` (comma-separated, the first is the primary), else
    the one ``embedding_model`` ("" = ``RAGNB_EMBEDDING_MODEL`` or the bundled default)."""
    names = comma_list(embedding_models, "embedding_models")
    if not names:
        return [embedding_model]
    seen: dict[str, str] = {}
    for i, name in enumerate(names):
        check_unique(seen, name, f"embedding_models entry #{i + 1}", "model")
    return names


def stored_model(db: Database, encoder: Encoder, which: str = "chunks") -> str | None:
    """The stored vectors ``encoder`` reads in ``which``: its own by name — except a column filled outside
    ragnb with no model declared, which only the dimension check can vouch for (None: the column)."""
    table = tables(db.schema).chunk if which == "chunks" else tables(db.schema).question
    col = column_vectors(db, table)
    if col.model is None and not catalogue_rows(db, table, encoder.name):
        return None
    return encoder.name


def model_encoders(names: list[str], embedding_model_options: str | dict = "") -> list[Encoder]:
    """The encoders of ``names`` with their query/document settings: ``embedding_model_options`` (a notebook
    parameter: JSON or a mapping ``{model: {query_prompt, document_prompt, input_type, dimensions}}``) over the
    environment's (:func:`ragnb.embeddings.models.env_options_for`). An entry for a model not compared is a
    typo, never ignored."""
    given = parse_model_options(embedding_model_options, "embedding_model_options")
    compared = {canonical_model_name(n or config.embedding_model_name()): n for n in names}
    stray = [m for m in given if m not in compared]
    if stray:
        raise ValueError(f"embedding_model_options has settings for {stray}, which this run does not use "
                         f"(models: {[n or config.embedding_model_name() for n in names]}); fix the model name")
    return [get_encoder(n or None, **options_for(n or config.embedding_model_name(), given)) for n in names]


def open_corpora(corpus: str = "demo", language: str = "ru", embedding_model: str = "",
                 embedding_models: str = "", embedding_model_options: str | dict = "") -> list[Corpus]:
    """One :class:`Corpus` per model of :func:`model_list` (first = primary) over one database, each encoder with
    its settings (:func:`model_encoders`). The demo embeds its chunks and questions with every model first
    (incremental: nothing is re-embedded)."""
    if corpus not in CORPORA:
        raise ValueError(f"corpus = {corpus!r}; use 'demo' (bundled XQuAD) or 'db' (the configured database)")
    encoders = model_encoders(model_list(embedding_models, embedding_model), embedding_model_options)
    if corpus == "demo":
        db, _ = demo.ensure_demo(language, encoders)
        label = f"demo: XQuAD {language} (CC BY-SA 4.0)"
    else:
        db = connect()
        label = "database"
    out = []
    for encoder in encoders:
        model = stored_model(db, encoder)
        space = check_space(db, tables(db.schema).chunk, encoder, model=model)
        out.append(Corpus(db, encoder, label, space, model))
    # the run record says which chunks (and whose vectors) were searched (ragnb.datasets.fingerprint)
    note_corpus(db, out[0].model, out[0].encoder.dim if out[0].model else None)
    return out


def open_corpus(corpus: str = "demo", language: str = "ru", embedding_model: str = "",
                embedding_model_options: str | dict = "") -> Corpus:
    """``"demo"``: the bundled XQuAD corpus, loaded and embedded on first use into its own embedded database.
    ``"db"``: the configured database (``RAGNB_DATABASE_URL`` or the embedded default), opened read-only."""
    return open_corpora(corpus, language, embedding_model, embedding_model_options=embedding_model_options)[0]


def open_dataset(dataset_path: str, corpus: str = "demo", language: str = "ru", max_questions: int = 0) -> Dataset:
    """A dataset file, or (empty path with the demo corpus) the demo questions. ``max_questions`` > 0 keeps the first N."""
    if dataset_path:
        ds = load_dataset(dataset_path)
    elif corpus == "demo":
        ds = demo.dataset(language)
    else:
        raise ValueError("dataset_path is empty; give a dataset JSON file (see `ragnb dataset --help`) or use corpus='demo'")
    if max_questions < 0:
        raise ValueError(f"max_questions = {max_questions}; use 0 for all or a positive number")
    if max_questions:
        ds = ds.model_copy(update={"items": ds.items[:max_questions]})
    note_dataset(ds)  # the run record says which questions were scored (ragnb.datasets.fingerprint)
    return ds


def open_questions(questions_path: str, corpus: str, db: Database, language: str = "ru",
                   max_questions: int = 0) -> Dataset:
    """The questions a system under test answers: a dataset file (what ``ragnb dataset …`` writes) as
    :func:`open_dataset` reads it, else the demo's, or on ``"db"`` the database's question log
    (:func:`ragnb.datasets.real_questions.question_log_dataset`); each is noted as the dataset scored."""
    if questions_path or corpus != "db":
        return open_dataset(questions_path, corpus, language, max_questions)
    from ragnb.datasets.real_questions import question_log_dataset

    ds = question_log_dataset(db, max_questions)
    note_dataset(ds)
    return ds


def open_dataset_corpus(corpus: str = "db", language: str = "ru", embedding_model: str = ""):
    """:func:`open_corpus`, after checking that the configured database has embedded
    chunks (so an empty database gets a clear message instead of an SQL error)."""
    from ragnb.store.loaders import count_rows

    check_language(language)
    if corpus not in CORPORA:
        raise ValueError(f"--corpus {corpus!r}: use 'db' (the configured database) or 'demo' (the bundled XQuAD)")
    if corpus == "db":
        db = connect()
        try:
            counts = count_rows(db, "chunks")
        finally:
            db.dispose()
        if counts["embedded"] == 0:
            raise ValueError(f"{db.display_url}: no embedded chunks ({counts['rows']} chunk rows); load them with "
                             "`ragnb load chunks FILE` and `ragnb embed --chunks`, or use --corpus demo")
    return open_corpus(corpus, language, embedding_model)
