"""The text view of a module's history (``lopen replay``, ``lopen log``, the TUI's log, the MCP
server): ``TextView`` — width-aware (values share the line's room; ``full`` cuts nothing), verdict
findings and failure causes on indented lines below their event, and ``tree`` grouping (an
invocation → its tool calls → its oracle invocations → their verdicts). Once parallel work shows up
(a claim, a component's own branch), every line that belongs to a component names it — ``[core]``
before its type — so interleaved lanes read apart. Which records are shown is
``events.selection``'s; records are rendered one at a time, so the first line appears at once.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from events import catalogue as ev
from events.catalogue import Event
from events.recorded import Recorded
from events.selection import (  # noqa: F401 (re-exported: the faces read the records and their text here)
    Bound,
    Selection,
    event_type_names,
    iso,
    json_line,
    module_records,
    parse_bound,
    select,
    session_records,
    task_records,
)
from lopen.text import lines_changed
from lopen.workflow.renderer import research_lines

_BASE_FIELDS = frozenset({"at", "session_id", "module", "project"})
_HASHES = frozenset({"tree", "parent", "base_commit", "sha", "from_sha", "to_sha", "result_hash", "base"})
_ENCODE = msgspec.json.Encoder().encode
WIDTH = 160  # when the width cannot be known (output to a pipe or a file)
MIN_VALUE = 12  # a cut value keeps at least this many characters
WIDE = 120  # from this width on, every line carries its date and the type column is aligned

# -- text --------------------------------------------------------------------------------------------


def prompt_header(event: ev.InvocationStarted) -> str:
    """The header line the invocation's prompt began with (the scripted model matches on it)."""
    return (
        f"[lopen] module={event.module} phase={event.phase or '-'} step={event.step} "
        f"component={event.component or '-'} task={event.task or '-'} kind={event.kind or '-'}"
    )


@dataclass(frozen=True)
class _Shape:
    """How one event type reads: a lead (its gist, never cut), fields it covers, and detail lines."""

    lead: Callable[[Any, _Glyphs], str] | None = None
    covers: frozenset[str] = frozenset()
    details: Callable[[Any, bool], list[str]] | None = None
    also: Callable[[Any], frozenset[str]] | None = None  # fields hidden for this event (shown as details)


@dataclass(frozen=True)
class _Glyphs:
    arrow: str
    start: str
    bar: str
    end: str
    bad: str
    good: str
    rule: str
    full: bool = False

    def sha(self, sha: str) -> str:
        return sha if self.full else sha[:12]


UNICODE = _Glyphs(arrow="→", start="┌ ", bar="│ ", end="└ ", bad="✗", good="✓", rule="─")
ASCII = _Glyphs(arrow="->", start="+ ", bar="| ", end="` ", bad="x", good="+", rule="-")


def _tail(text: str, lines: int, full: bool) -> str:
    """The last ``lines`` lines of ``text`` (all of them when ``full``), as one multi-line detail."""
    rows = text.rstrip().splitlines()
    if not full and len(rows) > lines:
        earlier = len(rows) - lines
        rows = [f"[… {earlier} earlier line{'s' * (earlier != 1)}]", *rows[-lines:]]
    return "\n".join(rows)


def _verdict_details(e: ev.OracleVerdictRecorded, full: bool) -> list[str]:
    out = [f"summary: {e.summary}"] if e.summary else []
    for c in e.criteria:
        said = "met" if c.met else "NOT MET"
        out.append(f"criterion {c.id} {said}" + (f": {c.evidence}" if c.evidence else ""))
    for f in e.findings:
        where = f" ({f.location})" if f.location else ""
        kind = f" {f.category}" if f.category else ""
        out.append(f"finding [{f.severity}]{kind}: {f.description}{where}")
    if e.raw:
        out.append(f"raw answer (not a verdict): {_tail(e.raw, 5, full)}")
    return out


def _approved_details(e: ev.SpecApproved, full: bool) -> list[str]:
    return [f"spec hash {e.spec_hash}"] + [f"§ {name}  {digest}" for name, digest in e.section_hashes.items()]


