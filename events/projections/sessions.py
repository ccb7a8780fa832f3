"""Session state: module, phase, step, status, current component and task — one row per session.

Rows are keyed ``<project>/<session id>``. ``first_seq``/``last_seq`` are the session's
span in the store (every event of the session is inside it), so ``lopen replay`` reads only that span.
A row's ``status`` is the session-status fold's (``events.folds.sessions.status_after``); deletion is
kept apart, as ``deleted``, so a deleted session still shows how it ended.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from events import catalogue as ev
from events.folds.sessions import ENDED, status_after
from events.projections.base import Projection, Skip, Table
from events.recorded import Recorded


class SessionView(msgspec.Struct, kw_only=True):
    id: str
    module: str
    project: str = ""
    status: str = "running"  # running | paused | completed | failed
    phase: str = ""
    step: int = 0
    component: str = ""
    task: str = ""
    resumed_from: str = ""
    reason: str = ""
    error_kind: str = ""
    deleted: bool = False
    started_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float = 0.0
    first_seq: int = 0
    last_seq: int = 0
    protection: str = ""
    worktree: str = ""

    @property
    def key(self) -> str:
        return f"{self.project}/{self.id}"


Sessions = Table[SessionView]


def _row(t: Sessions, seq: int, e: ev.Event) -> SessionView | None:
    if not e.session_id:
        return None
    key = f"{e.project}/{e.session_id}"
    row = t.get(key)
    if row is None:
        row = SessionView(id=e.session_id, module=e.module, project=e.project, started_at=e.at, first_seq=seq)
    row.updated_at = e.at
    row.last_seq = seq
    t.put(key, row)
    return row


def _sessions(t: Sessions, records: Sequence[Recorded], skip: Skip) -> None:
    """A run of one stream's events: each extends its session's span (``_row``, with the row looked up once
    per session instead of once per event); an event that says more about the session goes to its
    handler in ``CHANGES``."""
    row: SessionView | None = None
    session = project = ""
    for rec in records:
        e = rec.event
        change = CHANGES.get(type(e))
        if change is not None:
            try:
                change(t, rec.seq, e)
            except Exception as exc:  # a bug: stale for this event
                skip(rec.seq, e, exc)
            row = None  # looked up again: the handler may have started it
            continue
        if row is None or e.session_id != session or e.project != project:
            session, project = e.session_id, e.project
            if not session:
                row = None
                continue
            row = _row(t, rec.seq, e)
        else:
            row.updated_at = e.at
            row.last_seq = rec.seq


def _started(t: Sessions, seq: int, e: ev.SessionStarted) -> None:
    if row := _row(t, seq, e):
        row.resumed_from = e.resumed_from
        row.protection, row.worktree = e.protection, e.worktree


def _status(t: Sessions, seq: int, e: ev.Event) -> None:
    if row := _row(t, seq, e):
        row.status = status_after(row.status, e)
        row.reason = getattr(e, "reason", "")
        row.error_kind = getattr(e, "error_kind", "")
        row.ended_at = e.at if row.status in ENDED else 0.0


def _deleted(t: Sessions, seq: int, e: ev.SessionDeleted) -> None:
    if row := _row(t, seq, e):
        row.deleted = True


def _step(t: Sessions, seq: int, e: ev.StepEntered) -> None:
    if row := _row(t, seq, e):
        row.phase, row.step = e.phase, e.step


def _component(t: Sessions, seq: int, e: ev.ComponentSelected) -> None:
    if row := _row(t, seq, e):
        row.component, row.task = e.component, ""


def _task(t: Sessions, seq: int, e: ev.TaskStatusChanged) -> None:
    if row := _row(t, seq, e):
        if e.to_state == "in-progress":
            row.task = e.task_id
        elif e.to_state == "complete" and row.task == e.task_id:
            row.task = ""


CHANGES = {
    ev.SessionStarted: _started,
    ev.SessionPaused: _status,
    ev.SessionResumed: _status,
    ev.SessionCompleted: _status,
    ev.SessionFailed: _status,
    ev.SessionAbandoned: _status,
    ev.SessionDeleted: _deleted,
    ev.StepEntered: _step,
    ev.ComponentSelected: _component,
    ev.TaskStatusChanged: _task,
}
"""The events that change more of their session's row than its span, and how."""

PROJECTION = Projection(name="sessions", row=SessionView, run=_sessions, version=3)
