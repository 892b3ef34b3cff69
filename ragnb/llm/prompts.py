"""Prompt templates live in files, one per task and language: ``ragnb/llm/prompts/<language>/<name>.txt``.

Placeholders are written ``{{name}}`` (JSON examples in a prompt keep their single braces). Rendering fails
on a missing or an unknown placeholder, so a typo never sends a half-filled prompt.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

LANGUAGES = ("en", "ru")
PROMPT_DIR = Path(__file__).parent / "prompts"
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


def check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r}: explanations are available in {LANGUAGES}")
    return language


@lru_cache(maxsize=None)
def load_prompt(name: str, language: str = "en") -> str:
    """The template text of prompt ``name`` in ``language`` ("en" or "ru")."""
    path = PROMPT_DIR / check_language(language) / f"{name}.txt"
    if not path.is_file():
        known = sorted(p.stem for p in (PROMPT_DIR / language).glob("*.txt"))
        raise ValueError(f"no prompt {name!r} for language {language!r} (looked for {path}); known: {known}")
    return path.read_text(encoding="utf-8")


def render(template: str, **values: object) -> str:
    """Fill ``{{name}}`` placeholders; every placeholder must be given and every value must be used."""
    wanted = set(_PLACEHOLDER.findall(template))
    missing, unused = wanted - set(values), set(values) - wanted
    if missing or unused:
        raise ValueError(f"prompt placeholders: missing {sorted(missing)}, unknown {sorted(unused)}")
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)


def prompt(name: str, language: str = "en", **values: object) -> str:
    """Load and render in one step."""
    return render(load_prompt(name, language), **values)
