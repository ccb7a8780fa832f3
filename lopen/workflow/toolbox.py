"""Lopen's own tools (T1–T12) for one invocation, with the completion gate (B2).

A `Toolbox` is made per invocation: it knows the module, step, component and task, records
every state change as an event through the run's journal, and remembers which verifications
passed in this invocation — `update_task_status(complete)` without one is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

import msgspec

from events import catalogue as ev
from lopen.copilot.tools import LopenTool, NoArguments
from lopen.documents import tools as doc_tools
from lopen.documents.paths import research_path
from lopen.workflow.oracle import Verdict
from lopen.workflow.steps import STEP_NAMES, phase_of


class DependencyArg(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    kind: str = ""
    reason: str = ""


class RecordDependenciesArgs(msgspec.Struct, forbid_unknown_fields=True):
    dependencies: list[DependencyArg]


class ComponentArg(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    description: str = ""
    status: Literal["missing", "partial", "done"] = "missing"
    depends_on: list[str] = []


class RecordComponentsArgs(msgspec.Struct, forbid_unknown_fields=True):
    components: list[ComponentArg]


class SelectComponentArgs(msgspec.Struct, forbid_unknown_fields=True):
    component: str
    reason: str = ""


class TaskArg(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    description: str = ""
    subtasks: list[str] = []
    acceptance: list[str] = []


class RecordTasksArgs(msgspec.Struct, forbid_unknown_fields=True):
    component: str
    tasks: list[TaskArg]


class UpdateTaskStatusArgs(msgspec.Struct, forbid_unknown_fields=True):
    task_id: str
    status: Literal["in-progress", "complete", "failed"]
    reason: str = ""


class VerifyTaskArgs(msgspec.Struct, forbid_unknown_fields=True):
    task_id: str
    notes: str = ""


class VerifyComponentArgs(msgspec.Struct, forbid_unknown_fields=True):
    component: str
    notes: str = ""


class VerifyModuleArgs(msgspec.Struct, forbid_unknown_fields=True):
    module: str
    notes: str = ""


class ReportProgressArgs(msgspec.Struct, forbid_unknown_fields=True):
    progress: str


class Run(Protocol):
    """What the tools need from the run they belong to (implemented by `lopen.workflow.run`)."""

    module: str
    root: Path

    def record(self, *events: ev.Event) -> None: ...
    def plan(self) -> PlanView: ...
    def verify(self, scope: str, target: str, notes: str, invocation_id: str) -> Verdict: ...
    def untested(self) -> str: ...
    def documents(self) -> doc_tools.ToolContext: ...


class TaskView(msgspec.Struct, frozen=True):
    id: str
    name: str
    component: str
    state: str
    description: str = ""
    subtasks: tuple[str, ...] = ()
    acceptance: tuple[str, ...] = ()


class ComponentView(msgspec.Struct, frozen=True):
    slug: str
    name: str
    status: str
    tasks: tuple[TaskView, ...] = ()


class PlanView(msgspec.Struct, frozen=True):
    components: tuple[ComponentView, ...]
    selected: str = ""

    def component(self, name: str) -> ComponentView | None:
        key = slugify(name)
        return next((c for c in self.components if c.slug == key), None)

    def task(self, task_id: str) -> TaskView | None:
        return next((t for c in self.components for t in c.tasks if t.id == task_id), None)


def slugify(name: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in name.strip().lower())
    return "-".join(part for part in out.split("-") if part) or "component"


class ToolError(Exception):
    """A refusal the model can read and act on."""


class Toolbox:
    def __init__(self, run: Run, *, invocation_id: str, step: int, component: str = "", task: str = "") -> None:
        self.run = run
        self.invocation_id = invocation_id
        self.step = step
        self.component = component
        self.task = task
        self.passed: set[tuple[str, str]] = set()

    def tools(self, names: tuple[str, ...]) -> list[LopenTool]:
        table: dict[str, tuple[str, type[msgspec.Struct], Callable]] = {
            "get_current_context": ("Where the workflow stands now.", NoArguments, self.get_current_context),
            "read_spec": (
                "Read one section of a module's specification.",
                doc_tools.ReadSpecArgs,
                self._doc(doc_tools.read_spec),
            ),
            "read_research": (
                "Read a research note by topic.",
                doc_tools.ReadResearchArgs,
                self._doc(doc_tools.read_research),
            ),
            "read_plan": (
                "Read the module's plan with task states.",
                doc_tools.ReadPlanArgs,
                self._doc(doc_tools.read_plan),
            ),
            "log_research": ("Save a research note for the module.", doc_tools.LogResearchArgs, self.log_research),
            "report_progress": ("Report progress to the user.", ReportProgressArgs, self.report_progress),
            "record_dependencies": (
                "Record the module's dependencies.",
                RecordDependenciesArgs,
                self.record_dependencies,
            ),
            "record_components": ("Record the module's components.", RecordComponentsArgs, self.record_components),
            "select_component": ("Select the next component to build.", SelectComponentArgs, self.select_component),
            "record_tasks": ("Record a component's tasks.", RecordTasksArgs, self.record_tasks),
            "update_task_status": ("Change a task's status.", UpdateTaskStatusArgs, self.update_task_status),
            "verify_task_completion": ("Verify a task before completing it.", VerifyTaskArgs, self.verify_task),
            "verify_component_completion": (
                "Verify a component at its boundary.",
                VerifyComponentArgs,
                self.verify_component,
            ),
            "verify_module_completion": ("Verify the whole module.", VerifyModuleArgs, self.verify_module),
        }
        return [LopenTool(name, *table[name]) for name in names]

    def _doc(self, handler: Callable) -> Callable:
        return lambda args: handler(args, self.run.documents())

    def _record(self, *events: ev.Event) -> None:
        self.run.record(*events)

    # context and documents -------------------------------------------------------------------

    def get_current_context(self, _: NoArguments) -> dict[str, object]:
        task = self.run.plan().task(self.task) if self.task else None
        return {
            "phase": phase_of(self.step).value,
            "step": self.step,
            "step_name": STEP_NAMES[self.step],
            "module": self.run.module,
            "component": self.component or None,
            "task": task.name if task else None,
            "task_id": self.task or None,
        }

    def log_research(self, args: doc_tools.LogResearchArgs) -> str:
        self._check_module(args.module)
        message = doc_tools.log_research(args, self.run.documents())
        path = research_path(self.run.root, args.module, args.topic).relative_to(self.run.root)
        self._record(ev.ResearchLogged(topic=args.topic, path=str(path)))
        return message

    def report_progress(self, args: ReportProgressArgs) -> str:
        self._record(ev.ProgressReported(invocation_id=self.invocation_id, progress=args.progress))
        return "noted"

    # planning ------------------------------------------------------------------------------------

    def record_dependencies(self, args: RecordDependenciesArgs) -> str:
        deps = tuple(ev.Dependency(name=d.name, kind=d.kind, reason=d.reason) for d in args.dependencies)
        self._record(ev.DependenciesRecorded(dependencies=deps))
        return f"recorded {len(deps)} dependencies"

    def record_components(self, args: RecordComponentsArgs) -> str:
        if not args.components:
            raise ToolError("record at least one component")
        names = [slugify(c.name) for c in args.components]
        if len(set(names)) != len(names):
            raise ToolError(f"component names must be distinct; got {', '.join(names)}")
        components = tuple(
            ev.ComponentSpec(name=c.name, description=c.description, status=c.status, depends_on=tuple(c.depends_on))
            for c in args.components
        )
        self._record(ev.ComponentsRecorded(components=components))
        return "recorded components: " + ", ".join(names)

    def select_component(self, args: SelectComponentArgs) -> str:
        plan = self.run.plan()
        component = plan.component(args.component)
        if component is None:
            known = ", ".join(c.name for c in plan.components) or "none yet — call record_components first"
            raise ToolError(f"no component '{args.component}'; components are: {known}")
        if component.status == "complete":
            raise ToolError(f"component '{component.name}' is already complete; select one that is not")
        self.component = component.slug
        self._record(ev.ComponentSelected(component=component.slug, reason=args.reason))
        return f"selected {component.slug}"

    def record_tasks(self, args: RecordTasksArgs) -> str:
        """Record the component's task list: started and finished tasks stay; tasks not yet started are
        replaced by the new list (a task of the same name keeps its id); new tasks get new ids."""
        plan = self.run.plan()
        component = plan.component(args.component)
        if component is None:
            raise ToolError(f"no component '{args.component}'; record it with record_components first")
        if not args.tasks:
            raise ToolError("record at least one task")
        kept = [t for t in component.tasks if t.state != "pending"]
        pending = {slugify(t.name): t.id for t in component.tasks if t.state == "pending"}
        used = [int(t.id.rsplit("/", 1)[1]) for t in component.tasks]
        next_n = max(used, default=0) + 1
        tasks = [
            ev.TaskSpec(id=t.id, name=t.name, description=t.description, subtasks=t.subtasks, acceptance=t.acceptance)
            for t in kept
        ]
        for t in args.tasks:
            task_id = pending.pop(slugify(t.name), None)
            if task_id is None:
                task_id, next_n = f"{component.slug}/{next_n}", next_n + 1
            tasks.append(
                ev.TaskSpec(
                    id=task_id,
                    name=t.name,
                    description=t.description,
                    subtasks=tuple(t.subtasks),
                    acceptance=tuple(t.acceptance),
                )
            )
        self._record(ev.TasksRecorded(component=component.slug, tasks=tuple(tasks)))
        return "the tasks of " + component.slug + " are: " + ", ".join(f"{t.id} ({t.name})" for t in tasks)

    # building --------------------------------------------------------------------------------------

    def update_task_status(self, args: UpdateTaskStatusArgs) -> str:
        task = self._task(args.task_id)
        if args.status == "complete" and ("task", task.id) not in self.passed:
            why = "no passing verify_task_completion for this task in this invocation"
            self._record(ev.CompletionRefused(scope="task", target=task.id, why=why))
            raise ToolError(
                f"refused: {why}. Call verify_task_completion('{task.id}') and fix what it reports; "
                "mark the task complete only after it passes."
            )
        if args.status == "complete" and (missing := self.run.untested()):
            why = f"the tests were never run in this invocation (the spec's verify-tests is `{missing}`)"
            self._record(ev.CompletionRefused(scope="task", target=task.id, why=why))
            raise ToolError(f"refused: {why}. Run them with bash, fix what fails, then complete the task.")
        if task.state == args.status:
            return f"{task.id} is already {args.status}"
        if args.status in ("complete", "failed") and task.state != "in-progress":
            self._record(
                ev.TaskStatusChanged(
                    task_id=task.id, from_state=task.state, to_state="in-progress", reason="work started"
                )
            )
            task = msgspec.structs.replace(task, state="in-progress")
        if not ev.is_valid_transition(task.state, args.status):
            raise ToolError(f"{task.id} cannot go from {task.state} to {args.status}")
        self._record(
            ev.TaskStatusChanged(task_id=task.id, from_state=task.state, to_state=args.status, reason=args.reason)
        )
        return f"{task.id} is now {args.status}"

    def verify_task(self, args: VerifyTaskArgs) -> str:
        task = self._task(args.task_id)
        return self._verify("task", task.id, args.notes)

    def verify_component(self, args: VerifyComponentArgs) -> str:
        component = self.run.plan().component(args.component)
        if component is None:
            raise ToolError(f"no component '{args.component}' in the plan")
        open_tasks = [t.id for t in component.tasks if t.state != "complete"]
        if open_tasks:
            why = f"tasks not complete yet: {', '.join(open_tasks)}"
            self._record(ev.CompletionRefused(scope="component", target=component.slug, why=why))
            raise ToolError(f"refused: {why}")
        return self._verify("component", component.slug, args.notes)

    def verify_module(self, args: VerifyModuleArgs) -> str:
        self._check_module(args.module)
        unfinished = [c.name for c in self.run.plan().components if c.status != "complete"]
        if unfinished:
            why = f"components not complete yet: {', '.join(unfinished)}"
            self._record(ev.CompletionRefused(scope="module", target=args.module, why=why))
            raise ToolError(f"refused: {why}")
        return self._verify("module", args.module, args.notes)

    def _verify(self, scope: str, target: str, notes: str) -> str:
        verdict = self.run.verify(scope, target, notes, self.invocation_id)
        if verdict.passed:
            self.passed.add((scope, target))
        return msgspec.json.encode(
            {
                "passed": verdict.passed,
                "confidence": verdict.confidence,
                "summary": verdict.summary,
                "findings": verdict.findings,
            }
        ).decode()

    def _task(self, task_id: str) -> TaskView:
        task = self.run.plan().task(task_id)
        if task is None:
            raise ToolError(f"no task '{task_id}'; the current task is '{self.task or 'none'}' (see read_plan)")
        if self.task and task.id != self.task:
            raise ToolError(f"this invocation works on task '{self.task}', not '{task_id}'")
        return task

    def _check_module(self, module: str) -> None:
        if module != self.run.module:
            raise ToolError(f"this run builds module '{self.run.module}', not '{module}'")
