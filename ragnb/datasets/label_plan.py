"""A labelling plan for prediction-powered estimates (docs/ppi.md): pick the items a reviewer labels next from a
per-item table of judge scores, write them as a CSV sheet, and read the filled sheet back into the estimate.

Designs (the sampling probabilities are written on every row so the estimate stays unbiased):

* ``uniform`` (default): a seeded simple random sample of exactly ``budget`` items; π_i = budget/N. The estimate is
  PPI++ (:mod:`ragnb.metrics.ppi`). A row left empty counts as not labelled (items skipped at random keep the
  sample uniform; the report counts them).
* ``--active``: the judge's error is learned from labels first (:mod:`ragnb.metrics.ppi_learned`). Without earlier
  labels the plan is a uniform first round, and says so. After uniform rounds (``--labelled``), their labels fit
  where the judge errs; the sheet is then ``learned`` — each item independently with π_i ∝ √(fitted error), about
  ``budget`` rows, weighted by 1/π in the estimate, so every drawn row must be labelled — only when that is
  expected narrower than uniform on those labels; else the round is uniform and the report says why.
* ``active`` sheets of earlier versions (π from √(s(1 − s)), :mod:`ragnb.metrics.ppi_active`) are still estimated.

The sheet follows the annotation CSV conventions (:mod:`ragnb.datasets.annotation_csv`): UTF-8 with a byte-order
mark, comma-separated (read back with ``;``/tab too), one row per item, an empty cell = no value. The reviewer fills
``human_label`` (binary: true/false, yes/no, 1/0, any case; continuous: a number) and may write ``notes``; the
other columns (``judge_score``, ``inclusion_probability``, ``design``, ``metric`` — the score column the plan labels —,
the item's texts) are to be left as they are. ``--labelled`` sheets of earlier rounds leave their labelled items
out of the draw (π over the others; ``labelled=K`` in the design; :mod:`ragnb.datasets.label_estimate`). A sheet
that holds a reviewer's work is never written over (:func:`refuse_filled`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragnb.io import read_per_item
from ragnb.metrics.ppi import fill_failed
from ragnb.metrics.ppi_active import MIX, expected_widths, inclusion_probabilities, uncertainty
from ragnb.metrics.ppi_learned import MIX as LEARNED_MIX
from ragnb.metrics.ppi_learned import MARGIN, ErrorModel, choose, fit_error

LABEL = "human_label"
SHEET_COLUMNS = ("id", LABEL, "notes", "judge_score", "inclusion_probability", "design", "metric")
SHOW = ("question", "answer", "response", "contexts", "context", "knowledge", "ground_truth", "ground_truth_answer")
ID_COLUMNS = ("item_id", "id")
ANSWER_COLUMNS = ("answer", "response")  # what a label is about: a later run's labels must be of the same text
# the answer's fingerprint beside its text: a spreadsheet may reformat the text (a date, a number, a cell cut at
# 32,767 characters), the prefixed hex it leaves alone
ANSWER_HASH = "answer_sha256"
_DESIGN = re.compile(r"^(?P<kind>uniform|active|learned) budget=(?P<budget>\d+) N=(?P<N>\d+) seed=(?P<seed>-?\d+)"
                     r"(?: mix=(?P<mix>[0-9.]+))?(?: labelled=(?P<labelled>\d+))?$")


def read_scores(path: str | Path, score: str, others: tuple[str, ...] = ()) -> pd.DataFrame:
    """The per-item table (``.parquet``, ``.csv``, ``.json``/``.jsonl`` records) with an ``id`` column (from
    ``item_id`` or ``id``) and numeric ``score`` (and ``others``) columns; NaN = a failed verdict."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such file; give the per-item table of judge scores (--scores)")
    try:
        frame = (pd.read_json(p, lines=p.suffix == ".jsonl") if p.suffix in (".json", ".jsonl")
                 else read_per_item(p))
    except (ValueError, OSError) as exc:
        raise ValueError(f"{p}: cannot read the table ({exc}); use .parquet, .csv, .json or .jsonl") from None
    id_col = next((c for c in ID_COLUMNS if c in frame.columns), None)
    if id_col is None:
        raise ValueError(f"{p}: no item id column (item_id or id); columns: {', '.join(map(str, frame.columns))}")
    frame = frame.rename(columns={id_col: "id"})
    frame["id"] = frame["id"].astype(str)
    dup = frame["id"][frame["id"].duplicated()]
    if len(dup):
        raise ValueError(f"{p}: item id {dup.iloc[0]!r} appears more than once; one row per item")
    for col in (score, *others):
        if col not in frame.columns:
            raise ValueError(f"{p}: no column {col!r} (--score / --other-score); numeric columns: "
                             f"{', '.join(c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]))}")
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = frame[col][values.isna() & frame[col].notna()]
        if len(bad):
            raise ValueError(f"{p}: column {col!r} of item {frame['id'][bad.index[0]]!r} is {bad.iloc[0]!r}, not "
                             "a number; a judge score is a number, empty for a failed verdict")
        frame[col] = values.astype(float)
    return frame


