#!/usr/bin/env python3
"""Point the code's citations of the source documents ("seed 000 §3.2", "(seed 004)", "seed-002",
"seed 001's …", "the seed's …") to where the repository states the definitions: docs/metrics.md (metrics),
or README (datasets, tables, run records).

Only comments and docstrings (string statements) are rewritten, in ``ragnb/**/*.py`` and in the notebooks'
``.ipynb`` twins (markdown cells and code comments), so that each ``ragnb/notebooks/NAME.py`` stays identical
to its ``NAME.ipynb``. String literals that reach users (error messages, report notes) are left alone and
listed, as are citations the rules below do not recognise.

    python scripts/cite_metrics_doc.py            # dry run: print the diff and the warnings
    python scripts/cite_metrics_doc.py --write    # rewrite the files in place
    python scripts/cite_metrics_doc.py --write ragnb/metrics/ux.py   # only these files
    python scripts/cite_metrics_doc.py tests/*.py                    # the tests cite the documents too

Standard library only. Review the diff: the rules are mechanical (a citation becomes a pointer to the
section that holds the definition; a possessive "seed 004's fallback" becomes "the fallback (see …)"),
and a few long lines may need re-wrapping by hand (they are listed).
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import re
import sys
import tokenize
from pathlib import Path

DOC = "docs/metrics.md"
MAX_LINE = 120

# ---------------------------------------------------------------------------------------------------------
# Where each source document's definitions live now.

# seed 000 (the tiered benchmark), by the first number after §.
SEED000 = {
    "2": None, "3": "Embedding geometry", "4": "Retrieval", "5": "LLM judge scores", "6": "LLM judge scores",
    "7": "Real users", "8": "Tier Judge and Judge Pipeline", "9": "Tier Judge and Judge Pipeline",
    "10": "Tier UX", "11": "Conventions", "12": "Analytics",
}
# Subsections of seed 000 that belong to another section than their chapter.
SEED000_SUB = {
    "5.5.1": "Faithfulness", "5.4": "Text and answer metrics", "5.5.3": "Text and answer metrics",
    "5.5.4": "Text and answer metrics", "6.3": "Text and answer metrics", "6.4.2": "Text and answer metrics",
    "4.4.5": "Retrieval",
}
SEED002 = "Ragas-style suite"
SEED003 = "NVIDIA-style metrics"
# seed 004: a keyword near the citation, else the file, else Faithfulness.
SEED004_WORDS = (
    (r"hallucination|utili[sz]ation", "Hallucination rate and context utilization"),
    (r"build speed|index size|chunking", "Build speed and index size"),
    (r"doc_|document|dedup|precision|recall|mrr|retriev|latency", "Retrieval"),
    (r"fallback|faithful|level|groundedness|sigmoid|overlap|embedding", "Faithfulness"),
)
SEED004_FILES = (
    (r"metrics/retrieval|tiers/tier1|tiers/real_users|notebooks/tier1|notebooks/real_users|rag/retrieval",
     "Retrieval"),
    (r"analysis/chunking|notebooks/chunking", "Build speed and index size"),
    (r"analysis/__init__", "Analytics"),
)
# seed 001 (pipeline, datasets, run records) → README, by a keyword near the citation or the file; no match →
# the citation carries no information and is removed.
SEED001_WORDS = (
    (r"dataset|phase 2|annotation|synthetic|manual|judge-pipeline|from-real|score-5|relevance label",
     "README, Datasets"),
    (r"table|column|chunk`|question_answer", "README, Using a production database"),
    (r"run.record|schema 2|benchmark_runs|record", "README, Concepts"),
    (r"phase 1|embed", "README, Command reference"),
)
SEED001_FILES = (
    (r"datasets/|cli/dataset|store/questions|tiers/judg", "README, Datasets"),
    (r"store/schema|store/loaders|config\.py", "README, Using a production database"),
    (r"runs/record|runs/runner|config\.py", "README, Concepts"),
    (r"rag/embeddings", "README, Command reference"),
)
# Sections whose source file is the best default for a citation without a section number.
FILE_DEFAULT = (
    (r"metrics/ux|tiers/ux|notebooks/ux", "Tier UX"),
    (r"metrics/embedding|tiers/tier0|notebooks/tier0", "Embedding geometry"),
    (r"metrics/retrieval|tiers/tier1|rag/retrieval|notebooks/tier1", "Retrieval"),
    (r"metrics/text", "Text and answer metrics"),
    (r"ragas", SEED002),
    (r"nvidia", SEED003),
    (r"llm/", "LLM judge scores"),
    (r"tiers/judg|notebooks/judge", "Tier Judge and Judge Pipeline"),
    (r"tiers/real_users|notebooks/real_users", "Real users"),
    (r"analysis/|notebooks/(utilization|topic|domain|vector)", "Analytics"),
    (r"runs/|reports/|notebooks/dashboard", "Conventions"),
    (r"tiers/generation|notebooks/tier[23]", "LLM judge scores"),
)

# ---------------------------------------------------------------------------------------------------------
# Patterns. SEP is a space or a line break inside a comment block / docstring.


SEP = r"(?:[ \t]+|[ \t]*\n[ \t]*(?:#[ \t]?)?[ \t]*)"
_SECT = r"§\d+(?:\.\d+)*(?:[–-]\d+(?:\.\d+)*)?"
# A name the citation gives from the source document: a quoted mode name (only after seed 001, whose modes
# README describes) or a CamelCase class name of the original implementation.
_NAME = rf"(?:(?<=001){SEP}(?:\"[^\"\n]{{1,40}}\"|``[^`\n]{{1,60}}``)|{SEP}[A-Z][a-z]+(?:[A-Z][a-z]+)+(?![\w-]))"
_CITE = (rf"[Ss]eed(?:-|{SEP})00[0-4](?:{SEP}{_SECT}(?:,{SEP}{_SECT})*)?(?:{SEP}phase{SEP}\d)?"
         rf"(?!{SEP}level\b){_NAME}?")
GROUP = re.compile(rf"(?P<group>{_CITE}(?:(?:,|;|{SEP}and){SEP}{_CITE})*)(?P<poss>'s)?")
ONE = re.compile(rf"[Ss]eed(?P<hy>-)?(?(hy)|{SEP})(?P<num>00[0-4])(?P<sects>(?:{SEP}{_SECT}(?:,{SEP}{_SECT})*)?)"
                 rf"(?P<phase>{SEP}phase{SEP}\d)?(?P<name>{_NAME})?")
NON_LATIN = re.compile(r"[\u0400-\u04FF\u3000-\u9FFF\uFF00-\uFFEF]")
_VERB = re.compile(r"[ \t]+(calls|defines|computes|names|says)\b")
# Words that end the noun phrase a possessive citation qualifies ("seed 004's fallback applies to" → after
# "fallback").
STOP_WORDS = frozenset("""applies apply is are was were be gives give uses use has have stands returns ignores
which that with as for of to in on at by from when where while than so because over into per between after
before about against under and or do does did not can cannot may must should will would need needs""".split())
MAX_PHRASE_WORDS = 4
_WORD = re.compile(r"(?:[ \t]|\n[ \t]*#?[ \t]*)*(``[^`\n]*``|\"[^\"\n]*\"|[^\s,;:()—+\"`]+)")

# One-off wordings, applied before the general rules.
SPECIAL: list[tuple[re.Pattern, str]] = [
    (re.compile(rf"Seed{SEP}004{SEP}level{SEP}(\d)"), rf"Fallback level \1 ({DOC}, Faithfulness)"),
    (re.compile(rf"Seed{SEP}002{SEP}\(camelCase\)"), "The original field names (camelCase)"),
]
# Citations without a number: the wording the original documents were referred to by.
PHRASES: list[tuple[re.Pattern, str]] = [
    (re.compile(rf"Seed table:{SEP}\"[^\"]*\""), f"The bands are strict ({DOC}, Conventions)"),
    # a quoted line of a source document (not English, not in the repository): drop the quote
    (re.compile(rf"[ \t]*Seed:{SEP}\"[^\"]*\"\.?"), ""),
    (re.compile(r"[ \t]*\(\"[^\"]*\"\)"), "<quote>"),
    (re.compile(r"(?:the )?seed §11(?:\.2)? thresholds"), f"the status thresholds ({DOC}, Conventions)"),
    (re.compile(r"[ \t]*\(seed: \d+(?:\.\d+)?\)"), ""),
    (re.compile(r"\(seed: "), "(as originally defined: "),
    (re.compile(r"\bseed default\b"), "original default"),
    (re.compile(r"\b([Bb])eyond the seed\b"), r"\1eyond the original definition"),
    (re.compile(r"\b([Tt])he seed\b(?= (?:defines|computes|is silent|says))"), r"\1he original definition"),
    (re.compile(r"\bas the seed\b(?!')"), "as originally defined"),
    (re.compile(r"\bthe seed's(?= and\b)"), "the original definition"),
    (re.compile(r"\b([Tt])he seed's\b"), r"\1he original"),
    (re.compile(r"\bSeed's\b"), "The original"),
    (re.compile(r"\bseed's\b"), "the original"),
]
# What is still worth a human look after the rules ran.
LEFTOVER = re.compile(r"[Ss]eed[ -]?00\d|\bseed §|\b[Tt]he seed\b(?! (?:r|of|value)\b)|\b[Ss]eed's|\bseeds? \d{3}")


# ---------------------------------------------------------------------------------------------------------
# Which characters of a Python source are comments or docstrings.


def _offsets(text: str) -> list[int]:
    starts, pos = [0], 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def prose_mask(text: str) -> list[bool]:
    """True for every character inside a comment or a string statement (docstring), and for whitespace.

    A string statement is a STRING token that is a whole logical line (module/class/function docstrings and
    attribute docstrings). Whitespace is allowed so that a citation may continue on the next comment line;
    code characters are never whitespace, so a match cannot run into code.
    """
    mask = [ch in " \t\r\n" for ch in text]
    starts = _offsets(text)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return mask
    skip = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}
    significant = [t for t in tokens if t.type not in skip]
    for i, tok in enumerate(tokens):
        prose = tok.type == tokenize.COMMENT
        if tok.type == tokenize.STRING:
            k = significant.index(tok)
            before = significant[k - 1].type if k else tokenize.NEWLINE
            after = significant[k + 1].type if k + 1 < len(significant) else tokenize.ENDMARKER
            prose = before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING) and \
                after in (tokenize.NEWLINE, tokenize.ENDMARKER)
        if prose:
            a = starts[tok.start[0] - 1] + tok.start[1]
            b = starts[tok.end[0] - 1] + tok.end[1]
            for j in range(a, b):
                mask[j] = True
    return mask


def _in_prose(mask: list[bool], a: int, b: int) -> bool:
    return all(mask[a:b])


# ---------------------------------------------------------------------------------------------------------
# Mapping one citation to its pointer.


def _first(rules, text: str) -> str | None:
    for pattern, target in rules:
        if re.search(pattern, text, re.IGNORECASE):
            return target
    return None


def _nearest(rules, before: str, after: str) -> str | None:
    """The target of the keyword closest to the citation (``before`` ends at it, ``after`` starts after it)."""
    best: tuple[int, int, str] | None = None
    for order, (pattern, target) in enumerate(rules):
        for m in re.finditer(pattern, before, re.IGNORECASE):
            cand = (len(before) - m.end(), order, target)
            best = cand if best is None or cand < best else best
        for m in re.finditer(pattern, after, re.IGNORECASE):
            cand = (m.start(), order, target)
            best = cand if best is None or cand < best else best
    return best[2] if best else None


def _context(before: str, after: str, lines: int) -> tuple[str, str]:
    """The text around a citation: the rest of its own line(s) and ``lines`` lines more on each side."""
    head = before.rsplit("\n", lines + 1)
    tail = after.split("\n", lines + 1)
    return ("\n".join(head[1:]) if len(head) > lines + 1 else before), "\n".join(tail[:lines + 1])


def _by_keyword(rules, before: str, after: str) -> str | None:
    for lines in (0, 2):
        found = _nearest(rules, *_context(before, after, lines))
        if found:
            return found
    return None


def _enclosing(rules, before: str) -> str | None:
    """The target named by the function or class whose docstring holds the citation (its def within 4 lines)."""
    defs = re.findall(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", "\n".join(before.split("\n")[-5:]), re.M)
    return _first(rules, defs[-1]) if defs else None


def target_of(cite: re.Match, before: str, after: str, path: str) -> str | None:
    """The pointer for one citation: "docs/metrics.md, <Section>", "README, <Section>" or None (drop it)."""
    num = cite.group("num")
    if num == "000":
        sects = re.findall(r"§(\d+(?:\.\d+)*)", cite.group("sects") or "")
        section = None
        if re.search(r"pairwise", before[-40:], re.IGNORECASE):
            section = "LLM judge scores"
        elif sects:
            first = sects[0]
            section = next((s for sub, s in SEED000_SUB.items() if first == sub or first.startswith(sub + ".")), None)
            section = section or SEED000.get(first.split(".")[0])
        elif re.search(r"threshold|status|band", after[:40], re.IGNORECASE):
            section = "Conventions"
        elif re.search(r"anchor", after[:40], re.IGNORECASE):
            section = "LLM judge scores"
        section = section or _first(FILE_DEFAULT, path)
        return f"{DOC}, {section}" if section else None
    if num == "001":
        # only a keyword on the citation's own line counts: seed 001 is often cited next to seed 000 for
        # nothing in particular, and then it is dropped
        return _nearest(SEED001_WORDS, *_context(before, after, 0)) or _first(SEED001_FILES, path)
    if num == "002":
        judge_api = re.search(r"llm/(result|judge\.py|config|api)", path) and "ragas" not in path
        return f"{DOC}, {'LLM judge scores' if judge_api else SEED002}"
    if num == "003":
        return f"{DOC}, {SEED003}"
    section = _first(SEED004_FILES, path) or _enclosing(SEED004_WORDS, before) or \
        _by_keyword(SEED004_WORDS, before, after) or "Faithfulness"
    return f"{DOC}, {section}"


def targets_of(group: str, before: str, after: str, path: str) -> list[str]:
    out: list[str] = []
    for cite in ONE.finditer(group):
        t = target_of(cite, before, after, path)
        if t and t not in out:
            out.append(t)
    return out


def _phrase_end(text: str, prose: list[bool]) -> tuple[int, str]:
    """End of the noun phrase at the start of ``text`` (a few words of prose, up to punctuation, a verb or a
    preposition) and the character that stopped it ('' at the word cap)."""
    i, words = 0, 0
    while words < MAX_PHRASE_WORDS:
        m = _WORD.match(text, i)
        if not m or m.group(1).lower() in STOP_WORDS or not all(prose[m.start(1):m.end(1)]):
            break
        word = m.group(1)
        words += 1
        if word.endswith(".") and not word.startswith(("``", '"')):  # the sentence ends with this word
            i = m.end() - 1
            break
        i = m.end()
    stop = text[i:].lstrip(" \t")[:1]
    return i, stop if stop and stop in "(),;:.—+\n" else ""


def _sentence_start(before: str) -> bool:
    tail = before[-12:]
    return before == "" or bool(re.search(
        r"(^|\n)[ \t]*(#[ \t]*)?$|#[ \t]*$|(\"\"\"|''')[ \t]*$|[.!?][ \t]+$|\n[ \t]*(#[ \t]*)?[*-][ \t]+$", tail))


def rewrite_citations(text: str, path: str) -> str:
    """Replace every citation group (with a number) that lies in prose; right to left, so offsets hold."""
    for pattern, repl in SPECIAL:
        text = _sub_in_prose(pattern, repl, text)
    mask = prose_mask(text)
    matches = [m for m in GROUP.finditer(text) if _in_prose(mask, m.start(), m.end())]
    for m in reversed(matches):
        text = _replace_group(text, m, path)
    return text


def _clause_end(text: str) -> int:
    """End of the words at the start of ``text`` up to the next , ; : ) or line break."""
    m = re.match(r"[^,;:)\n]*", text)
    return len(m.group(0).rstrip(" \t"))


def _qualify(before: str, after: str, pointer: str, lead: str, prose: list[bool]) -> str:
    """``lead`` + the noun phrase at the start of ``after`` + " (see pointer)", merged into a parenthesis that
    follows or closes the phrase."""
    if not pointer:
        return before + lead + (after if lead else after.lstrip(" \t"))
    end, stop = _phrase_end(after, prose)
    if end == 0:  # no phrase: "Seed 000 §4.4.5 per query" → "docs/metrics.md, Retrieval, per query"
        return before + pointer + "," + after
    rest = after[end:]
    if stop == "(":
        paren = end + rest.index("(") + 1
        new_after = after[:paren] + f"see {pointer}; " + after[paren:]
    elif stop == ")":
        new_after = after[:end] + f"; see {pointer}" + rest
    else:
        new_after = after[:end] + f" (see {pointer})" + rest
    return before + lead + (new_after if lead else new_after.lstrip(" \t"))


def _drop_quote(after: str) -> str:
    """': "<a line of a source document>"' right after a citation goes with it."""
    quote = re.match(r":[ \t]*\"[^\"]*\"", after)
    return after[quote.end():] if quote and NON_LATIN.search(quote.group(0)) else after


def _replace_group(text: str, m: re.Match, path: str) -> str:
    before, after = text[:m.start()], text[m.end():]
    prose = prose_mask(text)[m.end():]
    group = m.group("group")
    pointer = "; ".join(targets_of(group, before, after, path))
    breaks = _breaks(m.group(0))
    if breaks:  # the citation ran over a line break: the break goes where the citation started
        before = before.rstrip(" \t") + breaks
    start = _sentence_start(before)
    the = "The" if group[0] == "S" and start else "the"
    first = ONE.match(group)
    name = first.group("name") if first else None
    nxt = re.match(r"(?:[ \t]|\n[ \t]*#?[ \t]*)+[\w`\"]", after)
    word_next = bool(nxt) and prose[nxt.end() - 1] and not _VERB.match(after)

    # "seed 004's fallback", "the seed-000 threshold", "seed 000 §9 metrics"
    phrase = word_next and not name and not before.endswith("(") and _phrase_end(after, prose)[0] > 0
    if m.group("poss") or phrase:
        lead = "" if re.search(r"\b[Tt]he[ \t]+$", before) else the
        return _qualify(before, after, pointer, lead, prose)

    # "(seed 004)", "(seed 002; ragas …)", "(seed 004: "<quote>")", "(seed 001 defaults; …)"
    if before.endswith("("):
        after = _drop_quote(after)
        if not pointer:
            if after.startswith(")"):  # the whole parenthesis goes, and the space before it
                return before[:-1].rstrip(" \t") + after[1:]
            return before + re.sub(r"^[;:,]?[ \t]*", "", after)
        if word_next:  # "(seed 001 defaults; …)" → "(defaults; see README, …; …)"
            end = _clause_end(after)
            return before + after[:end].lstrip(" \t") + f"; see {pointer}" + after[end:]
        return before + f"see {pointer}" + after

    if _VERB.match(after):  # "Seed 001 calls them …"
        return before + f"{the} original" + after

    if name and "," not in group and ";" not in group:  # 'Seed 001 "synthetic": …' → 'The "synthetic" mode (see …): …'
        label = name.strip(" \t\n#")
        what = f"{the} {label} mode" if label[:1] in "\"`" else f"{the} original {label}"
        return before + what + (f" (see {pointer})" if pointer else "") + after

    after = _drop_quote(after)
    if not pointer:  # nothing to point to: drop the citation and a separator after it
        after = re.sub(r"^[ \t]*[:,;]?[ \t]*", "", after)
        if start and after[:1].islower():
            after = after[0].upper() + after[1:]
        elif not start:
            before = before.rstrip(" \t") + (" " if after and after[0] not in ".,;:)" else "")
        return before + after
    if start:  # "Seed 000 §10.3.1: …" → "docs/metrics.md, Tier UX: …"; "# seed 000 §10.3.1" → "# see …"
        if re.match(r"[:,]", after):
            return before + pointer + after
        if word_next:  # "Seed 000 §4.4.5 per query:" → "docs/metrics.md, Retrieval, per query:"
            return before + pointer + "," + after
        return before + ("See " if the == "The" else "see ") + pointer + after
    if re.search(r"\b(metrics|modes|definitions?|variants) of[ \t]+$", before):
        return re.sub(r"[ \t]+of[ \t]+$", "", before) + f" (see {pointer})" + after
    if re.search(r"(\b(as in|as|in|from|of|see|by)|[,;(\[])[ \t]*$", before):
        return before + pointer + after
    return before + f"the definition in {pointer}" + after


def _sub_in_prose(pattern: re.Pattern, repl: str, text: str) -> str:
    """``pattern.sub(repl, text)`` for the matches that lie in comments and docstrings."""
    mask = prose_mask(text)
    out, last = [], 0
    for m in pattern.finditer(text):
        if not _in_prose(mask, m.start(), m.end()):
            continue
        if repl == "<quote>":  # a parenthesised quote of a source document, right after a reference to it
            near = text[max(0, m.start() - 80):m.start()]
            if not NON_LATIN.search(m.group(0)) or not re.search(r"seed|original", near, re.IGNORECASE):
                continue
            new = ""
        else:
            new = m.expand(repl)
        head = text[last:m.start()]
        breaks = _breaks(m.group(0))
        if breaks:
            head, new = head.rstrip(" \t") + breaks, new.lstrip(" \t")
        out.append(head + new)
        last = m.end()
    return "".join(out) + text[last:]


def _breaks(matched: str) -> str:
    """The line breaks (with their comment marker / indentation) inside a match, to keep the line count."""
    return "".join(re.findall(r"\n[ \t]*(?:#[ \t]?)?", matched))


def rewrite_phrases(text: str) -> str:
    for pattern, repl in PHRASES:
        text = _sub_in_prose(pattern, repl, text)
    return text


def tidy(text: str) -> str:
    """Merge a pointer with a parenthesis right after it ("(see X) (Y …" → "(see X; Y …"), and keep only the
    last of the same pointer repeated on one line ("Tier Judge (see X) and Tier Judge Pipeline (see X)")."""
    mask = prose_mask(text)
    pat = re.compile(rf"\((see )?((?:{re.escape(DOC)}|README), [^()\n]*)\)[ \t]+\(")
    for m in reversed([m for m in pat.finditer(text) if _in_prose(mask, m.start(), m.end())]):
        text = text[:m.start()] + f"(see {m.group(2)}; " + text[m.end():]
    mask = prose_mask(text)
    pat = re.compile(rf" \(see ((?:{re.escape(DOC)}|README), [^()\n]*)\)")
    drop = []
    for line_start, line in zip(_offsets(text), text.splitlines(keepends=True)):
        found = [m for m in pat.finditer(line) if _in_prose(mask, line_start + m.start(), line_start + m.end())]
        drop += [(line_start + m.start(), line_start + m.end()) for k, m in enumerate(found)
                 if any(later.group(1) == m.group(1) for later in found[k + 1:])]
    for a, b in reversed(drop):
        text = text[:a] + text[b:]
    return text


_TARGET = rf"(?:{re.escape(DOC)}|README), [^()\n]*"
_POINTER = re.compile(rf"[ \t]*\(see {_TARGET}\)|; see {_TARGET}(?=\))")
# A next line that starts a list item, a heading ("Inputs:") or a ruler ("# -----") does not continue the paragraph.
_BULLET = re.compile(r"[ \t]*(?:[*-] |\d+\. |[A-Z][\w ]{0,30}:$|[^\w`\"'(\[{:])")


def _cut(body: str, lo: int) -> int:
    """The last space at which ``body`` can break within MAX_LINE, outside a pointer ("see docs/metrics.md, X")
    when possible; -1 if none."""
    inside = set()
    for m in re.finditer(rf"(?:see )?(?:{re.escape(DOC)}|README), [^()\n;:]*", body):
        inside.update(range(m.start() + 1, m.end()))
    spaces = [i for i in range(lo + 1, min(len(body), MAX_LINE + 1)) if body[i] == " "]
    outside = [i for i in spaces if i not in inside]
    return (outside or spaces or [-1])[-1]


def wrap_long(old: str, new: str) -> str:
    """Re-wrap the rewritten comment and docstring lines that grew past MAX_LINE (the rules keep the line count,
    so line i of ``new`` is line i of ``old``): the overflow flows into the next line of the same paragraph
    (same comment marker or indentation, not a list item), or onto a new line. A trailing comment after code
    (a notebook parameter's help, say) cannot wrap: it loses the added pointer instead. Lines that were long
    before are left alone."""
    old_lines = old.splitlines(keepends=True)
    lines = new.splitlines(keepends=True)
    if len(old_lines) != len(lines):
        return new
    mask = prose_mask(new)
    starts = _offsets(new)
    kinds = []  # per line: None (code / unchanged), or the prefix its prose continues with
    for i, line in enumerate(lines):
        body = line.rstrip("\n")
        indent = len(body) - len(body.lstrip())
        if indent == len(body) or not mask[starts[i] + indent]:
            kinds.append(None)
            continue
        comment = re.match(r"[ \t]*#[ \t]*", body)
        kinds.append(comment.group(0) if comment else body[:indent])
    out: list[str] = []
    carry = ""
    for i, (was, line) in enumerate(zip(old_lines, lines)):
        body, end = line.rstrip("\n"), line[len(line.rstrip("\n")):]
        prefix = kinds[i]
        if carry:
            body = prefix + carry + " " + body[len(prefix):].lstrip()
            carry = ""
        elif line == was or len(body) <= MAX_LINE:
            out.append(line)
            continue
        if prefix is None:  # code with a trailing comment
            code, hash_, comment = body.partition("#")
            if hash_ and len(body) > MAX_LINE:
                body = code + hash_ + _POINTER.sub("", comment)
            out.append(body + end)
            continue
        nxt = lines[i + 1].rstrip("\n") if i + 1 < len(lines) else ""
        flows = (i + 1 < len(lines) and kinds[i + 1] == prefix and nxt[len(prefix):].strip() not in ("", '"""', "'''")
                 and not _BULLET.match(nxt[len(prefix):]) and not body.rstrip().endswith(('"""', "'''")))
        while len(body) > MAX_LINE:
            cut = _cut(body, len(prefix))
            if cut <= len(prefix):
                break
            head, rest = body[:cut].rstrip(), body[cut + 1:]
            if flows:
                out.append(head + end)
                body, carry = "", rest
                break
            out.append(head + "\n")
            body = prefix + rest
        if body:
            out.append(body + end)
    return "".join(out)


