"""What the screen shows, as plain data: the one fold plus the activity of the followed session.

``ScreenState`` is fed two kinds of input, always on the app's thread (``lopen.tui.feed`` moves them
there):

- ``apply(recorded)``: an event of the module's history, in stream order. The plan and progress go
  through ``events.fold.ModuleState`` — the same fold the projections and the run use — and the
  token totals through the tokens projection's own handler, so the TUI can never disagree with
  ``lopen session show``. The rest (step, current invocation, model, context window) is read off
  the events of the followed session.
- ``apply_stream(event)``: a streaming delta of the invocation now running (the model's narrative,
  a tool call starting and finishing). Deltas only make the screen livelier: everything they show
  is recorded as an event too (``ToolCalled`` closes the same line a ``ToolStarted`` opened).

The activity pane's entries are ``Entry`` records with an ``id`` and a ``rev`` (bumped on every
change), so a widget redraws only the entries that changed. Each session keeps its last
``ACTIVITY_LIMIT`` entries; the store keeps everything (``/replay``).

Nothing here imports Textual: it is tested as plain data (``tests/tui/test_state.py``).
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from events import catalogue as ev
from events.projections.base import Table
from events.projections.tokens import apply_run as apply_tokens
from events.recorded import Recorded
from lopen.app.views.live import LIFECYCLE, ModuleState, TaskNode, TokenTotals
from lopen.app.views.replay import research_lines
from lopen.copilot import results as stream
from lopen.text import lines_changed, plural
from lopen.tui.contract import HeaderInfo
from lopen.workflow.steps import STEP_NAMES

ACTIVITY_LIMIT = 1000
ARGS_WIDTH = 60

PHASES = {1: "Requirements", 2: "Planning", 3: "Planning", 4: "Planning", 5: "Planning", 6: "Building", 7: "Building"}

RUN_STATE = {
    "running": "running",
    "paused": "paused",
    "completed": "complete",
    "failed": "failed",
    "abandoned": "failed",
}
"""A session's status (``events.folds.sessions``) as the top bar's run state names it."""

EntryKind = Literal["narrative", "tool", "verdict", "error", "notice", "user"]


@dataclass
class Entry:
    """One item of the activity pane.

    ``kind`` says how it is drawn: ``narrative`` (the model's text), ``tool`` (one collapsible line;
    ``status`` running | ok | failed), ``verdict`` (an oracle verdict with findings), ``error``
    (always expanded: what / why / fix), ``notice`` (a one-line fact: a step, a task's new state, a
    commit), ``user`` (a message the person queued).
    """

    id: int
    kind: EntryKind
    title: str = ""
    detail: str = ""
    status: str = ""
    level: str = "info"  # info | warn | error | ok
    tool: str = ""
    args: str = ""
    arguments: Any = None
    duration: float | None = None
    started: float = 0.0  # time.monotonic() when a live tool call began
    result: str = ""
    diff: list[DiffLine] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    rev: int = 0


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: ``sign`` is "+", "-", " " or "@" (a hunk header); numbers may be None."""

    sign: str
    old: int | None
    new: int | None
    text: str


@dataclass
class Invocation:
    id: str
    kind: str = ""
    model: str = ""
    task: str = ""
    component: str = ""
    sections: tuple[str, ...] = ()


