"""Write the reference tables of docs/ from the code: run it after changing a notebook parameter, an environment
variable or a command.

    python scripts/gen_reference.py           # rewrite the generated parts of docs/
    python scripts/gen_reference.py --check   # exit 1, naming the files, when they differ from the code

What is generated, each between ``<!-- BEGIN GENERATED: KEY -->`` and ``<!-- END GENERATED: KEY -->``:

* docs/notebooks.md, ``parameters NAME``: one notebook's parameters — name, type, default and comment as its
  ``parameters`` cell declares them (what ``ragnb run --list`` and papermill read);
* docs/configuration.md, ``environment``: every environment variable, from :data:`ragnb.envvars.ENV_VARS`;
* docs/commands.md, ``cli``: every ``ragnb`` command with its options and help, from the command objects;
* docs/metrics.md, ``metric-index``: every registered metric — name, family, kind, direction, range and the
  formula its docstring states — from :mod:`ragnb.metrics.registry` (the prose sections below it are kept by hand).

``tests/test_reference_docs.py`` regenerates them in memory and fails when a file differs.
"""

from __future__ import annotations

import inspect
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
_BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (?P<key>[^>]+?) -->\n)(?P<body>.*?)(<!-- END GENERATED: (?P=key) -->)",
                    re.S)


def cell(text: object) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def parameters_table(name: str) -> str:
    """The parameter table of the notebook ``name`` (a short name of :data:`ragnb.spec.TIERS`)."""
    from ragnb.runs.params import declared_params, resolve
    from ragnb.runs.runner import notebooks_dir

    nb = resolve([name], notebooks_dir())[0]
    rows = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    for param, info in declared_params(nb).items():
        default = cell(info.get("default"))
        rows.append(f"| `{param}` | {info.get('inferred_type_name') or 'any'} | `{default}` | {cell(info.get('help') or '')} |")
    return "\n".join(rows) + "\n"


def environment_table(_key: str = "") -> str:
    """One table of every environment variable ragnb reads."""
    from ragnb.envvars import ENV_VARS

    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {cell(v.default)} | {cell(v.meaning)} |" for v in ENV_VARS]
    return "\n".join(rows) + "\n"


def _command_lines(command, path: str, ctx) -> list[str]:
    # Duck-typed: typer's commands are click's classes from typer's own copy of click, the `run` command click's.
    lines: list[str] = []
    if hasattr(command, "list_commands"):
        for sub in command.list_commands(ctx):
            child = command.get_command(ctx, sub)
            if child is not None and not child.hidden:
                lines += _command_lines(child, f"{path} {sub}", child.context_class(child, info_name=sub, parent=ctx))
        return lines
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += [f"### `{path}`", "", f"`{path} {usage}`".replace("  ", " "), ""]
    help_text = (command.help or "").strip()
    if help_text:
        lines += [cell(help_text.split("\n\n")[0]), ""]
    rows = []
    for param in command.params:
        record = param.get_help_record(ctx) if param.param_type_name == "option" else None
        if record:
            rows.append(f"| `{cell(record[0])}` | {cell(record[1])} |")
    if rows:
        lines += ["| option | meaning |", "|---|---|", *rows, ""]
    return lines


def cli_reference(_key: str = "") -> str:
    """Every ``ragnb`` command: usage, what it does, its options (as ``--help`` shows them)."""
    from ragnb.cli.main import build_cli

    group = build_cli()
    ctx = group.context_class(group, info_name="ragnb", terminal_width=10_000, max_content_width=10_000)
    return "\n".join(_command_lines(group, "ragnb", ctx)).rstrip("\n") + "\n"


# Where each family's prose definitions are, in docs/metrics.md (a heading of that page; the link test checks it).
FAMILY_SECTIONS = {
    "retrieval": "Retrieval", "embedding": "Embedding geometry", "text": "Text and answer metrics",
    "groundedness": "Faithfulness", "llm": "Ragas-style suite", "judge": "LLM judge scores",
    "nvidia": "NVIDIA-style metrics", "classification": "Classification and judge calibration", "ux": "Tier UX",
    "analysis": "Analytics", "latency": "Other Tier 1 numbers", "ppi": "Prediction-powered estimates",
}
_FORMULA = ("=", "Σ", "/", "·", "max_", "min_")  # what tests/metrics/test_common.py accepts as a formula


