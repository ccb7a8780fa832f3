"""The approval and re-planning: the approved specification, the section hashes the plan was made
from (its baseline), drift from it, and a re-plan asked for (from which step, and why).

``ModuleState`` fields: ``approval``, ``approval_seqs``, ``baseline``, ``replan_from``, ``replan_why``.
A re-plan ends when a planning invocation finishes well (``events.folds.invocations``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from events import catalogue as ev
from events.folds.rules import Rule
from events.folds.scopes import invalidate_above

if TYPE_CHECKING:
    from events.fold import ModuleState


class Approval(msgspec.Struct, kw_only=True):
    spec_hash: str
    section_hashes: dict[str, str]
    approver: str = ""
    at: float = 0.0
    seq: int = 0  # where it is in the store (a session's story starts with the approval before it)


def _approved(s: ModuleState, e: ev.SpecApproved, seq: int) -> None:
    s.approval = Approval(spec_hash=e.spec_hash, section_hashes=dict(e.section_hashes), approver=e.approver, at=e.at)
    if not s.planned:
        s.baseline = dict(e.section_hashes)
    if seq:
        s.approval.seq = seq
        s.approval_seqs = [*s.approval_seqs, seq]


def _drift(s: ModuleState, e: ev.SpecDriftDetected) -> None:
    s.baseline = dict(e.section_hashes)
    if e.reentry_step:
        s.replan_from = min(s.replan_from or e.reentry_step, e.reentry_step)
        s.replan_why = "the approved specification changed: re-planning"
        invalidate_above(s)


def _replan(s: ModuleState, e: ev.ReplanRequested) -> None:
    s.replan_from = min(s.replan_from or e.step, e.step)
    s.replan_why = f"{e.requested_by or 'a person'} asked to re-plan" + (f" ({e.reason})" if e.reason else "")
    invalidate_above(s)


def _planned(s: ModuleState, e: ev.ComponentsRecorded) -> None:
    """A plan made under an approval takes its section hashes as the baseline."""
    if not s.baseline and s.approval is not None:
        s.baseline = dict(s.approval.section_hashes)


RULES: dict[type, Rule] = {
    ev.SpecApproved: Rule(None, _approved, stamped=True),
    ev.SpecDriftDetected: Rule(None, _drift),
    ev.ReplanRequested: Rule(None, _replan),
    ev.ComponentsRecorded: Rule(None, _planned),
}