SHAPES: dict[type[Event], _Shape] = {
    ev.InvocationStarted: _Shape(
        lambda e, g: e.invocation_id + (f" (oracle for {e.parent_invocation})" if e.parent_invocation else ""),
        frozenset({"invocation_id", "parent_invocation"}),
    ),
    ev.InvocationFinished: _Shape(
        lambda e, g: f"{e.invocation_id} {e.outcome}",
        frozenset({"invocation_id", "outcome", "error_kind"}),
        lambda e, full: [f"why: {e.error_kind}"] if e.outcome != "ok" and e.error_kind else [],
    ),
    ev.ToolCalled: _Shape(
        lambda e, g: e.tool + ("" if e.success else f" {g.bad} failed"),
        frozenset({"tool", "success"}),
        lambda e, full: [] if e.success else [f"result: {_tail(e.result_summary, 8, full)}"],
        lambda e: frozenset() if e.success else frozenset({"result_summary"}),
    ),
    ev.ModelSaid: _Shape(None, frozenset({"text"}), lambda e, full: [_tail(e.text, 6, full)] if e.text.strip() else []),
    ev.ModelReasoned: _Shape(
        None, frozenset({"text"}), lambda e, full: [f"reasoning: {_tail(e.text, 6, full)}"] if e.text.strip() else []
    ),
    ev.TaskStatusChanged: _Shape(
        lambda e, g: f"{e.task_id} {e.from_state} {g.arrow} {e.to_state}",
        frozenset({"task_id", "from_state", "to_state", "reason"}),
        lambda e, full: [f"{'why' if e.to_state == 'failed' else 'reason'}: {e.reason}"] if e.reason else [],
    ),
    ev.OracleVerdictRecorded: _Shape(
        lambda e, g: f"{e.scope} {e.target} " + (f"{g.good} passed" if e.passed else f"{g.bad} REJECTED"),
        frozenset({"scope", "target", "passed", "summary", "criteria", "findings", "raw"}),
        _verdict_details,
    ),
    ev.CompletionRefused: _Shape(
        lambda e, g: f"{e.scope} {e.target} {g.bad} refused",
        frozenset({"scope", "target", "why"}),
        lambda e, full: [f"why: {e.why}"] if e.why else [],
    ),
    ev.VerificationEvidenceRecorded: _Shape(
        lambda e, g: f"{e.scope} {e.target} `{e.command}` exit {e.exit_code}",
        frozenset({"scope", "target", "command", "exit_code", "output_tail"}),
        lambda e, full: [] if e.exit_code == 0 else [f"output: {_tail(e.output_tail, 8, full)}"],
        None,
    ),
    ev.CommitRecorded: _Shape(
        lambda e, g: g.sha(e.sha) + (f" {lines_changed(e.added, e.removed, e.files)}" if e.files else ""),
        frozenset({"sha", "added", "removed", "files"}),
    ),
    ev.Reverted: _Shape(
        lambda e, g: f"{g.sha(e.from_sha)} {g.arrow} {g.sha(e.to_sha)}", frozenset({"from_sha", "to_sha"})
    ),
    ev.SpecApproved: _Shape(
        lambda e, g: f"by {e.approver or '(approver not recorded)'}" + (f" via {e.via}" if e.via else ""),
        frozenset({"approver", "spec_hash", "section_hashes", "via"}),
        _approved_details,
    ),
    ev.SessionFailed: _Shape(
        None, frozenset({"reason", "error_kind"}), lambda e, full: [f"why: {e.reason or e.error_kind or 'unknown'}"]
    ),
    ev.SessionPaused: _Shape(None, frozenset({"reason"}), lambda e, full: [f"why: {e.reason}"] if e.reason else []),
    ev.SessionAbandoned: _Shape(None, frozenset({"reason"}), lambda e, full: [f"why: {e.reason}"] if e.reason else []),
    ev.GuardrailTripped: _Shape(
        lambda e, g: f"{e.category} {e.level}",
        frozenset({"category", "level", "detail"}),
        lambda e, full: [e.detail] if e.detail else [],
    ),
    ev.StepEntered: _Shape(lambda e, g: f"step {e.step} {e.phase}", frozenset({"step", "phase"})),
    ev.ResearchCompleted: _Shape(
        lambda e, g: research_lines(e)[0],
        frozenset({"topics", "notes"}),
        lambda e, full: [*(f"topic: {t}" for t in e.topics), *(f"note {n}" for n in research_lines(e)[1:])],
    ),
    ev.ControlRequested: _Shape(lambda e, g: f"{e.action} by {e.caller or '?'}", frozenset({"action", "caller"})),
    ev.PauseRequested: _Shape(lambda e, g: f"by {e.requested_by or '?'}", frozenset({"requested_by"})),
    ev.ComponentClaimed: _Shape(
        lambda e, g: f"{e.component} by {e.worker} until {_clock(e.lease_until)}",
        frozenset({"component", "worker", "lease_until"}),
    ),
    ev.ComponentLeaseRenewed: _Shape(
        lambda e, g: f"{e.component} by {e.worker} until {_clock(e.lease_until)}",
        frozenset({"component", "worker", "lease_until"}),
    ),
    ev.ComponentReleased: _Shape(lambda e, g: f"{e.component} by {e.worker}", frozenset({"component", "worker"})),
    ev.ComponentMerged: _Shape(
        lambda e, g: f"{e.component} {g.arrow} {g.sha(e.sha)}" + (" (fast-forward)" if e.fast_forward else ""),
        frozenset({"component", "sha", "fast_forward"}),
    ),
    ev.ComponentMergeConflicted: _Shape(
        lambda e, g: f"{e.component} {g.bad} " + ("built again" if e.redo else f"resolved by {e.task_id}"),
        frozenset({"component", "redo", "task_id", "files"}),
        lambda e, full: [f"conflicts in: {', '.join(e.files)}"] if e.files else [],
    ),
}


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%SZ")


