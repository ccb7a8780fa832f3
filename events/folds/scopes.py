"""Scopes, verdicts and evidence: what has been judged, on which tree, and whether it still counts.

``ModuleState`` fields: ``scopes`` (scope key → base commit), ``verdicts`` (scope key → the latest
verdict, its tree and attempts), ``evidence`` (``"<tree> <command>"`` → a verify command's result,
the latest ``EVIDENCE_KEPT``). A passing verdict stops counting (``valid``) when the work it judged
changes: the plan events that change it invalidate it here, beside ``events.folds.plan``'s effects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from events import catalogue as ev
from events.folds.plan import slugify
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState

EVIDENCE_KEPT = 64


def scope_key(scope: str, target: str) -> str:
    return f"{scope}:{target}"


def evidence_key(tree: str, command: str) -> str:
    return f"{tree} {command}"


class VerdictNode(msgspec.Struct, kw_only=True):
    passed: bool = False
    valid: bool = False  # a passing verdict stops counting when the work it judged changes
    tree: str = ""
    attempts: int = 0
    summary: str = ""


class EvidenceNode(msgspec.Struct, kw_only=True):
    """A verify command's result on one tree: the same command on the same tree is not run again."""

    exit_code: int
    output_tail: str = ""
    duration: float = 0.0


def invalidate(s: ModuleState, scope: str, target: str) -> None:
    verdict = s.verdicts.get(scope_key(scope, target))
    if verdict is not None:
        verdict.valid = False


def invalidate_above(s: ModuleState) -> None:
    """Component and module verdicts stop counting (drift, re-planning)."""
    for key, verdict in s.verdicts.items():
        if not key.startswith("task:"):
            verdict.valid = False


def _scope(s: ModuleState, e: ev.ScopeStarted) -> None:
    s.scopes[scope_key(e.scope, e.target)] = e.base_commit


def _verdict(s: ModuleState, e: ev.OracleVerdictRecorded) -> None:
    key = scope_key(e.scope, e.target)
    verdict = s.verdicts.get(key) or VerdictNode()
    verdict.attempts += 1
    verdict.passed = verdict.valid = e.passed
    verdict.tree, verdict.summary = e.tree, e.summary
    s.verdicts[key] = verdict


def _evidence(s: ModuleState, e: ev.VerificationEvidenceRecorded) -> None:
    if not e.tree or e.reused:
        return
    s.evidence[evidence_key(e.tree, e.command)] = EvidenceNode(
        exit_code=e.exit_code, output_tail=e.output_tail, duration=e.duration
    )
    while len(s.evidence) > EVIDENCE_KEPT:
        s.evidence.pop(next(iter(s.evidence)))


def _tasks_recorded(s: ModuleState, e: ev.TasksRecorded) -> None:
    """A component's tasks changed: its verdict stops counting."""
    invalidate(s, "component", slugify(e.component))


def _task_moved(s: ModuleState, e: ev.TaskStatusChanged) -> None:
    """A task not complete loses its verdict; a task started again, its component's and the module's."""
    if e.to_state != "complete":
        invalidate(s, "task", e.task_id)
    if e.to_state == "in-progress":
        invalidate(s, "component", s.tasks[e.task_id].component)
        invalidate(s, "module", s.module)


def _task_reopened(s: ModuleState, e: ev.TaskReopened) -> None:
    """A re-opened task starts a new scope; its, its component's and the module's verdicts stop counting."""
    s.scopes.pop(scope_key("task", e.task_id), None)
    invalidate(s, "task", e.task_id)
    invalidate(s, "component", s.tasks[e.task_id].component)
    invalidate(s, "module", s.module)


RULES: dict[type, Rule] = {
    ev.ScopeStarted: Rule(None, _scope),
    ev.OracleVerdictRecorded: Rule(None, _verdict),
    ev.VerificationEvidenceRecorded: Rule(None, _evidence),
    ev.TasksRecorded: Rule(None, _tasks_recorded),
    ev.TaskStatusChanged: Rule(None, _task_moved),
    ev.TaskReopened: Rule(None, _task_reopened),
}
