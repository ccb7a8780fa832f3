"""Acceptance criteria (D3) and Skills & Hooks commands (B6) read from a specification.

Acceptance criteria are the checkbox list items (`- [ ]` / `- [x]`, any depth, also in
subsections) of the `Acceptance Criteria` section. An item may start with an id in brackets ending
in a digit — `[AUTH-01]`, `[LLM-14]`, `[R2]` — which is kept apart from the text.

Skills & Hooks entries are lines `name: command` in the `Skills & Hooks` section (list items or
plain lines, also inside a fenced block), `name` being lower-case (`verify-tests`):
- `verify-tests: pytest -q` — the command is the rest of the line;
- `- verify-tests: \\`python -m pytest -q\\` — runs the suite` — a backticked command wins, the
  remaining text is its description;
- `- **verify-sdk**: Lightweight call that checks …` — a bold name with prose and no backticks is
  a description only (`command` is None): Lopen never runs prose.
"""

from __future__ import annotations

import re

import msgspec

from lopen.documents.sections import Document, Section, block_tokens

ACCEPTANCE_CRITERIA = "Acceptance Criteria"
SKILLS_AND_HOOKS = "Skills & Hooks"

_CHECKBOX = re.compile(r"^\[([ xX])\](?:[ \t]+|$)(.*)$", re.DOTALL)
_CRITERION_ID = re.compile(r"^\[([A-Za-z][\w.-]*\d)\][ \t]*(.*)$", re.DOTALL)
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_BOLD_NAME = re.compile(r"^(\*\*|__)(.+?)\1")
_ENTRY = re.compile(r"^`?([a-z0-9][a-z0-9_.-]*)`?\s*:\s*(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


class Criterion(msgspec.Struct, frozen=True):
    """One acceptance criterion; ``line`` is its 1-based line in the file."""

    id: str | None
    text: str
    checked: bool
    line: int


class SkillHook(msgspec.Struct, frozen=True):
    """A named Skills & Hooks entry; ``command`` is None when it is only described."""

    name: str
    command: str | None
    description: str
    line: int


def criteria_in(doc: Document, section: Section) -> list[Criterion]:
    """The checkbox items anywhere in ``section`` (with its subsections)."""
    items: list[Criterion] = []
    tokens = block_tokens(doc.text(section))
    for i, token in enumerate(tokens):
        if token.type != "list_item_open" or i + 2 >= len(tokens):
            continue
        inline = tokens[i + 2]
        if tokens[i + 1].type != "paragraph_open" or inline.type != "inline":
            continue
        box = _CHECKBOX.match(inline.content)
        if box is None:
            continue
        text = " ".join(box.group(2).split())
        ident = _CRITERION_ID.match(text)
        line = section.line + (token.map[0] if token.map else 0)
        items.append(
            Criterion(
                id=ident.group(1) if ident else None,
                text=ident.group(2).strip() if ident else text,
                checked=box.group(1) != " ",
                line=line,
            )
        )
    return items


def acceptance_criteria(doc: Document) -> list[Criterion]:
    """The items of the spec's Acceptance Criteria section (empty when it has none)."""
    section = doc.named(ACCEPTANCE_CRITERIA)
    return criteria_in(doc, section) if section else []


def skills_and_hooks(doc: Document) -> list[SkillHook]:
    """The named entries of the spec's Skills & Hooks section (see the module docstring)."""
    section = doc.named(SKILLS_AND_HOOKS)
    if section is None:
        return []
    entries: list[SkillHook] = []
    body_line = section.line + doc.source.count("\n", section.start, section.body)
    for offset, raw in enumerate(doc.source[section.body : section.end].split("\n")):
        line = _LIST_MARKER.sub("", raw, count=1).strip()
        bold = _BOLD_NAME.match(line)
        if bold:
            line = bold.group(2) + line[bold.end() :]
        entry = _ENTRY.match(line)
        if entry is None:
            continue
        name, rest = entry.group(1), entry.group(2).strip()
        span = _CODE_SPAN.search(rest)
        if span:
            command: str | None = span.group(2).strip()
            description = (rest[: span.start()] + rest[span.end() :]).strip(" \t—–-:;,.")
        elif bold or not rest:
            command, description = None, rest
        else:
            command, description = rest, ""
        entries.append(SkillHook(name=name, command=command, description=description, line=body_line + offset))
    return entries