class TextView:
    """Renders records as text lines, one event per line plus its detail lines.

    ``width``: the terminal's columns (values are cut, longest first, so the line fits; detail lines
    are wrapped, never cut); ``full``: nothing is cut or abbreviated; ``tree``: events are indented
    under the invocation they belong to; ``sessions``: a heading line whenever the session changes
    (``lopen log``); ``prompts``: an invocation shows the header line its prompt began with, and one
    that failed or ended without completing its task says why it stopped, in the model's words (its
    last message).
    """

    def __init__(
        self,
        width: int = WIDTH,
        *,
        full: bool = False,
        tree: bool = False,
        ascii: bool = False,
        seq_width: int = 6,
        sessions: bool = False,
        prompts: bool = False,
    ) -> None:
        self.width = max(width, 40)
        self.full = full
        self.tree = tree
        self.glyphs = dataclasses.replace(ASCII if ascii else UNICODE, full=full)
        self.seq_width = seq_width
        self.sessions = sessions
        self.prompts = prompts
        self.dated = full or self.width >= WIDE
        self._day = ""
        self._session: str | None = None
        self._depth: dict[str, int] = {}  # open invocation → its depth in the tree
        self._tasks: dict[str, str] = {}  # open invocation → its task
        self._owners: dict[str, str] = {}  # invocation → the component it worked on
        self._parallel = False  # parallel work seen: lines name their component
        self._said: dict[str, str] = {}  # open invocation of a task → the model's last message in it
        self._done: set[str] = set()  # open invocations in which their task was completed

    def render(self, rec: Recorded) -> list[str]:
        event = rec.event
        lines: list[str] = []
        if self.sessions and event.session_id and event.session_id != self._session:
            self._session = event.session_id
            lines.append(self._rule(f"session {event.session_id}"))
        moment = datetime.fromtimestamp(event.at, UTC)
        if self.dated:
            stamp = moment.strftime("%Y-%m-%d %H:%M:%SZ")
        else:
            day = moment.strftime("%Y-%m-%d")
            if day != self._day:
                self._day = day
                lines.append(self._rule(f"{day} (UTC)"))
            stamp = moment.strftime("%H:%M:%S")
        gutter = self._gutter(event) if self.tree else ""
        name = type(event).__name__
        component = self._component(event)
        if self._parallel and component:
            name = f"[{component}] {name}"
        pad = max(0, 28 - len(gutter)) if self.dated else 0
        head = f"{stamp}  #{rec.seq:<{self.seq_width}} {gutter}{name:<{pad}} "
        shape = SHAPES.get(type(event), _Shape())
        lead = shape.lead(event, self.glyphs) if shape.lead else ""
        hidden = shape.covers | ({"invocation_id", "parent_invocation"} if self.tree else frozenset())
        if shape.also is not None:
            hidden |= shape.also(event)
        parts = [(k, self._value(v, k)) for k, v in _fields(event, hidden)]
        lines.append(self._fit(head, lead, parts))
        indent = (
            " " * (len(stamp) + 4 + self.seq_width)
            + gutter.replace(self.glyphs.start, self.glyphs.bar).replace(self.glyphs.end, "  ")
            + "    "
        )
        details = shape.details(event, self.full) if shape.details else []
        if self.prompts and isinstance(event, ev.InvocationStarted):
            details = [f"prompt: {prompt_header(event)}", *details]
        if self.prompts:
            details += self._stopped(event)
        for detail in details:
            lines += self._wrap(detail, indent)
        return lines

    def _stopped(self, event: Event) -> list[str]:
        """Under the end of a task's invocation that failed or did not complete its task: the model's last
        message (why it stopped, in its words)."""
        if isinstance(event, ev.InvocationStarted):
            if event.task and event.kind != "oracle":
                self._said[event.invocation_id] = ""
        elif isinstance(event, ev.ModelSaid):
            if event.invocation_id in self._said and not event.agent_id and event.text.strip():
                self._said[event.invocation_id] = event.text
        elif isinstance(event, ev.TaskStatusChanged):
            if event.to_state == "complete" and event.invocation_id in self._said:
                self._done.add(event.invocation_id)
        elif isinstance(event, ev.InvocationFinished) and event.invocation_id in self._said:
            said = self._said.pop(event.invocation_id)
            completed = event.invocation_id in self._done
            self._done.discard(event.invocation_id)
            if said.strip() and (event.outcome != "ok" or not completed):
                how = "it failed" if event.outcome != "ok" else "its task was not completed"
                return [f"why it stopped ({how}), in the model's words: {said.strip()}"]
        return []

    # -- components (parallel work) ------------------------------------------------------------

    def _component(self, event: Event) -> str:
        """The component an event belongs to ("" for module-wide ones)."""
        if isinstance(event, _PARALLEL) and (not isinstance(event, ev.BranchEnsured) or event.component):
            self._parallel = True
        if isinstance(event, ev.InvocationStarted):
            owner = event.component or self._owners.get(event.parent_invocation, "") or _of_task(event.task)
            if owner:
                self._owners[event.invocation_id] = owner
            return owner
        direct = getattr(event, "component", "")
        if isinstance(direct, str) and direct and not direct.startswith(":"):
            return direct
        task = getattr(event, "task_id", "")
        if task:
            return _of_task(task)
        scope, target = getattr(event, "scope", ""), getattr(event, "target", "")
        if scope == "task":
            return _of_task(target)
        if scope == "component":
            return target
        invocation = getattr(event, "invocation_id", "") or getattr(event, "parent_invocation", "")
        return self._owners.get(invocation, "") if invocation else ""

    # -- the tree ------------------------------------------------------------------------------

    def _owner(self, event: Event) -> str:
        for name in ("invocation_id", "parent_invocation"):
            ident = getattr(event, name, "")
            if ident and ident in self._depth:
                return ident
        task = getattr(event, "task_id", "") or (
            getattr(event, "target", "") if getattr(event, "scope", "") == "task" else ""
        )
        if task:
            owners = [i for i, t in self._tasks.items() if t == task]
            if owners:
                return owners[-1]
        return ""

    def _gutter(self, event: Event) -> str:
        g = self.glyphs
        if isinstance(event, ev.InvocationStarted):
            parent = event.parent_invocation if event.parent_invocation in self._depth else ""
            depth = self._depth[parent] + 1 if parent else 0
            self._depth[event.invocation_id] = depth
            self._tasks[event.invocation_id] = event.task
            return g.bar * depth + g.start
        if isinstance(event, ev.InvocationFinished) and event.invocation_id in self._depth:
            depth = self._depth.pop(event.invocation_id)
            self._tasks.pop(event.invocation_id, None)
            return g.bar * depth + g.end
        owner = self._owner(event)
        return g.bar * (self._depth[owner] + 1) if owner else ""

    # -- fitting -------------------------------------------------------------------------------

    def _value(self, value: Any, name: str = "") -> str:
        if name in _HASHES and isinstance(value, str) and not self.full:
            return value[:12]
        if isinstance(value, str):
            text = value if self.full else " ".join(value.split())
            return _ENCODE(text).decode() if (not text or any(c in text for c in ' "\n\t=')) else text
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, tuple) and value and isinstance(value[0], msgspec.Struct) and not self.full:
            names = [str(getattr(v, v.__struct_fields__[0])) for v in value]
            return f"{len(names)}[{', '.join(names)}]"
        return _ENCODE(value).decode()

    def _fit(self, head: str, lead: str, parts: list[tuple[str, str]]) -> str:
        start = head + (lead + "  " if lead and parts else lead)
        if self.full:
            return (start + " ".join(f"{k}={v}" for k, v in parts)).rstrip()
        room = self.width - len(start) - sum(len(k) + 2 for k, _ in parts) + 1
        lengths = [len(v) for _, v in parts]
        if parts and sum(lengths) > room:
            cap = _cap(lengths, room)
            parts = [(k, v if len(v) <= cap else v[: cap - 1] + "…") for k, v in parts]
        line = (start + " ".join(f"{k}={v}" for k, v in parts)).rstrip()
        return line if len(line) <= self.width else line[: self.width - 1] + "…"

    def _wrap(self, text: str, indent: str) -> list[str]:
        """A detail: its first line at ``indent``, the rest (and wrapped parts) two columns further."""
        out: list[str] = []
        for n, row in enumerate(text.splitlines() or [""]):
            first = indent if n == 0 else indent + "  "
            if self.full:
                out.append((first + row).rstrip())
                continue
            out += textwrap.wrap(
                " ".join(row.split()),
                width=max(self.width, len(indent) + 30),
                initial_indent=first,
                subsequent_indent=indent + "  ",
                break_on_hyphens=False,
            ) or [first.rstrip()]
        return out

    def _rule(self, title: str) -> str:
        text = f"{self.glyphs.rule * 2} {title} "
        return text + self.glyphs.rule * max(0, min(self.width, 80) - len(text))


