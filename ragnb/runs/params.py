"""Which notebooks a run executes, and with which parameters.

A parameters YAML file (``ragnb run -f``) holds common parameters and per-notebook sections::

    dataset_file: data/demo/dataset.jsonl   # common: every notebook with this parameter gets it
    embedding_model: all-MiniLM-L6-v2
    tier1:                                   # only for tier1_retrieval
      top_k: 10
    tier0: {sample_size: 500}

Top-level keys that name a notebook (short name such as ``tier1`` or stem such as ``tier1_retrieval``, see
:data:`ragnb.spec.TIERS`) are sections; every other key is common. A common key must be a parameter of some
notebook (of this run, or of another known tier — so one file can serve all tiers); a section's keys must be
parameters of that notebook. Then ``params`` (``-p NAME VALUE``): ``{"top_k": 10}`` goes to every notebook
of the run that declares ``top_k`` (at least one must); ``{"tier1.top_k": 10}`` targets one notebook.

Precedence, later wins: file common < file section < params common < params ``"<notebook>.<name>"``. Text
values are converted to the declared int/float/bool type (CLI input). Unknown names are rejected with the
notebook's parameter list; count parameters outside :data:`COUNT_BOUNDS` are rejected (``top_k`` of 10⁹
would allocate gigabytes and hang); names that look like secrets (``key``, ``token``, ``password``, ``secret``) are
rejected — use environment variables. ``output_dir`` is always set by the runner.

Paths (:func:`resolve_paths`): a non-empty ``*_path`` / ``*_file`` / ``*_dir`` parameter (and the dashboard's
``outputs``) relative to the folder ``ragnb run`` was started in becomes absolute, and an input path that does
not exist or cannot be read is rejected before any notebook starts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragnb import config
from ragnb.config import find_secret
from ragnb.spec import NOTEBOOKS, TIERS, by_name, by_stem

# The allowed range of every count parameter a notebook may declare, kept here once: (min, max), inclusive.
# The maxima are far above any meaningful run and far below what would exhaust memory or never finish.
COUNT_BOUNDS: dict[str, tuple[int, int]] = {
    "top_k": (1, 10_000),
    "max_questions": (0, 10_000_000),  # 0: all
    "n_boot": (0, 100_000),  # 0: no confidence intervals
    "consistency_runs": (1, 100),  # 1: skip the consistency metrics
    "sample_size": (0, 10_000_000),  # 0: all
}

# A notebook whose use of a count needs a narrower range than COUNT_BOUNDS: {stem: {name: (min, max)}}.
NOTEBOOK_BOUNDS: dict[str, dict[str, tuple[int, int]]] = {
    # its paired tests put a bootstrap CI on every difference: no resamples, no comparison (compare.compare_runs)
    "dashboard": {"n_boot": (1, 100_000)},
}

_SECRET_WORDS = {"key", "apikey", "token", "password", "passwd", "pwd", "secret"}


SHIPPED_NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"  # inside the package, beside runs/


def notebooks_dir() -> Path:
    """The notebooks shipped inside the ``ragnb`` package (``notebooks/`` of a checkout links to them)."""
    if not SHIPPED_NOTEBOOKS.is_dir():
        raise ValueError(f"no notebooks/ folder in {SHIPPED_NOTEBOOKS.parent}; reinstall ragnb or pass notebooks_dir=")
    return SHIPPED_NOTEBOOKS


@dataclass(frozen=True)
class Notebook:
    """A notebook of a run: ``name`` as asked for (``tier1``, or the stem of a notebook outside the spec)."""

    name: str
    stem: str
    path: Path

    @property
    def post_record(self) -> bool:
        """Runs after the run's record is written (the dashboard reads benchmark_runs.json)."""
        tier = by_stem(self.stem)
        return tier is not None and tier.post_record


def resolve(names: list[str], nb_dir: Path) -> list[Notebook]:
    """The notebooks named by short name (:data:`ragnb.spec.NOTEBOOKS`; their files are ``<name>.ipynb``), by
    output stem (``tier1_retrieval``, the long name), or by the file stem of a notebook outside the spec — each
    once, in the given order."""
    if isinstance(names, str) or not names:
        raise ValueError(f"name the notebooks to run as a list, e.g. ['tier1']; known: {sorted(NOTEBOOKS)}")
    out: list[Notebook] = []
    for name in names:
        tier = by_name(name) or by_stem(name)
        path = nb_dir / (tier.notebook if tier else f"{name}.ipynb")
        if not path.is_file():
            available = sorted(p.stem for p in nb_dir.glob("*.ipynb"))
            raise ValueError(
                f"unknown notebook {name!r}: {path} does not exist; known short names: {sorted(NOTEBOOKS)}, "
                f"notebooks in {nb_dir}: {available}"
            )
        stem = tier.stem if tier else name
        if all(nb.stem != stem for nb in out):
            out.append(Notebook(tier.name if tier else name, stem, path))
    return out


