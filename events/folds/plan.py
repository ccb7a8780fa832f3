"""The plan: dependencies, components (keyed by slug, with their dependencies), tasks and their W5
states, the component selected, and the task numbers ever given (ids are never reused).

``ModuleState`` fields: ``dependencies``, ``components``, ``tasks``, ``selected``, ``task_numbers``.
A task's verdicts and scopes are invalidated by ``events.folds.scopes`` on the same events; the
approval baseline a first plan takes is ``events.folds.approval``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

import msgspec

from events import catalogue as ev
from events.catalogue import ComponentStatus, TaskState
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState


@lru_cache(maxsize=4096)
def slugify(name: str) -> str:
    """A component's key: ``"Token Issuer"`` → ``"token-issuer"`` (remembered: a plan's few names come back
    with every plan, selection and task list of a module's history)."""
    out = "".join(ch if ch.isalnum() else "-" for ch in name.strip().lower())
    return "-".join(part for part in out.split("-") if part) or "component"


def aggregate(states: Iterable[str]) -> str:
    """W5 parent state: failed wins, all complete = complete, all pending = pending, else in-progress."""
    states = list(states)
    if not states or all(s == "pending" for s in states):
        return "pending"
    if "failed" in states:
        return "failed"
    if all(s == "complete" for s in states):
        return "complete"
    return "in-progress"


class TaskNode(msgspec.Struct, kw_only=True):
    id: str
    name: str
    component: str
    description: str = ""
    subtasks: list[str] = []
    acceptance: list[str] = []
    state: TaskState = "pending"
    tree: str = ""  # the verified tree its completion is bound to
    commit: str = ""  # Lopen's commit of that tree
    invocation: str = ""  # the invocation that completed it
    failures: int = 0
    reasons: list[str] = []
    seconds: float = 0.0  # P2: the wall time of its invocations (not the oracle's: they run inside them)
    added: int = 0  # P2: lines its commit added and removed, and files it changed (CommitRecorded)
    removed: int = 0
    files: int = 0

    def spec(self) -> ev.TaskSpec:
        """The task as ``TasksRecorded`` records it: how a component's plan is recorded again."""
        return ev.TaskSpec(
            id=self.id,
            name=self.name,
            description=self.description,
            subtasks=tuple(self.subtasks),
            acceptance=tuple(self.acceptance),
        )


class ComponentNode(msgspec.Struct, kw_only=True):
    slug: str
    name: str
    description: str = ""
    status: ComponentStatus = "missing"
    depends_on: list[str] = []  # slugs of components (names that are not components are external)
    tasks: list[str] = []
    last_n: int = 0  # the highest task number ever given here: task ids are never reused


# -- DependenciesRecorded ------------------------------------------------------------------------


def _dependencies(s: ModuleState, e: ev.DependenciesRecorded) -> None:
    s.dependencies = list(e.dependencies)


# -- ComponentsRecorded: distinct names, no cycle, no started component dropped -------------------


def _check_components(s: ModuleState, e: ev.ComponentsRecorded) -> str | None:
    slugs = [slugify(c.name) for c in e.components]
    if len(set(slugs)) != len(slugs):
        return f"component names must be distinct; got {', '.join(slugs)}"
    graph = {slug: [slugify(d) for d in c.depends_on] for slug, c in zip(slugs, e.components, strict=True)}
    for slug, deps in graph.items():
        if slug in deps:
            return f"component {slug} depends on itself"
    cycle = _cycle(graph)
    if cycle:
        return f"the components' depends_on form a cycle: {' → '.join(cycle)}"
    for slug, node in s.components.items():
        if slug in graph:
            continue
        started = [t for t in node.tasks if s.tasks[t].state != "pending"]
        if started:
            return f"component {slug} has started work ({', '.join(started)}) and cannot be dropped"
    return None


def _cycle(graph: dict[str, list[str]]) -> list[str]:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> list[str]:
        if node in done or node not in graph:
            return []
        if node in visiting:
            return [*visiting[visiting.index(node) :], node]
        visiting.append(node)
        for dep in graph[node]:
            found = visit(dep)
            if found:
                return found
        visiting.pop()
        done.add(node)
        return []

    for node in graph:
        found = visit(node)
        if found:
            return found
    return []


def _components(s: ModuleState, e: ev.ComponentsRecorded) -> None:
    old = s.components
    fresh: dict[str, ComponentNode] = {}
    for spec in e.components:
        slug = slugify(spec.name)
        known = old.get(slug)
        fresh[slug] = ComponentNode(
            slug=slug,
            name=spec.name,
            description=spec.description,
            status=spec.status,
            depends_on=list(dict.fromkeys(slugify(d) for d in spec.depends_on)),
            tasks=known.tasks if known else [],
            last_n=known.last_n if known else s.task_numbers.get(slug, 0),
        )
    for slug, node in old.items():  # a dropped component's pending tasks go with it
        if slug not in fresh:
            for task_id in node.tasks:
                s.tasks.pop(task_id, None)
    s.components = fresh
    if s.selected and s.selected not in fresh:
        s.selected = ""


