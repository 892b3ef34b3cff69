"""The corpus a tier or a dataset mode works on: the database (bundled demo or configured) and the encoder
that matches its stored vectors, and the dataset of questions that goes with it."""

from __future__ import annotations

from dataclasses import dataclass

from ragnb.datasets import demo
from ragnb.datasets.fingerprint import note_corpus, note_dataset
from ragnb.datasets.schema import Dataset, load_dataset
from ragnb.rag.embeddings import Encoder, get_encoder
from ragnb.store.engine import Database, connect
from ragnb.store.schema import tables
from ragnb.store.vectors import check_space

CORPORA = ("demo", "db")


@dataclass
class Corpus:
    db: Database
    encoder: Encoder
    label: str  # what the report header shows (no secrets)
    space: dict  # the verified (model, dim) of the stored vectors

    def header_info(self) -> dict:
        return {"corpus": self.label, "database": self.db.display_url, "embedding_model": self.encoder.name,
                "vectors_verified": self.space.get("verified", False)}


def open_corpus(corpus: str = "demo", language: str = "ru", embedding_model: str = "") -> Corpus:
    """``"demo"``: the bundled XQuAD corpus, loaded and embedded on first use into its own embedded database.
    ``"db"``: the configured database (``RAGNB_DATABASE_URL`` or the embedded default), opened read-only."""
    if corpus not in CORPORA:
        raise ValueError(f"corpus = {corpus!r}; use 'demo' (bundled XQuAD) or 'db' (the configured database)")
    encoder = get_encoder(embedding_model or None)
    if corpus == "demo":
        db, _ = demo.ensure_demo(language, encoder)
        label = f"demo: XQuAD {language} (CC BY-SA 4.0)"
    else:
        db = connect()
        label = "database"
    space = check_space(db, tables(db.schema).chunk, encoder)
    note_corpus(db)  # the run record says which chunks were searched (ragnb.datasets.fingerprint)
    return Corpus(db, encoder, label, space)


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
