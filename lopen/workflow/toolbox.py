"""Lopen's own tools (T1–T12) for one invocation, with the completion gate (B2, G6).

A `Toolbox` is made per invocation: it knows the module, step, component and task, records every
state change as an event through the module's journal (the one fold checks each before it is
stored: a contradiction comes back to the model as a refusal it can act on), and remembers which
verifications passed in this invocation and on which git tree. `update_task_status(complete)` is
refused without a passing verification in this invocation, when the tests never ran (B4), and when
the worktree changed since the passing verdict: the completion — and Lopen's commit — is exactly
the tree the oracle judged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from events import catalogue as ev
from events.fold import ModuleState, TaskNode, render_plan, slugify
from events.journal import Contradiction, Journal
from lopen.copilot.tools import LopenTool, NoArguments
from lopen.documents import tools as doc_tools
from lopen.documents.paths import research_path
from lopen.text import plural
from lopen.workflow.oracle import Verdict
from lopen.workflow.steps import STEP_NAMES, phase_of

Verifier = Callable[[str, str, str, str], Verdict]  # (scope, target, notes, invocation id) → verdict with its tree


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


class ToolError(Exception):
    """A refusal the model can read and act on."""


class _Documents:
    """What the document tools read: the module's files in the worktree."""

    def __init__(self, root: Path) -> None:
        self.root = root


