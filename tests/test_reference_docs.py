"""The documentation stays true to the code: the generated reference tables of docs/ equal what
``scripts/gen_reference.py`` writes now, every environment variable the package reads is declared once
(ragnb/envvars.py, the table's source), every link of README.md and docs/ resolves, and the README stays a path."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from conftest import REPO

VARIABLE = re.compile(r"^(RAGNB_[A-Z0-9_]*[A-Z0-9]|NUMBA_CACHE_DIR|OPENAI_API_KEY|OPENROUTER_API_KEY|XDG_DATA_HOME)$")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_reference_is_up_to_date():
    stale = [str(path.relative_to(REPO)) for path, (old, new) in _generator().generated_files().items() if old != new]
    assert not stale, f"out of date: {stale}; run python scripts/gen_reference.py"


def test_every_notebook_has_its_generated_parameter_table():
    from ragnb.spec import TIERS

    text = (REPO / "docs" / "notebooks.md").read_text(encoding="utf-8")
    for tier in TIERS:
        assert f"<!-- BEGIN GENERATED: parameters {tier.name} -->" in text, tier.name
    # the tables are the notebooks' own declarations, the ones hand-kept tables had lost included
    for name, param in (("tier2", "llm_max_retries"), ("tier2", "llm_max_wait_s"), ("rag_metrics", "generation_model")):
        block = text.split(f"<!-- BEGIN GENERATED: parameters {name} -->", 1)[1].split("<!-- END GENERATED", 1)[0]
        assert f"| `{param}` |" in block, (name, param)


def test_a_stale_table_is_noticed():
    gen = _generator()
    text = "<!-- BEGIN GENERATED: environment -->\n| old |\n<!-- END GENERATED: environment -->\n"
    new = gen.regenerate(text, "x.md")
    assert new != text and "| `RAGNB_HOME` |" in new
    with pytest.raises(ValueError, match="unknown generated block"):
        gen.regenerate("<!-- BEGIN GENERATED: nothing -->\n<!-- END GENERATED: nothing -->", "x.md")


def _variables_read() -> set[str]:
    from ragnb.llm.settings import EMBEDDING_PREFIX, LIMIT_VARIABLES, LLM_PREFIX

    found = {prefix + name for prefix in (LLM_PREFIX, EMBEDDING_PREFIX) for name in LIMIT_VARIABLES}
    for path in (REPO / "ragnb").rglob("*.py"):
        if path.name == "envvars.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.match(node.value):
                found.add(node.value)
    return found


def test_every_environment_variable_is_declared_once():
    from ragnb.envvars import ENV_VARS

    declared = [v.name for v in ENV_VARS]
    assert len(declared) == len(set(declared))
    read = _variables_read()
    assert not read - set(declared), f"read but not declared in ragnb/envvars.py: {sorted(read - set(declared))}"
    assert not set(declared) - read, f"declared but read nowhere: {sorted(set(declared) - read)}"


def test_declared_defaults_are_the_codes():
    from ragnb import config
    from ragnb.envvars import ENV_VARS
    from ragnb.llm.settings import LLMSettings

    by_name = {v.name: v.default for v in ENV_VARS}
    s = LLMSettings()
    for field, name in (("max_concurrency", "MAX_CONCURRENCY"), ("timeout_s", "TIMEOUT_S"),
                        ("max_retries", "MAX_RETRIES"), ("max_wait_s", "MAX_WAIT_S")):
        assert by_name[f"RAGNB_LLM_{name}"] == f"`{getattr(s, field):g}`", name
        assert f"({getattr(s, field):g})" in by_name[f"RAGNB_EMBEDDING_{name}"], name
    assert by_name["RAGNB_SEARCH_MEMORY_MB"] == f"`{config.SEARCH_MEMORY_MB}`"
    assert by_name["RAGNB_EMBEDDING_MODEL"] == f"`{config.DEFAULT_EMBEDDING_MODEL}`"
    assert by_name["RAGNB_EMBEDDED_DB"] == "`ragnb`" and by_name["RAGNB_VECTOR_STORE_DB"] == "`ragnb_vectors`"


# ------------------------------------------------------------------------------------------------ links

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (links as their text, no backticks), lower case, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _markdown_files() -> list[Path]:
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_link_resolves():
    broken = []
    for path in _markdown_files():
        text = _CODE.sub("", path.read_text(encoding="utf-8"))
        for target in _LINK.findall(text):
            if re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked offline
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f"{path.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{path.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_slugs_follow_github():
    assert slug("Quickstart: the two commands") == "quickstart-the-two-commands"
    assert slug("`tier0` — embedding geometry ([definitions](docs/metrics.md#x))") == "tier0--embedding-geometry-definitions"
    assert slug("Which model the environment's options configure") == "which-model-the-environments-options-configure"


def test_readme_is_a_path_not_a_reference():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for heading in ("## Quickstart: the two commands", "## A 10-minute tour on your own data", "## Reading a report",
                    "## Gating CI on ragnb", "## From Python", "## Where to go next"):
        assert heading in text, heading
    # the two commands .ci/run and the Makefile run, exactly
    assert "make demo    # set up .venv" in text and "make test    # set up .venv with test tools" in text
    assert "\t.venv/bin/python -m pytest --durations=15\n" in (REPO / "Makefile").read_text(encoding="utf-8")
    for doc in ("commands", "notebooks", "configuration", "databases", "embeddings", "llm-judges", "datasets", "trec",
                "development", "metrics"):
        assert f"(docs/{doc}.md)" in text, doc
