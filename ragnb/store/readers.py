"""Reading the records of a JSONL / CSV / Parquet file a bounded block at a time, each with its place for messages.

:func:`read_records` is what ``ragnb load`` validates (:class:`ragnb.store.loaders.FileRows`). A JSON Lines file
is read a line at a time (:func:`ragnb.io.iter_lines`), a CSV file ``batch_rows`` rows at a time (pandas'
``chunksize`` over the same checked lines), a Parquet file a record batch at a time (pyarrow's
``iter_batches``): memory does not grow with the file — a 1M-chunk export loads on a laptop.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator

import pandas as pd

from ragnb.io import is_json_lines, iter_json_records, iter_lines


def read_records(path: Path, batch_rows: int) -> Iterator[tuple[str, dict]]:
    """Yield (where, record), ``where`` = ``"<path>:<n>"`` for messages. JSONL (``.jsonl``/``.ndjson``, optionally
    ``.gz``): physical line; CSV: line incl. header; Parquet: row+1. Read a line (JSONL) or ``batch_rows`` rows
    (CSV, Parquet) at a time: memory does not grow with the file."""
    suffixes = "".join(path.suffixes[-2:]).lower()
    if is_json_lines(path):
        for where, rec in iter_json_records(path, "record file"):
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            yield where, rec
    elif suffixes.endswith((".csv", ".csv.gz")):
        yield from _csv_records(path, batch_rows)
    elif suffixes.endswith(".parquet"):
        yield from _parquet_records(path, batch_rows)
    else:
        raise ValueError(f"{path}: unsupported file type; use .jsonl, .jsonl.gz, .csv or .parquet (or a folder of .md/.txt)")


def _parquet_records(path: Path, batch_rows: int) -> Iterator[tuple[str, dict]]:
    """A Parquet file's rows, a record batch at a time (``iter_batches``), as ``pd.read_parquet`` gives them: each
    batch carries the file's pandas metadata, so an index pandas stored is an index again, not a column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def unreadable(exc: Exception) -> ValueError:  # pyarrow raises its own types for a corrupt or truncated file
        return ValueError(f"{path}: cannot read the Parquet file ({type(exc).__name__}: {exc}); "
                          "check that it is complete")

    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=batch_rows)
    except Exception as exc:
        raise unreadable(exc) from None
    n = 0
    while True:
        try:
            batch = next(batches, None)
            frame = None if batch is None else pa.Table.from_batches([batch]).to_pandas()
        except Exception as exc:  # a damaged row group is found when it is reached
            raise unreadable(exc) from None
        if frame is None:
            return
        for rec in _frame_records(frame):
            n += 1
            yield f"{path}:{n}", rec


CSV_DELIMITERS = (",", ";", "\t", "|")


def sniff_delimiter(header: str) -> str:
    """The delimiter of a CSV header line: the candidate that splits it into the most columns (ties: comma).
    Excel in a Russian or German locale writes ``;``; tabs and pipes occur in exports."""
    import csv

    counts = {d: len(next(csv.reader([header], delimiter=d), [])) for d in CSV_DELIMITERS}
    best = max(CSV_DELIMITERS, key=lambda d: (counts[d], d == ","))
    return best if counts[best] > 1 else ","


class _LineReader:
    """The lines of :func:`ragnb.io.iter_lines` as the file object pandas reads a CSV from (``read(size)``): the
    file's UTF-8 and NUL checks name their line, and only a block of it is held."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines = lines

    def read(self, size: int = -1) -> str:
        out, n = [], 0
        for line in self.lines:
            out.append(line)
            n += len(line)
            if 0 < size <= n:
                break
        return "".join(out)

    def __iter__(self) -> Iterator[str]:  # pandas takes an object with read() and __iter__ for a file
        return self.lines


def _csv_records(path: Path, batch_rows: int) -> Iterator[tuple[str, dict]]:
    lines = (line for _, line in iter_lines(path, "CSV file"))  # UTF-8, NUL and gzip checked there, per line
    first = next(lines, "").lstrip("\ufeff")  # the BOM Excel writes
    while first and not first.strip():  # blank lines before the header (pandas skips them too)
        first = next(lines, "")
    if not first.strip():
        raise ValueError(f"{path}: the CSV file is empty; it needs a header line and at least one row")
    sep = sniff_delimiter(first.rstrip("\r\n"))
    n = 0
    try:
        with pd.read_csv(_LineReader(itertools.chain([first], lines)), dtype=str, keep_default_na=False,
                         na_values=[""], sep=sep, chunksize=batch_rows) as chunks:
            for chunk in chunks:
                for rec in _frame_records(chunk):
                    n += 1
                    yield f"{path}:{n + 1}", rec
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{path}: cannot parse CSV with delimiter {sep!r} ({exc}); check quoting and the "
                         "header line") from None


def _frame_records(df: pd.DataFrame) -> list[dict]:
    """The rows of a CSV/Parquet frame. A missing cell is None, except in a float column: its NaN stays a float,
    so that an id column pandas stored as floats is refused (:func:`ragnb.store.loaders._check_id`) rather than
    read as missing."""
    cols = {c: s if s.dtype.kind == "f" else s.astype(object).where(s.notna(), None) for c, s in df.items()}
    return pd.DataFrame(cols, index=df.index, columns=df.columns).to_dict("records")
