"""Module progress (for ``lopen modules``): not started, in progress or complete.

A module is in progress from its first session, complete when a session of it completes,
and back in progress when spec drift is detected or a new session starts.
"""

from __future__ import annotations

import msgspec

from events import catalogue as ev
from events.projections.base import Projection, Table


class ModuleProgress(msgspec.Struct, kw_only=True):
    module: str
    status: str = "not started"  # not started | in progress | complete
    sessions: int = 0
    last_session: str = ""
    updated_at: float = 0.0


Modules = Table[ModuleProgress]


def _row(t: Modules, e: ev.Event) -> ModuleProgress:
    row = t.get(e.module) or ModuleProgress(module=e.module)
    row.updated_at = e.at
    t.put(e.module, row)
    return row


def _approved(t: Modules, seq: int, e: ev.SpecApproved) -> None:
    _row(t, e)


def _started(t: Modules, seq: int, e: ev.SessionStarted) -> None:
    row = _row(t, e)
    row.status = "in progress"
    row.sessions += 1
    row.last_session = e.session_id


def _completed(t: Modules, seq: int, e: ev.SessionCompleted) -> None:
    _row(t, e).status = "complete"


def _drift(t: Modules, seq: int, e: ev.SpecDriftDetected) -> None:
    row = _row(t, e)
    if row.status == "complete":
        row.status = "in progress"


PROJECTION = Projection(
    name="modules",
    row=ModuleProgress,
    handlers={
        ev.SpecApproved: _approved,
        ev.SessionStarted: _started,
        ev.SessionCompleted: _completed,
        ev.SpecDriftDetected: _drift,
    },
)
