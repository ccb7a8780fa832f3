"""Invocations: those started and not finished (with the bash commands run in them), and the models
that fell back in the latest session.

``ModuleState`` fields: ``invocations``, ``unavailable``. A planning invocation that finishes well
ends a re-plan (``replan_from``, ``replan_why``: see ``events.folds.approval``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from events import catalogue as ev
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState


class OpenInvocation(msgspec.Struct, kw_only=True):
    kind: str = ""
    session_id: str = ""
    task: str = ""
    commands: list[str] = []  # bash commands run in it (B4: were the tests run?)


def _started(s: ModuleState, e: ev.InvocationStarted) -> None:
    s.invocations[e.invocation_id] = OpenInvocation(kind=e.kind, session_id=e.session_id, task=e.task)


def _finished(s: ModuleState, e: ev.InvocationFinished) -> None:
    opened = s.invocations.pop(e.invocation_id, None)
    if opened is not None and opened.kind != "oracle" and opened.task in s.tasks:
        s.tasks[opened.task].seconds += max(e.duration, 0.0)
    if opened is not None and opened.kind == "planning" and e.outcome == "ok":
        s.replan_from, s.replan_why = 0, ""


def _tool(s: ModuleState, e: ev.ToolCalled) -> None:
    command = e.arguments.get("command") if e.tool == "bash" else None
    opened = s.invocations.get(e.invocation_id)
    if isinstance(command, str) and opened is not None:
        opened.commands.append(command)


def _fell_back(s: ModuleState, e: ev.ModelFellBack) -> None:
    if e.from_model not in s.unavailable:
        s.unavailable = [*s.unavailable, e.from_model]


def _session_opened(s: ModuleState, e: ev.SessionStarted | ev.SessionResumed) -> None:
    """A session started or resumed tries every model again."""
    s.unavailable = []


RULES: dict[type, Rule] = {
    ev.InvocationStarted: Rule(None, _started),
    ev.InvocationFinished: Rule(None, _finished),
    ev.ToolCalled: Rule(None, _tool),
    ev.ModelFellBack: Rule(None, _fell_back),
    ev.SessionStarted: Rule(None, _session_opened),
    ev.SessionResumed: Rule(None, _session_opened),
}
