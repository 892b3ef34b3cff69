"""Tier Judge (seed 000 §8) and Tier Judge Pipeline (seed 000 §9), calibrated against human labels.

* :func:`run_tier_judge` — how far the *benchmark* judge can be trusted: every item's faithfulness is judged
  twice (the second pass with the LLM cache off, so it is a real repeat) per judge mode (direct / reasoned)
  → consistency_score (|s₁ − s₂| ≤ δ, δ = 0.5), error_rate, latency, avg_faithfulness, agreement between
  judge models, and — beyond the seed — calibration of the scores against the human labels (ROC-AUC, best
  threshold, accuracy / balanced accuracy / precision / recall / F1 / Cohen's κ at ``show_threshold``).
* :func:`run_tier_judge_pipeline` — the *production* show/no-show judge against ``ground_truth_show``:
  the system under test's own ``judge(question, answer)`` when it has one, else ragnb's baseline judge
  (show ⇔ faithfulness ≥ ``show_threshold``) → accuracy, precision, recall, F1, TP/FP/FN/TN with bootstrap
  CIs, and latency mean/p50/p95.

Without an LLM endpoint (or with no judge model named) the judge is seed 004's offline fallback
(embedding similarity → word overlap): ``judge_backend = "offline-fallback"`` and every per-item score
carries the ``method`` that produced it. The fallback is deterministic, so its consistency is 1.0 by
construction; its latency and its calibration against the human labels are the meaningful offline numbers.

Judge-pipeline datasets (seed 001): JSON (array, or ``{"name", "items": [...]}``) or JSONL, one item per
object with ``question``, ``answer``, ``ground_truth_show`` and optional ``context`` (string or list of
strings) and ``id``; see :class:`JudgePipelineItem`. The bundled demo set is BEGIN's dev split
(:func:`begin_pipeline_dataset`, human attribution labels; see ``ragnb/data/begin_groundedness/README.md``).

Every finished item is appended to an :class:`~ragnb.runs.itemlog.ItemLog` (``<output_dir>/<stem>.items.jsonl``)
the moment it is judged, so an interrupted run resumes without judging anything twice.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import inspect
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragnb.runs.itemlog import ItemLog, fingerprint, run_items
from ragnb.metrics import classification as cls
from ragnb.metrics.stats import aggregate as _stats_aggregate
from ragnb.io import to_jsonable
from ragnb.rag.embeddings import MemoEncoder

BEGIN_DIR = Path(__file__).resolve().parent.parent / "data" / "begin_groundedness"
BEGIN_FILE = BEGIN_DIR / "begin_dev.jsonl.gz"
GENERIC_CHOICES = ("no_show", "drop")
# Faithfulness at or above this → show. 0.5 is the midpoint of the judge's 0–1 scale (seed 000 anchors:
# 0.5 = "partially agrees") and, for the offline fallback, the sigmoid's centre (mean best-match cosine 0.6,
# see ragnb.metrics.fallback.SIGMOID_CENTER), i.e. the point where the evidence for and against support
# balance. The Tier Judge report shows the best threshold on labelled data to tune it.
DEFAULT_SHOW_THRESHOLD = 0.5
OFFLINE_BACKEND = "offline-fallback"
OFFLINE_MODE = "offline-fallback"
_TRUE = frozenset({"true", "yes", "y", "1", "show"})
_FALSE = frozenset({"false", "no", "n", "0", "no_show", "no-show", "noshow"})


# --------------------------------------------------------------------------------------------
# Dataset: schema, loaders, the bundled BEGIN set
# --------------------------------------------------------------------------------------------


def _as_show(v: Any) -> Any:
    """bool, 0/1 or yes/no/true/false/show/no_show (any case) → bool; anything else is left for pydantic
    to reject (with the field's name)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    return v


class JudgePipelineItem(BaseModel):
    """One judged answer with its human label (seed 001's judge-pipeline dataset).

    ``ground_truth_show``: should the production system show this answer (True) or not (False)?
    ``context``: what the answer should be grounded in (string or list of passages) — needed by the
    faithfulness judge and by the baseline show/no-show judge, optional for a system's own judge.
    ``label``/``source``: optional finer human label and origin (BEGIN: attributable / not_attributable /
    generic; wow / cmu / tc). Unknown extra fields are kept.
    """

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: str
    ground_truth_show: bool
    context: str | list[str] | None = None
    label: str | None = None
    source: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls_, v):
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls_, v: str) -> str:
        if not v.strip():
            raise ValueError("the question is blank; the judge needs the question the answer replies to")
        return v

    @field_validator("ground_truth_show", mode="before")
    @classmethod
    def _show(cls_, v):
        v = _as_show(v)
        if not isinstance(v, bool):
            raise ValueError(f"{v!r} is not a show/no-show label; use true/false (or yes/no, show/no_show, 1/0)")
        return v

    def contexts(self) -> list[str]:
        """The context as a list of passages ([] when there is none)."""
        if self.context is None:
            return []
        return [self.context] if isinstance(self.context, str) else list(self.context)

    def digest(self) -> str:
        """Hash of what a judgement depends on: a changed question, answer or context is judged again."""
        text = json.dumps([self.question, self.answer, self.contexts()], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


class JudgePipelineDataset(BaseModel):
    name: str
    type: str = "judge_pipeline"
    items: list[JudgePipelineItem]

    def positive_rate(self) -> float:
        return float(np.mean([it.ground_truth_show for it in self.items])) if self.items else math.nan


def _field_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = [str(x) for x in first["loc"]]
    return f"field '{'.'.join(loc) or '(item)'}': {first['msg']}"


def _validate(obj: Any, where: str, default_id: str) -> JudgePipelineItem:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object with question, answer and ground_truth_show, "
                         f"got {type(obj).__name__}")
    obj = obj if "id" in obj else {**obj, "id": default_id}
    try:
        return JudgePipelineItem.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(f"{where} {_field_error(exc)}; fix the value or remove the item") from None


