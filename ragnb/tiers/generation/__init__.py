"""Tier 2 — generation on a fixed context — and Tier 3 — end to end through the system under test — with the
offline faithfulness fallback, hallucination rate and context utilization (see docs/metrics.md, Tier 2 and Tier 3).

Per item (a dataset question):

1. context — Tier 2: the dataset's ``chunk_text`` (an item without one fails, with the reason);
   Tier 3: ``system.retrieve(question, top_k)`` (top-1 by default, as the original production path), timed;
2. answer — ``system.answer(question, contexts)``, ``consistency_runs`` times (timed on the first run);
   the baseline's LLM repeats carry seed r (r = 1, 2, …) so the disk cache cannot replay the first answer;
3. judged metrics on the first answer, when an LLM judge is given — Tier 2: faithfulness, answer_relevance,
   answer_correctness (1–5); Tier 3: faithfulness, e2e_score. Without a judge, answer_relevance,
   answer_correctness and e2e_score are *not computed* (never estimated). With a judge, faithfulness is the
   LLM's (``judge_faithfulness``; an item every judge model failed on is NaN, ``failed``, counted — a judge
   model failing while others scored makes it ``partial``) and the offline fallback (the method that agrees best
   with human labels; docs/metrics.md, Faithfulness) is reported beside it as ``fallback_faithfulness``, never
   in its place; without a judge, ``fallback_faithfulness`` alone. Answers are judged without reasoning blocks;
   an answer cut off at ``max_tokens`` fails the item at the generation stage;
4. every item's record (contexts, answers, judge verdicts, faithfulness and its method, errors) is appended
   to an :class:`~ragnb.tiers.itemlog.ItemLog` the moment it is finished: a killed run, started again on the
   same log, scores only the rest and the items that failed.

Deterministic metrics are computed afterwards on all records: ROUGE-1/2/L F, sentence BLEU (and corpus
BLEU), exact match / token F1 / answer recall against the reference on the Unicode-aware normalisation
(``answer_*_unicode``) and exact match / token F1 as SQuAD v1.1's official script (``squad_*``; docs/metrics.md, Text
and answer metrics), embedding cosine / dot / euclidean between answer and reference, hallucination_rate = 1 − F,
context_utilization (see docs/metrics.md, Hallucination rate and context utilization, "contains"),
response_exact_match_rate and response_semantic_consistency over the repeated answers, and (Tier 3) ``context_hit@k`` =
1 if a retrieved chunk id is among the item's relevant chunk ids. An undefined or failed value is NaN, excluded from the
mean and counted in ``n_failed`` — never 0.

Modules: :mod:`.kinds` (what differs between the two tiers), :mod:`.answering` (one item, logged),
:mod:`.aggregation` (the per-item table and the summary); this module runs them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragnb.datasets.schema import Dataset
from ragnb.io import comma_list
from ragnb.llm import run_sync
from ragnb.progress import reporter
from ragnb.metrics.fallback import OFFLINE_LABEL, OFFLINE_METHOD, agreement_note, split_sentences
from ragnb.metrics.fallback_trust import agreement_rows, mark_trust
from ragnb.rag.system import BaselineSystem
from ragnb.tiers.itemlog import ItemLog, fingerprint, run_items
from ragnb.tiers.generation.aggregation import JUDGED, LLM_ONLY, faithfulness_key, per_item_frame, summary_of
from ragnb.embeddings.models import MemoEncoder
from ragnb.tiers.generation.answering import answer_method, generation_model, item_key, scorer
from ragnb.tiers.generation.kinds import TIER2_JUDGED, TIER3_JUDGED, Tier2, Tier3
from ragnb.tiers.result import TierResult

_LOG_VERSION = 2  # bump when the record layout changes: old logs are then scored again
_BLOCK = 256  # items retrieved, embedded and scored together (bounds the embedding memo's memory)
_JUDGE_SETTINGS = ("models", "aggregate", "mode", "language", "temperature", "seed")


@dataclass
class GenerationResult(TierResult):
    """``per_item``: one row per dataset item — texts, every metric, methods, reasons, latencies;
    ``summary``: canonical metric name → {mean, ci95, n, n_valid, n_failed}, latency blocks, ``info``."""

    records: dict[str, dict] = field(default_factory=dict, kw_only=True)  # the logged per-item records, by log key

    @property
    def info(self) -> dict:
        return self.summary["info"]

    @property
    def faithfulness_key(self) -> str:
        """``judge_faithfulness`` or ``fallback_faithfulness``: the name this run's faithfulness is under."""
        return "judge_faithfulness" if "judge_faithfulness" in self.summary else "fallback_faithfulness"


