"""Research documents (W9): `docs/requirements/<module>/RESEARCH-<topic-slug>.md` and their index.

The topic is slugified (`JWT signing keys` → `jwt-signing-keys`); a topic given as its file name
(`RESEARCH-jwt-signing-keys.md`) is understood, and anything path-like is refused (see ``paths``).
Writing a document replaces any earlier one on the same topic and rewrites the index block of
`RESEARCH.md` (between the `lopen:research-index` markers; text outside them is the user's and is
kept).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import msgspec

from lopen.documents.errors import DocumentError
from lopen.documents.paths import RESEARCH_INDEX, module_dir, research_path, topic_slug
from lopen.documents.sections import parse_document

INDEX_START = "<!-- lopen:research-index start: Lopen keeps this list up to date -->"
INDEX_END = "<!-- lopen:research-index end -->"
MAX_RESEARCH_CHARS = 1_000_000
_SUMMARY_CHARS = 160


class ResearchDoc(msgspec.Struct, frozen=True):
    """One research document: topic slug, file name, title and a one-line summary."""

    slug: str
    file: str
    title: str
    summary: str


def _topic(topic: str) -> str:
    """The slug of a topic given in words, as a slug, or as its file name `RESEARCH-<slug>.md`."""
    file_name = re.fullmatch(r"RESEARCH-(.+)\.md", topic.strip(), flags=re.IGNORECASE)
    return topic_slug(file_name.group(1) if file_name else topic)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _describe(slug: str, text: str) -> ResearchDoc:
    doc = parse_document(text)
    heading = doc.title or (doc.sections[0] if doc.sections else None)
    summary = doc.front_matter.description if doc.front_matter else ""
    if not summary:
        start = heading.body if heading else doc.body_start
        for line in doc.source[start:].split("\n"):
            line = line.strip()
            if line and not line.startswith(("#", "```", "~~~", "|", "<", "---")):
                summary = line
                break
    if len(summary) > _SUMMARY_CHARS:
        summary = summary[: _SUMMARY_CHARS - 1].rstrip() + "…"
    return ResearchDoc(slug=slug, file=f"RESEARCH-{slug}.md", title=heading.title if heading else slug, summary=summary)


def list_research(root: Path, module: str) -> list[ResearchDoc]:
    """The module's research documents, sorted by topic slug."""
    folder = module_dir(root, module)
    if not folder.is_dir():
        return []
    docs = []
    for path in sorted(folder.glob("RESEARCH-*.md")):
        slug = path.name[len("RESEARCH-") : -len(".md")]
        try:
            docs.append(_describe(slug, path.read_bytes().decode("utf-8", errors="replace")))
        except OSError:
            continue
    return docs


def read_research(root: Path, module: str, topic: str) -> str:
    """The text of the research document on ``topic``; DocumentError naming the topics there are."""
    path = research_path(root, module, _topic(topic))
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        known = ", ".join(d.slug for d in list_research(root, module))
        have = f"research topics are: {known}" if known else "it has no research documents yet"
        raise DocumentError(
            f"no research on {topic!r} in module {module!r} (looked for {path.relative_to(root)}); {have}"
        ) from None


def write_research(root: Path, module: str, topic: str, content: str) -> Path:
    """Save research on ``topic`` (replacing earlier research on it) and update RESEARCH.md.

    Content without a leading `# ` title gets `# <topic>` so the index can name it.
    """
    if not content.strip():
        raise DocumentError("research content is empty; write the findings in Markdown")
    if len(content) > MAX_RESEARCH_CHARS:
        raise DocumentError(
            f"research content is {len(content)} characters; keep one document under {MAX_RESEARCH_CHARS}"
            " and split large findings into several topics"
        )
    path = research_path(root, module, _topic(topic))
    text = content.replace("\r\n", "\n").strip() + "\n"
    if parse_document(text).title is None and not text.startswith("# "):
        text = f"# {' '.join(topic.split())}\n\n{text}"
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, text)
    update_index(root, module)
    return path


def update_index(root: Path, module: str) -> Path:
    """Rewrite the research index block of the module's RESEARCH.md from the files present."""
    index = module_dir(root, module) / RESEARCH_INDEX
    entries = [
        f"- [{d.title}]({d.file}) — {d.summary}" if d.summary else f"- [{d.title}]({d.file})"
        for d in list_research(root, module)
    ]
    block = "\n".join([INDEX_START, *(entries or ["(no research documents yet)"]), INDEX_END])
    try:
        current = index.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = f"# Research: {module}\n\n{INDEX_START}\n{INDEX_END}\n"
    if INDEX_START in current and INDEX_END in current.split(INDEX_START, 1)[1]:
        before, rest = current.split(INDEX_START, 1)
        after = rest.split(INDEX_END, 1)[1]
        updated = before + block + after
    else:
        updated = current.rstrip("\n") + "\n\n" + block + "\n"
    index.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(index, updated)
    return index
