"""Small shared readers, writers and parsers: each exists once here and everything else imports it.

* strict JSON (:func:`to_jsonable`, :func:`dumps_strict`) and atomic files (:func:`atomic_write`, ``_text``,
  ``_bytes``), with a full disk as one message (:class:`DiskFullError`);
* text files, plain or gzip, whole or a line at a time, with errors that name the file and line
  (:func:`read_text`, :func:`iter_lines`);
* JSON / JSON Lines records with the place of each one for messages (:func:`iter_json_records`), NaN refused
  (:func:`loads_strict`); YAML with repeated keys refused (:func:`load_yaml`);
* comma-separated lists (:func:`comma_list`) and yes/no words (:func:`parse_yes_no`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import gzip
import json
import math
import os
import re
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

if TYPE_CHECKING:
    import pandas as pd

# --------------------------------------------------------------------------------------------
# Strict JSON and atomic files
# --------------------------------------------------------------------------------------------


def to_jsonable(obj: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """Convert to strict-JSON-compatible values: NaN/±inf → None, numpy/pandas scalars → Python,
    arrays/tuples/sets → lists, Paths and timestamps → strings. Unknown objects raise ValueError, or become
    ``default(obj)`` when it is given (``str`` for output meant to be read, not parsed back)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, default) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, default) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((to_jsonable(v, default) for v in obj), key=repr)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    tolist = getattr(obj, "tolist", None)  # numpy scalars and arrays
    if callable(tolist) and type(obj).__module__.startswith("numpy"):
        return to_jsonable(tolist(), default)
    if _is_pandas_missing(obj):
        return None
    isoformat = getattr(obj, "isoformat", None)  # pandas Timestamp
    if callable(isoformat):
        return isoformat()
    if default is not None:
        return default(obj)
    raise ValueError(f"cannot store a {type(obj).__name__} in JSON ({obj!r:.80}); convert it to a number, string, list or dict")


def _is_pandas_missing(obj: Any) -> bool:
    try:
        import pandas as pd
    except ImportError:
        return False
    return obj is pd.NA or obj is pd.NaT


def dumps_strict(obj: Any, indent: int | None = 2, default: Callable[[Any], Any] | None = None) -> str:
    """JSON text with NaN/inf as null (never the non-standard ``NaN``), UTF-8 kept as is; ``default`` as in
    :func:`to_jsonable`."""
    return json.dumps(to_jsonable(obj, default), indent=indent, ensure_ascii=False, allow_nan=False)


class DiskFullError(ValueError):
    """No space left on a device (ENOSPC) or over a disk quota (EDQUOT), as one message: the file, its folder,
    the space it needed where known and the space free. A ValueError, so every command prints it as a message."""


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# how the error's text says so: the OS's words (as other libraries and a notebook's error show them), and ours
_DISK_FULL_TEXTS = (*(os.strerror(e).lower() for e in sorted(DISK_FULL_ERRNOS)), "disk full: ")
DISK_FULL_FIX = "nothing half-written was kept; free some space on that disk and run again"


def is_disk_full(exc: BaseException | str) -> bool:
    """Whether ``exc`` is a full disk or quota: a :class:`DiskFullError`, an ``OSError`` with errno ENOSPC or
    EDQUOT, or (libraries such as pyarrow, or an error's text from a notebook kernel) a text saying so."""
    if isinstance(exc, DiskFullError):
        return True
    if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
        return True
    text = str(exc).lower()
    return any(t in text for t in _DISK_FULL_TEXTS)