@dataclass
class LabelPlan:
    sheet: pd.DataFrame  # the rows to label, SHEET_COLUMNS first
    report: dict[str, Any] = field(default_factory=dict)


def design_text(kind: str, budget: int, N: int, seed: int, mix: float | None = None, labelled: int = 0) -> str:
    return (f"{kind} budget={budget} N={N} seed={seed}" + (f" mix={mix:g}" if kind != "uniform" else "")
            + (f" labelled={labelled}" if labelled else ""))


# What BENCHMARKS §15 measured of the learned design, said with every plan made with --active.
ACTIVE_NOTE = ("active selection learns where the judge errs from a uniform first round and is used for a round "
               "only when those labels expect it at least 5% narrower than uniform; in BENCHMARKS §15 (four judges, "
               "25–200 labels) it was never wider than uniform, up to 4.5% narrower (a 0/1 verdict judge at 200 "
               "labels), covered 0.94–0.97 (0.93 on the draws that went learned with a calibrated judge at 200 labels), "
               "and stayed uniform below about 50 first-round labels")
FIRST_ROUND = ("no labels yet to learn the judge's errors from: this first round is uniform (about half the labels "
               "you mean to spend); label it, then plan the next round with --active --labelled <this sheet, filled>")


def learned_design(frame: pd.DataFrame, score: str, budget: int, labels: dict[str, float],
                   mix: float = LEARNED_MIX) -> tuple[ErrorModel, bool, float, np.ndarray, np.ndarray, np.ndarray]:
    """The learned round after uniform rounds whose ``labels`` (id → label) are given: (model, active?, expected
    width over uniform's, π of every row — 1 for the labelled ones —, the judge's scores with failed verdicts
    imputed, the labelled rows' mask). The estimate recomputes it from the same labels."""
    scores = frame[score].to_numpy(dtype=float)
    (f,) = fill_failed(scores)[1]
    first = frame["id"].isin(set(labels)).to_numpy()
    y1 = np.array([labels[i] for i in frame["id"][first]])
    model = fit_error(y1, f[first], f[~first])
    active, ratio, pi_rest = choose(model, f[~first], int(first.sum()), budget, mix)
    pi = np.ones(scores.size)
    pi[~first] = pi_rest
    return model, active, ratio, pi, f, first


def design_probabilities(frame: pd.DataFrame, score: str, budget: int, *, active: bool, others: tuple[str, ...] = (),
                         mix: float = MIX, labelled: np.ndarray | None = None) -> np.ndarray:
    """π_i of every row of ``frame``: 0 for the rows already ``labelled`` (a bool mask; they are not drawn again),
    and over the other rows budget/(their count) (uniform) or the active design's probabilities computed on them
    alone (:func:`ragnb.metrics.ppi_active.inclusion_probabilities`)."""
    scores = frame[score].to_numpy(dtype=float)
    free = ~labelled if labelled is not None else np.ones(scores.size, dtype=bool)
    pi = np.zeros(scores.size)
    if active:
        u = uncertainty(scores[free], *(frame[o].to_numpy(dtype=float)[free] for o in others))
        pi[free] = inclusion_probabilities(u, budget, mix)
    else:
        pi[free] = budget / int(free.sum())
    return pi


