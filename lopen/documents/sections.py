"""Sections of a Markdown document, found with markdown-it-py's CommonMark token stream.

A heading is an ATX (`## Title`) or setext (`Title` underlined with `===`/`---`) heading at the top
level of the document: headings inside fenced or indented code, HTML blocks, block quotes or list
items are not section headings. A section runs from its heading to the next heading of the same or
higher level; its *own* text stops at the next heading of any level.

Paths and keys: when the first heading is the document's only H1 it is the document *title* and is
left out of the paths of the other sections, so `## Components` / `### Token Service` has the path
`Components > Token Service` (its key). A key repeated in one document gets `#2`, `#3`… appended
(`Notes`, `Notes#2`), so every section has a unique key; keys are what drift hashes are stored by.

Lookup (``Document.find``), first rule that matches wins:
1. the key, exactly (case-insensitive): `Components > Token Service`, `Notes#2`;
2. a path suffix: `Token Service`'s parents may be left out, e.g. `Back-Pressure > Category 1`;
3. the heading text (case-insensitive), then `Title#n` for the n-th heading with that text;
4. the GitHub-style slug, with or without `#`: `skills--hooks`, `#token-service`;
5. the heading text with `&`/`and` and punctuation ignored: `skills and hooks`.
A leading `§` is ignored. Several matches → an error listing their keys; none → an error listing
the nearest headings and all sections.

Text is the source text (after a leading BOM is dropped and CRLF/CR line endings become LF), never
re-rendered Markdown.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from itertools import accumulate
from pathlib import Path

import msgspec
from markdown_it import MarkdownIt
from markdown_it.token import Token

from lopen.documents.errors import DocumentError
from lopen.documents.front_matter import FrontMatter, split_front_matter

_INLINE_MARKUP = re.compile(r"[*_`\[\]<>&!\\]")
_NTH = re.compile(r"^(.*?)\s*#(\d+)$")
_LISTED = 60  # how many section keys an error message lists


class Section(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One heading and the text under it. Offsets index ``Document.source``; lines are 1-based.

    ``parent`` is the index of the enclosing section in ``Document.sections`` (None at the top),
    ``depth`` the length of its path (``Document.path_of``). Encoded as an array and kept out of
    the garbage collector so that a cached document of tens of thousands of sections loads fast.
    """

    title: str
    level: int
    key: str
    parent: int | None
    depth: int
    slug: str
    line: int
    end_line: int
    start: int
    body: int
    own_end: int
    end: int