def rewrite_source(text: str, path: str) -> str:
    return tidy(wrap_long(text, tidy(rewrite_phrases(rewrite_citations(text, path)))))


# ---------------------------------------------------------------------------------------------------------
# Notebooks: the .ipynb twin gets the same rewrite as its jupytext .py.


def _markdown_as_comments(lines: list[str]) -> str:
    return "".join(("# " + ln) if ln.strip("\n") else ("#" + ln) for ln in lines)


def _comments_as_markdown(text: str) -> list[str]:
    out = []
    for ln in text.splitlines(keepends=True):
        out.append(ln[2:] if ln.startswith("# ") else ln[1:] if ln.startswith("#") else ln)
    return out


def rewrite_notebook(raw: str, path: str) -> str:
    nb = json.loads(raw)
    for cell in nb.get("cells", []):
        src = cell.get("source", [])
        lines = src if isinstance(src, list) else src.splitlines(keepends=True)
        if cell.get("cell_type") == "markdown":
            new = _comments_as_markdown(rewrite_source(_markdown_as_comments(lines), path))
        elif cell.get("cell_type") == "code":
            new = rewrite_source("".join(lines), path).splitlines(keepends=True)
        else:
            continue
        cell["source"] = new if isinstance(src, list) else "".join(new)
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