def _read_text(p: Path) -> str:
    if p.suffix == ".gz":
        with gzip.open(p, "rt", encoding="utf-8") as fh:
            return fh.read()
    return p.read_text(encoding="utf-8")


def _check_unique(item_id: str, where: str, seen: dict[str, str], p: Path) -> None:
    if item_id in seen:
        raise ValueError(f"{p}: {where} field 'id': {item_id!r} is repeated (first at {seen[item_id]}); "
                         "ids must be unique")
    seen[item_id] = where


def load_judge_dataset(path: str | Path) -> JudgePipelineDataset:
    """A judge-pipeline dataset from JSON or JSONL (``.jsonl``/``.ndjson``, optionally ``.gz``).

    JSON: an array of items or ``{"name": ..., "items": [...]}``. JSONL: one item object per line (blank
    lines skipped). Errors name the file, the line (JSONL) or item index (JSON, from 0) and the field:
    ``data.jsonl: line 3 field 'ground_truth_show': ...``. Items without an ``id`` get ``item-<k>`` (k from
    1, in file order); ids must be unique.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: judge-pipeline dataset file not found")
    try:
        text = _read_text(p)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise ValueError(f"{p}: cannot read the file as UTF-8 text ({exc})") from None
    suffixes = [s.lower() for s in p.suffixes]
    lines_format = any(s in (".jsonl", ".ndjson") for s in suffixes)
    items: list[JudgePipelineItem] = []
    where_of: dict[str, str] = {}
    name = p.name.split(".")[0] or p.stem
    if lines_format:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{p}: line {n}: invalid JSON at column {exc.colno}: {exc.msg}") from None
            items.append(_validate(obj, f"{p}: line {n}", f"item-{len(items) + 1}"))
            _check_unique(items[-1].id, f"line {n}", where_of, p)
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            hint = " (one object per line? name the file .jsonl)" if exc.msg == "Extra data" else ""
            raise ValueError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}") from None
        if isinstance(raw, dict) and isinstance(raw.get("items"), list):
            name = str(raw.get("name") or name)
            raw = raw["items"]
        if not isinstance(raw, list):
            raise ValueError(f"{p}: expected a JSON array of items or an object with an 'items' array")
        for i, obj in enumerate(raw):
            items.append(_validate(obj, f"{p}: item {i}", f"item-{i + 1}"))
            _check_unique(items[-1].id, f"item {i}", where_of, p)
    if not items:
        raise ValueError(f"{p}: the dataset has no items")
    return JudgePipelineDataset(name=name, items=items)


def _sample(n: int, limit: int, seed: int) -> list[int]:
    """``limit`` row indices drawn without replacement (fixed seed), in file order; all when limit is 0."""
    if limit <= 0 or limit >= n:
        return list(range(n))
    return sorted(np.random.default_rng(seed).permutation(n)[:limit].tolist())


def begin_pipeline_dataset(limit: int = 0, generic: str = "no_show", seed: int = 0,
                           path: str | Path | None = None) -> JudgePipelineDataset:
    """The bundled BEGIN dev set (human attribution labels) as judge-pipeline items.

    question = ``message`` (the previous user turn), answer = ``response``, context = ``knowledge``,
    ground_truth_show = ``grounded`` (True only for "Fully attributable"); ``label`` and ``source`` keep
    BEGIN's label and data source. ``generic``: "no_show" (default) keeps generic responses as no-show —
    they are not grounded, so a judge that shows grounded answers only should not show them; "drop" leaves
    them out. Rows with an empty message (2 of 1229) are skipped: the judge needs a question.
    ``limit`` > 0 keeps a fixed random sample (``seed``) of that many rows, in file order, so a small run
    still mixes the three sources.
    """
    if generic not in GENERIC_CHOICES:
        raise ValueError(f"generic = {generic!r}; use 'no_show' (generic responses count as not shown) or 'drop'")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit = {limit!r}; use 0 for all rows or a positive number")
    p = Path(path) if path is not None else BEGIN_FILE
    with gzip.open(p, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    rows = [r for r in rows if r["message"].strip() and (generic == "no_show" or r["label"] != "generic")]
    items = [
        JudgePipelineItem(id=r["id"], question=r["message"], answer=r["response"], context=r["knowledge"],
                          ground_truth_show=bool(r["grounded"]), label=r["label"], source=r["data_source"],
                          generator_model=r["generator_model"], license=r["license"])
        for r in (rows[i] for i in _sample(len(rows), limit, seed))
    ]
    suffix = "" if generic == "no_show" else "_no_generic"
    return JudgePipelineDataset(name=f"begin_dev{suffix}" + (f"_{len(items)}" if limit else ""), items=items)


def open_judge_dataset(dataset_path: str = "", max_items: int = 0,
                       begin_generic: str = "no_show") -> JudgePipelineDataset:
    """What the judge notebooks read: a user's file (first ``max_items`` items) or, with an empty path, the
    bundled BEGIN set (a fixed sample of ``max_items``; 0 = all)."""
    if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 0:
        raise ValueError(f"max_items = {max_items!r}; use 0 for all items or a positive number")
    if not dataset_path:
        return begin_pipeline_dataset(max_items, begin_generic)
    ds = load_judge_dataset(dataset_path)
    if max_items:
        ds = ds.model_copy(update={"items": ds.items[:max_items]})
    return ds


def _items(items: Any) -> list[JudgePipelineItem]:
    if isinstance(items, JudgePipelineDataset):
        items = items.items
    items = list(items)
    for i, it in enumerate(items):
        if not isinstance(it, JudgePipelineItem):
            raise ValueError(f"items[{i}] must be a JudgePipelineItem (see load_judge_dataset), "
                             f"got {type(it).__name__}")
    if not items:
        raise ValueError("no items to judge")
    ids = Counter(it.id for it in items)
    dupes = sorted(k for k, c in ids.items() if c > 1)
    if dupes:
        raise ValueError(f"item ids must be unique; repeated: {dupes[:10]}")
    return items


def _require_context(items: list[JudgePipelineItem], who: str) -> None:
    missing = [it.id for it in items if not any(c.strip() for c in it.contexts())]
    if missing:
        raise ValueError(f"{len(missing)} item(s) have no context (e.g. {missing[:5]}); {who} scores faithfulness "
                         "to the context — add a 'context' field to every item")


# --------------------------------------------------------------------------------------------
# Which judge: LLM models or the offline fallback
# --------------------------------------------------------------------------------------------


def parse_list(value: str | Sequence[str] | None) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` → ``["a", "b"]`` (blanks dropped, order kept, repeats rejected)."""
    if value is None:
        return []
    parts = value.split(",") if isinstance(value, str) else list(value)
    out = [str(p).strip() for p in parts if str(p).strip()]
    dupes = sorted(k for k, c in Counter(out).items() if c > 1)
    if dupes:
        raise ValueError(f"{dupes} listed more than once in {value!r}")
    return out