class Document(msgspec.Struct, gc=False):
    """A parsed Markdown file: its (normalized) source, front matter and sections in order."""

    path: str
    source: str
    front_matter: FrontMatter | None
    sections: list[Section]
    title_index: int | None = None
    body_start: int = 0
    problems: list[str] = []

    @property
    def title(self) -> Section | None:
        return None if self.title_index is None else self.sections[self.title_index]

    def text(self, section: Section) -> str:
        """The section with its subsections, from its heading line on."""
        return self.source[section.start : section.end]

    def own_text(self, section: Section) -> str:
        """The section's heading and its text up to the next heading of any level."""
        return self.source[section.start : section.own_end]

    def body_text(self, section: Section) -> str:
        """The section's own text without its heading line(s)."""
        return self.source[section.body : section.own_end]

    def preamble(self) -> str:
        """Text between the front matter and the first heading."""
        return self.source[self.body_start : self.sections[0].start if self.sections else len(self.source)]

    def top_level(self) -> list[Section]:
        """Sections directly under the title (or at the top when the document has no title)."""
        return [s for i, s in enumerate(self.sections) if s.depth == 1 and i != self.title_index]

    def path_of(self, section: Section) -> tuple[str, ...]:
        """The titles from the top (without the document title) down to ``section``."""
        path = [section.title]
        while section.parent is not None:
            section = self.sections[section.parent]
            path.append(section.title)
        return tuple(reversed(path))

    def named(self, name: str, *, top_level_only: bool = False) -> Section | None:
        """The first section titled ``name`` (loosely compared), preferring top-level ones."""
        wanted = normalize_title(name)
        for group in (self.top_level(), [] if top_level_only else self.sections):
            for section in group:
                if normalize_title(section.title) == wanted:
                    return section
        return None

    def descendants(self, section: Section) -> list[Section]:
        return [s for s in self.sections if section.start < s.start < section.end]

    def find(self, query: str, label: str = "the document") -> Section:
        """The section ``query`` names (see the module docstring); DocumentError when none or many."""
        cleaned = " ".join(query.strip().lstrip("§").split())
        if not cleaned:
            raise DocumentError(f"empty section name for {label}; sections are: {self._listing()}")
        hits = _lookup(self, cleaned)
        if len(hits) == 1:
            return hits[0]
        if hits:
            keys = ", ".join(repr(s.key) for s in hits)
            raise DocumentError(
                f"section {query!r} is ambiguous in {label}: it matches {keys}; ask for one of these keys"
            )
        names = list(dict.fromkeys([s.title for s in self.sections] + [s.key for s in self.sections]))
        folded = {n.casefold(): n for n in names}
        near = difflib.get_close_matches(cleaned.casefold(), list(folded), n=5, cutoff=0.5)
        hint = f"; nearest: {', '.join(repr(folded[n]) for n in near)}" if near else ""
        raise DocumentError(f"no section {query!r} in {label}{hint}; sections are: {self._listing()}")

    def _listing(self) -> str:
        keys = [s.key for s in self.sections]
        if not keys:
            return "(none: the document has no headings)"
        more = f", … and {len(keys) - _LISTED} more" if len(keys) > _LISTED else ""
        return ", ".join(keys[:_LISTED]) + more


def normalize_title(text: str) -> str:
    """A heading reduced for loose comparison: case, `&`/`and` and punctuation ignored."""
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold().replace("&", " and ")).split())


def github_slug(title: str) -> str:
    """The anchor GitHub gives a heading (without the duplicate `-1` suffix)."""
    return re.sub(r"[^\w\- ]", "", title.casefold()).replace(" ", "-")


def _collapse(slug: str) -> str:
    return re.sub(r"-+", "-", slug).strip("-")


def _lookup(doc: Document, query: str) -> list[Section]:
    sections = doc.sections
    folded = query.casefold()
    hits = [s for s in sections if s.key.casefold() == folded]
    if hits:
        return hits
    if ">" in query:
        parts = [p.strip().casefold() for p in query.split(">") if p.strip()]
        candidates = [s for s in sections if s.depth >= len(parts) and s.title.casefold() == parts[-1]]
        return [s for s in candidates if [p.casefold() for p in doc.path_of(s)[-len(parts) :]] == parts]
    hits = [s for s in sections if s.title.casefold() == folded]
    if hits:
        return hits
    nth = _NTH.match(query)
    if nth:
        same = [s for s in sections if s.title.casefold() == nth.group(1).casefold()]
        index = int(nth.group(2))
        if 1 <= index <= len(same):
            return [same[index - 1]]
    wanted = _collapse(github_slug(folded.lstrip("#").strip()))
    hits = [s for s in sections if s.slug == folded.lstrip("#") or _collapse(s.slug) == wanted]
    if hits:
        return hits
    loose = normalize_title(query)
    return [s for s in sections if normalize_title(s.title) == loose]


@cache
def _block_parser() -> MarkdownIt:
    # Block structure only: inline parsing of every paragraph is the slow part and not needed.
    return MarkdownIt("commonmark").disable(["inline", "text_join"])


def block_tokens(text: str) -> list[Token]:
    """markdown-it's block-level token stream for ``text`` (inline tokens keep their raw source)."""
    return _block_parser().parse(text)


@cache
def _inline_parser() -> MarkdownIt:
    return MarkdownIt("commonmark")