_PARALLEL = (ev.ComponentClaimed, ev.ComponentMerged, ev.BranchEnsured)


def _of_task(task: str) -> str:
    return task.rsplit("/", 1)[0] if "/" in task else ""


def _cap(lengths: list[int], room: int) -> int:
    """The largest value length ``c`` (at least MIN_VALUE) such that the values cut to ``c`` fit ``room``."""
    low, high = MIN_VALUE, max(lengths)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(n, mid) for n in lengths) <= room:
            low = mid
        else:
            high = mid - 1
    return low


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults(cls: type[Event]) -> dict[str, Any]:
    found = _DEFAULTS.get(cls)
    if found is None:
        found = _DEFAULTS[cls] = {
            f.name: f.default for f in msgspec.structs.fields(cls) if f.default is not msgspec.NODEFAULT
        }
    return found


def _fields(event: Event, hidden: frozenset[str]) -> Iterator[tuple[str, Any]]:
    """The event's fields that say something (not empty, not their default) and are not shown
    otherwise, in declaration order."""
    defaults = _defaults(type(event))
    for name in event.__struct_fields__:
        if name in _BASE_FIELDS or name in hidden:
            continue
        value = getattr(event, name)
        if value is None or (value in ("", 0, (), {}) and not isinstance(value, bool)):
            continue
        if name in defaults and type(value) is type(defaults[name]) and value == defaults[name]:
            continue
        yield name, value


def essentials(event: Event) -> str:
    """The event's non-empty fields, compactly: ``step=3 phase=planning why="…"`` (nothing cut)."""
    view = TextView(full=True)
    return " ".join(f"{k}={view._value(v)}" for k, v in _fields(event, frozenset()))