class Toolbox:
    def __init__(
        self,
        journal: Journal,
        *,
        invocation_id: str,
        step: int,
        component: str = "",
        task: str = "",
        documents_root: Path,
        verifier: Verifier | None = None,
        tree: Callable[[], str] | None = None,
        untested: Callable[[str], str] | None = None,
    ) -> None:
        self.journal = journal
        self.module = journal.module
        self.invocation_id = invocation_id
        self.step = step
        self.component = component
        self.task = task
        self.documents = _Documents(documents_root)
        self.verifier = verifier
        self.current_tree = tree
        self.untested = untested or (lambda _invocation: "")
        self.passed: dict[tuple[str, str], str] = {}  # (scope, target) → the tree its passing verdict judged

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
            "read_plan": ("Read the module's plan with task states.", doc_tools.ReadPlanArgs, self.read_plan),
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
        return lambda args: handler(args, self.documents)

    def _record(self, *events: ev.Event) -> None:
        try:
            self.journal.record(*events)
        except Contradiction as exc:
            raise ToolError(f"refused: {exc.problem}") from None

    def _state(self) -> ModuleState:
        return self.journal.snapshot()

    # context and documents -------------------------------------------------------------------

    def get_current_context(self, _: NoArguments) -> dict[str, object]:
        task = self.journal.read(lambda s: s.tasks.get(self.task)) if self.task else None
        return {
            "phase": phase_of(self.step).value,
            "step": self.step,
            "step_name": STEP_NAMES[self.step],
            "module": self.module,
            "component": self.component or None,
            "task": task.name if task else None,
            "task_id": self.task or None,
        }

    def read_plan(self, args: doc_tools.ReadPlanArgs) -> str:
        """T3: the plan as recorded right now (rendered from the one fold, never a stale file)."""
        self._check_module(args.module)
        return self.journal.read(render_plan)

    def log_research(self, args: doc_tools.LogResearchArgs) -> str:
        self._check_module(args.module)
        message = doc_tools.log_research(args, self.documents)
        path = research_path(self.documents.root, args.module, args.topic).relative_to(self.documents.root)
        self._record(ev.ResearchLogged(topic=args.topic, path=str(path)))
        return message

    def report_progress(self, args: ReportProgressArgs) -> str:
        self._record(ev.ProgressReported(invocation_id=self.invocation_id, progress=args.progress))
        return "noted"

    # planning ------------------------------------------------------------------------------------

    def record_dependencies(self, args: RecordDependenciesArgs) -> str:
        deps = tuple(ev.Dependency(name=d.name, kind=d.kind, reason=d.reason) for d in args.dependencies)
        self._record(ev.DependenciesRecorded(dependencies=deps, invocation_id=self.invocation_id))
        return f"recorded {plural(len(deps), 'dependency', 'dependencies')}"

    def record_components(self, args: RecordComponentsArgs) -> str:
        if not args.components:
            raise ToolError("record at least one component")
        components = tuple(
            ev.ComponentSpec(name=c.name, description=c.description, status=c.status, depends_on=tuple(c.depends_on))
            for c in args.components
        )
        self._record(ev.ComponentsRecorded(components=components, invocation_id=self.invocation_id))
        return "recorded components: " + ", ".join(slugify(c.name) for c in args.components)

    def select_component(self, args: SelectComponentArgs) -> str:
        state = self._state()
        component = state.component(args.component)
        if component is None:
            known = ", ".join(state.components) or "none yet — call record_components first"
            raise ToolError(f"no component '{args.component}'; components are: {known}")
        if state.component_done(component.slug):
            raise ToolError(f"component '{component.slug}' is already complete; select one that is not")
        blocked = state.blocked_by(component.slug)
        if blocked:
            ready = [s for s in state.components if not state.component_done(s) and not state.blocked_by(s)]
            raise ToolError(
                f"component '{component.slug}' depends on {', '.join(blocked)}, which are not complete yet; "
                f"select one that is ready: {', '.join(ready) or 'none'}"
            )
        self._record(
            ev.ComponentSelected(component=component.slug, reason=args.reason, invocation_id=self.invocation_id)
        )
        self.component = component.slug
        return f"selected {component.slug}"

    def record_tasks(self, args: RecordTasksArgs) -> str:
        """Record the component's task list: started and finished tasks stay; tasks not yet started are
        replaced by the new list (a task of the same name keeps its id); new tasks get ids never used
        before in the module."""
        state = self._state()
        component = state.component(args.component)
        if component is None:
            raise ToolError(f"no component '{args.component}'; record it with record_components first")
        if not args.tasks:
            raise ToolError("record at least one task")
        current = state.component_tasks(component.slug)
        kept = [t for t in current if t.state != "pending"]
        pending = {slugify(t.name): t.id for t in current if t.state == "pending"}
        next_n = component.last_n + 1
        tasks = [_spec(t.id, t.name, t.description, t.subtasks, t.acceptance) for t in kept]
        kept_names = {slugify(t.name) for t in kept}
        for t in args.tasks:
            if slugify(t.name) in kept_names:
                continue  # already started or done: it stays as it is
            task_id = pending.pop(slugify(t.name), None)
            if task_id is None:
                task_id, next_n = f"{component.slug}/{next_n}", next_n + 1
            tasks.append(_spec(task_id, t.name, t.description, t.subtasks, t.acceptance))
        self._record(ev.TasksRecorded(component=component.slug, tasks=tuple(tasks), invocation_id=self.invocation_id))
        return "the tasks of " + component.slug + " are: " + ", ".join(f"{t.id} ({t.name})" for t in tasks)

    # building --------------------------------------------------------------------------------------

    def update_task_status(self, args: UpdateTaskStatusArgs) -> str:
        task = self._task(args.task_id)
        state = task.state
        if state == args.status:
            return f"{task.id} is already {args.status}"
        tree = self._completion_tree(task.id) if args.status == "complete" else ""
        events: list[ev.Event] = []
        if args.status in ("complete", "failed") and state != "in-progress":
            events.append(
                ev.TaskStatusChanged(
                    task_id=task.id,
                    from_state=state,
                    to_state="in-progress",
                    reason="work started",
                    invocation_id=self.invocation_id,
                )
            )
            state = "in-progress"
        if not ev.is_valid_transition(state, args.status):
            raise ToolError(f"{task.id} cannot go from {state} to {args.status}")
        events.append(
            ev.TaskStatusChanged(
                task_id=task.id,
                from_state=state,
                to_state=args.status,
                reason=args.reason,
                tree=tree,
                invocation_id=self.invocation_id,
            )
        )
        self._record(*events)
        return f"{task.id} is now {args.status}"

    def _completion_tree(self, task_id: str) -> str:
        """The verified tree a completion binds to; refuses (recorded) when there is none to bind to."""
        verified = self.passed.get(("task", task_id))
        why = fix = ""
        if verified is None:
            why = "no passing verify_task_completion for this task in this invocation"
            fix = (
                f"Call verify_task_completion('{task_id}') and fix what it reports; "
                "mark the task complete only after it passes."
            )
        elif missing := self.untested(self.invocation_id):
            why = f"the tests were never run in this invocation (the spec's verify-tests is `{missing}`)"
            fix = "Run them with bash, fix what fails, then complete the task."
        elif self.current_tree is not None and verified and (now := self.current_tree()) != verified:
            why = f"the files changed after the passing verification (tree {verified[:10]} → {now[:10]})"
            fix = (
                f"Lopen commits exactly what the reviewer judged: call verify_task_completion('{task_id}') "
                "again on the files as they are now, then complete the task."
            )
        if why:
            self._record(ev.CompletionRefused(scope="task", target=task_id, why=why, invocation_id=self.invocation_id))
            raise ToolError(f"refused: {why}. {fix}")
        return verified or ""

    def verify_task(self, args: VerifyTaskArgs) -> str:
        task = self._task(args.task_id)
        return self._verify("task", task.id, args.notes)

    def verify_component(self, args: VerifyComponentArgs) -> str:
        state = self._state()
        component = state.component(args.component)
        if component is None:
            raise ToolError(f"no component '{args.component}' in the plan")
        open_tasks = [t.id for t in state.component_tasks(component.slug) if t.state != "complete"]
        if open_tasks:
            why = f"tasks not complete yet: {', '.join(open_tasks)}"
            refused = ev.CompletionRefused(
                scope="component", target=component.slug, why=why, invocation_id=self.invocation_id
            )
            self._record(refused)
            raise ToolError(f"refused: {why}")
        return self._verify("component", component.slug, args.notes)

    def verify_module(self, args: VerifyModuleArgs) -> str:
        self._check_module(args.module)
        state = self._state()
        unfinished = [slug for slug in state.components if not state.component_done(slug)]
        if unfinished:
            why = f"components not complete yet: {', '.join(unfinished)}"
            self._record(
                ev.CompletionRefused(scope="module", target=args.module, why=why, invocation_id=self.invocation_id)
            )
            raise ToolError(f"refused: {why}")
        return self._verify("module", args.module, args.notes)

    def _verify(self, scope: str, target: str, notes: str) -> str:
        if self.verifier is None:
            raise ToolError("verification is not available in this invocation")
        verdict = self.verifier(scope, target, notes, self.invocation_id)
        if verdict.passed:
            self.passed[(scope, target)] = verdict.tree
        else:
            self.passed.pop((scope, target), None)
        return msgspec.json.encode(
            {
                "passed": verdict.passed,
                "confidence": verdict.confidence,
                "summary": verdict.summary,
                "findings": verdict.findings,
            }
        ).decode()

    def _task(self, task_id: str) -> TaskNode:
        task = self.journal.read(lambda s: s.tasks.get(task_id))
        if task is None:
            raise ToolError(f"no task '{task_id}'; the current task is '{self.task or 'none'}' (see read_plan)")
        if self.task and task.id != self.task:
            raise ToolError(f"this invocation works on task '{self.task}', not '{task_id}'")
        return task

    def _check_module(self, module: str) -> None:
        if module != self.module:
            raise ToolError(f"this run builds module '{self.module}', not '{module}'")


def _spec(task_id: str, name: str, description: str, subtasks: list[str], acceptance: list[str]) -> ev.TaskSpec:
    return ev.TaskSpec(
        id=task_id, name=name, description=description, subtasks=tuple(subtasks), acceptance=tuple(acceptance)
    )