def plan(frame: pd.DataFrame, score: str, budget: int, *, seed: int = 0, active: bool = False,
         others: tuple[str, ...] = (), alpha: float = 0.05, labelled: Collection[str] | Mapping[str, float] = (),
         earlier: Collection[str] = ()) -> LabelPlan:
    """Pick the items to label (see the module docstring) and the expected interval widths after labelling.
    ``labelled``: ids labelled already (earlier sheets; a mapping id → label for ``active``, which learns from
    them): never drawn again; π is over the other items, and the design records how many were left out
    (``labelled=K``), which the estimate checks. ``earlier``: the earlier sheets' design kinds."""
    scores = frame[score].to_numpy(dtype=float)
    N = scores.size
    done = frame["id"].isin(set(labelled)).to_numpy()
    if len(set(labelled)) != int(done.sum()):
        unknown = sorted(set(labelled) - set(frame["id"]))
        raise ValueError(f"--labelled: {len(unknown)} labelled id(s) are not in the scores table, e.g. "
                         f"{', '.join(map(repr, unknown[:5]))}; give the sheets made from this table")
    free = N - int(done.sum())
    if not 1 <= budget <= free:
        raise ValueError(f"--budget {budget}: label between 1 and the {free} items of the table"
                         + (f" not labelled yet ({N - free} are)" if free < N else ""))
    kind, pi, notes = _design(frame, score, budget, active, labelled, done, earlier)
    rng = np.random.default_rng(seed)
    if kind == "learned":
        drawn = (rng.uniform(size=N) < pi) & ~done
    else:
        drawn = np.zeros(N, dtype=bool)
        drawn[rng.choice(np.flatnonzero(~done), budget, replace=False)] = True
    design = design_text(kind, budget, N, seed, LEARNED_MIX, N - free)
    sheet = pd.DataFrame({"id": frame["id"], LABEL: "", "notes": "", "judge_score": scores,
                          "inclusion_probability": np.where(done, 0.0, pi), "design": design, "metric": score})
    for c in (c for c in SHOW if c in frame.columns):
        sheet[c] = frame[c].map(cell_text)
    answer = next((c for c in ANSWER_COLUMNS if c in frame.columns), None)
    if answer is not None:
        sheet[ANSWER_HASH] = frame[answer].map(answer_hash)
    # the labelled items count as drawn with certainty: they are in the estimate whatever this round draws
    widths = planned_widths(scores, np.where(done, 1.0, pi), budget + N - free, score, alpha)
    report = {"design": design, "items": N, "already_labelled": N - free, "budget": budget,
              "rows": int(drawn.sum()), "judge_failed": int(np.isnan(scores).sum()),
              "expected_ci_width_ppi": round(widths["ppi"], 4),
              "expected_ci_width_human_only": round(widths["human_only"], 4),
              "assumption": widths["assumption"], **notes}
    return LabelPlan(sheet[drawn].reset_index(drop=True), report)


def _design(frame: pd.DataFrame, score: str, budget: int, active: bool, labelled: Collection[str] | Mapping[str, float],
            done: np.ndarray, earlier: Collection[str]) -> tuple[str, np.ndarray, dict[str, Any]]:
    """(kind, π of every row, what the report says of it): uniform unless ``active`` and the labels of earlier
    uniform rounds expect the learned design narrower (:func:`learned_design`)."""
    uniform = np.where(done, 0.0, budget / max(int((~done).sum()), 1))
    if not active:
        return "uniform", uniform, {}
    if not done.any():
        return "uniform", uniform, {"design_note": f"{FIRST_ROUND}; {ACTIVE_NOTE}"}
    if not isinstance(labelled, Mapping):
        raise ValueError("active=True after earlier rounds learns from their labels: pass labelled as a mapping "
                         "id → label (the CLI reads it from the --labelled sheets)")
    if any(k != "uniform" for k in earlier):
        raise ValueError("--active learns from uniform rounds only: every --labelled sheet must be a uniform one "
                         "(plan the rounds before without --active, or after a uniform first round)")
    _, pick, ratio, pi, _, _ = learned_design(frame, score, budget, dict(labelled))
    said = (f"on the {int(done.sum())} labels so far the learned design's interval is expected "
            f"{abs(1 - ratio):.0%} {'narrower' if ratio <= 1 else 'wider'} than uniform's")
    note = (f"{said}: this round is learned" if pick else
            f"{said}, not at least {MARGIN:.0%} narrower: this round stays uniform")
    return ("learned" if pick else "uniform"), (pi if pick else uniform), {
        "expected_width_learned_over_uniform": round(ratio, 4), "design_note": f"{note}; {ACTIVE_NOTE}"}