# --------------------------------------------------------------------------------------------
# Setup helpers for the notebooks
# --------------------------------------------------------------------------------------------


def parse_models(text: str) -> list[str]:
    """``"a, b"`` → ``["a", "b"]`` (blank entries dropped)."""
    if not isinstance(text, str):
        raise ValueError(f"model ids must be given as a comma-separated string, got {type(text).__name__}")
    return comma_list(text, "model ids")


def make_judge(client: Any, judge_models: str, aggregate: str = "mean", mode: str = "direct",
               language: str = "en") -> tuple[Any, list[str]]:
    """The LLM judge for a tier notebook, or ``None`` with the reason in the returned notes.

    ``client``: :attr:`ragnb.datasets.corpus.LLMSetup.client` (None offline); ``judge_models``: comma-separated
    model ids. The configuration is validated even when no judge can be built, so a typo fails early.
    """
    from ragnb.judges import JudgeConfig
    from ragnb.judges.scores import Judge

    models = parse_models(judge_models)
    if models:
        config = JudgeConfig(models=models, aggregate=aggregate, mode=mode, language=language)
    if client is None:
        why = "no LLM endpoint is configured (set RAGNB_LLM_BASE_URL or an API-key variable)"
        return None, [f"LLM judge off: {why}." + (f" judge_models {models} were not used." if models else "")]
    if not models:
        return None, ["LLM judge off: judge_models is empty; give one or more model ids to judge with the LLM."]
    return Judge(client, config), []


# --------------------------------------------------------------------------------------------
# The tiers
# --------------------------------------------------------------------------------------------


def _check(dataset: Dataset, consistency_runs: int, top_k: int, concurrency: int, language: str,
           judge_metrics: Sequence[str]) -> tuple[str, ...]:
    from ragnb.judges.scores import SCALES

    if not isinstance(dataset, Dataset) or not dataset.items:
        raise ValueError("dataset must be a ragnb Dataset with at least one item (see ragnb.datasets.corpus.open_dataset)")
    for name, value, fix in (("consistency_runs", consistency_runs, "use 1 (no repeats) or more"),
                             ("top_k", top_k, "retrieve at least one chunk per question"),
                             ("concurrency", concurrency, "use 1 or more")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} = {value!r}; {fix}")
    if language not in ("auto", "en", "ru"):
        raise ValueError(f"language = {language!r}; use 'ru', 'en' or 'auto'")
    judge_metrics = tuple(judge_metrics)
    unknown = [m for m in judge_metrics if m not in SCALES]
    if unknown:
        raise ValueError(f"judge_metrics {unknown} are not judged metrics; use some of {list(SCALES)}")
    return judge_metrics