@dataclass
class JudgeChoice:
    """The judge a notebook uses: an LLM client with model ids, or the offline fallback (client None)."""

    client: Any | None
    models: list[str]
    backend: str  # the metrics JSON's judge_backend: "openai-compatible" | "offline-fallback"
    endpoint: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def judge_model(self) -> str:
        return ",".join(self.models) if self.client is not None else OFFLINE_BACKEND

    def header_info(self) -> dict:
        return {"judge_backend": self.backend, "llm_endpoint": self.endpoint or "none (offline)",
                "judge_models": ", ".join(self.models) if self.client is not None else
                "none: seed-004 fallback (embedding similarity → word overlap)"}


def choose_judge(llm: Any, judge_models: str | Sequence[str]) -> JudgeChoice:
    """From :func:`ragnb.tiers.common.open_llm`'s setup and the ``judge_models`` parameter: the LLM judge
    when an endpoint is configured *and* models are named, else the offline fallback (with a note why)."""
    models = parse_list(judge_models)
    if getattr(llm, "client", None) is None:
        notes = ["No LLM endpoint is configured: the judge is seed 004's offline fallback (embedding similarity "
                 "→ word overlap), not an LLM."]
        if models:
            notes.append(f"judge_models {models} were not used: set RAGNB_LLM_BASE_URL and/or an API key "
                         "(RAGNB_LLM_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY) to judge with them.")
        return JudgeChoice(None, [], OFFLINE_BACKEND, None, notes)
    if not models:
        return JudgeChoice(None, [], OFFLINE_BACKEND, llm.endpoint,
                           ["An LLM endpoint is configured but judge_models is empty: the offline fallback judges "
                            "instead. Name judge models (comma-separated) to evaluate an LLM judge."])
    return JudgeChoice(llm.client, models, llm.backend, llm.endpoint, [])


def item_log_path(output_dir: str | Path, stem: str, resume: bool = True) -> Path:
    """``<output_dir>/<stem>.items.jsonl``; with ``resume=False`` an existing log is moved aside
    (``.items.jsonl.old``) so every item is judged again."""
    path = Path(output_dir) / f"{stem}.items.jsonl"
    if not resume and path.exists():
        path.replace(path.with_name(path.name + ".old"))
    return path


# --------------------------------------------------------------------------------------------
# Scoring one pass: LLM judge or offline fallback, logged per item
# --------------------------------------------------------------------------------------------


def _result_from_dict(d: dict):
    """Rebuild an EvaluationResult from its logged dict (None → NaN, as the log stores strict JSON)."""
    from ragnb.llm.result import EvaluationResult, ModelScore

    def num(v: Any) -> float:
        return math.nan if v is None else float(v)

    models = [ModelScore(**{**m, "score": num(m.get("score"))}) for m in d.get("model_scores", [])]
    return EvaluationResult(**{**d, "score": num(d.get("score")), "model_scores": models,
                               "duration_s": num(d.get("duration_s"))})


def _fallback_sentences(it: JudgePipelineItem) -> list[str]:
    from ragnb.metrics.fallback import split_sentences

    return split_sentences(it.answer) + [s for c in it.contexts() if c.strip() for s in split_sentences(c)]


def _fallback_result(it: JudgePipelineItem, encoder: Any, extra_s: float):
    """Seed 004's fallback on one item, as an EvaluationResult whose single "model" is the fallback."""
    from ragnb.llm.result import EvaluationResult, ModelScore
    from ragnb.metrics.fallback import faithfulness_fallback

    t0 = time.perf_counter()
    out = faithfulness_fallback(it.answer, it.contexts(), encoder, "auto")
    seconds = time.perf_counter() - t0 + extra_s
    score, method = float(out["score"]), out["method"]
    ok = math.isfinite(score)
    name = f"{OFFLINE_BACKEND}:{method}"
    call = {"latency_s": seconds, "cached": False, "attempts": 0, "tokens_in": 0, "tokens_out": 0}
    model = ModelScore(name, score if ok else math.nan, out["reason"] or "", "ok" if ok else "undefined",
                       "" if ok else (out["reason"] or "undefined"), 0, {"calls": [call], "reasks": 0})
    return EvaluationResult("faithfulness", score if ok else math.nan, out["reason"] or "", [model], seconds,
                            method, "ok" if ok else "undefined", "" if ok else (out["reason"] or "undefined"),
                            {"mode": OFFLINE_MODE})


async def _score_pass(items: list[JudgePipelineItem], stage: str, log: ItemLog | None, concurrency: int,
                      judge: Any = None, encoder: Any = None) -> list:
    """Judge every item once (LLM ``judge`` or, without one, the fallback with ``encoder``); items already in
    ``log`` are read back, the others are appended as they finish. Returns EvaluationResults in item order."""
    keys = [f"{stage}|{it.id}|{it.digest()}" for it in items]
    by_key = dict(zip(keys, items))
    done = log.done if log is not None else {}
    pending = [k for k in keys if k not in done]
    shares: dict[str, float] = {}
    fallback_encoder = encoder
    if judge is None and encoder is not None and pending:
        sentences = {k: _fallback_sentences(by_key[k]) for k in pending}
        fallback_encoder = MemoEncoder(encoder, [s for ss in sentences.values() for s in ss])
        total = sum(len(ss) for ss in sentences.values()) or 1
        # the batch's time, shared out by each item's number of sentences
        shares = {k: fallback_encoder.seconds * len(ss) / total for k, ss in sentences.items()}

    async def score(key: str) -> dict:
        it = by_key[key]
        if judge is not None:
            result = await judge.faithfulness(it.question, it.answer, it.contexts())
        else:
            result = _fallback_result(it, fallback_encoder, shares.get(key, 0.0))
        return to_jsonable({"id": it.id, "result": result.to_dict()})

    records = await run_items(keys, score, log, concurrency=concurrency if judge is not None else 1)
    return [_result_from_dict(records[k]["result"]) for k in keys]


