"""Context assembly (L2, L7): the document sections one invocation needs, within a token budget.

What each kind of invocation gets, by priority (0 = most important):

- ``spec`` (step 1): the spec-check gaps (or, with no spec yet, the pattern to write) 0; the title
  and front matter, Overview 1; Acceptance Criteria, Dependencies 2; other top-level sections,
  the research index 3; Notes, References 4.
- ``research`` (before step 2): References 0; Overview, the research index (notes already written)
  1; Dependencies, Notes 2; the list of other sections 3.
- ``planning`` (steps 2–5): Overview, the list of other sections 1; Acceptance Criteria,
  Dependencies, the research index (every research note by topic and title) 2; sections about
  components 3; Notes 4.
- ``task`` (step 6): the task text 0 (never cut); the acceptance criteria the task concerns 1
  (those whose ids it cites; else those naming the component or sharing enough keywords with it;
  else all), followed by the ids of the others; sections whose heading names the component,
  whole 2; research documents the task cites 3 (by file name, slug or title), then the research
  index (every research note by topic and title, without its first line) 3; passages of other
  sections — paragraphs, list items, code blocks — that name the component or share enough
  keywords with the task, the best eight 4; the list of the sections not sent 5. "Enough
  keywords" is 2 to 4 (a fifth of the task's keywords: its words of four letters or more, minus
  common ones).
- ``module-verification``: Acceptance Criteria 1; Overview 2; Skills & Hooks 3.
- ``oracle``: the task text when given 0 (never cut); Acceptance Criteria 1; sections whose
  heading names the component 2; Skills & Hooks 3.

Pieces appear in priority order (document order within one priority). Tokens are estimated as
``ceil(len(text) / 4)`` — about four characters per token for English prose and Markdown — and a
budget of 0 means no limit. Over budget, pieces are cut from the lowest priority up (the later
one first within a priority; a piece no longer than its marker is kept): the last piece cut
keeps as many leading lines as fit when a fifth of it or 1000 tokens do, and every cut piece leaves
a marker naming what was cut and the ``read_spec``/``read_research`` call that reads it.
``sections_sent`` names every piece sent (whole or truncated), ``cut`` every piece cut (wholly
or partly) in the order it was cut: spec sections by key, research by file name, and `task`,
`(title)`, `spec check`, `spec pattern`, `contents`, `research index`.

Summaries (given ``summaries``, ``lopen.documents.summaries``): once the cutting is done, each spec
section sent whole before but now cut wholly (to its marker) is, most important first, sent whole
again when the cuts after it left room for it, else sent as a summary when one fits in what the
budget has left and is shorter than the section: `==== Summary of § <key> (the section is
longer than this prompt's budget; ask with read_spec(…) for the whole) ====`. A summary is made once
per section content and cached, and made only when the budget has room for one of the length asked
for (``SUMMARY_WORDS`` words, ~160 tokens); one that cannot be made or does not fit leaves the cut as
it was, and after one that could not be made only cached ones are used. ``summarised`` names the
sections sent as summaries (not in ``cut`` nor in ``sections_sent``); a failed one stays in ``cut``
and its reason is in ``unsummarised``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import msgspec

from lopen.documents.criteria import ACCEPTANCE_CRITERIA, SKILLS_AND_HOOKS, criteria_in
from lopen.documents.errors import DocumentError
from lopen.documents.paths import REQUIREMENTS_DIR, SPEC_FILE, spec_path, validate_module
from lopen.documents.research import list_research, read_research
from lopen.documents.section_cache import SectionCache, load_spec
from lopen.documents.sections import Document, Section, block_tokens, normalize_title
from lopen.documents.spec_check import FRONT_MATTER_EXAMPLE, REQUIRED_SECTIONS, check_spec
from lopen.documents.summaries import SUMMARY_WORDS, Summaries, SummaryFailed

Kind = Literal["spec", "research", "planning", "task", "module-verification", "oracle"]
KINDS: tuple[str, ...] = ("spec", "research", "planning", "task", "module-verification", "oracle")
DEFAULT_BUDGET_TOKENS = 24_000
_PASSAGES = 8
_USEFUL_HEAD_CHARS = 4000  # a truncated piece keeps its head when this much, or a fifth of it, fits
_CONTAINERS = frozenset({"bullet_list_open", "ordered_list_open", "hr"})
_CONTENTS_LIMIT = 80
_SUMMARY_ROOM = SUMMARY_WORDS * 4 // 3  # tokens a summary may take: one is made only when they are left
_STOP_TEXT = (
    "about above after again against also because been before being below between both could does doing "
    "down during each from further have having here into itself just more most must only other over "
    "same should some such than that their them then there these they this those through under until "
    "very were what when where which while with would your implement implements task tasks make sure "
    "using used uses need needs file files code write writes"
)
_STOP_WORDS = frozenset(_STOP_TEXT.split())


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as Lopen estimates them: one per four characters, rounded up."""
    return -(-len(text) // 4)


class AssembledContext(msgspec.Struct, frozen=True):
    """The context text, what it holds and what was cut (names as in the module docstring)."""

    text: str
    sections_sent: list[str]
    tokens_estimate: int
    cut: list[str]
    summarised: list[str] = []
    unsummarised: list[str] = []  # "<section>: <why>" for each summary that could not be made


class _Piece(msgspec.Struct):
    name: str
    label: str
    body: str
    priority: int
    reread: str = ""
    protected: bool = False
    summarisable: bool = False  # a whole spec section: may be sent as a summary when cut

    def summary(self, text: str) -> str:
        return (
            f"==== Summary of § {self.name} (the section is longer than this prompt's budget; "
            f"ask with {self.reread} for the whole) ====\n{text.strip()}\n"
        )

    def render(self) -> str:
        return f"==== {self.label} ====\n{self.body.strip()}\n"

    def cut_marker(self) -> str:
        how = f"; read it with {self.reread}" if self.reread else ""
        return f"==== cut to fit the context budget: {self.name} (~{estimate_tokens(self.body)} tokens){how} ====\n"

    def truncated(self, keep_tokens: int) -> str | None:
        """The piece's head within ``keep_tokens`` plus a note on the rest; None when too little fits."""
        body = self.body.strip()
        head = body[: max(0, keep_tokens * 4)]
        head = head[: head.rfind("\n")] if "\n" in head else ""
        if (len(head) * 5 < len(body) and len(head) < _USEFUL_HEAD_CHARS) or not head.strip():
            return None
        rest = body.count("\n") - head.count("\n")
        how = f"; read it all with {self.reread}" if self.reread else ""
        return f"==== {self.label} ====\n{head}\n[… {rest} more lines cut to fit the context budget{how}]\n"


class _Builder:
    """Collects the pieces of one context from a module's spec and research."""

    def __init__(self, root: Path, module: str, doc: Document | None) -> None:
        self.root, self.module, self.doc = root, module, doc
        self.pieces: list[_Piece] = []
        self.used: set[int] = set()  # start offsets of sections sent whole or in part
        self.rel = (REQUIREMENTS_DIR / module / SPEC_FILE).as_posix()

    @property
    def spec(self) -> Document:
        if self.doc is None:
            raise DocumentError(f"module {self.module!r} has no specification at {self.rel}")
        return self.doc

    def add(self, piece: _Piece) -> None:
        self.pieces.append(piece)

    def section(self, section: Section | None, priority: int, *, whole: bool = True) -> None:
        if section is None or section.start in self.used:
            return
        doc = self.spec
        end = section.end if whole else section.own_end
        last = max(section.line, section.line + doc.source.count("\n", section.start, end) - 1)
        self.used.add(section.start)
        if whole:
            self.used.update(s.start for s in doc.descendants(section))
        self.add(
            _Piece(
                name=section.key,
                label=f"spec § {section.key} (lines {section.line}-{last})",
                body=doc.source[section.start : end],
                priority=priority,
                reread=f"read_spec({json.dumps(self.module)}, {json.dumps(section.key)})",
                summarisable=whole,
            )
        )

    def named(self, name: str, priority: int) -> None:
        self.section(self.spec.named(name), priority)

    def contents(self, priority: int) -> None:
        """The keys of the top two levels of sections not sent, so the model can ask for them."""
        doc = self.spec
        rest = [s.key for s in doc.sections if s.depth <= 2 and s.start not in self.used]
        if doc.title_index is not None:
            rest = [k for k in rest if k != doc.sections[doc.title_index].key]
        if not rest:
            return
        more = f"\n… and {len(rest) - _CONTENTS_LIMIT} more" if len(rest) > _CONTENTS_LIMIT else ""
        listing = "\n".join(f"- {k}" for k in rest[:_CONTENTS_LIMIT]) + more
        self.add(
            _Piece(
                name="contents",
                label=f"other spec sections (read one with read_spec({json.dumps(self.module)}, <section>))",
                body=listing,
                priority=priority,
            )
        )

    def research_index(self, priority: int, *, summaries: bool = True) -> None:
        """Every research note by topic (``read_research``'s id) and title, with its first line unless
        ``summaries`` is false (a task's context: the notes it cites come whole, the others by title)."""
        docs = list_research(self.root, self.module)
        if docs:
            body = "\n".join(
                f"- {d.slug}: {d.title}" + (f" — {d.summary}" if summaries and d.summary else "") for d in docs
            )
            label = f"research documents (read one with read_research({json.dumps(self.module)}, <topic>))"
            self.add(_Piece(name="research index", label=label, body=body, priority=priority))

    def task(self, task: str) -> None:
        self.add(_Piece(name="task", label="task", body=task, priority=0, protected=True))

    def component_sections(self, pattern: re.Pattern[str] | None, priority: int) -> None:
        """Sections whose heading names the component, whole."""
        if pattern is None:
            return
        for section in self._candidates():
            if pattern.search(section.title):
                self.section(section, priority)

    def criteria(self, task: str, pattern: re.Pattern[str] | None, wanted: set[str], priority: int) -> None:
        """The acceptance criteria the task concerns, and the ids of the others.

        Criteria whose ids the task cites; else those mentioning the component or sharing enough
        keywords with the task; else (nothing matches) the whole section.
        """
        section = self.spec.named(ACCEPTANCE_CRITERIA)
        if section is None:
            return
        items = criteria_in(self.spec, section)
        cited = [c for c in items if c.id and re.search(rf"(?<![\w-]){re.escape(c.id)}(?![\w-])", task, re.I)]
        chosen = cited or [
            c for c in items if (pattern and pattern.search(c.text)) or _score(c.text, wanted) >= _threshold(wanted)
        ]
        if len(chosen) in (0, len(items)):
            self.section(section, priority)
            return
        self.used.add(section.start)
        # not as checkboxes: the approved spec is never ticked, Lopen tracks progress in the plan
        lines = ["- " + (f"[{c.id}] " if c.id else "") + c.text for c in chosen]
        others = [c.id or f"line {c.line}" for c in items if c not in chosen]
        reread = f"read_spec({json.dumps(self.module)}, {json.dumps(section.key)})"
        if others:
            lines.append(f"\nOther criteria: {', '.join(others)} (read them with {reread})")
        self.add(
            _Piece(
                name=section.key,
                label=f"spec § {section.key}, the criteria this task concerns",
                body="\n".join(lines),
                priority=priority,
                reread=reread,
            )
        )

    def passages(self, pattern: re.Pattern[str] | None, wanted: set[str], priority: int) -> None:
        """Passages of other sections that mention the component or share keywords with the task.

        A passage is a paragraph, list item, code block or quote; a passage naming the component
        scores 3 on top of its shared keywords. The best ``_PASSAGES`` are sent, grouped by section.
        """
        scored: list[tuple[int, int, Section, str]] = []
        for section in self._candidates():
            own = self.spec.body_text(section)
            relevant = _score(own, wanted) >= _threshold(wanted) or (pattern and pattern.search(own))
            if section.start in self.used or not relevant:
                continue
            for line, text in _passages(self.spec, section):
                shared = _score(text, wanted)
                names = bool(pattern and pattern.search(text))
                if names or shared >= _threshold(wanted):
                    scored.append((shared + 3 * names, line, section, text))
        best = sorted(scored, key=lambda item: -item[0])[:_PASSAGES]
        by_section: dict[int, list[tuple[int, str]]] = {}
        sections: dict[int, Section] = {}
        for _, line, section, text in sorted(best, key=lambda item: item[1]):
            by_section.setdefault(section.start, []).append((line, text))
            sections[section.start] = section
        for start, chosen in by_section.items():
            section = sections[start]
            self.used.add(start)
            self.add(
                _Piece(
                    name=section.key,
                    label=f"spec § {section.key}, excerpt (line{'s' * (len(chosen) > 1)} "
                    + ", ".join(str(line) for line, _ in chosen)
                    + ")",
                    body="\n[…]\n".join(text for _, text in chosen),
                    priority=priority,
                    reread=f"read_spec({json.dumps(self.module)}, {json.dumps(section.key)})",
                )
            )

    def cited_research(self, text: str, priority: int) -> None:
        folded = text.casefold()
        for doc in list_research(self.root, self.module):
            names = (doc.file.casefold(), doc.slug, doc.slug.replace("-", " "), doc.title.casefold())
            if any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", folded) for n in names if len(n) >= 3):
                self.add(
                    _Piece(
                        name=doc.file,
                        label=f"research {doc.file}",
                        body=read_research(self.root, self.module, doc.slug),
                        priority=priority,
                        reread=f"read_research({json.dumps(self.module)}, {json.dumps(doc.slug)})",
                    )
                )

    def _candidates(self) -> list[Section]:
        """Sections a task may draw on: all but the title and the Acceptance Criteria subtree."""
        doc = self.spec
        criteria = doc.named(ACCEPTANCE_CRITERIA)
        return [
            s
            for i, s in enumerate(doc.sections)
            if i != doc.title_index and not (criteria and criteria.start <= s.start < criteria.end)
        ]


def _phrase_pattern(name: str) -> re.Pattern[str]:
    words = re.findall(r"[^\W_]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name))
    if not words:
        raise DocumentError(f"component name {name!r} has no letters or digits")
    return re.compile(r"(?<!\w)" + r"[\s_-]*".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)


def _keywords(text: str) -> set[str]:
    return {w for w in re.findall(r"[^\W\d_][\w-]{3,}", text.casefold()) if w not in _STOP_WORDS}


def _score(text: str, wanted: set[str]) -> int:
    return len(wanted & set(re.findall(r"[^\W_][\w-]*", text.casefold())))


def _threshold(wanted: set[str]) -> int:
    """Keywords a passage must share with a task: 2, rising to 4 for long tasks."""
    return max(2, min(4, -(-len(wanted) // 5)))


def _passages(doc: Document, section: Section) -> list[tuple[int, str]]:
    """The blocks of a section's own text as (1-based line, source text): paragraphs, list items
    (of top-level lists), code blocks, HTML blocks and quotes."""
    body = doc.body_text(section)
    first = section.line + doc.source.count("\n", section.start, section.body)
    lines = body.split("\n")
    out = []
    for token in block_tokens(body):
        top_block = token.level == 0 and token.nesting >= 0 and token.type not in _CONTAINERS
        if token.map and (top_block or (token.level == 1 and token.type == "list_item_open")):
            out.append((first + token.map[0], "\n".join(lines[token.map[0] : token.map[1]]).rstrip()))
    return out


def _spec_pieces(b: _Builder) -> None:
    doc = b.doc
    if doc is None:
        expected = "\n".join(f"- ## {name}: {what}" for name, what in REQUIRED_SECTIONS)
        b.add(
            _Piece(
                name="spec pattern",
                label=f"no specification yet: write {b.rel}",
                body=f"Front matter: {FRONT_MATTER_EXAMPLE}; then one '# <Module> Specification' title and\n{expected}",
                priority=0,
            )
        )
        b.research_index(3)
        return
    gaps = check_spec(doc, b.module).gaps
    if gaps:
        b.add(
            _Piece(
                name="spec check",
                label="gaps in the specification",
                body="\n".join(g.render() for g in gaps),
                priority=0,
            )
        )
    first = doc.top_level()[0].start if doc.top_level() else len(doc.source)
    if doc.source[:first].strip():
        b.add(_Piece(name="(title)", label=f"top of {b.rel}", body=doc.source[:first], priority=1))
    levels = {"overview": 1, "acceptance criteria": 2, "dependencies": 2, "notes": 4, "references": 4}
    for section in doc.top_level():
        b.section(section, levels.get(normalize_title(section.title), 3))
    b.research_index(3)


def assemble_context(
    root: Path,
    module: str,
    kind: Kind,
    component: str | None = None,
    task: str | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    cache: SectionCache | None = None,
    summaries: Summaries | None = None,
) -> AssembledContext:
    """The document context for one invocation (see the module docstring for what each kind gets);
    with ``summaries``, sections cut wholly are sent as summaries where they fit."""
    validate_module(module)
    if kind not in KINDS:
        raise DocumentError(f"unknown context kind {kind!r}; kinds are: {', '.join(KINDS)}")
    if kind == "task" and not (task and task.strip()):
        raise DocumentError("a task context needs the task text")
    cache = cache or SectionCache(root)
    missing = kind == "spec" and not spec_path(root, module).is_file()
    doc = None if missing else load_spec(root, module, cache)[1]
    b = _Builder(root, module, doc)
    if kind == "spec":
        _spec_pieces(b)
    elif kind == "research":
        b.named("References", 0)
        b.named("Overview", 1)
        b.research_index(1)
        b.named("Dependencies", 2)
        b.named("Notes", 2)
        b.contents(3)
    elif kind == "planning":
        b.named("Overview", 1)
        b.named(ACCEPTANCE_CRITERIA, 2)
        b.named("Dependencies", 2)
        b.research_index(2)
        for section in b.spec.top_level():
            if "component" in normalize_title(section.title):
                b.section(section, 3)
        b.named("Notes", 4)
        b.contents(1)
    elif kind == "task" and task:
        pattern = _phrase_pattern(component) if component else None
        wanted = _keywords(task)
        b.task(task)
        b.criteria(task, pattern, wanted, 1)
        b.component_sections(pattern, 2)
        b.cited_research(task, 3)
        b.research_index(3, summaries=False)
        b.passages(pattern, wanted, 4)
        b.contents(5)
    elif kind == "module-verification":
        b.named(ACCEPTANCE_CRITERIA, 1)
        b.named("Overview", 2)
        b.named(SKILLS_AND_HOOKS, 3)
    else:  # oracle
        if task and task.strip():
            b.task(task)
        b.named(ACCEPTANCE_CRITERIA, 1)
        b.component_sections(_phrase_pattern(component) if component else None, 2)
        b.named(SKILLS_AND_HOOKS, 3)
    return _fit(b.pieces, budget_tokens, summaries, module)


def _shrink(piece: _Piece, target: int) -> str | None:
    """The piece truncated to at most ``target`` tokens, or None when too little of it would fit."""
    keep = target - estimate_tokens(piece.label) - estimate_tokens(piece.reread) - 20
    for _ in range(3):
        head = piece.truncated(keep) if keep > 0 else None
        if head is None:
            return None
        excess = estimate_tokens(head) - target
        if excess <= 0:
            return head
        keep -= excess
    return None


def _fit(
    pieces: list[_Piece], budget_tokens: int, summaries: Summaries | None = None, module: str = ""
) -> AssembledContext:
    """Render the pieces in priority order, cutting from the lowest priority until within budget, then
    sending the wholly cut sections as summaries where they fit."""
    order = sorted(pieces, key=lambda p: p.priority)  # stable: document order within a priority
    rendered = [p.render() for p in order]
    cut: list[str] = []
    sent = [p.name for p in order]

    def total() -> int:
        return estimate_tokens("\n".join(rendered))

    if budget_tokens > 0:
        for i in reversed(range(len(order))):
            over = total() - budget_tokens
            if over <= 0:
                break
            piece = order[i]
            marker = piece.cut_marker()
            if piece.protected or estimate_tokens(marker) >= estimate_tokens(rendered[i]):
                continue  # never cut the task; cutting a piece smaller than its marker saves nothing
            cut.append(piece.name)
            head = _shrink(piece, estimate_tokens(rendered[i]) - over - 2)
            if head is not None:
                rendered[i] = head
            else:
                rendered[i] = marker
                sent.remove(piece.name)
    summarised: list[str] = []
    unsummarised: list[str] = []
    failed = False
    if summaries is not None and cut:
        for i, piece in enumerate(order):
            if not (piece.summarisable and rendered[i] == piece.cut_marker()):
                continue
            room = budget_tokens - total() + estimate_tokens(rendered[i])
            if estimate_tokens(piece.render()) <= room:  # higher-priority cuts made room for it whole
                rendered[i] = piece.render()
                cut.remove(piece.name)
                sent = [p.name for p in order if p.name in sent or p is piece]
                continue
            known = summaries.cached(piece.body)
            if known is None and (failed or room < estimate_tokens(piece.summary("")) + _SUMMARY_ROOM):
                continue  # no room for a summary of the length asked for, or the last one failed: none made
            try:
                summary = piece.summary(known or summaries.get(module, piece.name, piece.body))
            except SummaryFailed as exc:  # the next would fail the same way (the model, a budget)
                unsummarised.append(f"{piece.name}: {exc}")
                failed = True
                continue
            marker, rendered[i] = rendered[i], summary
            if total() > budget_tokens or estimate_tokens(summary) >= estimate_tokens(piece.render()):
                rendered[i] = marker
                unsummarised.append(f"{piece.name}: its summary (~{estimate_tokens(summary)} tokens) does not fit")
                continue
            summarised.append(piece.name)
            cut.remove(piece.name)
    text = "\n".join(rendered)
    return AssembledContext(
        text=text,
        sections_sent=sent,
        tokens_estimate=estimate_tokens(text),
        cut=cut,
        summarised=summarised,
        unsummarised=unsummarised,
    )
