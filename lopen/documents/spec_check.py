"""The specification pattern check (D2): what a spec Lopen can work from must contain.

The pattern: front matter with `name` and `description`; one H1 title as the first heading; the
top-level (`##`) sections Overview, Acceptance Criteria (a checkbox list), Dependencies,
Skills & Hooks, Notes and References. Each gap says what is missing and what is expected.
Errors make the check fail; warnings are reported but do not.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Literal

import msgspec

from lopen.documents.criteria import ACCEPTANCE_CRITERIA, SKILLS_AND_HOOKS, criteria_in, skills_and_hooks
from lopen.documents.paths import list_modules
from lopen.documents.section_cache import SectionCache, load_spec
from lopen.documents.sections import Document, Section

PLACEHOLDER = re.compile(r"\[TODO:[^\]]*\]")
"""What `lopen init` leaves for the author to fill in: ``[TODO: what the module does]``."""

FRONT_MATTER_EXAMPLE = "a '---' block at the top with 'name: <module>' and 'description: <one line>' lines"

# (section, what is expected in it) in the order a spec usually has them.
REQUIRED_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Overview", "a few paragraphs on what the module does, for whom, and what is out of scope"),
    (ACCEPTANCE_CRITERIA, "a checkbox list, one verifiable criterion per item: `- [ ] [AUTH-01] …`"),
    ("Dependencies", "the modules, libraries and services it needs (write 'None' when there are none)"),
    (SKILLS_AND_HOOKS, "named commands Lopen runs as evidence, e.g. '- verify-tests: `pytest -q`'"),
    ("Notes", "constraints, decisions and open questions"),
    ("References", "links to related specifications, research documents and outside sources"),
)


class Gap(msgspec.Struct, frozen=True):
    """One way the spec departs from the pattern."""

    part: str
    problem: str
    expected: str
    severity: Literal["error", "warning"] = "error"
    line: int | None = None

    def render(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"{self.severity}: {self.part}{where}: {self.problem}; expected {self.expected}"


class SpecCheck(msgspec.Struct, frozen=True):
    gaps: list[Gap]

    @property
    def ok(self) -> bool:
        return not any(g.severity == "error" for g in self.gaps)

    def summary(self) -> str:
        """One line: `ok`, or the count of errors and warnings with the parts they concern."""
        if not self.gaps:
            return "ok"
        errors = [g.part for g in self.gaps if g.severity == "error"]
        warnings = [g.part for g in self.gaps if g.severity == "warning"]
        parts = []
        if errors:
            parts.append(f"{len(errors)} error{'s' * (len(errors) != 1)} ({', '.join(dict.fromkeys(errors))})")
        if warnings:
            parts.append(f"{len(warnings)} warning{'s' * (len(warnings) != 1)}")
        return ("ok, " if not errors else "") + "; ".join(parts)


def check_spec(doc: Document, module: str | None = None) -> SpecCheck:
    """Every gap between ``doc`` and the specification pattern."""
    gaps = _front_matter_gaps(doc, module) + _title_gaps(doc)
    for name, expected in REQUIRED_SECTIONS:
        section = doc.named(name, top_level_only=True)
        if section is None:
            nested = doc.named(name)
            if nested is not None:
                gaps.append(
                    Gap(
                        name,
                        f"found only as the nested section {nested.key!r}",
                        f"a top-level '## {name}' section: {expected}",
                        line=nested.line,
                    )
                )
            else:
                gaps.append(Gap(name, "section missing", f"a '## {name}' section: {expected}"))
            continue
        if name == ACCEPTANCE_CRITERIA:
            gaps += _criteria_gaps(doc, section, expected)
        elif not doc.source[section.body : section.end].strip():
            gaps.append(Gap(name, "section is empty", expected, "warning", section.line))
        elif name == SKILLS_AND_HOOKS:
            gaps += _skills_gaps(doc, section, expected)
    return SpecCheck(gaps=gaps + placeholder_gaps(doc))


def placeholder_gaps(doc: Document) -> list[Gap]:
    """One error per ``[TODO: …]`` placeholder left in the text (outside code blocks)."""
    gaps: list[Gap] = []
    fence = ""
    for number, line in enumerate(doc.source.splitlines(), start=1):
        stripped = line.lstrip()
        marker = stripped[:3]
        if marker in ("```", "~~~"):
            fence = "" if fence and marker == fence else (fence or marker)
            continue
        if fence:
            continue
        for found in PLACEHOLDER.finditer(line):
            owner = [s for s in doc.sections if s.line <= number]
            part = owner[-1].key if owner and doc.sections.index(owner[-1]) != doc.title_index else "front matter"
            if owner and doc.sections.index(owner[-1]) == doc.title_index:
                part = "H1"
            gaps.append(Gap(part, f"placeholder left: {found.group(0)}", "your own text in its place", line=number))
    return gaps


def _front_matter_gaps(doc: Document, module: str | None) -> list[Gap]:
    fm = doc.front_matter
    gaps = [Gap("front matter", p, "front matter of `key: value` lines", "warning") for p in doc.problems]
    if fm is None:
        return [*gaps, Gap("front matter", "no front matter at the top of the file", FRONT_MATTER_EXAMPLE, line=1)]
    for key in ("name", "description"):
        if not fm.fields.get(key):
            gaps.append(Gap("front matter", f"no '{key}'", f"a '{key}:' line in the front matter", line=1))
    if module and fm.name and fm.name != module:
        gaps.append(
            Gap(
                "front matter",
                f"name {fm.name!r} differs from the module folder {module!r}",
                f"name: {module}",
                "warning",
                1,
            )
        )
    return gaps


def _title_gaps(doc: Document) -> list[Gap]:
    if doc.title is not None:
        return []
    h1s = [s for s in doc.sections if s.level == 1]
    expected = "exactly one '# <Module> Specification' title as the first heading"
    if not h1s:
        return [Gap("H1", "no H1 title", expected)]
    if len(h1s) > 1:
        lines = ", ".join(str(s.line) for s in h1s)
        return [
            Gap("H1", f"{len(h1s)} H1 headings (lines {lines})", expected + "; use '##' for sections", line=h1s[1].line)
        ]
    return [Gap("H1", f"the H1 {h1s[0].title!r} is not the first heading", expected, line=h1s[0].line)]


def _criteria_gaps(doc: Document, section: Section, expected: str) -> list[Gap]:
    items = criteria_in(doc, section)
    if not items:
        return [Gap(ACCEPTANCE_CRITERIA, "no checkbox items", expected, line=section.line)]
    repeated = [i for i, n in Counter(c.id for c in items if c.id).items() if n > 1]
    return [
        Gap(
            ACCEPTANCE_CRITERIA,
            f"id [{ident}] is used more than once",
            "a unique id per criterion",
            line=next(c.line for c in items if c.id == ident),
        )
        for ident in repeated
    ]


def _skills_gaps(doc: Document, section: Section, expected: str) -> list[Gap]:
    entries = skills_and_hooks(doc)
    if not entries:
        return [Gap(SKILLS_AND_HOOKS, "no `name: command` entries", expected, "warning", section.line)]
    if not any(e.command for e in entries):
        return [
            Gap(
                SKILLS_AND_HOOKS,
                "entries describe skills but give no command Lopen can run",
                "at least one command in backticks, e.g. '- verify-tests: `pytest -q`'",
                "warning",
                section.line,
            )
        ]
    return []


def check_module(root: Path, module: str, cache: SectionCache | None = None) -> SpecCheck:
    """The pattern check of ``module``'s specification (DocumentError when it has none)."""
    return check_spec(load_spec(root, module, cache)[1], module)


def check_modules(root: Path) -> dict[str, SpecCheck]:
    """Every module with a specification → its check, by module name."""
    cache = SectionCache(root)
    return {module: check_module(root, module, cache) for module in list_modules(root)}
