"""The Planner (steps 2–5): one planning invocation that records dependencies, components,
the selected component and its tasks (only steps 4–5 when looping back from step 7)."""

from __future__ import annotations

import pykka

from actors.messages import Assessment, StepOutcome
from lopen.workflow.invoke import Invoker
from lopen.workflow.run import ModuleRun
from lopen.workflow.steps import Kind


class PlannerActor(pykka.ThreadingActor):
    def __init__(self, run: ModuleRun, invoker: Invoker) -> None:
        super().__init__()
        self.run = run
        self.invoker = invoker

    def plan(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        outcome, _ = self.invoker.invoke(Kind.PLANNING, assessment.step, budget_hint=budget_hint, notes=notes)
        if not outcome.ok:
            return StepOutcome(ok=False, detail=outcome.detail, error_kind=outcome.error_kind)
        plan = self.run.plan()
        selected = plan.component(plan.selected) if plan.selected else None
        if selected is None or not any(t.state != "complete" for t in selected.tasks):
            return StepOutcome(ok=False, detail="the planning invocation ended without a selected component with tasks")
        return StepOutcome(ok=True, detail=f"planned {selected.slug}: {len(selected.tasks)} tasks")