def _run(kind: Tier2, dataset: Dataset, system: Any, encoder: Any, *, judge: Any, judge_metrics: Sequence[str],
         consistency_runs: int, top_k: int, language: str, concurrency: int, n_boot: int,
         log_path: str | Path | None, progress: Callable[[int, int], None] | None) -> GenerationResult:
    judge_metrics = _check(dataset, consistency_runs, top_k, concurrency, language, judge_metrics)
    kind.check_system(system)
    judged = judge is not None
    settings = {
        "version": _LOG_VERSION, "tier": kind.tier, "system": getattr(system, "name", type(system).__name__),
        "answer_method": answer_method(system), "generation_model": generation_model(system),
        "temperature": getattr(system, "temperature", None), "max_sentences": getattr(system, "max_sentences", None),
        "judge": None if not judged else {k: getattr(judge.config, k) for k in _JUDGE_SETTINGS},
        "judge_metrics": list(judge_metrics) if judged else [], "consistency_runs": consistency_runs,
        "top_k": kind.top_k(top_k), "encoder": encoder.name, "language": language,
    }
    log = ItemLog(log_path, fingerprint(settings)) if log_path is not None else None
    keys = [item_key(it) for it in dataset.items]
    by_key = dict(zip(keys, dataset.items))
    done: dict[str, dict] = {k: r for k, r in (log.done if log is not None else {}).items() if k in by_key}
    resumed = sum(k in done for k in keys)

    # The extractive baseline (and an embedding-based faithfulness fallback) embed the same context sentences
    # again and again; one memo, primed per block in large batches, serves them.
    memo = MemoEncoder(encoder)
    if isinstance(system, BaselineSystem):
        system = dataclasses.replace(system, encoder=memo if system.encoder is encoder else MemoEncoder(system.encoder))
    pending = [k for k in keys if k not in done]
    progress = progress or reporter("answers scored")  # to the terminal of `ragnb run` (ragnb.progress)
    embeds_context = isinstance(system, BaselineSystem) or OFFLINE_METHOD == "embedding"
    for start in range(0, len(pending), _BLOCK):
        block = {k: by_key[k] for k in pending[start:start + _BLOCK]}
        contexts_of = kind.contexts(system, block, top_k, concurrency)
        texts = [c.text for e in contexts_of.values() for c in e.get("contexts") or ()]
        # Context sentences are embedded only by the extractive baseline or an embedding-based fallback.
        sentences = [s for t in texts for s in split_sentences(t)] if embeds_context else []
        memo.prime(sentences)
        if isinstance(system, BaselineSystem):  # its answers rank the sentences for the question as a query
            system.encoder.prime_queries([it.question for it in block.values()])
        score = scorer(by_key, contexts_of, system, memo, judge, judge_metrics if judged else (), consistency_runs,
                       language)
        step = None if progress is None else (lambda n, _t, before=resumed + start: progress(before + n, len(keys)))
        done.update(run_sync(run_items(list(block), score, log, concurrency=concurrency, progress=step)))
        memo.clear()
    records = [done[k] for k in keys]

    # Through the memo: repeated answers, and answers shared by the similarity and consistency metrics,
    # are embedded once.
    frame, extra = per_item_frame(kind, dataset.items, records, memo, judge_metrics, judged, consistency_runs, top_k,
                                  language)
    memo.clear()
    summary = summary_of(kind, frame, records, extra["corpus_bleu"], judge_metrics, judged, top_k, n_boot)
    errors = Counter(r["stage"] for r in records if r["error"] is not None)
    notes = _notes(kind, summary, extra["methods"], records, errors, judge, judge_metrics, consistency_runs,
                   answer_method(system), top_k, log.resume_note() if log is not None else None)
    # The offline judge's scores are graded only where it is informative on held-out data of this kind.
    trust_note = mark_trust(summary, ("fallback_faithfulness",) if judge is not None else
                            ("fallback_faithfulness", "hallucination_rate"))
    notes += [trust_note] if trust_note else []
    clients = {id(c): c for c in (getattr(judge, "client", None), getattr(system, "client", None)) if c is not None}
    notes += [n for c in clients.values() if (n := getattr(c, "failure_note", lambda: None)())]
    summary["info"] = _info(kind, system, encoder, judge, judge_metrics, extra["methods"], records, errors,
                            consistency_runs, resumed, top_k)
    summary["info"]["retried_items"] = len(log.retried) if log is not None else 0
    summary["info"]["recovered_items"] = len(log.recovered) if log is not None else 0
    info = summary["info"]
    meta = {"judge_backend": info["judge_backend"], "generation_model": info["generation_model"],
            "judge_model": ",".join(info["judge_models"]) or None, "judge_eval_mode": info["judge_mode"],
            "consistency_runs": consistency_runs, "dataset": dataset.name, "embedding_model": encoder.name}
    return GenerationResult(frame, summary, notes, lead={"tier": kind.tier}, meta=meta,
                            records=dict(zip(keys, records)))