def _run(coro):
    from ragnb.llm import run_sync

    return run_sync(coro)


# --------------------------------------------------------------------------------------------
# Tier Judge
# --------------------------------------------------------------------------------------------


@dataclass
class TierJudgeResult:
    per_item: pd.DataFrame  # one row per (mode, item): both scores, agreement, status, latency, human label
    summary: dict  # headline metrics of the first mode + by_mode + mode_agreement + info
    notes: list[str] = field(default_factory=list)
    results: dict[str, tuple[list, list]] = field(default_factory=dict)  # mode → (first pass, second pass)


def _check_threshold(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name} = {value!r}; use a number in [0, 1] (faithfulness scores are 0–1)")
    return float(value)


def _calibration(y_true: list[bool], scores: np.ndarray, threshold: float, n_boot: int, seed: int) -> dict:
    """Scores vs. human labels: ROC-AUC + Youden threshold (score_report) and, at the fixed ``threshold``
    (not tuned on these items, so not optimistic), binary_report of ``score ≥ threshold``."""
    pred = np.where(np.isnan(scores), np.nan, (scores >= threshold).astype(float))
    at_threshold = cls.binary_report(y_true, pred, n_boot=n_boot, seed=seed)
    sr = cls.score_report(y_true, scores, n_boot=n_boot, seed=seed)
    best = sr["at_best_threshold"]
    return {
        "roc_auc": sr["roc_auc"],
        "best_threshold": sr["best_threshold"],
        "at_best_threshold": None if best is None else {"metrics": best["metrics"], "confusion": best["confusion"]},
        "threshold": threshold,
        "at_threshold": at_threshold,
        "note": "at_best_threshold is optimistic: the threshold was chosen on these same items",
    }


