"""The run's executive summary (a few lines a team lead reads in a minute) and what counts as a key metric.

The summary has at most about eight lines, in this order:

1. status — the overall status and how many graded metrics decided it; then "Inputs:", in one line, the
   datasets, corpora and embedding models the notebooks ran on, each from a notebook's own metrics JSON
   (:func:`block_inputs`; per notebook in the index page's Inputs table);
2. needs attention — one line per tier (at most three) with each metric below its lower threshold (value,
   95% CI, n and the threshold), or graded attention because it does not beat its trivial baselines (and why:
   :func:`ragnb.spec.grade_of`);
3. change — against the most recent earlier run on the same data (:func:`ragnb.runs.compare.same_data`), the
   metrics that changed significantly (paired tests, Holm-adjusted — :mod:`ragnb.runs.significance`), or "no
   significant change";
4. not computed — failed notebooks, metrics left ungraded because they say nothing here (constant, too few
   items) or could not be compared with their trivial baselines, metrics whose judge the run's Tier Judge found
   at chance on the team's labels ("judge unvalidated", :mod:`ragnb.runs.judge_trust`), and blocks whose LLM-judge
   metrics came from the offline fallback instead of an LLM.

Every number goes through one formatter, :func:`ragnb.metrics.stats.fmt_number`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ragnb import spec
from ragnb.config import url_database_name
from ragnb.runs.record import (RUNS_FILE, fmt_number, format_aggregate, load_runs, metric_value, overall_status,
                               status_blocks, tier_statuses, ungraded_degenerate)

MAX_TIER_LINES = 3  # attention lines; further tiers are counted on one more line
MAX_LISTED = 3  # metrics named per line


def block_label(key: str) -> str:
    """A block key's label: the tier's (``Tier 1 (retrieval)``), or the notebook stem of ``other:<stem>``."""
    return key.split(":", 1)[1] if key.startswith("other:") else spec.label_of(key)


@functools.lru_cache(maxsize=1)
def parameter_names() -> frozenset[str]:
    """Every parameter a shipped notebook declares (``limit``, ``tau``, ``trust_k``…): settings a notebook echoes
    into its metrics JSON, which are not metrics."""
    from ragnb.runs.params import SHIPPED_NOTEBOOKS, Notebook, declared_params

    names: set[str] = set()
    for path in sorted(SHIPPED_NOTEBOOKS.glob("*.ipynb")):
        try:
            names.update(declared_params(Notebook(path.stem, path.stem, path)))
        except Exception:  # a notebook without a parameters cell declares nothing
            continue
    return frozenset(names)


def is_metric(name: str, params: Any = None) -> bool:
    """A registered metric (:func:`ragnb.metrics.registry.resolve`), or a number that is no notebook parameter
    (counts such as ``total_samples`` stay; ``limit``, ``tau``, ``trust_k`` go). ``params``: the run's
    parameters (``record["params"]``, per notebook), also treated as settings."""
    from ragnb.metrics import registry

    if registry.resolve(name) is not None:
        return True
    run_params = {k for p in (params or {}).values() if isinstance(p, dict) for k in p}
    return name not in parameter_names() and name not in run_params


def block_inputs(block: Any) -> dict[str, str]:
    """What one notebook itself scored and searched, from its own metrics JSON: the dataset (name and items, from
    its ``provenance``, else the ``dataset_file`` it reported), the corpus (database, chunks, content digest)
    and its embedding model. Empty for a block without any (a notebook on no data)."""
    if not isinstance(block, dict):
        return {}
    prov = block.get("provenance") if isinstance(block.get("provenance"), dict) else {}
    out: dict[str, str] = {}
    datasets = [d for d in prov.get("datasets") or [] if isinstance(d, dict)]
    if datasets:
        out["dataset"] = "; ".join(f"{d.get('name')} ({d.get('n_items')} items)" for d in datasets)
    elif block.get("dataset_file"):
        out["dataset"] = Path(str(block["dataset_file"])).name
    corpora = [c for c in prov.get("corpora") or [] if isinstance(c, dict)]
    if corpora:
        out["corpus"] = "; ".join(f"{url_database_name(c.get('database'))}: {c.get('n_chunks')} chunks"
                                  + (f" (md5 {str(c['chunks_md5'])[:8]})" if c.get("chunks_md5") else "")
                                  for c in corpora)
    model = block.get("embedding_model") or next((c.get("model") for c in corpora if c.get("model")), None)
    if model:
        out["embedding_model"] = str(model)
    return out


def run_inputs(record: dict) -> dict[str, dict[str, str]]:
    """:func:`block_inputs` of every block of the run, by block key (the record's ``inputs``)."""
    return {k: inputs for k, b in status_blocks(record).items() if (inputs := block_inputs(b))}


_INPUT_FIELDS = (("dataset", "dataset", "datasets"), ("corpus", "corpus", "corpora"),
                 ("embedding_model", "model", "models"))


def _inputs_line(record: dict) -> str | None:
    """"Inputs: …" in one short line: the distinct datasets, corpora and models the notebooks ran on (at most
    :data:`MAX_LISTED` of each named). Which notebook ran on which is the index page's Inputs table (the record's
    ``inputs``): repeating it here made the summary longer than the table."""
    per_block = list(run_inputs(record).values())
    if not per_block:
        return None
    parts = []
    for field, one, many in _INPUT_FIELDS:
        values = list(dict.fromkeys(v[field] for v in per_block if v.get(field)))
        if values:
            more = f" and {len(values) - MAX_LISTED} more" if len(values) > MAX_LISTED else ""
            parts.append(f"{one if len(values) == 1 else many} {', '.join(values[:MAX_LISTED])}{more}")
    mixed = len({tuple(sorted(v.items())) for v in per_block}) > 1
    return "Inputs: " + "; ".join(parts) + (" — which notebook used which: the Inputs table" if mixed else "") + "."


def _status_line(record: dict, blocks: dict, graded: list, attention: list) -> str:
    failures = record.get("failures") or []
    status = "failed" if failures else str(record.get("overall_status") or overall_status(blocks))
    n_blocks = sum(isinstance(b, dict) for b in blocks.values())
    if failures:
        why = f"{len(failures)} notebook{'s' if len(failures) != 1 else ''} failed ({', '.join(map(str, failures))})"
    elif attention:
        capped = sum(spec.grade_of(spec.thresholds_of(n, k, blocks[k]), v).rule == "baselines" for k, n, v in attention)
        why = f"{len(attention) - capped} of {len(graded)} graded metrics below their threshold"
        if capped:
            why = (f"{capped} of {len(graded)} graded metrics not better than a trivial baseline"
                   + (f", {why}" if capped < len(attention) else ""))
    elif graded:
        why = f"every graded metric ({len(graded)}) is good or excellent"
    else:
        why = "no metric with a threshold could be graded"
    # what each notebook ran on is the Inputs line: one dataset or model named here would be wrong for the others
    return f"Status: {status.upper()} — {why}; {n_blocks} notebook{'s' if n_blocks != 1 else ''} reported metrics."


def _attention_lines(attention: list, blocks: dict) -> list[str]:
    by_tier: dict[str, list] = {}
    for key, name, value in attention:
        by_tier.setdefault(key, []).append((name, value))
    lines = []
    for key, items in list(by_tier.items())[:MAX_TIER_LINES]:
        parts = [attention_text(name, value, key, blocks[key]) for name, value in items[:MAX_LISTED]]
        more = f"; {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
        lines.append(f"Needs attention — {block_label(key)}: {'; '.join(parts)}{more}.")
    rest = list(by_tier)[MAX_TIER_LINES:]
    if rest:
        n = sum(len(by_tier[k]) for k in rest)
        lines.append(f"Needs attention also: {n} metrics in {', '.join(block_label(k) for k in rest)} (see Key metrics).")
    return lines


def attention_text(name: str, value: Any, key: str | None, block: Any) -> str:
    """``name = value < bound``, or, for a value in a better band that does not beat its trivial baselines,
    ``name = value — <why>`` (:func:`ragnb.spec.grade_of`)."""
    bounds = spec.thresholds_of(name, key, block)
    grade = spec.grade_of(bounds, value)
    if grade.rule == "baselines":
        return f"{name} = {format_aggregate(value)} — {grade.reason}"
    return f"{name} = {format_aggregate(value)} < {fmt_number(bounds[1])}"


def _undefined(blocks: dict) -> list[tuple[str, str]]:
    """(block key, metric) for every metric recorded without a value (no valid item: NaN/None)."""
    from ragnb.metrics import registry

    out = []
    for key, block in blocks.items():
        if not isinstance(block, dict):
            continue
        nested = block.get("metrics") if isinstance(block.get("metrics"), dict) else {}
        for name, value in {**block, **nested}.items():
            empty = value is None or (isinstance(value, dict) and "mean" in value and metric_value(value) is None)
            if empty and (registry.resolve(name) is not None or isinstance(value, dict)):
                out.append((key, name))
    return out


def _listed(pairs: list[tuple[str, str]]) -> str:
    by_block: dict[str, list[str]] = {}
    for key, name in pairs:
        by_block.setdefault(key, []).append(name)
    return "; ".join(f"{block_label(k)}: {', '.join(names[:MAX_LISTED])}"
                     + (f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")
                     for k, names in by_block.items())


def _not_computed_line(record: dict, blocks: dict) -> str | None:
    parts = []
    ungraded = [(k, n) for k, n, _ in ungraded_degenerate(blocks)]
    if ungraded:
        parts.append(f"says nothing here (constant, or fewer than 10 items) — {_listed(ungraded)}")
    undecided = [(k, n) for k, n, _ in ungraded_degenerate(blocks, rule="baselines")]
    if undecided:
        parts.append(f"not graded: no CI to compare with its trivial baselines — {_listed(undecided)}")
    near_chance = [(k, n) for k, n, _ in ungraded_degenerate(blocks, rule="uninformative")]
    if near_chance:
        parts.append(f"not graded: the offline judge is near chance on held-out data of this kind — {_listed(near_chance)}")
    unvalidated = ungraded_degenerate(blocks, rule="judge_unvalidated")
    if unvalidated:  # one judge per run's Tier Judge: one reason for all of them
        parts.append(f"not graded: {unvalidated[0][2]} — {_listed([(k, n) for k, n, _ in unvalidated])}")
    undefined = _undefined(blocks)
    if undefined:
        parts.append(f"undefined (no valid item) — {_listed(undefined)}")
    offline = [block_label(k) for k, b in blocks.items() if spec.is_offline(b)]
    if offline:
        from ragnb.metrics.fallback import OFFLINE_LABEL

        parts.append(f"LLM-judge metrics from the offline fallback (no LLM endpoint; {OFFLINE_LABEL}, not LLM "
                     f"judgments) in {', '.join(offline)}")
    return ("Not computed: " + " | ".join(parts) + ".") if parts else None


def executive_summary(record: dict, change: str | None = None) -> str:
    """At most about eight lines: status, what needs attention, what changed (``change``), what was not computed
    (module docstring)."""
    return "\n".join(summary_lines(record, change))


def summary_lines(record: dict, change: str | None = None) -> list[str]:
    """The summary's lines (module docstring); ``change`` is the comparison line (:func:`change_line`)."""
    blocks = status_blocks(record)
    graded = tier_statuses(blocks)
    attention = [(k, n, v) for k, n, v, s in graded if s == "attention"]
    lines = [_status_line(record, blocks, graded, attention)]
    inputs = _inputs_line(record)
    if inputs:
        lines.append(inputs)
    lines += _attention_lines(attention, blocks)
    if change:
        lines.append(change)
    not_computed = _not_computed_line(record, blocks)
    if not_computed:
        lines.append(not_computed)
    return lines


def _named(rows: Any, limit: int = MAX_LISTED) -> str:
    items = [f"{r['metric']} {fmt_number(r['mean_a'])} → {fmt_number(r['mean_b'])} ({block_label(r['tier_key'])})"
             for _, r in rows.head(limit).iterrows()]
    return ", ".join(items) + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def change_line(record: dict, runs: list[dict], outputs: str | Path, alpha: float = 0.05) -> str:
    """What changed against the most recent earlier run on the same data: only significant changes."""
    from ragnb.runs.compare import compare_runs, same_data
    from ragnb.runs.history import blocks_of, sort_runs

    run_id = str(record.get("id"))
    others = [r for r in runs if str(r.get("id")) != run_id]
    ordered = sort_runs(others + [record])
    earlier = [r for r in ordered[: ordered.index(record)] if blocks_of(r)]
    baseline = next((r for r in reversed(earlier) if same_data(r, record)), None)
    if baseline is None:
        return "Change: no earlier run on the same data to compare with (the dashboard lists every run)."
    comp = compare_runs(others + [record], outputs, str(baseline["id"]), run_id, alpha=alpha)
    table = comp.table
    if table.empty:
        return f"Change against run {baseline['id']} (same data): no metric in common."
    verdicts = table["verdict"].astype(str)
    better = table[verdicts.str.startswith("B better") | verdicts.str.startswith("B higher")]
    worse = table[verdicts.str.startswith("B worse") | verdicts.str.startswith("B lower")]
    tested = int(table["p_holm"].notna().sum())
    if better.empty and worse.empty:
        return (f"Change against run {baseline['id']} (same data): no significant change in {tested} tested "
                f"metric{'s' if tested != 1 else ''} (Holm-adjusted, α = {alpha:g}).")
    parts = ([f"worse: {_named(worse)}"] if len(worse) else []) + ([f"better: {_named(better)}"] if len(better) else [])
    rest = tested - len(better) - len(worse)
    if rest > 0:
        parts.append(f"no significant change in the other {rest}")
    return (f"Change against run {baseline['id']} (same data, significant at α = {alpha:g}, Holm-adjusted): "
            + "; ".join(parts) + ".")


def run_summary(record: dict, outputs: str | Path) -> str:
    """The summary of a finished run, comparing it with the history in ``<outputs>/benchmark_runs.json``."""
    try:
        change = change_line(record, load_runs(Path(outputs) / RUNS_FILE), outputs)
    except (ValueError, OSError, KeyError) as exc:  # the summary never stops a run: say why there is no comparison
        change = f"Change: not compared with earlier runs ({exc})."
    return "\n".join(summary_lines(record, change))