# ---------------------------------------------------------------------------------------------------------
# Driver.


def _files(root: Path, paths: list[str]) -> list[Path]:
    if paths:
        return [Path(p).resolve() for p in paths]
    found = sorted((root / "ragnb").rglob("*.py")) + sorted((root / "ragnb" / "notebooks").glob("*.ipynb"))
    return [p for p in found if "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts]


def _warnings(rel: str, new: str) -> list[str]:
    out = []
    if rel.endswith(".ipynb"):
        return out
    mask = prose_mask(new)
    starts = _offsets(new)
    for i, line in enumerate(new.splitlines(), start=1):
        if len(line) > MAX_LINE and "docs/metrics.md" in line or len(line) > MAX_LINE and "README, " in line:
            out.append(f"{rel}:{i}: line is {len(line)} characters; re-wrap it")
    for m in LEFTOVER.finditer(new):
        line = new.count("\n", 0, m.start()) + 1
        where = "comment/docstring, not rewritten" if mask[m.start()] else "string literal (user-visible), left alone"
        text = new[starts[line - 1]:starts[line]].strip()
        out.append(f"{rel}:{line}: {where}: {text[:110]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="files to rewrite (default: ragnb/**/*.py and the notebooks)")
    parser.add_argument("--write", action="store_true", help="rewrite the files (default: print the diff)")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent), help="repository root")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    changed, warnings = 0, []
    for path in _files(root, args.paths):
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        old = path.read_text(encoding="utf-8")
        new = rewrite_notebook(old, rel) if path.suffix == ".ipynb" else rewrite_source(old, rel)
        warnings += _warnings(rel, new)
        if new == old:
            continue
        changed += 1
        if args.write:
            path.write_text(new, encoding="utf-8")
        elif path.suffix != ".ipynb":  # the .ipynb diff repeats its .py twin's
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                                       f"a/{rel}", f"b/{rel}"))
    for w in warnings:
        print("warning:", w, file=sys.stderr)
    verb = "rewrote" if args.write else "would rewrite"
    print(f"{verb} {changed} file(s); {len(warnings)} warning(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
