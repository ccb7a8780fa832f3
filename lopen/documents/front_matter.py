"""Front matter: a `---` block of `key: value` lines at the very top of a document.

A tiny, tolerant reader for the few fields Lopen needs (`name`, `description`). It never raises:
lines it cannot read are recorded in ``problems`` and skipped, so odd YAML is reported, not fatal.
Understood: `key: value`, quoted values, `key: |` / `key: >` block scalars, indented continuation
lines, `- item` lists (joined with ", "), comments and blank lines.
"""

from __future__ import annotations

import re

import msgspec

_KEY = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_CLOSERS = ("---", "...")


class FrontMatter(msgspec.Struct, frozen=True, gc=False):
    """The parsed block: ``fields`` holds every key read; ``lines`` is how many source lines it spans."""

    fields: dict[str, str]
    lines: int
    problems: list[str] = []

    @property
    def name(self) -> str:
        return self.fields.get("name", "")

    @property
    def description(self) -> str:
        return self.fields.get("description", "")


def split_front_matter(lines: list[str]) -> tuple[FrontMatter | None, list[str]]:
    """Read the front matter at the top of ``lines`` (no line endings).

    Returns the front matter (or None when the document has none) and problems found when a block
    looks like front matter but is not one (never closed).
    """
    if not lines or lines[0].rstrip() != "---":
        return None, []
    for end in range(1, len(lines)):
        if lines[end].rstrip() in _CLOSERS:
            fields, problems = _parse(lines[1:end])
            return FrontMatter(fields=fields, lines=end + 1, problems=problems), []
    return None, ["line 1: '---' opens front matter that is never closed by a '---' line; read as Markdown"]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        return inner.replace("''", "'") if value[0] == "'" else inner.replace('\\"', '"')
    return value


def _parse(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    fields: dict[str, str] = {}
    problems: list[str] = []
    key: str | None = None
    style = ""  # "|" or ">" for block scalars, "-" for lists, "" for plain continuation
    parts: list[str] = []

    def flush() -> None:
        if key is None:
            return
        joiner = {"|": "\n", "-": ", "}.get(style, " ")
        fields[key] = joiner.join(p for p in parts if p or style == "|").strip()

    for number, raw in enumerate(lines, start=2):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            if style == "|" and key is not None:
                parts.append("")
            continue
        list_item = stripped.startswith("- ") and style in ("", "-") and (style == "-" or not parts)
        if line[0] in " \t" or (list_item and key is not None):
            if key is None:
                problems.append(f"line {number}: indented line outside any key: {stripped!r}")
            elif list_item:
                style = "-"
                parts.append(_unquote(stripped[2:].strip()))
            else:
                parts.append(stripped)
            continue
        match = _KEY.match(line)
        if match is None:
            problems.append(f"line {number}: not a 'key: value' line: {stripped!r}")
            flush()
            key, style, parts = None, "", []
            continue
        flush()
        key, value = match.group(1), (match.group(2) or "")
        if key in fields:
            problems.append(f"line {number}: key {key!r} appears twice; the last one wins")
        style, parts = "", []
        if value[:1] in ("|", ">") and value.rstrip("+-0123456789") in ("|", ">"):
            style = value[0]
        elif value:
            if value[0] in "'\"" and (len(value) < 2 or value[-1] != value[0]):
                problems.append(f"line {number}: unterminated quote in {key!r}")
            elif value[0] in "[{&*!%@`":
                problems.append(f"line {number}: {key!r} uses YAML syntax Lopen does not read; kept as text")
            parts.append(_unquote(value))
    flush()
    return fields, problems
