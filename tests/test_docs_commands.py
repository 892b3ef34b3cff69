"""Every ``ragnb …`` command written in README.md, CONTRIBUTING.md and docs/ — in code blocks and inline code —
names a command that exists and only options it has, as the real command tree (``ragnb.cli.main.build_cli``)
knows them: a renamed or removed flag fails here, not in a reader's terminal."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO
from test_reference_docs import _markdown_files

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`")
# What may stand before the command on its line: a shell prompt, a YAML list item or `run:` key, variables.
_LEAD = re.compile(r"^\s*(?:\$ |- )?(?:run: )?(?:[A-Z_][A-Z0-9_]*=\S* )*(?:\S*/)?(?:python -m )?ragnb(?=\s)")
_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "<"}  # the command ends at a pipe, a list or a redirection
_PLACEHOLDER = re.compile(r"^(…|\.\.\.|[A-Z][A-Z_]*|<[^>]*>)$")  # `ragnb dataset …`, `ragnb metrics COMMAND`


def commands(text: str) -> list[str]:
    """The ``ragnb`` command lines of a Markdown text (a line continued by ``\\`` is joined), each from ``ragnb``."""
    lines = [line for block in _FENCE.findall(text) for line in block.replace("\\\n", " ").splitlines()]
    lines += _INLINE.findall(_FENCE.sub("", text))
    return [line[m.end() - len("ragnb"):] for line in lines if (m := _LEAD.match(line))]


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote in an inline fragment: its words as written
        words = line.split()
    out = []
    for word in words[1:]:  # words[0] is ragnb
        if word in _STOP or word.startswith(">"):
            break
        out.append(word.strip("[]"))  # `[--model NAME]`: an optional part of a usage line
    return out


def _options(command, ctx) -> set[str]:
    options = [p for p in command.get_params(ctx) if p.param_type_name == "option"]
    names = {n for p in options for n in (*p.opts, *p.secondary_opts)}
    return names | set(ctx.help_option_names)


def problems(line: str, group) -> tuple[list[str], int]:
    """What is wrong with one command line (unknown command or option, each with what exists), and how many
    options were checked."""
    # Duck-typed, as scripts/gen_reference.py: typer's commands are classes of typer's own copy of click.
    command = group
    ctx = group.context_class(group, info_name="ragnb")
    path, words, checked = "ragnb", _words(line), 0
    while words and hasattr(command, "list_commands") and not words[0].startswith("-"):
        word = words.pop(0)
        if _PLACEHOLDER.match(word):
            return [], checked
        sub = command.get_command(ctx, word)
        if sub is None:
            return [f"`{path} {word}`: no such command; {path} has {sorted(command.list_commands(ctx))}"], checked
        command, path = sub, f"{path} {word}"
        ctx = command.context_class(command, info_name=word, parent=ctx)
    known, found = _options(command, ctx), []
    for word in words:
        if word == "--":
            break
        if re.match(r"^--?[A-Za-z]", word):
            checked += 1
            name = word.split("=", 1)[0]
            if name not in known:
                found.append(f"`{path}` has no option {name}; it has {sorted(known)}")
    return found, checked


@pytest.fixture(scope="module")
def cli():
    from ragnb.cli.main import build_cli

    return build_cli()


def test_every_command_in_the_docs_exists_with_its_options(cli):
    wrong, lines, checked = [], 0, 0
    for path in _markdown_files():
        for line in commands(path.read_text(encoding="utf-8")):
            found, n = problems(line, cli)
            lines, checked = lines + 1, checked + n
            wrong += [f"{path.relative_to(REPO)}: {line.strip()}\n    {p}" for p in found]
    assert not wrong, "commands in the docs that the CLI does not have:\n" + "\n".join(wrong)
    # the extraction itself still finds the docs' commands (≈ 230 lines, ≈ 200 options today)
    assert lines > 150 and checked > 150, (lines, checked)


@pytest.mark.parametrize("text, expected", [
    ("```bash\nragnb load chunks wiki/ --chunk-size 200 --overlap 40\n```", []),
    ("```bash\nragnb load chunks wiki/ --chunk-words 200 --overlap 40\n```", ["has no option --chunk-words"]),
    ("```bash\nragnb load chunks wiki/ \\\n  --chunk-words 200\n```", ["has no option --chunk-words"]),
    ("Run `ragnb lod chunks DIR` first.", ["`ragnb lod`: no such command"]),
    ("Run `ragnb db indexes` first.", ["`ragnb db indexes`: no such command"]),
    ("```yaml\n- run: ragnb compare base head --fail-if-wrose x > out.md\n```", ["has no option --fail-if-wrose"]),
    ("`ragnb compare base head --fail-if-worse 'a,b' > comparison.md --nope`", []),  # after > : not the command's
    ("`ragnb dataset …` and `ragnb metrics COMMAND` and `ragnb db index [--model NAME] [--m 16]`", []),
    ("`ragnb run … --fail-on attention` and `ragnb run --nope`", ["has no option --nope"]),
    ("`ragnb.metrics.registry` and `import ragnb` and expose_as: ragnb comparison", []),
    ("```\n$ RAGNB_HOME=/tmp ragnb load questions q.jsonl --map question=Q --help\n```", []),
])
def test_the_check_finds_wrong_commands_and_options(cli, text, expected):
    found = [p for line in commands(text) for p in problems(line, cli)[0]]
    assert len(found) == len(expected), found
    for f, e in zip(found, expected):
        assert e in f, f
