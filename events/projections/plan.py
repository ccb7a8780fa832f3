"""Plan progress (W5): module → component → task → subtask, rendered to ``.lopen/modules/<m>/plan.md``.

Task states change only along W5 transitions (``catalogue.TASK_TRANSITIONS``), and a
``TaskStatusChanged`` must name the state the task is in. Subtasks are checklist items
that share their task's state. Parent state is aggregated from children: failed wins,
all complete = complete, all pending = pending, else in-progress. A component without
tasks is complete when it was recorded as ``done``, else pending.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from events import catalogue as ev
from events.errors import StoreWriteError
from events.projections.base import Invalid, Projection, Table


class TaskView(msgspec.Struct, kw_only=True):
    id: str
    name: str
    description: str = ""
    state: str = "pending"
    subtasks: list[str] = []
    acceptance: list[str] = []


class ComponentView(msgspec.Struct, kw_only=True):
    name: str
    description: str = ""
    status: str = "missing"
    depends_on: list[str] = []
    tasks: list[TaskView] = []

    @property
    def state(self) -> str:
        if self.tasks:
            return aggregate([t.state for t in self.tasks])
        return "complete" if self.status == "done" else "pending"


class PlanView(msgspec.Struct, kw_only=True):
    module: str
    selected: str = ""
    dependencies: list[ev.Dependency] = []
    components: list[ComponentView] = []

    @property
    def state(self) -> str:
        return aggregate([c.state for c in self.components])

    def component(self, name: str) -> ComponentView | None:
        return next((c for c in self.components if c.name == name), None)

    def task(self, task_id: str) -> tuple[ComponentView, TaskView] | None:
        for c in self.components:
            for t in c.tasks:
                if t.id == task_id:
                    return c, t
        return None


def aggregate(states: list[str]) -> str:
    if not states or all(s == "pending" for s in states):
        return "pending"
    if "failed" in states:
        return "failed"
    if all(s == "complete" for s in states):
        return "complete"
    return "in-progress"


Plans = Table[PlanView]


def _plan(t: Plans, e: ev.Event) -> PlanView:
    plan = t.get(e.module) or PlanView(module=e.module)
    t.put(e.module, plan)
    return plan


def _dependencies(t: Plans, seq: int, e: ev.DependenciesRecorded) -> None:
    _plan(t, e).dependencies = list(e.dependencies)


def _components(t: Plans, seq: int, e: ev.ComponentsRecorded) -> None:
    plan = _plan(t, e)
    old = {c.name: c for c in plan.components}
    plan.components = [
        ComponentView(
            name=c.name,
            description=c.description,
            status=c.status,
            depends_on=list(c.depends_on),
            tasks=old[c.name].tasks if c.name in old else [],
        )
        for c in e.components
    ]


def _selected(t: Plans, seq: int, e: ev.ComponentSelected) -> None:
    _plan(t, e).selected = e.component


def _tasks(t: Plans, seq: int, e: ev.TasksRecorded) -> None:
    plan = _plan(t, e)
    component = plan.component(e.component)
    if component is None:
        component = ComponentView(name=e.component)
        plan.components.append(component)
    states = {task.id: task.state for task in component.tasks}
    for spec in e.tasks:
        found = plan.task(spec.id)
        if found is not None and found[0] is not component:
            raise Invalid(f"task {spec.id} already belongs to component {found[0].name!r}")
    component.tasks = [
        TaskView(
            id=s.id,
            name=s.name,
            description=s.description,
            state=states.get(s.id, "pending"),
            subtasks=list(s.subtasks),
            acceptance=list(s.acceptance),
        )
        for s in e.tasks
    ]


def _status(t: Plans, seq: int, e: ev.TaskStatusChanged) -> None:
    plan = _plan(t, e)
    found = plan.task(e.task_id)
    if found is None:
        raise Invalid(f"task {e.task_id} is not in the plan of module {e.module!r}")
    task = found[1]
    if task.state != e.from_state:
        raise Invalid(f"task {e.task_id} is {task.state!r}, but the event moves it from {e.from_state!r}")
    if not ev.is_valid_transition(e.from_state, e.to_state):
        raise Invalid(f"task {e.task_id}: {e.from_state} → {e.to_state} is not a valid transition (W5)")
    task.state = e.to_state


def _reopened(t: Plans, seq: int, e: ev.TaskReopened) -> None:
    found = _plan(t, e).task(e.task_id)
    if found is None:
        raise Invalid(f"task {e.task_id} is not in the plan of module {e.module!r}")
    found[1].state = "pending"


def _box(state: str) -> str:
    return "[x]" if state == "complete" else "[ ]"


def render(plan: PlanView) -> str:
    """The plan as a markdown checkbox tree (``plan.md``)."""
    tasks = [t for c in plan.components for t in c.tasks]
    done = sum(t.state == "complete" for t in tasks)
    lines = [
        f"# Plan: {plan.module}",
        "",
        "<!-- Rendered by lopen from the event store; edits here are overwritten. -->",
        "",
        f"State: {plan.state} — {done} of {len(tasks)} tasks complete",
        "",
    ]
    if plan.dependencies:
        lines += ["## Dependencies", ""]
        lines += [
            f"- {d.name}" + (f" ({d.kind})" if d.kind else "") + (f": {d.reason}" if d.reason else "")
            for d in plan.dependencies
        ]
        lines.append("")
    lines += ["## Components", ""]
    for c in plan.components:
        selected = " (selected)" if c.name == plan.selected else ""
        lines.append(f"- {_box(c.state)} **{c.name}** — {c.state}{selected}")
        for task in c.tasks:
            note = f" — {task.state}" if task.state in ("in-progress", "failed") else ""
            lines.append(f"  - {_box(task.state)} `{task.id}` {task.name}{note}")
            lines += [f"    - {_box(task.state)} {s}" for s in task.subtasks]
    if not plan.components:
        lines.append("_No components recorded yet._")
    return "\n".join(lines) + "\n"


def plan_path(root: Path, module: str) -> Path:
    return root / ".lopen" / "modules" / module / "plan.md"


def write_plans(root: Path, plans: dict[str, Any]) -> None:
    """Render changed plans to their files, atomically (a reader never sees half a file);
    a file that already holds the same text is left alone."""
    for module, plan in plans.items():
        path = plan_path(root, module)
        text = render(plan)
        try:
            if path.is_file() and path.read_text(encoding="utf-8") == text:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".plan.md.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            raise StoreWriteError(
                f"cannot write {path}",
                f"{exc.strerror or exc} (errno {exc.errno})",
                f"make {path.parent} writable (and check free disk space); "
                "`lopen projections rebuild` renders it again",
            ) from exc


PROJECTION = Projection(
    name="plan",
    row=PlanView,
    handlers={
        ev.DependenciesRecorded: _dependencies,
        ev.ComponentsRecorded: _components,
        ev.ComponentSelected: _selected,
        ev.TasksRecorded: _tasks,
        ev.TaskStatusChanged: _status,
        ev.TaskReopened: _reopened,
    },
    on_flush=write_plans,
)