def formula(doc: str) -> str:
    """The definition a docstring states, on one line: its first paragraph, and the first paragraph that holds
    a formula when that is another one."""
    paragraphs = [p for p in inspect.cleandoc(doc).split("\n\n") if p.strip()] or [""]
    with_formula = next((p for p in paragraphs if any(sym in p for sym in _FORMULA)), paragraphs[0])
    shown = paragraphs[:1] + ([with_formula] if with_formula is not paragraphs[0] else [])
    return cell(" — ".join(shown))


def _bound(value: float) -> str:
    return "∞" if value == math.inf else "−∞" if value == -math.inf else f"{value:g}"


def metric_index(_key: str = "") -> str:
    """One row per registered metric, by family: the registry's own declaration of it."""
    from ragnb.metrics.registry import load_all

    rows = ["| metric | family | kind | better | range | definition (its docstring) |", "|---|---|---|---|---|---|"]
    for metric in sorted(load_all().values(), key=lambda m: (m.family, m.name)):
        if metric.family not in FAMILY_SECTIONS:
            raise ValueError(f"metric family {metric.family!r} ({metric.name}) has no section in docs/metrics.md; "
                             "add it to FAMILY_SECTIONS in scripts/gen_reference.py")
        section = FAMILY_SECTIONS[metric.family]
        anchor = re.sub(r"[^\w\- ]", "", section.lower()).replace(" ", "-")
        name = f"`{metric.name}@k`" if metric.needs_k else f"`{metric.name}`"
        if metric.aliases:
            name += " (also " + ", ".join(f"`{a}`" for a in metric.aliases) + ")"
        low, high = metric.value_range
        span = f"{'[' if math.isfinite(low) else '('}{_bound(low)}, {_bound(high)}{']' if math.isfinite(high) else ')'}"
        better = "↑" if metric.higher_is_better else "↓"
        rows.append(f"| {name} | [{metric.family}](#{anchor}) | {metric.kind} | {better} | {span} "
                    f"| {formula(metric.doc)} |")
    return "\n".join(rows) + "\n"


GENERATORS: dict[str, tuple[str, Callable[[str], str]]] = {
    "parameters": ("notebooks.md", lambda key: parameters_table(key.split(" ", 1)[1])),
    "environment": ("configuration.md", environment_table),
    "cli": ("commands.md", cli_reference),
    "metric-index": ("metrics.md", metric_index),
}


def regenerate(text: str, where: str) -> str:
    """``text`` with every generated block rewritten from the code; ValueError for an unknown key."""
    def body(m: re.Match) -> str:
        kind = m.group("key").split(" ", 1)[0]
        if kind not in GENERATORS:
            raise ValueError(f"{where}: unknown generated block {m.group('key')!r}; known: {sorted(GENERATORS)}")
        return m.group(1) + GENERATORS[kind][1](m.group("key")) + m.group(4)

    return _BLOCK.sub(body, text)


def generated_files() -> dict[Path, tuple[str, str]]:
    """Each file with generated blocks: (text on disk, text regenerated from the code)."""
    out: dict[Path, tuple[str, str]] = {}
    for name in sorted({file for file, _ in GENERATORS.values()}):
        path = DOCS / name
        text = path.read_text(encoding="utf-8")
        out[path] = (text, regenerate(text, str(path)))
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, (old, new) in generated_files().items():
        if old != new:
            stale.append(path)
            if not check:
                path.write_text(new, encoding="utf-8")
    if check and stale:
        print("out of date (run python scripts/gen_reference.py): " + ", ".join(str(p.relative_to(REPO)) for p in stale))
        return 1
    print(("rewrote: " + ", ".join(str(p.relative_to(REPO)) for p in stale)) if stale else "up to date")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main(sys.argv[1:]))
