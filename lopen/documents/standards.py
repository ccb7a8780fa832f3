"""The project's coding standards: what every task is built to and every change is judged against.

Looked for in the user's checkout (where the model cannot write, so a model cannot lower the bar it is
judged by), the first found wins:

1. ``docs/requirements/<module>/STANDARDS.md`` — the module's own;
2. ``docs/requirements/STANDARDS.md`` — the project's;
3. a section of the module's spec titled "Coding Standards" (or "Standards").

Their text goes into every task prompt's rules and into the oracle's prompt, where a change that breaks
one is a finding. A longer text is cut at ``MAX_CHARS`` (and says so).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from lopen.documents.errors import DocumentError
from lopen.documents.paths import spec_path

MAX_CHARS = 8_000
SECTION_NAMES = ("Coding Standards", "Standards")


class Standards(msgspec.Struct, frozen=True):
    """Where the standards come from (a path, or ``<spec>#<section>``) and their text."""

    source: str
    text: str


def coding_standards(root: Path, module: str) -> Standards | None:
    """The module's coding standards (see the module docstring), or None when the project has none."""
    for path in (
        root / "docs" / "requirements" / module / "STANDARDS.md",
        root / "docs" / "requirements" / "STANDARDS.md",
    ):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return Standards(str(path.relative_to(root)), _cut(text))
    return _from_spec(root, module)


def _from_spec(root: Path, module: str) -> Standards | None:
    from lopen.documents import load_spec

    try:
        _, doc = load_spec(root, module)
    except (DocumentError, OSError):
        return None
    for name in SECTION_NAMES:
        section = doc.named(name)
        if section is not None:
            text = doc.text(section).partition("\n")[2].strip()  # without its heading, with its subsections
            if text:
                return Standards(f"{spec_path(root, module).relative_to(root)}#{section.title}", _cut(text))
    return None


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + "\n… (cut: the standards are longer)"


def render(standards: Standards | None) -> str:
    """The standards as a prompt section's body (with their source), or "" without any."""
    return "" if standards is None else f"(from {standards.source})\n{standards.text}"