def score_range(score: str, scores: np.ndarray) -> tuple[float, float, str]:
    """(low, high, where from) of a score column: the registry's value_range of the metric it names, else [0, 1]
    when the scores lie there, else the scores' own span (stated: the labels may reach beyond it)."""
    registered = registered_range(score)
    if registered is not None:
        return (*registered, f"{score}'s registered range")
    valid = scores[~np.isnan(scores)]
    if valid.size == 0 or (valid.min() >= 0.0 and valid.max() <= 1.0):
        return 0.0, 1.0, "the default range"
    lo, hi = float(valid.min()), float(valid.max())
    return lo, (hi if hi > lo else lo + 1.0), "the judge scores' own span (no registered range)"


def registered_range(score: str) -> tuple[float, float] | None:
    """The registry's finite value_range of the metric a score column names (None: unregistered or unbounded)."""
    from ragnb.metrics.registry import resolve

    metric = resolve(score)
    return metric.value_range if metric is not None and all(map(math.isfinite, metric.value_range)) else None


def planned_widths(scores: np.ndarray, pi: np.ndarray, n: int, score: str, alpha: float = 0.05) -> dict[str, Any]:
    """Expected interval widths after ``n`` labels, never below what the labels allow (docs/ppi.md, A labelling plan).
    Scores are scaled to [0, 1] by :func:`score_range`. The labels' variance is p(1 − p), p the judge's mean — the
    variance of 0/1 labels, and an upper bound for labels in [0, 1] of that mean; a constant judge (or none that
    scored) says nothing of p, so the worst case 0.25. PPI's width comes from the rectifier Y − s: for a soft judge
    assumed calibrated, E[(Y − s)²] = mean s(1 − s) (:func:`ragnb.metrics.ppi_active.expected_widths`); a hard
    0/1 or constant judge's error rate is unknown before labels, so PPI++ is planned as no better than human-only
    (its tuned λ falls back to that), never as the zero error a hard verdict would imply."""
    from ragnb.metrics.ppi import z_value

    lo, hi, source = score_range(score, scores)
    s = np.clip((scores - lo) / (hi - lo), 0.0, 1.0)
    valid = s[~np.isnan(s)]
    constant = valid.size == 0 or float(valid.max() - valid.min()) == 0.0
    p = math.nan if constant else float(valid.mean())
    var_y = 0.25 if constant else max(p * (1 - p), 0.0)
    human = 2 * z_value(alpha) * math.sqrt(var_y / n) * (hi - lo)
    hard = constant or bool(np.all((valid == 0.0) | (valid == 1.0)))
    if hard:
        ppi = human
        why = ("the judge is constant (or never scored): p unknown, worst case p(1 − p) = 0.25; planned as "
               "human-only" if constant else f"label variance p(1 − p) with p = {p:.3f} (judge mean); a hard 0/1 "
               "judge's error rate is unknown before labels: PPI planned as human-only (no gain assumed)")
    else:
        ppi = min(expected_widths(s, pi, n, alpha)["ppi"] * (hi - lo), human)
        why = (f"label variance p(1 − p) with p = {p:.3f} (judge mean); PPI from the rectifier variance of a "
               "calibrated judge, E[(Y − s)² | s] = s(1 − s)")
    return {"ppi": ppi, "human_only": human,
            "assumption": f"scores scaled to [0, 1] from {source} [{lo:g}, {hi:g}]; {why}; a planning figure, "
                          "not a guarantee"}