def run_tier_judge(
    items: Any,
    client: Any = None,
    models: Sequence[str] = (),
    *,
    aggregate: str = "mean",
    modes: Sequence[str] = ("direct", "reasoned"),
    language: str = "en",
    delta: float = 0.5,
    show_threshold: float = DEFAULT_SHOW_THRESHOLD,
    encoder: Any = None,
    concurrency: int = 8,
    n_boot: int = 1000,
    seed: int = 0,
    log_path: str | Path | None = None,
) -> TierJudgeResult:
    """Judge every item's faithfulness twice per mode and report the judge's reliability and calibration.

    ``client`` + ``models``: an :class:`~ragnb.llm.LLMClient` and judge model ids (several → per-model
    scores, ``aggregate`` over them, and inter-model agreement). Pass 1 may be answered from the client's
    disk cache; pass 2 always asks the endpoint again (``cache=False``), so it is a real repeat. Without a
    client the judge is the seed-004 fallback (``encoder``: embedding similarity; None: word overlap), which
    ignores ``modes`` and is deterministic.

    Per mode (seed 000 §8.3, via :func:`ragnb.llm.judges.reliability.judge_reliability`):
        consistency_score = mean_q 𝟙[|s₁(q) − s₂(q)| ≤ δ]   (an item with a failed pass: NaN, excluded, counted)
        error_rate        = failed judgements / all 2·n judgements
        avg_latency_ms    = mean latency of the judge calls that reached the endpoint (cache hits excluded)
        avg_faithfulness  = mean first-pass score
    plus ``calibration`` of the first-pass scores against ``ground_truth_show`` (ROC-AUC with CI, best
    threshold by Youden's J, accuracy / balanced accuracy / precision / recall / F1 / κ at
    ``show_threshold``) and, with several models, :func:`ragnb.llm.judges.agreement.agreement`.

    The summary's top level holds the first mode's ``consistency_score``, ``error_rate``,
    ``avg_latency_ms``, ``avg_faithfulness``, ``roc_auc``, ``balanced_accuracy`` and ``cohen_kappa``
    (the seed-000 threshold applies to consistency_score); ``by_mode`` holds every mode.
    """
    from ragnb.llm.judges.agreement import agreement
    from ragnb.llm.judges.config import MODES
    from ragnb.llm.judges.reliability import judge_consistency, judge_reliability

    items = _items(items)
    _require_context(items, "Tier Judge")
    delta = float(delta) if isinstance(delta, (int, float)) and not isinstance(delta, bool) else delta
    if not isinstance(delta, float) or not math.isfinite(delta) or delta < 0:
        raise ValueError(f"delta = {delta!r}; use a number ≥ 0 (seed 000: 0.5)")
    show_threshold = _check_threshold(show_threshold, "show_threshold")
    models = parse_list(models)
    notes: list[str] = []
    offline = client is None
    if offline:
        mode_list = [OFFLINE_MODE]
        method = "embedding similarity" if encoder is not None else "word overlap (no encoder given)"
        notes.append(
            f"No LLM judge: every score comes from seed 004's offline fallback ({method}). The fallback is "
            "deterministic, so consistency_score is 1.0 by construction and says nothing about an LLM judge's "
            "repeatability; its latency and its calibration against the human labels are the meaningful numbers here.")
        if list(modes) != [OFFLINE_MODE]:
            notes.append(f"Judge modes {list(modes)} apply to LLM judges only; the fallback has none.")
    else:
        if not models:
            raise ValueError("models is empty; name at least one judge model, or pass client=None for the "
                             "offline fallback")
        mode_list = parse_list(modes)
        bad = [m for m in mode_list if m not in MODES]
        if bad or not mode_list:
            raise ValueError(f"modes = {list(modes)!r}; use one or more of {MODES}")
    log = None
    if log_path is not None:
        log = ItemLog(log_path, fingerprint({
            "tier": "tier_judge", "backend": "llm" if not offline else OFFLINE_BACKEND, "models": models,
            "aggregate": aggregate, "language": language,
            "encoder": getattr(encoder, "name", None) if offline else None}))

    y_true = [it.ground_truth_show for it in items]
    frames, by_mode, results = [], {}, {}
    for mode in mode_list:
        if offline:
            first = _run(_score_pass(items, f"{mode}|1", log, concurrency, encoder=encoder))
            second = _run(_score_pass(items, f"{mode}|2", log, concurrency, encoder=encoder))
        else:
            from ragnb.llm.judges import JudgeConfig
            from ragnb.llm.judges.scores import Judge

            def judge(cache: bool) -> Any:
                return Judge(client, JudgeConfig(models=models, aggregate=aggregate, mode=mode, language=language,
                                                 cache=cache))

            first = _run(_score_pass(items, f"{mode}|1", log, concurrency, judge=judge(True)))
            second = _run(_score_pass(items, f"{mode}|2", log, concurrency, judge=judge(False)))
        results[mode] = (first, second)
        frame, rel = judge_reliability(first, second, delta)
        frame.insert(0, "id", [it.id for it in items])
        frame.insert(1, "mode", mode)
        scores = frame["score_1"].to_numpy(dtype=float)
        cal = _calibration(y_true, scores, show_threshold, n_boot, seed)
        block = {
            "consistency_score": _agg(frame["consistent"], n_boot, seed),
            "error_rate": rel["error_rate"],
            "avg_latency_ms": rel["avg_latency_ms"],
            "avg_faithfulness": _agg(scores, n_boot, seed),
            "consistency_by_model": rel["consistency_by_model"],
            "errors": rel["errors"],
            "latency": rel["latency"],
            "delta": delta,
            "methods": dict(Counter(r.method for r in first)),
            "calibration": cal,
        }
        if len(models) > 1:
            block["agreement"] = agreement(first, delta=delta)
        by_mode[mode] = block
        frame["ground_truth_show"] = y_true
        frame["label"] = [it.label for it in items]
        frame["source"] = [it.source for it in items]
        frame["method"] = [r.method for r in first]
        frame["predicted_show"] = [None if math.isnan(s) else bool(s >= show_threshold) for s in scores]
        frame["outcome"] = _outcomes(y_true, frame["predicted_show"].tolist())
        frame["explanation_1"] = [r.explanation for r in first]
        frame["reason_1"] = [r.reason for r in first]
        frame["question"] = [it.question for it in items]
        frame["answer"] = [it.answer for it in items]
        frames.append(frame.drop(columns=["item"]))
        if any(r.method == "word_overlap" for r in first) and offline and encoder is not None:
            notes.append("Some items were scored by word overlap (the last fallback level); see the method column.")

    head = by_mode[mode_list[0]]
    cal = head["calibration"]
    summary: dict[str, Any] = {
        "consistency_score": head["consistency_score"],
        "error_rate": head["error_rate"],
        "avg_latency_ms": head["avg_latency_ms"],
        "avg_faithfulness": head["avg_faithfulness"],
        "roc_auc": cal["roc_auc"],
        "balanced_accuracy": cal["at_threshold"]["metrics"]["balanced_accuracy"],
        "cohen_kappa": cal["at_threshold"]["metrics"]["cohen_kappa"],
        "primary_mode": mode_list[0],
        "by_mode": by_mode,
    }
    if len(mode_list) > 1:
        summary["mode_agreement"] = {}
        for i, a in enumerate(mode_list):
            for b in mode_list[i + 1:]:
                within = judge_consistency(results[a][0], results[b][0], delta)
                diff = np.abs(np.array([r.score for r in results[a][0]]) - np.array([r.score for r in results[b][0]]))
                summary["mode_agreement"][f"{a} vs {b}"] = {
                    "share_within_delta": _agg(within, n_boot, seed),
                    "mean_abs_diff": float(np.nanmean(diff)) if np.isfinite(diff).any() else math.nan,
                }
        notes.append(f"Headline numbers are the first mode's ({mode_list[0]}); every mode is under by_mode.")
    summary["info"] = {
        "n_items": len(items), "n_show": int(sum(y_true)), "positive_rate": float(np.mean(y_true)),
        "modes": mode_list, "models": models, "aggregate": aggregate if not offline else None,
        "language": language, "delta": delta, "show_threshold": show_threshold,
        "judge_backend": OFFLINE_BACKEND if offline else "llm",
        "encoder": getattr(encoder, "name", None) if offline else None,
    }
    return TierJudgeResult(pd.concat(frames, ignore_index=True), summary, notes, results)


def _agg(values: Any, n_boot: int, seed: int) -> dict:
    """:func:`ragnb.metrics.stats.aggregate` with this tier's bootstrap settings."""
    return _stats_aggregate(np.asarray(values, dtype=float), n_boot=n_boot, seed=seed)


def _outcomes(y_true: Sequence[bool], predicted: Sequence[bool | None]) -> list[str]:
    out = []
    for t, p in zip(y_true, predicted):
        if p is None:
            out.append("failed")
        else:
            out.append(("TP" if t else "FP") if p else ("FN" if t else "TN"))
    return out


# --------------------------------------------------------------------------------------------
# Tier Judge Pipeline
# --------------------------------------------------------------------------------------------


@dataclass
class TierJudgePipelineResult:
    per_item: pd.DataFrame  # one row per item: human label, verdict, outcome, score (baseline), latency, error
    summary: dict  # seed 000 §9 metrics with CIs, confusion counts, latency; score calibration (baseline)
    notes: list[str] = field(default_factory=list)