def declared_params(nb: Notebook) -> dict[str, dict]:
    """The notebook's parameters as papermill reads them (``{name: {inferred_type_name, default, help}}``)."""
    import papermill as pm

    declared = pm.inspect_notebook(str(nb.path))
    if "output_dir" not in declared:
        raise ValueError(
            f"{nb.path}: its parameters cell has no `output_dir: str` parameter; every ragnb notebook needs one "
            "and must write <output_dir>/<stem>.metrics.json with ragnb.tiers.result.TierResult.write (or ragnb.tiers.payload.write_metrics)"
        )
    return declared


def _describe(declared: dict[str, dict]) -> str:
    return ", ".join(f"{k}: {v.get('inferred_type_name')}" for k, v in declared.items() if k != "output_dir")


def _check_name_and_value(name: str, value: Any, where: str) -> None:
    words = set(re.split(r"[^a-z0-9]+", str(name).lower()))
    if words & _SECRET_WORDS:
        raise ValueError(
            f"{where}: parameter {name!r} looks like a secret; secrets never go into parameters (they would be "
            "saved in the executed notebook and the run record) — set them as environment variables, e.g. "
            "RAGNB_DATABASE_URL or the LLM endpoint's API-key variable"
        )
    if name == "output_dir":
        raise ValueError(f"{where}: output_dir is set by the runner to the run folder; choose the outputs folder "
                         "with outputs= (ragnb run --outputs) or RAGNB_OUTPUTS")
    if isinstance(value, str) and (what := find_secret(value)):
        raise ValueError(f"{where}: the value of {name!r} looks like it contains {what}; pass secrets through "
                         "environment variables, never as parameters")


def load_params_file(path: str | Path) -> dict[str, Any]:
    """Read a parameters YAML file (its layout: this module's docstring)."""
    return config.read_yaml_mapping(path, "parameters file",
                                    "a mapping of parameter: value (with optional per-notebook sections)")


def _coerce(name: str, value: Any, declared: dict, where: str, stem: str = "") -> Any:
    kind = declared.get("inferred_type_name")
    if isinstance(value, str) and kind in ("int", "float", "bool", "dict", "list"):
        parsed = _parse_text(value, kind, name, where) if value.strip() else value  # CLI values arrive as text
        value = float(parsed) if kind == "float" and isinstance(parsed, int) and not isinstance(parsed, bool) else parsed
    ok = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "dict": lambda v: isinstance(v, dict),
        "list": lambda v: isinstance(v, list),
    }.get(kind or "")
    if ok is not None and not ok(value):
        raise ValueError(f"{where}: parameter {name!r} must be {kind} (default {declared.get('default')}), got {value!r}")
    check_bounds(name, value, where, stem)
    return value


