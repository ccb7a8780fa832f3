"""Resume points: where a session would continue (step, component, task, last good commit).

A session started with ``resumed_from`` inherits the resume point of that session.
``last_good_commit`` is the latest commit recorded for a completed task (or the commit
a revert went back to).
"""

from __future__ import annotations

import msgspec

from events import catalogue as ev
from events.projections.base import Projection, Table


class ResumePoint(msgspec.Struct, kw_only=True):
    session_id: str
    module: str
    phase: str = ""
    step: int = 0
    component: str = ""
    task: str = ""
    last_good_commit: str = ""


Points = Table[ResumePoint]


def _point(t: Points, e: ev.Event) -> ResumePoint | None:
    if not e.session_id:
        return None
    point = t.get(e.session_id) or ResumePoint(session_id=e.session_id, module=e.module)
    t.put(e.session_id, point)
    return point


def _started(t: Points, seq: int, e: ev.SessionStarted) -> None:
    previous = t.get(e.resumed_from) if e.resumed_from else None
    if previous is not None:
        t.put(e.session_id, msgspec.structs.replace(previous, session_id=e.session_id))
    else:
        _point(t, e)


def _step(t: Points, seq: int, e: ev.StepEntered) -> None:
    if point := _point(t, e):
        point.phase, point.step = e.phase, e.step


def _component(t: Points, seq: int, e: ev.ComponentSelected) -> None:
    if point := _point(t, e):
        point.component, point.task = e.component, ""


def _task(t: Points, seq: int, e: ev.TaskStatusChanged) -> None:
    if point := _point(t, e):
        if e.to_state in ("in-progress", "failed"):
            point.task = e.task_id
        elif point.task == e.task_id:
            point.task = ""


def _commit(t: Points, seq: int, e: ev.CommitRecorded) -> None:
    if e.task_id and (point := _point(t, e)):
        point.last_good_commit = e.sha


def _reverted(t: Points, seq: int, e: ev.Reverted) -> None:
    if point := _point(t, e):
        point.last_good_commit = e.to_sha


PROJECTION = Projection(
    name="resume",
    row=ResumePoint,
    handlers={
        ev.SessionStarted: _started,
        ev.StepEntered: _step,
        ev.ComponentSelected: _component,
        ev.TaskStatusChanged: _task,
        ev.CommitRecorded: _commit,
        ev.Reverted: _reverted,
    },
)