def resolve_judge_system(system: Any) -> tuple[Any | None, str]:
    """``"baseline"``/None → (None, "baseline"); ``"module:attr"``, ``"http:FILE.yaml"`` or an object →
    (object with ``judge(question, answer)``, label). Only ``judge`` is needed here (a production judge
    need not retrieve or answer); an HTTP system needs ``judge_url`` in its file."""
    if system is None or system == "baseline":
        return None, "baseline"
    if isinstance(system, str):
        from ragnb.rag.system import parse_system_spec

        kind, target = parse_system_spec(system)
        if kind == "http":
            from ragnb.rag.system import HttpSystem

            obj = HttpSystem.from_file(target)
            if not obj.judge_url:
                raise ValueError(f"system {system!r}: the file has no judge_url; add it to evaluate the service's "
                                 "show/no-show judge, or use system='baseline'")
        else:  # "python": "baseline" was handled above
            from ragnb.rag.system import load_python_system

            try:
                obj = load_python_system(target, methods=("judge",))
            except ValueError as exc:
                if "lacks" not in str(exc):
                    raise
                raise ValueError(f"system {system!r} has no judge(question, answer) method returning show (True) / "
                                 "no-show (False); add one, or use system='baseline'") from None
        label = system
    else:
        obj, label = system, getattr(system, "name", None) or type(system).__name__
    if not callable(getattr(obj, "judge", None)):
        raise ValueError(f"system {label!r} has no judge(question, answer) method returning show (True) / no-show "
                         "(False); add one, or use system='baseline' for ragnb's faithfulness-threshold judge")
    return obj, str(label)