class ScreenState:
    """The screen's data, folded from a module's events and the live deltas (see the module docstring)."""

    def __init__(
        self,
        project: str,
        module: str,
        session_id: str = "",
        info: HeaderInfo | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.project = project
        self.module = module
        self.session_id = session_id  # the followed session ("" until one is known)
        self.pinned = bool(session_id)  # `lopen watch <session>` follows that session only
        self.info = info or HeaderInfo()
        self.clock = clock
        self.fold = ModuleState(project=project, module=module)
        self.version = 0  # the stream version folded so far
        self.last_seq = 0
        self._tokens: Table[TokenTotals] = Table(TokenTotals, None)
        self._entries: dict[str, deque[Entry]] = {}
        self._said_live: set[str] = set()  # the model's messages streamed live, not yet read back from the store
        self._said_stored: set[str] = set()  # … and read from the store before their live copy arrived
        self._by_call: dict[str, Entry] = {}
        self._recorded_calls: set[str] = set()  # a delta arriving after its call's event is not drawn again
        self._ids = itertools.count(1)
        self.step = 0
        self.phase = ""
        self.invocation: Invocation | None = None
        self.models: dict[str, str] = dict(self.info.models)
        self.model = ""
        self.context_used = 0
        self.context_limit = 0
        self.protection = ""
        self.status_line = ""  # what the run said last (``say``), or the outcome
        self.run_state = "idle"  # idle | running | stopping | paused | complete | failed | stopped (RUN_STATE)
        self.changed: set[str] = set()  # "top", "activity", "context": what needs drawing

    # -- reading -------------------------------------------------------------------------------

    def entries(self, session_id: str | None = None) -> list[Entry]:
        """The activity of ``session_id`` (default: the followed session), oldest first."""
        return list(self._entries.get(self.session_id if session_id is None else session_id, ()))

    def tokens(self, scope: str = "session") -> TokenTotals:
        """Token totals of the followed session or the module (the tokens projection's own fold)."""
        ident = self.session_id if scope == "session" else self.module
        return self._tokens.get(f"{scope}:{self.project}/{ident}") or TokenTotals()

    @property
    def session_status(self) -> str:
        node = self.fold.sessions.get(self.session_id)
        return node.status if node else ""

    def current_task(self) -> TaskNode | None:
        """The task the running invocation works on, else the one in progress, else the next pending."""
        if self.invocation and self.invocation.task in self.fold.tasks:
            return self.fold.tasks[self.invocation.task]
        tasks = self.fold.ordered_tasks()
        for wanted in ("in-progress", "failed", "pending"):
            found = next((t for t in tasks if t.state == wanted), None)
            if found is not None:
                return found
        return None

    def sections_sent(self) -> tuple[str, ...]:
        return self.invocation.sections if self.invocation else ()

    # -- folding events --------------------------------------------------------------------------

    def apply_all(self, records: Iterable[Recorded]) -> None:
        for rec in records:
            self.apply(rec)

    def apply(self, rec: Recorded) -> bool:
        """Fold one event of the module's stream; False when it was already folded (a duplicate)."""
        if rec.version and rec.version <= self.version:
            return False
        event = rec.event
        self.fold.apply(event, rec.seq)
        self.fold.version = self.version = rec.version or self.version + 1
        self.last_seq = max(self.last_seq, rec.seq)
        apply_tokens(self._tokens, (rec,), _raise)  # the tokens projection's own handler (a run of one event)
        self._tokens.dirty.clear()
        self.changed.update(("top", "context"))
        self._follow(event)
        if event.session_id == self.session_id or not event.session_id:
            self._session_event(event)
        self._activity(event)
        return True

    def _follow(self, event: ev.Event) -> None:
        """Follow the newest session opened or resumed (in the history, then live), unless pinned."""
        if self.pinned or not isinstance(event, (ev.SessionStarted, ev.SessionResumed)):
            return
        if event.session_id != self.session_id:
            self.session_id = event.session_id
            self.invocation = None
            self.step, self.phase = 0, ""
            self.context_used = self.context_limit = 0
            self.changed.add("activity")

    def _session_event(self, event: ev.Event) -> None:
        if type(event) in LIFECYCLE:  # the session-status fold decides; the top bar names it its way
            self.run_state = RUN_STATE.get(self.session_status, self.run_state)
        match event:
            case ev.SessionStarted():
                self.models = {**self.models, **event.models}
                self.protection = event.protection or self.protection
            case ev.SessionPaused() | ev.SessionCompleted() | ev.SessionFailed() | ev.SessionAbandoned():
                self.invocation = None
            case ev.StepEntered():
                self.step, self.phase = event.step, event.phase
            case ev.InvocationStarted() if event.kind not in ev.HELPER_KINDS:
                self.invocation = Invocation(
                    id=event.invocation_id,
                    kind=event.kind,
                    model=event.model,
                    task=event.task,
                    component=event.component,
                    sections=tuple(event.sections_sent),
                )
                self.model = event.model or self.model
                if event.step:
                    self.step = event.step
            case ev.InvocationFinished() if self.invocation and event.invocation_id == self.invocation.id:
                self.invocation = None
                self._close_live_tools()
            case ev.ContextWindowMeasured():
                self.context_used, self.context_limit = event.used, event.limit
            case ev.ModelFellBack():
                self.model = event.to_model

    # -- the activity pane -------------------------------------------------------------------------

    def _bucket(self, session_id: str) -> deque[Entry]:
        bucket = self._entries.get(session_id)
        if bucket is None:
            bucket = self._entries[session_id] = deque(maxlen=ACTIVITY_LIMIT)
        return bucket

    def _add(self, session_id: str, entry: Entry) -> Entry:
        self._bucket(session_id).append(entry)
        if session_id == self.session_id:
            self.changed.add("activity")
        return entry

    def _touch(self, entry: Entry) -> None:
        entry.rev += 1
        self.changed.add("activity")

    def _new(self, kind: EntryKind, **fields: Any) -> Entry:
        return Entry(id=next(self._ids), kind=kind, **fields)

    def _activity(self, event: ev.Event) -> None:
        sid = event.session_id
        if not sid:
            if isinstance(event, ev.SpecApproved) and self.session_id:
                sid = self.session_id
            else:
                return
        add = lambda kind, **f: self._add(sid, self._new(kind, **f))  # noqa: E731
        match event:
            case ev.SessionStarted():
                add("notice", title=f"session {sid} started", detail=_protection(event.protection))
            case ev.SessionResumed():
                add("notice", title=f"session {sid} resumed", detail=event.reason)
            case ev.SessionPaused():
                add("notice", title="paused", detail=event.reason, level="warn")
            case ev.SessionCompleted():
                add("notice", title="session complete", detail=event.reason, level="ok")
            case ev.SessionFailed():
                add("error", title="the run failed", detail=event.reason, status=event.error_kind, level="error")
            case ev.SessionAbandoned():
                add("notice", title=f"session {event.session_id} abandoned", detail=event.reason, level="warn")
            case ev.SpecApproved():
                add("notice", title="specification approved", detail=f"by {event.approver or 'someone'}", level="ok")
            case ev.SpecDriftDetected():
                changed = ", ".join(event.changed_sections) or "sections"
                add(
                    "notice",
                    title=f"spec changed: {changed}",
                    detail=f"re-entering at step {event.reentry_step}",
                    level="warn",
                )
            case ev.StepEntered():
                add("notice", title=f"Step {event.step}/7 {STEP_NAMES.get(event.step, '')}", detail=event.why)
            case ev.ResearchCompleted():
                head, *notes = research_lines(event)
                add("notice", title=head, detail="\n".join(notes), level="ok" if notes else "info")
            case ev.InvocationStarted() if event.kind not in ev.HELPER_KINDS:
                what = event.task or event.component or event.kind
                add("notice", title=f"invocation: {what}", detail=event.model, level="info")
            case ev.InvocationFinished() if event.outcome != "ok":
                add("error", title=f"invocation {event.outcome}", detail=event.error_kind, level="error")
            case ev.ToolCalled():
                self._tool_called(sid, event)
            case ev.ModelSaid() if not event.agent_id:
                if event.text in self._said_live:  # this TUI's own run streamed it already
                    self._said_live.discard(event.text)
                elif event.text.strip():  # a watched (or past) session: what the model said, from the store
                    add("narrative", detail=event.text)
                    self._said_stored.add(event.text)  # read before its live copy: that one is not drawn
            case ev.ModelReasoned() if not event.agent_id and event.text.strip():
                add("narrative", title="reasoning", detail=event.text)  # its thinking: drawn apart from what it said
            case ev.ProgressReported():
                add("narrative", detail=event.progress)
            case ev.UserMessageQueued():
                add("user", title="queued for the next invocation", detail=event.text)
            case ev.UserMessageDelivered():
                add("notice", title="your message was delivered", detail=event.invocation_id)
            case ev.TaskStatusChanged():
                task = self.fold.tasks.get(event.task_id)
                name = f"{event.task_id} {task.name}" if task else event.task_id
                level = {"complete": "ok", "failed": "error"}.get(event.to_state, "info")
                add("notice", title=f"task {name}: {event.to_state}", detail=event.reason, level=level)
            case ev.ComponentSelected():
                add("notice", title=f"component {event.component} selected", detail=event.reason)
            case ev.ComponentsRecorded():
                names = ", ".join(c.name for c in event.components)
                add("notice", title=plural(len(event.components), "component") + " recorded", detail=names)
            case ev.TasksRecorded():
                add(
                    "notice",
                    title=plural(len(event.tasks), "task") + f" recorded for {event.component}",
                    detail=", ".join(t.name for t in event.tasks),
                )
            case ev.OracleVerdictRecorded():
                add(
                    "verdict",
                    title=f"oracle on {event.scope} {event.target}",
                    status="ok" if event.passed else "failed",
                    detail=event.summary or event.raw,
                    findings=[_finding(f) for f in event.findings],
                    level="ok" if event.passed else "error",
                    result=f"{event.confidence:.0%}" if event.confidence else "",
                )
            case ev.CompletionRefused():
                add(
                    "error", title=f"completion of {event.scope} {event.target} refused", detail=event.why, level="warn"
                )
            case ev.GuardrailTripped():
                level = "warn" if event.level == "warn" else "error"
                kind: EntryKind = "notice" if event.level == "warn" else "error"
                add(kind, title=f"{event.category}: {event.level}", detail=event.detail, level=level)
            case ev.CorrectiveInstructionIssued():
                add("notice", title=f"corrective note ({event.category})", detail=event.instruction, level="warn")
            case ev.ModelFellBack():
                add(
                    "notice",
                    title=f"model {event.from_model} unavailable → {event.to_model}",
                    detail=event.why,
                    level="warn",
                )
            case ev.CommitRecorded():
                shown = event.task_id and event.files
                lines = f"  {lines_changed(event.added, event.removed, event.files)}" if shown else ""
                add("notice", title=f"commit {event.sha[:8]}{lines}", detail=event.message, level="ok")
            case ev.Reverted():
                add(
                    "notice",
                    title=f"reverted {event.from_sha[:8]} → {event.to_sha[:8]}",
                    detail=event.reason,
                    level="warn",
                )
            case ev.PauseRequested():
                add(
                    "notice",
                    title=f"pause requested by {event.requested_by or 'someone'}",
                    detail="the run pauses before its next invocation",
                    level="warn",
                )
            case ev.ControlRequested():
                add("notice", title=f"{event.action} requested by {event.caller or 'someone'}", detail=event.detail)

    def _tool_called(self, sid: str, event: ev.ToolCalled) -> None:
        if event.agent_id:
            return
        if event.call_id:
            self._recorded_calls.add(event.call_id)
        entry = self._by_call.pop(event.call_id, None) if event.call_id else None
        if entry is None and not event.call_id:
            entry = self._oldest_live(event.tool)
        if entry is None:
            entry = self._add(sid, self._tool_entry(event.call_id, event.tool, event.arguments))
        entry.status = "ok" if event.success else "failed"
        entry.duration = event.duration
        entry.result = event.result_summary or entry.result
        entry.level = "ok" if event.success else "error"
        self._touch(entry)

    def _oldest_live(self, tool: str) -> Entry | None:
        """The oldest streamed call of ``tool`` not yet recorded (for a ``ToolCalled`` without call id)."""
        for key, entry in list(self._by_call.items()):
            if entry.tool == tool:
                return self._by_call.pop(key)
        return None

    def _tool_entry(self, call_id: str, name: str, arguments: Any) -> Entry:
        return self._new(
            "tool",
            tool=name,
            args=short_args(name, arguments, folders=self._worktrees()),
            arguments=arguments,
            status="running",
            started=self.clock(),
            diff=diff_of(name, arguments),
            title=call_id,
        )

    def _worktrees(self) -> tuple[str, ...]:
        """The folders the module is built in (its worktree, each lane's), as the history records them."""
        fold = self.fold
        found = [fold.worktree, *(lane.worktree for lane in fold.lanes.values())]
        return tuple(sorted({f for f in found if f}, key=len, reverse=True))

    def _close_live_tools(self) -> None:
        for entry in self._by_call.values():
            if entry.status == "running":
                entry.status = "failed"
                entry.result = entry.result or "the invocation ended before the call finished"
                self._touch(entry)
        self._by_call.clear()

    # -- folding streaming deltas --------------------------------------------------------------------

    def apply_stream(self, event: stream.StreamEvent) -> None:
        """A live delta of the running invocation (see the module docstring)."""
        sid = self.session_id
        match event:
            case stream.AssistantText():
                if not event.agent_id and event.text in self._said_stored:
                    self._said_stored.discard(event.text)  # the store's copy came first and is drawn
                    return
                self._add(sid, self._new("narrative", detail=event.text))
                if not event.agent_id:
                    self._said_live.add(event.text)  # its ModelSaid, read from the store next, is not shown again
            case stream.ToolStarted():
                if event.call_id in self._by_call or event.call_id in self._recorded_calls:
                    return
                entry = self._tool_entry(event.call_id, event.name, event.arguments)
                self._by_call[event.call_id] = self._add(sid, entry)
            case stream.ToolFinished():
                entry = self._by_call.get(event.record.call_id)
                if entry is not None:
                    entry.status = "ok" if event.record.success else "failed"
                    entry.duration = event.record.duration
                    entry.result = event.record.result
                    self._touch(entry)
            case stream.ContextMeasured():
                self.context_used, self.context_limit = event.used, event.limit
                self.changed.add("top")
            case stream.RetryScheduled():
                self._add(sid, self._new("notice", title=f"retrying {event.model}", detail=event.reason, level="warn"))

    def say(self, line: str) -> None:
        """A status line from the run (``RunCallbacks.say``)."""
        self.status_line = line.strip()
        self.changed.add("top")

    def live_tools(self) -> list[Entry]:
        return [e for e in self._by_call.values() if e.status == "running"]

    def take_changes(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed


# -- helpers ---------------------------------------------------------------------------------------


def _protection(protection: str) -> str:
    return f"sandbox: {protection}" if protection else ""


def _finding(finding: ev.Finding) -> str:
    where = f" ({finding.location})" if finding.location else ""
    return f"{finding.severity}: {finding.description}{where}"


def short_args(name: str, arguments: Any, width: int = ARGS_WIDTH, folders: tuple[str, ...] = ()) -> str:
    """A tool call's arguments in one short line: the command for ``bash``, the path for file tools,
    ``key=value`` pairs for Lopen's tools. Paths inside ``folders`` (the worktrees) are shown relative to
    them; a path too long keeps its end (the file's name), a command its start."""
    is_path = False
    if isinstance(arguments, str):
        text = arguments
    elif isinstance(arguments, dict):
        if name == "bash" and "command" in arguments:
            text = str(arguments["command"])
        elif "path" in arguments and name in ("view", "create", "edit", "str_replace", "read"):
            text, is_path = str(arguments["path"]), True
        else:
            text = " ".join(f"{k}={_scalar(v)}" for k, v in arguments.items())
    else:
        text = ""
    for folder in folders:  # the longest first: a lane's folder sits beside the module's
        text = text.replace(folder.rstrip("/") + "/", "")
        text = re.sub(re.escape(folder.rstrip("/")) + r"(?![\w./-])", ".", text)
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1) :] if is_path else text[: width - 1] + "…"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def diff_of(name: str, arguments: Any) -> list[DiffLine]:
    """The change a file tool makes, with line numbers: ``create`` adds every line of the new file;
    ``edit`` replaces ``old_str`` by ``new_str`` (numbered from the snippet's first line)."""
    if not isinstance(arguments, dict):
        return []
    if name == "create" and isinstance(arguments.get("file_text"), str):
        return [DiffLine("+", None, n, line) for n, line in enumerate(arguments["file_text"].splitlines(), 1)]
    if name in ("edit", "str_replace") and isinstance(arguments.get("new_str"), str):
        old = str(arguments.get("old_str") or "").splitlines()
        new = arguments["new_str"].splitlines()
        lines: list[DiffLine] = []
        for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(2):
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    lines += [
                        DiffLine(" ", i + 1, j + 1, old[i]) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                    ]
                    continue
                lines += [DiffLine("-", i + 1, None, old[i]) for i in range(i1, i2)]
                lines += [DiffLine("+", None, j + 1, new[j]) for j in range(j1, j2)]
        return lines
    return []


def _raise(seq: int, event: ev.Event, exc: Exception) -> None:
    """An event the tokens projection cannot apply is a bug here as well: not hidden."""
    raise exc
