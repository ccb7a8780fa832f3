"""Content hashes for drift detection (D4, W8).

A hash is xxHash's 128-bit digest (hex) of *normalized* text: LF line endings, trailing whitespace
stripped from every line, runs of blank lines collapsed to one, leading/trailing blank space
trimmed. So re-saving a spec with CRLF endings or re-wrapping blank lines is never drift.

Each section is hashed by its own text without its heading (the heading is in its key), keyed by
the section key; `(front matter)` and `(preamble)` (text before the first heading) are hashed too.
"""

from __future__ import annotations

import re

import msgspec
import xxhash

from lopen.documents.sections import Document, normalize_source, normalize_title

FRONT_MATTER_KEY = "(front matter)"
PREAMBLE_KEY = "(preamble)"
_BLANK_RUNS = re.compile(r"\n{3,}")

# Sections whose change sends the workflow back to a step (W8); the first match in a key's path wins.
REENTRY_STEPS: dict[str, int] = {"acceptance criteria": 3, "dependencies": 2}


def normalize(text: str) -> str:
    """The text as hashed: LF endings, no trailing whitespace, single blank lines, trimmed."""
    lines = [line.rstrip() for line in normalize_source(text).split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def content_hash(text: str) -> str:
    """xxh128 hex digest of the normalized text."""
    return xxhash.xxh128_hexdigest(normalize(text).encode("utf-8"))


def spec_hash(doc: Document) -> str:
    """One hash for the whole document."""
    return content_hash(doc.source)


def section_hashes(doc: Document) -> dict[str, str]:
    """Section key → hash of its own text (see the module docstring)."""
    hashes: dict[str, str] = {}
    if doc.front_matter is not None:
        hashes[FRONT_MATTER_KEY] = content_hash(doc.source[: doc.body_start])
    if doc.preamble().strip():
        hashes[PREAMBLE_KEY] = content_hash(doc.preamble())
    for section in doc.sections:
        hashes[section.key] = content_hash(doc.body_text(section))
    return hashes


def reentry_step_for(key: str) -> int | None:
    """The step a change to section ``key`` re-enters at, or None when it is only reported."""
    steps = [
        step
        for part in key.split(" > ")
        for name, step in REENTRY_STEPS.items()
        if normalize_title(re.sub(r"#\d+$", "", part)) == name
    ]
    return min(steps) if steps else None


class Drift(msgspec.Struct, frozen=True):
    """What changed between an approved hash map and the current one (keys sorted)."""

    changed: list[str]
    added: list[str]
    removed: list[str]
    reentry_step: int | None

    @property
    def drifted(self) -> bool:
        return bool(self.changed or self.added or self.removed)


def compare(approved: dict[str, str], current: dict[str, str]) -> Drift:
    """Per-section comparison; the re-entry step is the earliest one any affected section implies."""
    changed = sorted(k for k in approved.keys() & current.keys() if approved[k] != current[k])
    added = sorted(current.keys() - approved.keys())
    removed = sorted(approved.keys() - current.keys())
    steps = [s for k in (*changed, *added, *removed) if (s := reentry_step_for(k)) is not None]
    return Drift(changed=changed, added=added, removed=removed, reentry_step=min(steps) if steps else None)