def _plain(inline_source: str) -> str:
    """Heading text without Markdown markup (emphasis, code, links, entities)."""
    if not _INLINE_MARKUP.search(inline_source):
        return " ".join(inline_source.split())
    out: list[str] = []

    def walk(tokens: list[Token]) -> None:
        for token in tokens:
            if token.type in ("text", "code_inline"):
                out.append(token.content)
            elif token.type in ("softbreak", "hardbreak"):
                out.append(" ")
            elif token.children:
                walk(token.children)

    walk(_inline_parser().parseInline(inline_source))
    return " ".join("".join(out).split())


def normalize_source(raw: str) -> str:
    """Drop a leading BOM and turn CRLF / CR line endings into LF."""
    return raw.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def read_document(path: Path) -> Document:
    """Read and parse a Markdown file (invalid UTF-8 bytes are replaced, not fatal)."""
    return parse_document(path.read_bytes().decode("utf-8", errors="replace"), str(path))


def parse_document(raw: str, origin: str = "") -> Document:
    """Parse Markdown text into front matter and sections."""
    source = normalize_source(raw)
    lines = source.split("\n")
    front_matter, problems = split_front_matter(lines)
    if front_matter is not None:
        problems = [f"front matter {p}" for p in front_matter.problems]
    first = front_matter.lines if front_matter else 0
    offsets = [0, *accumulate(len(line) + 1 for line in lines)]
    total_lines = len(lines) - (1 if source.endswith("\n") else 0)
    size = len(source)

    def offset(line: int) -> int:
        return min(offsets[line], size)

    headings: list[tuple[int, int, int, str]] = []  # (level, first line, line after, title)
    tokens = block_tokens(source[offset(first) :])
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map:
            title = _plain(tokens[i + 1].content) or "(untitled)"
            headings.append((int(token.tag[1]), token.map[0] + first, token.map[1] + first, title))

    title_index = 0 if headings and headings[0][0] == 1 and sum(h[0] == 1 for h in headings) == 1 else None
    ends = [size] * len(headings)
    end_lines = [total_lines] * len(headings)
    open_stack: list[int] = []
    for i, (level, line, _, _) in enumerate(headings):
        while open_stack and headings[open_stack[-1]][0] >= level:
            closed = open_stack.pop()
            ends[closed], end_lines[closed] = offset(line), line
        open_stack.append(i)

    sections: list[Section] = []
    ancestry: list[tuple[int, int]] = []  # (level, index) of the open sections
    seen_keys: dict[str, int] = {}
    seen_slugs: dict[str, int] = {}
    for i, (level, line, after, title) in enumerate(headings):
        if i == title_index:
            parent, depth, key = None, 1, title
        else:
            while ancestry and ancestry[-1][0] >= level:
                ancestry.pop()
            parent = ancestry[-1][1] if ancestry else None
            depth = len(ancestry) + 1
            key = " > ".join([*(headings[j][3] for _, j in ancestry), title])
            ancestry.append((level, i))
        seen_keys[key.casefold()] = count = seen_keys.get(key.casefold(), 0) + 1
        if count > 1:
            key = f"{key}#{count}"
        slug = github_slug(title)
        seen_slugs[slug] = slug_count = seen_slugs.get(slug, 0) + 1
        if slug_count > 1:
            slug = f"{slug}-{slug_count - 1}"
        next_start = offset(headings[i + 1][1]) if i + 1 < len(headings) else size
        sections.append(
            Section(
                title=title,
                level=level,
                key=key,
                parent=parent,
                depth=depth,
                slug=slug,
                line=line + 1,
                end_line=max(end_lines[i], line + 1),
                start=offset(line),
                body=min(offset(after), next_start),
                own_end=next_start,
                end=ends[i],
            )
        )
    return Document(
        path=origin,
        source=source,
        front_matter=front_matter,
        sections=sections,
        title_index=title_index,
        body_start=offset(first),
        problems=problems,
    )