def format_bytes(n: float) -> str:
    """``512 B``, ``3.2 kB``, ``4.6 MB``, ``1.5 GB`` (decimal units, as ``df -H`` shows them)."""
    if n < 1000:
        return f"{n:.0f} B"
    power = min(int(math.log10(n)) // 3, 3)
    return f"{n / 1000 ** power:.1f} {'kMG'[power - 1]}B"


def disk_full_error(path: str | Path, needed: int | None = None, at_least: bool = False) -> DiskFullError:
    """The message for a write of ``path`` that ran out of space: the folder, the space needed (``at_least``:
    only a lower bound is known) and the space free now."""
    path = Path(path)
    try:
        free = format_bytes(shutil.disk_usage(path.parent if path.parent.exists() else path.anchor).free)
    except OSError:
        free = "unknown"
    need = f"{'at least ' if at_least else ''}{format_bytes(needed)} needed, " if needed else ""
    return DiskFullError(f"disk full: cannot write {path.name} in {path.parent} ({need}{free} free); "
                         f"{DISK_FULL_FIX}")


def _fsync(path: str | Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        if not directory:  # some filesystems cannot fsync a folder; a file's data must reach the disk
            raise
    finally:
        os.close(fd)


def atomic_write(path: str | Path, writer: Callable[[Path], Any], size: int | None = None,
                 durable: bool = True) -> Path:
    """Write ``path`` through ``writer(temp_path)`` (e.g. ``lambda p: df.to_csv(p)``) into a temp file in the same
    folder, fsync, then ``os.replace``: readers never see half a file, and a failed write (a full disk)
    leaves the previous file as it was. A full disk or quota raises :class:`DiskFullError` (``size``: the
    bytes being written, for its message). ``durable=False`` skips the fsyncs (~10 ms each): still never half a
    file, but a power cut may lose the newest version — for a file saved again and again. Returns ``path``."""
    path = Path(path)
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        writer(tmp)
        if durable:
            _fsync(tmp)  # the data reaches the disk before the rename makes it visible
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        written = tmp.stat().st_size if tmp is not None and tmp.exists() else 0
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if is_disk_full(exc) and not isinstance(exc, DiskFullError):
            raise disk_full_error(path, size or written or None, at_least=size is None) from None
        raise
    if durable:
        with contextlib.suppress(OSError):
            _fsync(path.parent, directory=True)  # make the rename itself durable
    return path


def atomic_write_bytes(path: str | Path, data: bytes, durable: bool = True) -> Path:
    """:func:`atomic_write` of ``data``."""
    return atomic_write(path, lambda p: p.write_bytes(data), size=len(data), durable=durable)


def atomic_write_text(path: str | Path, text: str, durable: bool = True) -> Path:
    """:func:`atomic_write` of ``text`` as UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


# --------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------

JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


def is_json_lines(path: str | Path) -> bool:
    """``x.jsonl``, ``x.ndjson`` and their ``.gz`` forms hold one JSON value per line."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in JSON_LINES_SUFFIXES


def read_text(path: str | Path, what: str = "file") -> str:
    """The whole UTF-8 text of ``path`` (gunzipped when it ends in ``.gz``); ValueError naming the file (and
    the line where known) and the fix when it is missing, not UTF-8, holds a NUL byte or is a broken gzip.
    :func:`iter_lines` reads a file of any size a line at a time, with the same checks."""
    p = Path(path)
    with _reading(p, what) as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # lone surrogates written as UTF-8 bytes land here too
        raise _not_utf8(p, raw.count(b"\n", 0, exc.start) + 1, exc.start, exc.reason, what) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise _has_nul(p, text.count("\n", 0, nul) + 1, what)
    return text


def iter_lines(path: str | Path, what: str = "file") -> Iterator[tuple[int, str]]:
    """(line number from 1, line with its ``\\n``) of a UTF-8 file (gunzipped when it ends in ``.gz``), read a line
    at a time: memory stays one line however large the file. Lines end at ``\\n`` only (a ``\\r`` before it is
    kept), as in JSON Lines and CSV, so a U+2028 or U+0085 inside a text stays in its line. The checks and
    messages of :func:`read_text`, raised when the reader reaches the line."""
    p = Path(path)
    offset = 0  # bytes before this line, for the message of a line that is not UTF-8
    with _reading(p, what) as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(p, lineno, offset + exc.start, exc.reason, what) from None
            if "\x00" in line:
                raise _has_nul(p, lineno, what)
            offset += len(raw)
            yield lineno, line


@contextlib.contextmanager
def _reading(p: Path, what: str) -> Iterator[Any]:
    """``p`` opened for reading bytes (gunzipped when it ends in ``.gz``); a missing file, a read error or a
    corrupt or truncated gzip — at any point of the read — is a ValueError naming the file."""
    if not p.is_file():
        raise ValueError(f"{p}: {what} not found")
    try:
        with (gzip.open(p, "rb") if p.suffix.lower() == ".gz" else open(p, "rb")) as fh:
            yield fh
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError; truncated → EOFError
        raise ValueError(f"{p}: cannot read the {what} ({exc}); the gzip is corrupt or truncated — "
                         "check that it is complete") from None


def _not_utf8(p: Path, line: int, byte: int, reason: str, what: str) -> ValueError:
    return ValueError(f"{p}:{line}: not UTF-8 text (byte {byte}: {reason}); re-save the {what} as UTF-8")


def _has_nul(p: Path, line: int, what: str) -> ValueError:
    return ValueError(f"{p}:{line}: contains a NUL byte (\\x00), so it is binary or corrupt; "
                      f"remove it or re-export the {what} as text")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_encodable(value: Any, where: str) -> None:
    """JSON's ``\\ud800`` escapes decode to lone surrogates, which no database or file can store."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{where}: holds a lone surrogate ({exc.object[exc.start:exc.end]!r}), "
                         "a broken \\uXXXX escape; fix the text at its source") from None


def _non_finite_path(value: Any, path: str = "") -> tuple[str, float] | None:
    """(field path such as ``score`` or ``items[3].score``, value) of the first NaN/±Infinity in ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((found for sub, item in items if (found := _non_finite_path(item, sub)) is not None), None)


def loads_strict(text: str, where: str) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity``: Python's json module reads and writes
    them, but they are not JSON, and a NaN score or id would otherwise pass as a missing value. The ValueError
    names ``where`` and the field; malformed text raises JSONDecodeError, as json.loads does."""
    if "NaN" not in text and "Infinity" not in text:  # the common case: json.loads' cached decoder is faster
        return json.loads(text)
    seen: list[str] = []
    value = json.loads(text, parse_constant=lambda c: seen.append(c) or float(c))
    if seen:  # only then walk the value: valid JSON costs nothing more
        field, bad = _non_finite_path(value) or ("", math.nan)
        spelled = "NaN" if math.isnan(bad) else ("Infinity" if bad > 0 else "-Infinity")
        raise ValueError(f"{where}: {f'field {field!r}' if field else 'the value'} is {spelled}, which is not JSON "
                         "(Python's json.dumps writes it for a float NaN); write null for a missing value, or a "
                         "number")
    return value


def iter_json_records(path: str | Path, what: str = "file", text: str | None = None) -> Iterator[tuple[str, Any]]:
    """(where, value) for every record of a JSON Lines file (one value per non-empty line, ``where`` =
    ``"<path>:<line>"``) or a JSON file holding an array, or an object with an ``items`` array (``where`` =
    ``"<path>: item <i>"``, 0-based). Values are yielded as parsed; the caller checks their shape. ``text``: the
    file's text as :func:`read_text` returns it (decoded from UTF-8, so free of lone surrogates); without it a
    JSON Lines file is read a line at a time (:func:`iter_lines`), so memory does not grow with the file."""
    p = Path(path)
    if is_json_lines(p):
        # JSON Lines are separated by \n alone (a \r before it is JSON whitespace): splitlines() would also
        # break at U+2028, U+0085 or \x1c, which JSON leaves unescaped inside strings (Confluence exports hold them).
        lines = iter_lines(p, what) if text is None else enumerate(text.split("\n"), start=1)
        for lineno, line in lines:
            if not line.strip():
                continue
            try:
                value = loads_strict(line, f"{p}:{lineno}")
            except json.JSONDecodeError as exc:
                raise ValueError(f"{p}:{lineno}: invalid JSON at column {exc.colno} ({exc.msg}); "
                                 "each line must be one JSON object") from None
            if _SURROGATE_ESCAPE.search(line):  # UTF-8 text holds no surrogate: only a \uD800–\uDFFF escape makes one
                _check_encodable(value, f"{p}:{lineno}")
            yield f"{p}:{lineno}", value
        return
    text = read_text(p, what) if text is None else text
    try:
        data = loads_strict(text, str(p))
    except json.JSONDecodeError as exc:
        hint = " (one object per line? name the file .jsonl)" if exc.msg == "Extra data" else ""
        raise ValueError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}") from None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    if not isinstance(data, list):
        raise ValueError(f"{p}: expected a JSON array of {what} records, or an object with an 'items' array")
    for i, value in enumerate(data):
        _check_encodable(value, f"{p}: item {i}")
        yield f"{p}: item {i}", value


def load_yaml(text: str, path: str | Path, first_line: int = 1) -> Any:
    """``yaml.safe_load`` that refuses a key repeated in one mapping (YAML itself keeps the last value without a
    word, so a second ``top_k:`` would silently win): ValueError naming ``path``, the line and the key. Line
    numbers count from ``first_line`` (2 for front matter after its ``---``). Other YAML errors propagate as
    ``yaml.YAMLError`` for the caller to word."""
    import yaml

    return yaml.load(text, Loader=_unique_key_loader(str(path), first_line))  # noqa: S506 - a SafeLoader


def _unique_key_loader(path: str, first_line: int) -> type:
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            lines: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *defaults' may be overridden on purpose
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + first_line
                try:
                    first = lines.setdefault(key, line)
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    continue
                if first != line:
                    raise ValueError(f"{path}:{line}: key {key!r} is repeated (first at line {first}); YAML would "
                                     "keep only the last value — remove one, or merge them")
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


# --------------------------------------------------------------------------------------------
# Small parsers
# --------------------------------------------------------------------------------------------


def comma_list(value: str | Iterable[str] | None, what: str = "value") -> list[str]:
    """``"a, b,,c"`` → ``["a", "b", "c"]``; a list/tuple is stripped the same way; None or "" → ``[]``."""
    if value is None:
        return []
    if isinstance(value, str):
        parts: Iterable[Any] = value.split(",")
    elif isinstance(value, (list, tuple)):
        parts = value
    else:
        raise ValueError(f"{what} must be a comma-separated text such as 'a,b', got {value!r}")
    out = []
    for part in parts:
        if not isinstance(part, str):
            raise ValueError(f"{what}: {part!r} is not text; give names such as 'a,b'")
        if part.strip():
            out.append(part.strip())
    return out


# TRUE/FALSE and ИСТИНА/ЛОЖЬ are what Excel writes for booleans in an English and a Russian locale.
YES_WORDS = frozenset({"1", "true", "yes", "y", "show", "positive", "да", "истина"})
NO_WORDS = frozenset({"0", "false", "no", "n", "no_show", "no-show", "noshow", "negative", "нет", "ложь"})
YES_NO_SPELLINGS = "true/false, yes/no, 1/0, да/нет, истина/ложь (any case)"  # for messages


def parse_yes_no(value: Any) -> bool | None:
    """True/False for a yes/no answer — bool, 0/1 (int or float), or one of :data:`YES_WORDS` /
    :data:`NO_WORDS` in any case (English and Russian, Excel's TRUE/FALSE and ИСТИНА/ЛОЖЬ included) — and
    None for anything else (the caller says what it expected)."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # numpy scalars: np.True_, np.int64(1)
        value = value.item()
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in YES_WORDS:
            return True
        if word in NO_WORDS:
            return False
    return None


def check_unique(seen: dict[Any, str], key: Any, where: str, field: str = "id") -> None:
    """Remember that ``key`` was read at ``where``; ValueError naming both places if it was read before."""
    if key in seen:
        raise ValueError(f"{where}: field '{field}': {key!r} is repeated (first at {seen[key]}); "
                         f"each {field} must be unique")
    seen[key] = where


def natural_key(text: str) -> tuple:
    """Sort key that orders "p2" before "p10" (chunk ids like ``page.md#2`` / ``page.md#10`` in page order)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


def read_per_item(path: str | Path) -> pd.DataFrame:
    """A report's per-item table with its exact floats: the ``.csv`` a notebook writes
    (:func:`ragnb.tiers.payload.write_metrics`), or an older run's ``.parquet`` (its CSV twin when the parquet
    cannot be read)."""
    import pandas as pd

    path = Path(path)
    if path.suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except (ImportError, OSError, ValueError):  # unreadable parquet: the CSV twin has the same rows
            csv = path.with_suffix(".csv")
            if not csv.is_file():
                raise
            path = csv
    # pandas 3 parses floats exactly by default (and deprecates the option); pandas 2 needs round_trip for it
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    return pd.read_csv(path, low_memory=False, **exact)
