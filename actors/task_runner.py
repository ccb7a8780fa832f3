"""The TaskRunner (step 6): one fresh invocation per task, then Lopen's own commit of the
verified work; also the component and module verification invocations."""

from __future__ import annotations

import pykka

from actors.git import GitActor
from actors.messages import Assessment, StepOutcome
from events import catalogue as ev
from lopen.workflow.invoke import Invoker
from lopen.workflow.run import ModuleRun
from lopen.workflow.steps import Kind


class TaskRunnerActor(pykka.ThreadingActor):
    def __init__(self, run: ModuleRun, invoker: Invoker, git: pykka.ActorProxy[GitActor]) -> None:
        super().__init__()
        self.run = run
        self.invoker = invoker
        self.git = git

    def run_task(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        task = self.run.plan().task(assessment.task)
        assert task is not None
        self.run.start_scope("task", task.id, self.git.head().get())
        leftovers = self.run.repo.dirty_files() if task.state == "in-progress" else []
        if leftovers:  # an invocation of this task was cut off (crash, kill): say what it left behind
            shown = ", ".join(leftovers[:20]) + (" …" if len(leftovers) > 20 else "")
            notes = (
                *notes,
                f"An earlier invocation of {task.id} was cut off before it finished. It left these "
                f"uncommitted changes, which are still in the working tree: {shown}. Build on them (edit "
                "files that exist rather than creating them again) or undo what is wrong.",
            )
        if task.state in ("pending", "failed"):
            self.run.record(
                ev.TaskStatusChanged(
                    task_id=task.id, from_state=task.state, to_state="in-progress", reason="invocation started"
                )
            )
        outcome, _ = self.invoker.invoke(
            Kind.TASK,
            6,
            component=assessment.component,
            task=task.id,
            task_text=self.run.task_text(task),
            last_task_of_component=assessment.last_task_of_component,
            budget_hint=budget_hint,
            notes=notes,
        )
        after = self.run.plan().task(task.id)
        if after is not None and after.state == "complete":
            sha = self.git.commit_task(task.id, task.name, assessment.component).get()
            return StepOutcome(ok=True, detail=f"{task.id} complete" + (f", commit {sha[:8]}" if sha else ""))
        reason = outcome.detail if not outcome.ok else "the invocation ended without completing the task"
        if after is not None and after.state == "in-progress":
            self.run.record(
                ev.TaskStatusChanged(task_id=task.id, from_state="in-progress", to_state="failed", reason=reason[:500])
            )
        return StepOutcome(ok=False, detail=f"{task.id} failed: {reason[:300]}", error_kind=outcome.error_kind)

    def verify_scope(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        kind = Kind(assessment.kind)
        scope, target = (
            ("module", self.run.module) if kind is Kind.MODULE_VERIFICATION else ("component", assessment.component)
        )
        outcome, _ = self.invoker.invoke(
            kind, assessment.step, component=assessment.component, budget_hint=budget_hint, notes=notes
        )
        if (scope, target) in self.run.verified():
            return StepOutcome(ok=True, detail=f"{scope} {target} verified")
        detail = outcome.detail if not outcome.ok else f"{scope} {target} did not pass verification"
        return StepOutcome(ok=False, detail=detail, error_kind=outcome.error_kind)
