"""The TaskRunner (step 6): one fresh invocation per task, and the component and module verification
invocations.

Before a task's invocation it records the scopes that begin (``ScopeStarted`` with the branch tip:
the oracle's diff starts there) and tells the model what a cut-off or failed earlier invocation left
in the worktree. After it, the Git actor puts HEAD and the branch back if the model moved them; a
completed task has been committed by the Git actor (exactly its verified tree) and the worktree is
reset to that commit; an unfinished one is recorded failed with the reason.
"""

from __future__ import annotations

import pykka

from actors.git import GitActor
from actors.messages import Assessment, StepOutcome
from events import catalogue as ev
from events.fold import ModuleState, scope_key
from events.journal import Journal
from lopen.workflow.invoke import Invoker
from lopen.workflow.steps import Kind

SHOWN = 20


def task_text(task) -> str:  # type: ignore[no-untyped-def]
    lines = [f"Task {task.id}: {task.name}", "", task.description]
    if task.subtasks:
        lines += ["", "Subtasks:", *(f"- [ ] {s}" for s in task.subtasks)]
    if task.acceptance:
        lines += ["", "Acceptance:", *(f"- {a}" for a in task.acceptance)]
    return "\n".join(lines).strip()


class TaskRunnerActor(pykka.ThreadingActor):
    def __init__(self, journal: Journal, invoker: Invoker, git: pykka.ActorProxy[GitActor]) -> None:
        super().__init__()
        self.journal = journal
        self.invoker = invoker
        self.git = git

    def run_task(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        state = self.journal.snapshot()
        task = state.tasks[assessment.task]
        self._start_scopes(task.id, task.component)
        if task.state in ("in-progress", "failed"):
            leftovers = self.git.leftovers().get()
            if leftovers:  # an earlier invocation was cut off or failed: say what it left behind
                shown = ", ".join(leftovers[:SHOWN]) + (" …" if len(leftovers) > SHOWN else "")
                notes = (
                    *notes,
                    f"An earlier invocation of {task.id} did not finish it. It left these uncommitted changes, "
                    f"which are still in the working tree: {shown}. Build on them (edit files that exist rather "
                    "than creating them again) or undo what is wrong.",
                )
        if task.state in ("pending", "failed"):
            self.journal.record(
                ev.TaskStatusChanged(
                    task_id=task.id, from_state=task.state, to_state="in-progress", reason="invocation started"
                )
            )
        outcome = self.invoker.invoke(
            Kind.TASK,
            6,
            component=assessment.component,
            task=task.id,
            task_text=task_text(task),
            last_task_of_component=assessment.last_task_of_component,
            budget_hint=budget_hint,
            notes=notes,
        )
        if outcome.error_kind == "interrupted":
            return StepOutcome(ok=False, detail=f"{task.id} interrupted", error_kind="interrupted")
        self.git.guard().get()
        after = self.journal.read(lambda s: s.tasks[task.id].state)
        if after == "complete":
            self.git.settle().get()
            self.git.reset_to_tip().get()
            commit = self.journal.read(lambda s: s.tasks[task.id].commit)
            return StepOutcome(ok=True, detail=f"{task.id} complete" + (f", commit {commit[:8]}" if commit else ""))
        reason = outcome.detail if not outcome.ok else "the invocation ended without completing the task"
        if after == "in-progress":
            self.journal.record(
                ev.TaskStatusChanged(task_id=task.id, from_state="in-progress", to_state="failed", reason=reason[:500])
            )
        return StepOutcome(ok=False, detail=f"{task.id} failed: {reason[:300]}", error_kind=outcome.error_kind)

    def _start_scopes(self, task_id: str, component: str) -> None:
        def owed(state: ModuleState) -> list[ev.Event]:
            tip = state.tip_of(component)  # the component's own branch in parallel work
            wanted = [
                ("module", state.module, state.branch_base),
                ("component", component, tip),
                ("task", task_id, tip),
            ]
            return [
                ev.ScopeStarted(scope=scope, target=target, base_commit=base)  # type: ignore[arg-type]
                for scope, target, base in wanted
                if scope_key(scope, target) not in state.scopes
            ]

        started = self.journal.read(owed)
        if started:
            self.journal.record(*started)

    def verify_scope(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        kind = Kind(assessment.kind)
        scope, target = (
            ("module", self.journal.module) if kind is Kind.MODULE_VERIFICATION else ("component", assessment.component)
        )
        outcome = self.invoker.invoke(
            kind, assessment.step, component=assessment.component, budget_hint=budget_hint, notes=notes
        )
        if outcome.error_kind == "interrupted":
            return StepOutcome(ok=False, detail=f"{scope} verification interrupted", error_kind="interrupted")
        self.git.guard().get()
        if self.journal.read(lambda s: s.verified(scope, target)):
            return StepOutcome(ok=True, detail=f"{scope} {target} verified")
        detail = outcome.detail if not outcome.ok else f"{scope} {target} did not pass verification"
        return StepOutcome(ok=False, detail=detail, error_kind=outcome.error_kind)
