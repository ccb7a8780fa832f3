"""A session's status, folded once: running | paused | completed | failed | abandoned | deleted.

``status_after`` is the one rule — a lifecycle event announces the status it names, and a deleted
session stays deleted. ``SessionNode`` (a session as ``ModuleState`` keeps it), the sessions
projection's rows and the TUI's run state all take a session's status from here.

``RULES`` is this concern's part of ``ModuleState`` (field ``sessions``): a session is started once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from events import catalogue as ev
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState

STATUS: dict[type, str] = {
    ev.SessionStarted: "running",
    ev.SessionResumed: "running",
    ev.SessionPaused: "paused",
    ev.SessionCompleted: "completed",
    ev.SessionFailed: "failed",
    ev.SessionAbandoned: "abandoned",
    ev.SessionDeleted: "deleted",
}
"""The status each lifecycle event announces."""

LIFECYCLE = tuple(STATUS)
ENDED = ("completed", "failed", "abandoned")  # the statuses a session ends in
LIVE = ("running", "paused")  # a session not ended: the one a run would resume


def status_after(status: str, event: ev.Event) -> str:
    """A session's status after ``event``: the one it announces, but a deleted session stays deleted."""
    return status if status == "deleted" else STATUS.get(type(event), status)


class SessionNode(msgspec.Struct, kw_only=True):
    status: str = "running"  # running | paused | completed | failed | abandoned | deleted
    started_at: float = 0.0
    worker: str = ""  # the process that opened it (host:pid)

    def apply(self, event: ev.Event) -> None:
        self.status = status_after(self.status, event)


def _check_started(s: ModuleState, e: ev.SessionStarted) -> str | None:
    return f"session {e.session_id} already exists" if e.session_id in s.sessions else None


def _started(s: ModuleState, e: ev.SessionStarted) -> None:
    s.sessions[e.session_id] = SessionNode(status=STATUS[ev.SessionStarted], started_at=e.at, worker=e.worker)


def _moved(s: ModuleState, e: ev.Event) -> None:
    node = s.sessions.get(e.session_id)
    if node is not None:
        node.apply(e)


RULES: dict[type, Rule] = {
    ev.SessionStarted: Rule(_check_started, _started),
    **{kind: Rule(None, _moved) for kind in LIFECYCLE if kind is not ev.SessionStarted},
}
