"""Reading a module's history back for audit: which records (``lopen replay``, ``lopen log``, the MCP
server, telemetry rebuilt from history). How they read as text is the application's
(``lopen.app.views.replay``).

A session is a view of its module's history: its events are those of the module stream with its
``session_id``, plus the module-level facts around it — the spec approval it started from (with its
approver and the approved hashes), and approvals or control requests recorded while it ran.

Everything here streams: records are read page by page, so a session of any length is read in
constant memory.

- ``session_records(store, project, session_id, after=0, until=None)``: the session's events, in order;
- ``task_records(store, project, module, task)``: one task's events across every session;
- ``Selection``: the filters (``--task``, ``--invocation``, ``--type``, ``--since``/``--until``);
- ``json_line``: ``{"seq": n, "type": …, "at": "<ISO-8601 UTC>", …fields}``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import msgspec

from events import catalogue as ev
from events.catalogue import EVENT_TYPES, Event
from events.recorded import Recorded, module_stream
from events.store import EventStore

_ENCODE = msgspec.json.Encoder().encode


# -- reading ---------------------------------------------------------------------------------------


def session_records(
    store: EventStore, project: str, session_id: str, after: int = 0, until: int | None = None
) -> Iterator[Recorded]:
    """The events of one session (and the module facts around it) with ``after < seq <= until``, in order,
    paged. The session's story starts with the latest spec approval recorded before it."""
    views = store.projections
    session = views.sessions.get(session_id, project)
    if session is None:
        return
    stream = module_stream(project, session.module)
    last = session.last_seq if until is None else min(until, session.last_seq)
    state = views.plan.get(session.module, project)
    before = [seq for seq in (state.approval_seqs if state else []) if seq < session.first_seq]
    if before and after < before[-1] <= last:
        yield from _at(store, before[-1], stream)
    for page in store.pages(max(session.first_seq - 1, after)):
        for rec in page:
            if rec.seq > last:
                return
            if rec.stream_id == stream and rec.event.session_id in (session_id, ""):
                yield rec


def module_records(store: EventStore, project: str, module: str) -> Iterator[Recorded]:
    """A module's whole history, in order, paged."""
    return store.read_stream(module_stream(project, module))


def task_records(store: EventStore, project: str, module: str, task: str) -> Iterator[Recorded]:
    """Every event of one task across all sessions of its module (``lopen log``)."""
    selection = Selection(task=task)
    return (rec for rec in module_records(store, project, module) if selection.wants(rec))


def _at(store: EventStore, seq: int, stream: str) -> Iterator[Recorded]:
    for page in store.pages(seq - 1, 1):
        yield from (rec for rec in page if rec.seq == seq and rec.stream_id == stream)
        return


# -- filters -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """One end of a ``--since``/``--until`` range: a seq, or a moment (UTC seconds since the epoch)."""

    seq: int | None = None
    at: float | None = None


def parse_bound(text: str, *, upper: bool = False) -> Bound:
    """``"1234"`` or ``"#1234"`` → a seq; an ISO-8601 date or time → a moment (naive = UTC).

    A bare date as an upper bound means the end of that day. ValueError saying what is allowed.
    """
    raw = text.strip()
    digits = raw.removeprefix("#")
    if digits.isdigit():
        return Bound(seq=int(digits))
    try:
        if len(raw) == 10 and raw[4:5] == "-":
            day = date.fromisoformat(raw)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC) + (timedelta(days=1) if upper else timedelta())
            return Bound(at=moment.timestamp() - (1e-6 if upper else 0.0))
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an event number nor an ISO-8601 time; "
            "give a seq (1234 or #1234), a date (2026-11-26) or a time (2026-11-26T14:05:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return Bound(at=moment.timestamp())