def _notes(kind: Tier2, summary: dict, methods: dict, records: list[dict], errors: Counter, judge: Any,
           judge_metrics: tuple[str, ...], consistency_runs: int, answer_method: str, top_k: int,
           resume_note: str | None) -> list[str]:
    """What was not computed, what is an approximation, and what failed."""
    judged = judge is not None
    notes: list[str] = []
    missing = [m for m in (judge_metrics if judged else kind.judged) if m in LLM_ONLY]
    if not judged and missing:
        they = "they need" if len(missing) > 1 else "it needs"
        notes.append(f"Not computed: {', '.join(missing)} — {they} an LLM judge, and none was used; omitted, "
                     "not estimated.")
    if not judged:
        notes.append(f"fallback_faithfulness is the offline fallback ({OFFLINE_LABEL}), not an LLM judgement; "
                     f"hallucination_rate = 1 − that score. Method {agreement_note()} (table: "
                     "summary['info']['fallback_agreement']).")
    key = faithfulness_key(judged, judge_metrics)
    n_failed = methods[key].get("failed", 0)
    if key == "judge_faithfulness" and n_failed:
        notes.append(f"judge_faithfulness: every judge model failed on {n_failed} item(s); they are NaN and counted "
                     f"in n_failed — the offline fallback is not averaged in (it is reported beside, as "
                     f"fallback_faithfulness, {OFFLINE_LABEL}).")
    partial = {m: c.get("partial", 0) for m, c in methods.items() if c.get("partial", 0)}
    if partial:
        notes.append("Partial juries: some judge models failed on " + ", ".join(f"{c} item(s) of {m}" for m, c in
                     partial.items()) + "; those scores come from the models that answered (n_partial in the "
                     "summary; the reason column names the failed models).")
    if consistency_runs < 2:
        notes.append("consistency_runs = 1: response_exact_match_rate and response_semantic_consistency need at "
                     "least 2 answers per question and were not computed.")
    elif answer_method == "extractive":
        notes.append("The extractive baseline is deterministic, so its repeated answers agree by construction.")
    if answer_method == "extractive":
        notes.append("Answers are extractive (the context sentences closest to the question), not LLM-generated, "
                     "so faithfulness and context utilization are high by construction, and the answer latency "
                     "leaves out the embedding (done in batches beforehand): set generation_model and an LLM "
                     "endpoint to evaluate a generator.")
    notes += kind.notes(summary, top_k)
    n_stripped = sum(r.get("reasoning_removed", 0) for r in records)
    if n_stripped:
        notes.append(f"{n_stripped} answer(s) of the system held a reasoning block (<think>…</think>); it was removed "
                     "before they were judged or compared — the system shows it to its users unless it removes it too.")
    if answer_method == "llm":
        notes.append("Generated answers are judged and compared without their reasoning: <think>…</think> blocks "
                     "and reasoning fields are removed first; an answer cut off at max_tokens (finish_reason=length) "
                     "is never scored — it is asked again with RAGNB_LLM_RETRY_MAX_TOKENS when set, else the item "
                     "fails at the generation stage with the reason.")
        notes.append("Answer latency includes disk-cache hits (≈ 0 ms) for requests made before; set "
                     "RAGNB_LLM_CACHE_DIR=off to time the endpoint.")
    if errors:
        notes.append(f"{sum(errors.values())} of {len(records)} item(s) failed ("
                     + ", ".join(f"{stage}: {c}" for stage, c in sorted(errors.items()))
                     + "); their metrics are NaN and counted in n_failed (see the 'error' column).")
    if resume_note:
        notes.append(resume_note)
    return notes


def _info(kind: Tier2, system: Any, encoder: Any, judge: Any, judge_metrics: tuple[str, ...], methods: dict,
          records: list[dict], errors: Counter, consistency_runs: int, resumed: int, top_k: int) -> dict:
    """How the run was made: judge, generator, system, counts of failed and resumed items."""
    judged = judge is not None
    return {
        "judge_backend": "openai-compatible" if judged else "offline-fallback",
        "methods": methods,
        "answer_method": answer_method(system),
        "generation_model": generation_model(system),
        "judge_models": list(judge.config.models) if judged else [],
        "judge_aggregate": judge.config.aggregate if judged else None,
        "judge_mode": judge.config.mode if judged else None,
        "judge_metrics": list(judge_metrics) if judged else [f"faithfulness ({OFFLINE_LABEL} fallback)"],
        "fallback_agreement": agreement_rows(),
        "system": getattr(system, "name", type(system).__name__),
        "embedding_model": encoder.name,
        "consistency_runs": consistency_runs,
        "n_items": len(records),
        "n_failed_items": int(sum(errors.values())),
        "failed_by_stage": dict(sorted(errors.items())),
        "resumed_items": resumed,
        "reasoning_removed_answers": int(sum(r.get("reasoning_removed", 0) for r in records)),
        **kind.info(top_k),
    }