def _parse_text(text: str, kind: str, name: str, where: str) -> Any:
    """A CLI value for a parameter declared ``kind``, read as YAML (JSON is YAML); unreadable → the error says
    what was expected."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: parameter {name!r} must be {kind}; {text!r} cannot be read as one "
                         f"({str(exc).splitlines()[0]})") from None


def check_bounds(name: str, value: Any, where: str, stem: str = "") -> None:
    """ValueError naming the parameter and its allowed range when a count of :data:`COUNT_BOUNDS` (or of
    notebook ``stem``'s :data:`NOTEBOOK_BOUNDS`) is outside it."""
    bounds = NOTEBOOK_BOUNDS.get(stem, {}).get(name) or COUNT_BOUNDS.get(name)
    if bounds is None:
        return
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        notebook = f" in notebook {stem}" if name in NOTEBOOK_BOUNDS.get(stem, {}) else ""
        raise ValueError(f"{where}: parameter {name!r} = {value!r} is outside its allowed range{notebook}: "
                         f"an integer from {low:,} to {high:,}")


def merge_params(
    nbs: list[Notebook], declared: dict[str, dict[str, dict]], file_params: dict, params: dict, nb_dir: Path,
    file_label: str,
) -> dict[str, dict[str, Any]]:
    """``{stem: {name: value}}`` for the run's notebooks from the file's and the caller's parameters, checked
    and converted as the module docstring says."""
    by_alias = {a: nb for nb in nbs for a in (nb.name, nb.stem)}
    known_sections = set(NOTEBOOKS) | set(NOTEBOOKS.values()) | set(by_alias)
    merged: dict[str, dict[str, Any]] = {nb.stem: {} for nb in nbs}

    def put(nb: Notebook, name: str, value: Any, where: str) -> None:
        _check_name_and_value(name, value, where)
        if name not in declared[nb.stem]:
            raise ValueError(
                f"{where}: notebook {nb.stem} has no parameter {name!r}; its parameters are: "
                f"{_describe(declared[nb.stem])}"
            )
        merged[nb.stem][name] = _coerce(name, value, declared[nb.stem][name], where, nb.stem)

    def put_common(name: str, value: Any, where: str, others_ok: bool) -> None:
        _check_name_and_value(name, value, where)
        takers = [nb for nb in nbs if name in declared[nb.stem]]
        if not takers and not (others_ok and _declared_elsewhere(name, nb_dir, nbs)):
            listing = "; ".join(f"{nb.stem}: {_describe(declared[nb.stem])}" for nb in nbs)
            raise ValueError(f"{where}: no notebook of this run has a parameter {name!r}. Parameters: {listing}")
        for nb in takers:
            put(nb, name, value, where)

    common = {k: v for k, v in file_params.items() if k not in known_sections}
    sections = {k: v for k, v in file_params.items() if k in known_sections}
    for key, section in sections.items():
        if not isinstance(section, dict):
            raise ValueError(f"{file_label}: '{key}' names a notebook, so its value must be a mapping of parameters")
    # precedence (later wins): file common < file section < params common < params "<notebook>.<name>"
    for name, value in common.items():
        put_common(name, value, f"{file_label}: {name}", others_ok=True)
    for key, section in sections.items():
        if key in by_alias:
            for name, value in section.items():
                put(by_alias[key], name, value, f"{file_label}: {key}.{name}")
    targeted = {k: v for k, v in params.items() if "." in k}
    for name, value in params.items():
        if "." not in name:
            put_common(name, value, f"parameter {name}", others_ok=False)
    for key, value in targeted.items():
        prefix, name = key.split(".", 1)
        if prefix not in by_alias:
            raise ValueError(f"parameter {key}: {prefix!r} is not a notebook of this run ({[nb.name for nb in nbs]})")
        put(by_alias[prefix], name, value, f"parameter {key}")
    return merged


def _declared_elsewhere(name: str, nb_dir: Path, nbs: list[Notebook]) -> bool:
    # A shared YAML file may hold settings for tiers that are not part of this run.
    running = {nb.stem for nb in nbs}
    for tier in TIERS:
        path = nb_dir / tier.notebook
        if tier.stem not in running and path.is_file():
            import papermill as pm

            if name in pm.inspect_notebook(str(path)):
                return True
    return False


PATH_SUFFIXES = ("_path", "_file", "_dir")  # parameters holding a path: made absolute, inputs checked
INPUT_FOLDERS = ("outputs",)  # folder parameters a notebook reads (the dashboard's history)


def is_path_param(name: str) -> bool:
    return name.endswith(PATH_SUFFIXES) or name in INPUT_FOLDERS


def _check_input(name: str, path: Path, where: str) -> None:
    folder = name.endswith("_dir") or name in INPUT_FOLDERS
    if name.endswith("_dir") and not path.exists():
        return  # a folder the notebook writes into: it creates it
    if not path.exists():
        raise ValueError(f"{where}: {name} = {str(path)!r} does not exist (relative paths are read from the "
                         f"folder you ran the command in, {Path.cwd()}); fix the path or leave it empty for the default")
    if folder and not path.is_dir():
        raise ValueError(f"{where}: {name} = {str(path)!r} is a file; give a folder")
    if not folder and path.is_dir() and name.endswith("_file"):
        raise ValueError(f"{where}: {name} = {str(path)!r} is a folder; give a file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{where}: {name} = {str(path)!r} cannot be read (permissions); fix them or copy the file")


def resolve_paths(merged: dict[str, dict[str, Any]], cwd: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """``merged`` with every non-empty path parameter (:func:`is_path_param`; ``output_dir`` is the runner's)
    made absolute against ``cwd`` (default: the current folder) and checked (module docstring), so a wrong path
    stops the run before its first notebook instead of failing notebook after notebook."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    out: dict[str, dict[str, Any]] = {}
    for stem, params in merged.items():
        out[stem] = dict(params)
        for name, value in params.items():
            if name == "output_dir" or not is_path_param(name) or not isinstance(value, str) or not value.strip():
                continue
            path = (base / Path(value).expanduser()).resolve()
            _check_input(name, path, f"notebook {stem}")
            out[stem][name] = str(path)
    return out


def declared_default(info: dict) -> Any:
    """A parameter's default as a value (papermill gives its source text, e.g. ``'"demo"'``); None if not a literal."""
    import ast

    try:
        return ast.literal_eval(str(info.get("default")))
    except (ValueError, SyntaxError):
        return None


def database_readers(merged: dict[str, dict[str, Any]], declared: dict[str, dict[str, dict]]) -> list[str]:
    """The notebooks of a run that read the configured database (``corpus`` set to, or defaulting to, "db")."""
    out = []
    for stem, params in merged.items():
        info = declared.get(stem, {}).get("corpus")
        if info is not None and params.get("corpus", declared_default(info)) == "db":
            out.append(stem)
    return out