def _verdict(value: Any) -> bool:
    """A production judge's answer → show (True) / no-show (False); "Yes"/"No" as the seed's judge replies."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().strip(".!").lower() in _TRUE | _FALSE:
        return value.strip().strip(".!").lower() in _TRUE
    raise ValueError(f"judge returned {value!r:.80}; expected True/False or 'Yes'/'No'")


def _judge_call(obj: Any, it: JudgePipelineItem) -> tuple[Any, Any]:
    fn = obj.judge
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    kwargs = {}
    for name in ("context", "contexts"):
        if name in params:
            kwargs[name] = it.contexts() if name == "contexts" else "\n\n".join(it.contexts())
    return fn, kwargs


async def _system_verdict(obj: Any, it: JudgePipelineItem) -> dict:
    fn, kwargs = _judge_call(obj, it)

    def timed_sync() -> tuple[Any, float]:
        t0 = time.perf_counter()
        try:
            return fn(it.question, it.answer, **kwargs), (time.perf_counter() - t0) * 1000
        except Exception as exc:  # noqa: BLE001 - one failing call is a failed item, not a failed run
            return exc, (time.perf_counter() - t0) * 1000

    if inspect.iscoroutinefunction(fn):
        t0 = time.perf_counter()
        try:
            value = await fn(it.question, it.answer, **kwargs)
        except Exception as exc:  # noqa: BLE001
            value = exc
        ms = (time.perf_counter() - t0) * 1000
    else:
        value, ms = await asyncio.to_thread(timed_sync)
    if isinstance(value, Exception):
        return {"predicted_show": None, "latency_ms": ms, "error": f"{type(value).__name__}: {value}"[:500]}
    try:
        return {"predicted_show": _verdict(value), "latency_ms": ms, "error": None}
    except ValueError as exc:
        return {"predicted_show": None, "latency_ms": ms, "error": str(exc)}


def _fresh_ms(result: Any) -> float:
    calls = [c for m in result.model_scores for c in m.details.get("calls", []) if not c["cached"]]
    return sum(c["latency_s"] for c in calls) * 1000.0 if calls else math.nan


def run_tier_judge_pipeline(
    items: Any,
    system: Any = "baseline",
    *,
    client: Any = None,
    models: Sequence[str] = (),
    aggregate: str = "mean",
    mode: str = "direct",
    language: str = "en",
    show_threshold: float = DEFAULT_SHOW_THRESHOLD,
    encoder: Any = None,
    concurrency: int = 8,
    n_boot: int = 1000,
    seed: int = 0,
    log_path: str | Path | None = None,
) -> TierJudgePipelineResult:
    """The production show/no-show judge against ``ground_truth_show`` (seed 000 §9).

    The judge: ``system``'s ``judge(question, answer)`` (``"module:attr"``, ``"http:FILE.yaml"`` or an
    object; it may be async and may take a ``context``/``contexts`` keyword), returning True/False or
    "Yes"/"No" — or, with ``system="baseline"``, ragnb's judge: show ⇔ faithfulness ≥ ``show_threshold``,
    faithfulness from the LLM judge (``client``, ``models``, ``aggregate``, ``mode``) or, without a client,
    the seed-004 fallback (``encoder``). A call that raises or returns anything else is a *failed* item:
    excluded from the metrics and counted (``n_failed``), never scored as wrong.

    Metrics (:func:`ragnb.metrics.classification.binary_report` / ``judge_pipeline_metrics``):
        accuracy = (TP + TN) / n,  precision = TP / (TP + FP),  recall = TP / (TP + FN),
        f1_score = 2·TP / (2·TP + FP + FN),  plus balanced accuracy and Cohen's κ, each with a bootstrap CI;
        TP/FP/FN/TN; latency avg/p50/p95 per judged item (ms). The seed-000 threshold applies to accuracy.
    ``majority_class_accuracy`` is what always answering the more common label would score — on skewed
    labels, accuracy alone flatters a judge. The baseline also reports how its scores separate the classes
    (``roc_auc``, ``score_calibration`` with the best threshold by Youden's J).
    """
    items = _items(items)
    show_threshold = _check_threshold(show_threshold, "show_threshold")
    obj, label = resolve_judge_system(system)
    models = parse_list(models)
    notes: list[str] = []
    baseline = obj is None
    if baseline:
        _require_context(items, "the baseline judge")
        if client is not None and not models:
            raise ValueError("models is empty; name at least one judge model, or pass client=None for the "
                             "offline fallback")
        level = "embedding similarity" if encoder is not None else "word overlap"
        how = (f"LLM faithfulness ({', '.join(models)}, {mode})" if client is not None else
               f"offline fallback faithfulness ({level})")
        judge_label = f"baseline: show if {how} ≥ {show_threshold:g}"
        if client is None:
            notes.append("No LLM judge: the baseline show/no-show judge thresholds seed 004's offline fallback "
                         "(not an LLM judgement); each item's method says which level scored it.")
    else:
        judge_label = f"system: {label}"
    log = None
    if log_path is not None:
        log = ItemLog(log_path, fingerprint({
            "tier": "tier_judge_pipeline", "judge": "baseline" if baseline else label,
            "backend": None if not baseline else ("llm" if client is not None else OFFLINE_BACKEND),
            "models": models, "aggregate": aggregate, "mode": mode, "language": language,
            "encoder": getattr(encoder, "name", None) if baseline and client is None else None}))

    y_true = [it.ground_truth_show for it in items]
    if baseline:
        judge = None
        if client is not None:
            from ragnb.llm.judges import JudgeConfig
            from ragnb.llm.judges.scores import Judge

            judge = Judge(client, JudgeConfig(models=models, aggregate=aggregate, mode=mode, language=language))
        results = _run(_score_pass(items, "pipeline", log, concurrency, judge=judge, encoder=encoder))
        scores = np.array([r.score for r in results], dtype=float)
        predicted = [None if math.isnan(s) else bool(s >= show_threshold) for s in scores]
        latency = [_fresh_ms(r) for r in results]
        errors = [None if r.ok else (r.reason or r.status) for r in results]
        methods = [r.method for r in results]
    else:
        keys = [f"pipeline|{it.id}|{it.digest()}" for it in items]
        by_key = dict(zip(keys, items))

        async def score(key: str) -> dict:
            return to_jsonable({"id": by_key[key].id, **await _system_verdict(obj, by_key[key])})

        records = _run(run_items(keys, score, log, concurrency=concurrency))
        scores = np.full(len(items), np.nan)
        predicted = [records[k]["predicted_show"] for k in keys]
        latency = [math.nan if records[k]["latency_ms"] is None else records[k]["latency_ms"] for k in keys]
        errors = [records[k]["error"] for k in keys]
        methods = ["system"] * len(items)

    pred_arr = [math.nan if p is None else float(p) for p in predicted]
    flat = cls.judge_pipeline_metrics(y_true, pred_arr, latencies_ms=latency, n_boot=n_boot, seed=seed)
    report = cls.binary_report(y_true, pred_arr, n_boot=n_boot, seed=seed)
    m = report["metrics"]
    p = float(np.mean(y_true))
    summary: dict[str, Any] = {
        "accuracy": m["accuracy"], "precision": m["precision"], "recall": m["recall"], "f1_score": m["f1"],
        "balanced_accuracy": m["balanced_accuracy"], "cohen_kappa": m["cohen_kappa"],
        "tp": flat["tp"], "fp": flat["fp"], "fn": flat["fn"], "tn": flat["tn"],
        "avg_latency_ms": flat["avg_latency_ms"], "p50_latency_ms": flat["p50_latency_ms"],
        "p95_latency_ms": flat["p95_latency_ms"],
        "n": flat["n"], "n_valid": flat["n_valid"], "n_failed": flat["n_failed"],
        "majority_class_accuracy": max(p, 1 - p),
        "undefined": flat["undefined"],
        "judge": judge_label,
    }
    if baseline:
        sr = cls.score_report(y_true, scores, n_boot=n_boot, seed=seed)
        summary["roc_auc"] = sr["roc_auc"]
        summary["score_calibration"] = {"best_threshold": sr["best_threshold"],
                                        "at_best_threshold": None if sr["at_best_threshold"] is None else
                                        sr["at_best_threshold"]["metrics"],
                                        "note": "optimistic: the threshold was chosen on these same items"}
    if flat["n_failed"]:
        notes.append(f"{flat['n_failed']} of {flat['n']} items got no verdict (see the error column); they are "
                     "excluded from the metrics, not counted as wrong.")
    if summary["accuracy"]["mean"] <= max(p, 1 - p):
        notes.append(f"Accuracy {summary['accuracy']['mean']:.3f} is not above the {max(p, 1 - p):.3f} that always "
                     f"answering {'show' if p > 0.5 else 'no-show'} would get on these labels; read balanced "
                     "accuracy, κ and F1.")
    summary["info"] = {
        "n_items": len(items), "n_show": int(sum(y_true)), "positive_rate": p, "system": label,
        "show_threshold": show_threshold if baseline else None, "models": models if baseline else [],
        "mode": mode if baseline and client is not None else None,
        "judge_backend": "system" if not baseline else ("llm" if client is not None else OFFLINE_BACKEND),
        "encoder": getattr(encoder, "name", None) if baseline and client is None else None,
        "latency": "per judged item; baseline LLM: sum of its non-cached calls; offline: batched embedding "
                   "time shared out by sentence count plus scoring",
    }
    per_item = pd.DataFrame({
        "id": [it.id for it in items], "ground_truth_show": y_true, "predicted_show": predicted,
        "outcome": _outcomes(y_true, predicted), "score": scores, "method": methods, "latency_ms": latency,
        "error": errors, "label": [it.label for it in items], "source": [it.source for it in items],
        "question": [it.question for it in items], "answer": [it.answer for it in items],
    })
    return TierJudgePipelineResult(per_item, summary, notes)


# --------------------------------------------------------------------------------------------
# Tables and figures for the two notebooks
# --------------------------------------------------------------------------------------------

_HEADLINE = ("consistency_score", "error_rate", "avg_latency_ms", "avg_faithfulness")
_CAL = ("accuracy", "balanced_accuracy", "precision", "recall", "f1", "cohen_kappa")


def _row(metric: str, v: Any, **extra: Any) -> dict:
    if isinstance(v, dict):
        lo, hi = (v.get("ci95") or [math.nan, math.nan])[:2]
        return {**extra, "metric": metric, "value": v.get("mean"), "ci95_low": lo, "ci95_high": hi,
                "n": v.get("n"), "n_valid": v.get("n_valid"), "n_failed": v.get("n_failed")}
    return {**extra, "metric": metric, "value": v}


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for col in ("n", "n_valid", "n_failed"):
        if col in df:
            df[col] = df[col].astype("Int64")
    return df


def judge_table(summary: dict) -> pd.DataFrame:
    """Tier Judge: one row per (mode, metric) — the seed's four metrics, then the calibration against the
    human labels (ROC-AUC, and the binary metrics at the show threshold), with CIs and counts."""
    rows = []
    for mode, b in summary["by_mode"].items():
        for name in _HEADLINE:
            rows.append(_row(name, b[name], mode=mode))
        cal = b["calibration"]
        rows.append(_row("roc_auc", cal["roc_auc"], mode=mode))
        for name in _CAL:
            rows.append(_row(f"{name}@{cal['threshold']:g}", cal["at_threshold"]["metrics"][name], mode=mode))
        if "agreement" in b:
            a = b["agreement"]
            rows.append(_row("models_share_within_delta", a["share_within_delta"], mode=mode))
            rows.append(_row("models_krippendorff_alpha", a["krippendorff_alpha"], mode=mode))
    return _frame(rows)


def pipeline_table(summary: dict) -> pd.DataFrame:
    """Tier Judge Pipeline: the seed's metrics with CIs, then counts and latency."""
    rows = [_row(n, summary[n]) for n in ("accuracy", "precision", "recall", "f1_score", "balanced_accuracy",
                                            "cohen_kappa", "roc_auc") if n in summary]
    rows += [_row(n, summary[n]) for n in ("majority_class_accuracy", "tp", "fp", "fn", "tn", "n", "n_valid",
                                            "n_failed", "avg_latency_ms", "p50_latency_ms", "p95_latency_ms")]
    return _frame(rows)


def _label_of(df: pd.DataFrame) -> pd.Series:
    if "label" in df and df["label"].notna().any():
        return df["label"].fillna(df["ground_truth_show"].map({True: "show", False: "no-show"}))
    return df["ground_truth_show"].map({True: "show", False: "no-show"})


def score_by_label_figure(per_item: pd.DataFrame, score_col: str = "score_1", threshold: float | None = None,
                          title: str = "Judge score by human label"):
    """Overlaid histograms of the judge's score for each human label."""
    import plotly.express as px

    df = per_item.assign(human_label=_label_of(per_item)).dropna(subset=[score_col])
    fig = px.histogram(df, x=score_col, color="human_label", barmode="overlay", nbins=40, opacity=0.65,
                       range_x=[0, 1], title=title, labels={score_col: "score"})
    if threshold is not None:
        fig.add_vline(x=threshold, line_dash="dash", annotation_text=f"show threshold {threshold:g}")
    fig.update_layout(height=380)
    return fig


def roc_figure(curves: dict[str, tuple[Sequence[bool], Sequence[float]]], threshold: float | None = None):
    """ROC curve per name → (labels, scores); NaN scores are left out. Marks the point of ``threshold``."""
    import plotly.graph_objects as go
    from sklearn.metrics import roc_curve

    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="grey"), name="chance"))
    for name, (y, s) in curves.items():
        y, s = np.asarray(y, dtype=bool), np.asarray(s, dtype=float)
        ok = ~np.isnan(s)
        if ok.sum() < 2 or y[ok].all() or not y[ok].any():
            continue
        fpr, tpr, _ = roc_curve(y[ok], s[ok])
        auc = cls.roc_auc(y[ok], s[ok])
        fig.add_trace(go.Scatter(x=fpr, y=tpr, mode="lines", name=f"{name} (AUC {auc:.3f})"))
        if threshold is not None:
            pred = s[ok] >= threshold
            tp_rate = float((pred & y[ok]).sum() / y[ok].sum())
            fp_rate = float((pred & ~y[ok]).sum() / (~y[ok]).sum())
            fig.add_trace(go.Scatter(x=[fp_rate], y=[tp_rate], mode="markers", marker=dict(size=10),
                                     name=f"{name} at {threshold:g}"))
    fig.update_layout(title="ROC curve of the judge score against the human labels", xaxis_title="false positive rate",
                      yaxis_title="true positive rate", xaxis_range=[0, 1], yaxis_range=[0, 1.02], height=420)
    return fig