def answer_hash(value: Any) -> str:
    """``sha256:`` and 16 hex digits of an answer's text, whitespace runs as one space (a spreadsheet may rewrap)."""
    return "sha256:" + hashlib.sha256(" ".join(cell_text(value).split()).encode("utf-8")).hexdigest()[:16]


def cell_text(value: Any) -> str:
    """A table cell as the sheet shows it: lists one item per paragraph, a missing value empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (list, tuple, np.ndarray)):
        return "\n\n".join(str(v) for v in value)
    return str(value)


def sheet_csv(sheet: pd.DataFrame) -> str:
    """The CSV text (byte-order mark first) of a plan's sheet."""
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(list(sheet.columns))
    for row in sheet.itertuples(index=False):
        writer.writerow([("" if math.isnan(v) else repr(float(v))) if isinstance(v, float) else str(v) for v in row])
    return "\ufeff" + buf.getvalue()


def refuse_filled(path: str | Path) -> None:
    """ValueError when ``path`` exists and holds a reviewer's work (a human_label or a note), or cannot be read as
    a label sheet: a new plan written over it would lose labels that cost hours."""
    from ragnb.datasets.annotation_csv import open_csv

    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return  # nothing there to lose (a folder is refused by resolve_output)
    fix = "choose another --output, or move that file away first if it is no longer needed"
    try:
        header, reader = open_csv(p, "label sheet", fix)
    except ValueError as exc:
        raise ValueError(f"{p}: exists and cannot be read as a label sheet ({exc}); {fix}") from None
    if LABEL not in header:
        raise ValueError(f"{p}: exists and is not a label sheet (no {LABEL!r} column); {fix}")
    kept = [header.index(c) for c in (LABEL, "notes") if c in header]
    for cells in reader:
        if any(k < len(cells) and cells[k].strip() for k in kept):
            raise ValueError(f"{p}: exists and holds human labels (row {reader.line_num}); a new sheet would "
                             f"overwrite them — {fix}")


def write_sheet(plan_: LabelPlan, path: str | Path) -> Path:
    from ragnb.io import atomic_write_text

    refuse_filled(path)
    try:
        return atomic_write_text(path, sheet_csv(plan_.sheet))
    except OSError as exc:
        raise ValueError(f"{path}: cannot write the sheet ({exc.strerror or exc}); choose another --output") from None


# --------------------------------------------------------------------------- the filled sheet


@dataclass
class Sheet:
    """A filled sheet: labels by id, every row's π and the design, the rows left empty (with their lines)."""

    labels: dict[str, float]
    pi: dict[str, float]
    design: dict[str, Any]
    empty: list[str]  # "file:line (id 'x')" of rows without a label
    metric: str | None = None  # the score column the plan was made from (older sheets: None)
    path: str = ""
    answers: dict[str, str] = field(default_factory=dict)  # id → answer_hash of what its reviewer saw, when shown
    where: dict[str, str] = field(default_factory=dict)  # id → "file:line (id 'x')" of each labelled row


def check_sheet(sheet: Sheet, score: str, binary: bool | None) -> None:
    """ValueError when the sheet labels another metric than ``score``, or a label lies outside the registry's
    value_range of ``score`` — a label of 2 on a 0–1 score is a typo, not a datum."""
    if sheet.metric is not None and sheet.metric != score:
        raise ValueError(f"{sheet.path}: the sheet labels {sheet.metric!r} (its 'metric' column) but the estimate is "
                         f"of {score!r}; give the sheet made for {score!r}, or evaluate --score {sheet.metric}")
    # an unregistered score's range is not known, so only a binary one's 0/1 is enforced (by the reader) there
    lo, hi = registered_range(score) or (-math.inf, math.inf)
    for item, value in sheet.labels.items():
        if not lo <= value <= hi:
            allowed = "0 or 1 (no/yes)" if binary else f"a number from {lo:g} to {hi:g} ({score}'s registered range)"
            raise ValueError(f"{sheet.where[item]} column {LABEL!r}: {value:g} is outside {score!r}'s range; write "
                             f"{allowed}, or leave the cell empty if the item was not labelled")