# -- ComponentSelected: a component of the plan, not complete, not blocked -------------------------


def _check_selected(s: ModuleState, e: ev.ComponentSelected) -> str | None:
    slug = slugify(e.component)
    if slug not in s.components:
        return f"no component {e.component!r} in the plan"
    if s.component_done(slug):
        return f"component {slug} is already complete"
    blocked = s.blocked_by(slug)
    if blocked:
        return f"component {slug} depends on {', '.join(blocked)}, which are not complete yet"
    return None


def _selected(s: ModuleState, e: ev.ComponentSelected) -> None:
    s.selected = slugify(e.component)


# -- TasksRecorded: a known component, distinct ids of its own, no started task dropped ------------


def _check_tasks(s: ModuleState, e: ev.TasksRecorded) -> str | None:
    slug = slugify(e.component)
    component = s.components.get(slug)
    if component is None:
        return f"no component {e.component!r} in the plan"
    ids = [t.id for t in e.tasks]
    if len(set(ids)) != len(ids):
        return f"task ids must be distinct; got {', '.join(ids)}"
    for spec in e.tasks:
        owner = s.tasks.get(spec.id)
        if owner is not None and owner.component != slug:
            return f"task {spec.id} already belongs to component {owner.component!r}"
        if owner is None and not spec.id.startswith(f"{slug}/"):
            return f"task id {spec.id} is not of the form {slug}/<n>"
    started = [t for t in component.tasks if s.tasks[t].state != "pending" and t not in ids]
    if started:
        return f"tasks with started or finished work cannot be dropped: {', '.join(started)}"
    return None


def _tasks(s: ModuleState, e: ev.TasksRecorded) -> None:
    slug = slugify(e.component)
    component = s.components[slug]
    ids = [t.id for t in e.tasks]
    for task_id in component.tasks:
        if task_id not in ids:
            s.tasks.pop(task_id, None)
    for spec in e.tasks:
        known = s.tasks.get(spec.id)
        node = TaskNode(
            id=spec.id,
            name=spec.name,
            component=slug,
            description=spec.description,
            subtasks=list(spec.subtasks),
            acceptance=list(spec.acceptance),
        )
        if known is not None:
            node.state, node.tree, node.commit = known.state, known.tree, known.commit
            node.failures, node.reasons = known.failures, known.reasons
        s.tasks[spec.id] = node
        number = spec.id.rsplit("/", 1)[-1]
        if number.isdigit():
            component.last_n = max(component.last_n, int(number))
            s.task_numbers[slug] = max(s.task_numbers.get(slug, 0), int(number))
    component.tasks = ids


# -- TaskStatusChanged: a task of the plan, moved from the state it is in, along W5 ----------------


def _check_status(s: ModuleState, e: ev.TaskStatusChanged) -> str | None:
    task = s.tasks.get(e.task_id)
    if task is None:
        return f"task {e.task_id} is not in the plan of module {s.module!r}"
    if task.state != e.from_state:
        return f"task {e.task_id} is {task.state!r}, but the event moves it from {e.from_state!r}"
    if not ev.is_valid_transition(e.from_state, e.to_state):
        return f"task {e.task_id}: {e.from_state} → {e.to_state} is not a valid transition (W5)"
    return None


def _status(s: ModuleState, e: ev.TaskStatusChanged) -> None:
    task = s.tasks[e.task_id]
    task.state = e.to_state
    if e.to_state == "complete":
        task.tree, task.invocation = e.tree, e.invocation_id
    if e.to_state == "failed":
        task.failures += 1
        task.reasons = [*task.reasons, e.reason][-10:]
    if e.to_state == "in-progress":
        task.tree = task.commit = ""


# -- TaskReopened: a task of the plan starts afresh ------------------------------------------------


def _check_task_exists(s: ModuleState, e: ev.TaskReopened) -> str | None:
    return None if e.task_id in s.tasks else f"task {e.task_id} is not in the plan of module {s.module!r}"


def _reopened(s: ModuleState, e: ev.TaskReopened) -> None:
    task = s.tasks[e.task_id]
    task.state, task.tree, task.commit = "pending", "", ""
    task.added = task.removed = task.files = 0  # its commit is no longer the module's
    task.failures, task.reasons = 0, []  # a re-opened task starts afresh: earlier failures were another try


RULES: dict[type, Rule] = {
    ev.DependenciesRecorded: Rule(None, _dependencies),
    ev.ComponentsRecorded: Rule(_check_components, _components),
    ev.ComponentSelected: Rule(_check_selected, _selected),
    ev.TasksRecorded: Rule(_check_tasks, _tasks),
    ev.TaskStatusChanged: Rule(_check_status, _status),
    ev.TaskReopened: Rule(_check_task_exists, _reopened),
}
