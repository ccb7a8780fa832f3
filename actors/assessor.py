"""The Assessor (W3): works out where the module really stands, from the recorded plan, the
verdicts and the repository — never from a cached "current step"."""

from __future__ import annotations

import pykka

from actors.messages import Assessment
from lopen.workflow.run import ModuleRun
from lopen.workflow.steps import Kind
from lopen.workflow.toolbox import ComponentView, PlanView


def assess(plan: PlanView, verified: set[tuple[str, str]], module: str, replan_from: int = 0) -> Assessment:
    """The next step for ``plan``; ``verified`` holds the (scope, target) pairs that passed; ``replan_from``
    is the step a spec drift re-enters at (0 = none)."""
    if replan_from:
        return Assessment(step=replan_from, kind=Kind.PLANNING.value, why="the specification changed: re-planning")
    if not plan.components:
        return Assessment(step=2, kind=Kind.PLANNING.value, why="no components recorded yet")
    selected = plan.component(plan.selected) if plan.selected else None
    if selected is None or _done(selected, verified):
        remaining = [c for c in plan.components if not _done(c, verified)]
        if remaining:
            why = "no component selected yet" if selected is None else f"component {selected.slug} is complete"
            return Assessment(step=4, kind=Kind.PLANNING.value, why=f"{why}; {len(remaining)} remain")
        if ("module", module) in verified:
            return Assessment(step=7, kind="complete", why="every component is complete and the module is verified")
        return Assessment(step=7, kind=Kind.MODULE_VERIFICATION.value, why="every component is complete")
    if not selected.tasks:
        return Assessment(
            step=4, kind=Kind.PLANNING.value, component=selected.slug, why=f"component {selected.slug} has no tasks yet"
        )
    open_tasks = [t for t in selected.tasks if t.state != "complete"]
    if open_tasks:
        task = open_tasks[0]
        return Assessment(
            step=6,
            kind=Kind.TASK.value,
            component=selected.slug,
            task=task.id,
            last_task_of_component=len(open_tasks) == 1,
            why=f"task {task.id} is {task.state}",
        )
    return Assessment(
        step=6,
        kind=Kind.COMPONENT_VERIFICATION.value,
        component=selected.slug,
        why=f"all tasks of {selected.slug} are complete; the component is not verified yet",
    )


def _done(component: ComponentView, verified: set[tuple[str, str]]) -> bool:
    if component.status == "done" and not component.tasks:
        return True
    return (
        bool(component.tasks)
        and ("component", component.slug) in verified
        and all(t.state == "complete" for t in component.tasks)
    )


class AssessorActor(pykka.ThreadingActor):
    def __init__(self, run: ModuleRun) -> None:
        super().__init__()
        self.run = run

    def assess(self) -> Assessment:
        self.run.reopen_lost_tasks()
        self.run.check_drift()
        return assess(self.run.plan(), self.run.verified(), self.run.module, self.run.state.replan_from)
