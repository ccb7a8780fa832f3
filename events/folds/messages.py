"""What people and the guards tell the run: messages queued until delivered, corrective notes for
the next invocation, and a pause asked for until the run pauses.

``ModuleState`` fields: ``queued`` (message id → text), ``notes``, ``pause_requested`` (who asked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import catalogue as ev
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState


def _queued(s: ModuleState, e: ev.UserMessageQueued) -> None:
    s.queued[e.message_id] = e.text


def _delivered(s: ModuleState, e: ev.UserMessageDelivered) -> None:
    s.queued.pop(e.message_id, None)


def _note(s: ModuleState, e: ev.CorrectiveInstructionIssued) -> None:
    s.notes = [*s.notes, e.instruction]


def _given(s: ModuleState, e: ev.InvocationStarted) -> None:
    """The invocation that starts now (not an oracle's or a summary's) was given the notes."""
    if e.kind not in ev.HELPER_KINDS:
        s.notes = []


def _pause(s: ModuleState, e: ev.PauseRequested) -> None:
    s.pause_requested = e.requested_by or "someone"


def _stopped(s: ModuleState, e: ev.SessionPaused | ev.SessionCompleted | ev.SessionFailed) -> None:
    """A session that stops (paused, completed, failed) answers the pause asked for."""
    if s.pause_requested and e.session_id:
        s.pause_requested = ""


RULES: dict[type, Rule] = {
    ev.UserMessageQueued: Rule(None, _queued),
    ev.UserMessageDelivered: Rule(None, _delivered),
    ev.CorrectiveInstructionIssued: Rule(None, _note),
    ev.InvocationStarted: Rule(None, _given),
    ev.PauseRequested: Rule(None, _pause),
    ev.SessionPaused: Rule(None, _stopped),
    ev.SessionCompleted: Rule(None, _stopped),
    ev.SessionFailed: Rule(None, _stopped),
}