def _label(cell: str, binary: bool | None, where: str) -> float | None:
    """``binary``: True yes/no only, False a number only, None either (a report reading any judged metric)."""
    from ragnb.io import parse_yes_no

    if not cell.strip():
        return None
    if binary is None and parse_yes_no(cell) is not None:
        return float(parse_yes_no(cell))
    if binary:
        value = parse_yes_no(cell)
        if value is None:
            raise ValueError(f"{where} column {LABEL!r}: {cell!r} is not a yes/no label; write true/false, yes/no or "
                             "1/0 (or leave it empty if the item was not labelled)")
        return float(value)
    try:
        value = float(cell.strip().replace(",", "."))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{where} column {LABEL!r}: {cell!r} is not a number; write the score (e.g. 0.5 or 1)")
    return value


def read_sheet(path: str | Path, binary: bool | None) -> Sheet:
    """Read a filled sheet; errors name the file, line and column. ``binary`` as in :func:`_label`."""
    from ragnb.datasets.annotation_csv import open_csv

    p = Path(path)
    header, reader = open_csv(p, "label sheet", "write one with `ragnb dataset label-plan`")
    missing = [c for c in ("id", LABEL, "inclusion_probability", "design") if c not in header]
    if missing:
        raise ValueError(f"{p}: the header lacks {', '.join(missing)}; keep the columns label-plan wrote "
                         f"(found: {', '.join(header)})")
    col = {c: header.index(c) for c in header}
    sheet, designs, metrics, line = Sheet({}, {}, {}, [], path=str(p)), set(), set(), reader.line_num
    for cells in reader:
        where, line = f"{p}:{line + 1}", reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise ValueError(f"{where}: {len(cells)} cells but the header has {len(header)} columns; give every row "
                             "one cell per column")
        item = cells[col["id"]].strip()
        where = f"{where} (id {item!r})"
        if item in sheet.pi:
            raise ValueError(f"{where}: the id appears twice in the sheet; one row per item")
        designs.add(cells[col["design"]].strip())
        metrics.add(cells[col["metric"]].strip() if "metric" in col else "")
        try:
            sheet.pi[item] = float(cells[col["inclusion_probability"]])
        except ValueError:
            raise ValueError(f"{where} column 'inclusion_probability': {cells[col['inclusion_probability']]!r} is "
                             "not a number; leave the column as label-plan wrote it") from None
        shown = next((c for c in ANSWER_COLUMNS if c in col), None)
        if ANSWER_HASH in col:
            sheet.answers[item] = cells[col[ANSWER_HASH]].strip()
        elif shown is not None:  # an older sheet: the text itself
            sheet.answers[item] = answer_hash(cells[col[shown]])
        value = _label(cells[col[LABEL]], binary, where)
        if value is None:
            sheet.empty.append(where)
        else:
            sheet.labels[item], sheet.where[item] = value, where
    if len(designs) != 1 or not _DESIGN.match(next(iter(designs))):
        raise ValueError(f"{p}: column 'design' must hold the one design label-plan wrote on every row; found "
                         f"{sorted(designs)[:3]}")
    if len(metrics) > 1:
        raise ValueError(f"{p}: column 'metric' must hold the one score column label-plan wrote on every row; found "
                         f"{sorted(metrics)[:3]}")
    m = _DESIGN.match(designs.pop())
    sheet.design = {"kind": m["kind"], "budget": int(m["budget"]), "N": int(m["N"]), "seed": int(m["seed"]),
                    "mix": float(m["mix"]) if m["mix"] else None, "labelled": int(m["labelled"] or 0),
                    "text": m.group(0)}
    sheet.metric = metrics.pop() or None if metrics else None
    return sheet