def run_tier2(dataset: Dataset, system: Any, encoder: Any, *, judge: Any = None,
              judge_metrics: Sequence[str] = TIER2_JUDGED, consistency_runs: int = 1, language: str = "auto",
              concurrency: int = 4, n_boot: int = 1000, log_path: str | Path | None = None,
              progress: Callable[[int, int], None] | None = None) -> GenerationResult:
    """Tier 2 (see docs/metrics.md, LLM judge scores): answer every question on the dataset's fixed context
    (``chunk_text``) and score it.

    ``system``: anything with ``answer(question, contexts)`` (:func:`ragnb.rag.system.load_system`); ``encoder``:
    the embedding model for the faithfulness fallback and the similarity metrics; ``judge``: a
    :class:`ragnb.judges.scores.Judge` or None (offline: see the module docstring); ``log_path``: the
    :class:`~ragnb.tiers.itemlog.ItemLog` JSONL that makes the run resumable. Summary keys: ``faithfulness``,
    ``hallucination_rate``, ``context_utilization``, [``answer_relevance``, ``answer_correctness`` (1–5) with a
    judge], ``rouge1``, ``rouge2``, ``rougel``, ``bleu`` (mean sentence BLEU, 0–100), ``answer_exact_match_unicode``,
    ``answer_f1_unicode``, ``answer_recall_unicode``, ``squad_exact_match``, ``squad_f1``, ``corpus_bleu``, ``semantic_similarity``, ``dot_similarity``, ``euclidean_distance``, [``response_exact_match_rate``,
    ``response_semantic_consistency`` when ``consistency_runs`` ≥ 2], ``latency_answer_ms``, ``info``.
    """
    return _run(Tier2(), dataset, system, encoder, judge=judge, judge_metrics=judge_metrics,
                consistency_runs=consistency_runs, top_k=1, language=language, concurrency=concurrency,
                n_boot=n_boot, log_path=log_path, progress=progress)


def run_tier3(dataset: Dataset, system: Any, encoder: Any, *, top_k: int = 1, judge: Any = None,
              judge_metrics: Sequence[str] = TIER3_JUDGED, consistency_runs: int = 1, language: str = "auto",
              concurrency: int = 4, n_boot: int = 1000, log_path: str | Path | None = None,
              progress: Callable[[int, int], None] | None = None) -> GenerationResult:
    """Tier 3 (see docs/metrics.md, LLM judge scores): retrieve ``top_k`` contexts (default 1, the original production
    path) through the system under test, answer, and score the answer against the reference.

    As :func:`run_tier2`, plus ``context_hit@k`` (1 if a retrieved chunk id is among the item's relevant
    chunk ids; NaN when the system gives no ids or the item has no relevant ids), ``e2e_score`` (0–1, with a
    judge) and ``latency_retrieve_ms``. Faithfulness is judged against the *retrieved* context.
    """
    return _run(Tier3(), dataset, system, encoder, judge=judge, judge_metrics=judge_metrics,
                consistency_runs=consistency_runs, top_k=top_k, language=language, concurrency=concurrency,
                n_boot=n_boot, log_path=log_path, progress=progress)


def worst_items(per_item: pd.DataFrame, by: str, n: int = 10, ascending: bool = True) -> pd.DataFrame:
    """The ``n`` items with the lowest ``by`` (failed items first), with the texts needed to read them."""
    if by not in per_item:
        raise ValueError(f"per_item has no column {by!r}; columns: {list(per_item.columns)}")
    cols = [c for c in ("id", by, f"{by}_method", "question", "answer", "reference", "context", "error")
            if c in per_item]
    return per_item.sort_values(by, ascending=ascending, na_position="first").head(n)[cols]


__all__ = ["GenerationResult", "JUDGED", "LLM_ONLY", "TIER2_JUDGED", "TIER3_JUDGED", "make_judge", "parse_models",
           "run_tier2", "run_tier3", "worst_items"]