def confusion_figure(confusion: dict, title: str = "Confusion matrix"):
    """2×2 heatmap: rows = human label (show / no-show), columns = judge verdict."""
    import plotly.graph_objects as go

    z = [[confusion["tp"], confusion["fn"]], [confusion["fp"], confusion["tn"]]]
    names = [["TP", "FN"], ["FP", "TN"]]
    text = [[f"{names[i][j]}<br>{z[i][j]}" for j in range(2)] for i in range(2)]
    fig = go.Figure(go.Heatmap(z=z, x=["judge: show", "judge: no-show"], y=["human: show", "human: no-show"],
                               text=text, texttemplate="%{text}", colorscale="Blues", showscale=False))
    fig.update_layout(title=title, yaxis_autorange="reversed", height=340, width=460)
    return fig


def consistency_figure(per_item: pd.DataFrame, delta: float, title: str = "First vs. second judgement of each item"):
    """Scatter of score_1 vs score_2 with the |s₁ − s₂| ≤ δ band; one colour per mode."""
    import plotly.express as px

    df = per_item.dropna(subset=["score_1", "score_2"])
    fig = px.scatter(df, x="score_1", y="score_2", color="mode" if df["mode"].nunique() > 1 else None,
                     opacity=0.6, hover_data=["id"], title=title,
                     labels={"score_1": "first pass", "score_2": "second pass"})
    for off in (-delta, delta):
        fig.add_shape(type="line", x0=0, y0=off, x1=1, y1=1 + off, line=dict(dash="dash", color="grey"))
    fig.update_layout(xaxis_range=[-0.02, 1.02], yaxis_range=[-0.02, 1.02], height=420, width=520)
    return fig