def event_type_names(names: Iterable[str]) -> frozenset[str]:
    """Validate ``--type`` names (case-insensitive) → the catalogue's names; ValueError naming close ones."""
    known = {name.lower(): name for name in EVENT_TYPES}
    out = set()
    for name in names:
        found = known.get(name.strip().lower())
        if found is None:
            close = [t for t in EVENT_TYPES if name.strip().lower() in t.lower()] or difflib.get_close_matches(
                name, list(EVENT_TYPES), n=3, cutoff=0.6
            )
            hint = f"did you mean {', '.join(close)}?" if close else "event types: " + ", ".join(sorted(EVENT_TYPES))
            raise ValueError(f"no event type {name!r}; {hint}")
        out.add(found)
    return frozenset(out)


_SCOPED = (ev.ScopeStarted, ev.CompletionRefused, ev.OracleVerdictRecorded, ev.VerificationEvidenceRecorded)
_TASK_ID = (ev.TaskStatusChanged, ev.TaskReopened, ev.CommitRecorded)


@dataclass
class Selection:
    """The events an auditor asked for. Streaming: invocations are followed as they start, so an
    invocation's tool calls, usage, oracle invocations and verdicts go with it (memory grows only with
    the invocations of the one task or invocation asked for)."""

    task: str = ""
    invocation: str = ""
    types: frozenset[str] = frozenset()
    since: Bound = field(default_factory=Bound)
    until: Bound = field(default_factory=Bound)
    _invocations: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.invocation:
            self._invocations.add(self.invocation)

    @property
    def first_seq(self) -> int:
        """Records at or below this seq cannot be wanted (read from here on)."""
        return self.since.seq - 1 if self.since.seq else 0

    @property
    def last_seq(self) -> int | None:
        return self.until.seq

    def wants(self, rec: Recorded) -> bool:
        event = rec.event
        if self.since.seq is not None and rec.seq < self.since.seq:
            return False
        if self.until.seq is not None and rec.seq > self.until.seq:
            return False
        if self.since.at is not None and event.at < self.since.at:
            return False
        if self.until.at is not None and event.at > self.until.at:
            return False
        if (self.task or self.invocation) and not self._related(event):
            return False
        return not self.types or type(event).__name__ in self.types

    def _related(self, event: Event) -> bool:
        if isinstance(event, ev.InvocationStarted):
            mine = (self.task and event.task == self.task and event.kind != "oracle") or (
                event.invocation_id == self.invocation
            )
            if mine or event.parent_invocation in self._invocations:
                self._invocations.add(event.invocation_id)
                return True
            return False
        invocation = getattr(event, "invocation_id", "")
        if invocation and invocation in self._invocations:
            return True
        if getattr(event, "parent_invocation", "") in self._invocations - {""}:
            return True
        if not self.task:
            return False
        if isinstance(event, _TASK_ID):
            return event.task_id == self.task
        if isinstance(event, _SCOPED):
            return event.scope == "task" and event.target == self.task
        if isinstance(event, ev.TasksRecorded):
            return any(t.id == self.task for t in event.tasks)
        return False


def select(records: Iterable[Recorded], selection: Selection) -> Iterator[Recorded]:
    last = selection.last_seq
    for rec in records:
        if last is not None and rec.seq > last:
            return
        if selection.wants(rec):
            yield rec


# -- JSON ----------------------------------------------------------------------------------------


def iso(at: float) -> str:
    """UTC seconds since the epoch → ``2026-11-26T14:05:00.123456Z``."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def json_line(rec: Recorded) -> bytes:
    """``{"seq": n, "type": …, "at": "<ISO-8601>", …fields}`` and a newline."""
    body = _ENCODE(rec.event)
    start = body.find(b',"at":')
    end = body.find(b",", start + 6) if start >= 0 else -1
    if start < 0 or end < 0:  # not the layout msgspec writes today: take the slow, sure way
        data = msgspec.to_builtins(rec.event)
        data["at"] = iso(rec.event.at)
        return b'{"seq":%d,%s\n' % (rec.seq, _ENCODE(data)[1:])
    return b'{"seq":%d,%s,"at":"%s"%s\n' % (rec.seq, body[1:start], iso(rec.event.at).encode(), body[end:])
