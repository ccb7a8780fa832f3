"""Lopen's own tools (T1–T12) for one invocation, with the completion gate (B2, G6).

A `Toolbox` is made per invocation: it knows the module, step, component and task, records every
state change as an event through the module's journal (the one fold checks each before it is
stored: a contradiction comes back to the model as a refusal it can act on), and remembers which
verifications passed in this invocation and on which git tree. `update_task_status(complete)` is
refused without a passing verification in this invocation, when the tests never ran (B4), and when
the worktree changed since the passing verdict: the completion — and Lopen's commit — is exactly
the tree the oracle judged.

Each tool states its contract to the model (``DESCRIPTIONS``, and a description on every argument):
what it changes, what it refuses, what comes next. Ids Lopen knows default to the invocation's
(task, component, module). `record_components` and `record_tasks` merge into what is recorded
unless asked to replace it, and a task's acceptance items must cite the approved spec's criteria.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import msgspec
from msgspec import Meta

from events import catalogue as ev
from events.fold import ComponentNode, ModuleState, TaskNode, render_plan, slugify
from events.journal import Contradiction, Journal
from lopen.copilot.tools import LopenTool, NoArguments
from lopen.documents import DocumentError, acceptance_criteria, load_spec
from lopen.documents import tools as doc_tools
from lopen.documents.paths import research_path
from lopen.text import plural
from lopen.workflow.oracle import Verdict
from lopen.workflow.steps import STEP_NAMES, phase_of

Verifier = Callable[[str, str, str, str], Verdict]  # (scope, target, notes, invocation id) → verdict with its tree


class DependencyArg(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Annotated[str, Meta(description="The dependency, e.g. a library 'PyJWT', a service, a tool or a module")]
    kind: Annotated[str, Meta(description="What it is: library, service, tool, module, …")] = ""
    reason: Annotated[str, Meta(description="What the module needs it for")] = ""


class RecordDependenciesArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    dependencies: Annotated[
        list[DependencyArg], Meta(description="Every dependency of the module: the list replaces the one recorded")
    ]


COMPONENT_STATUS = (
    "How much of it exists: 'missing' nothing yet; 'partial' some code exists (it gets tasks for the rest); "
    "'done' it exists and is tested already — Lopen takes your word: it gets no tasks and is not built or "
    "verified on its own, only its criteria are judged in the module's final verification (a failure there "
    "becomes a fix task). When in doubt, say 'partial'"
)


class ComponentArg(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Annotated[
        str,
        Meta(description="The component's name; its slug is its key ('Token Issuer' and 'token-issuer' are one)"),
    ]
    description: Annotated[
        str, Meta(description="What it does, where its code lives (files, public names), the criteria it covers")
    ] = ""
    status: Annotated[Literal["missing", "partial", "done"], Meta(description=COMPONENT_STATUS)] = "missing"
    depends_on: Annotated[
        list[str],
        Meta(
            description="Components that must be complete before this one can be selected; a name that is not "
            "a component (a library) is only noted and blocks nothing"
        ),
    ] = []


class RecordComponentsArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    components: Annotated[
        list[ComponentArg], Meta(min_length=1, description="Components to add, or to update (matched by slug)")
    ]
    replace: Annotated[
        bool,
        Meta(
            description="true: this list replaces every component recorded, instead of merging into them "
            "(dropping one with started tasks is refused)"
        ),
    ] = False


class SelectComponentArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    component: Annotated[str, Meta(description="The component's name or slug, as recorded with record_components")]
    reason: Annotated[str, Meta(description="Why this one now, e.g. what depends on it")] = ""


class TaskArg(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Annotated[
        str,
        Meta(description="A short name, e.g. 'Cut slugs at max_length'; a pending task of the same name is updated"),
    ]
    description: Annotated[str, Meta(description="What to build and where: files, functions, behaviour")] = ""
    subtasks: Annotated[list[str], Meta(description="The steps in order, writing the tests included")] = []
    acceptance: Annotated[
        list[str],
        Meta(
            min_length=1,
            description="Checks that prove the task done, at least one; each starts with or contains the id of the "
            "spec criterion it proves, e.g. '[SLUG-05] a cut slug never ends with the separator'. The reviewer "
            "judges the task against them",
        ),
    ]


class RecordTasksArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    component: Annotated[
        str,
        Meta(description="The component's name or slug; default: this invocation's component, else the selected one"),
    ] = ""
    tasks: Annotated[list[TaskArg], Meta(min_length=1, description="Tasks to add, or to update (matched by name)")]
    replace: Annotated[
        bool,
        Meta(
            description="true: this list replaces the component's pending tasks, instead of merging into them "
            "(started and finished tasks never change)"
        ),
    ] = False


TASK_ID = "The task's id, '<component>/<n>' (read_plan lists them); default: this invocation's task"
NOTES = "For the reviewer: what you did and where to look (optional)"


class UpdateTaskStatusArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    task_id: Annotated[str, Meta(description=TASK_ID)] = ""
    status: Annotated[
        Literal["in-progress", "complete", "failed"],
        Meta(
            description="'in-progress' you started; 'complete' done and verified in this invocation; 'failed' you "
            "cannot finish (say why in reason)"
        ),
    ]
    reason: Annotated[str, Meta(description="Why; for 'failed', what went wrong: the next attempt is shown it")] = ""


class VerifyTaskArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    task_id: Annotated[str, Meta(description=TASK_ID)] = ""
    notes: Annotated[str, Meta(description=NOTES)] = ""


class VerifyComponentArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    component: Annotated[
        str,
        Meta(description="The component's name or slug; default: this invocation's component, else the selected one"),
    ] = ""
    notes: Annotated[str, Meta(description=NOTES)] = ""


class VerifyModuleArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: Annotated[str, Meta(description="The module; default (and the only one accepted): the run's module")] = ""
    notes: Annotated[str, Meta(description=NOTES)] = ""


class ReportProgressArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    progress: Annotated[str, Meta(description="One or two sentences for the user: what is done, what comes next")]


# the arguments whose module defaults to the run's
M = TypeVar(
    "M",
    doc_tools.ReadSpecArgs,
    doc_tools.ReadResearchArgs,
    doc_tools.ReadPlanArgs,
    doc_tools.LogResearchArgs,
    VerifyModuleArgs,
)


# What each tool does, for a model that has never seen Lopen: what it changes, what it refuses, what comes next.
DESCRIPTIONS: dict[str, str] = {
    "get_current_context": (
        "Where the workflow stands: phase, step number and name, the module this run builds, and the component "
        "and task this invocation works on (null when none). Changes nothing. Those ids are the defaults of the "
        "task_id, component and module arguments of the other tools."
    ),
    "read_spec": (
        "Read one section of a module's approved specification, with its subsections, as written: name it by "
        "heading, 'Parent > Child' path or slug; an unknown name's error lists the sections. 'Acceptance "
        "Criteria' holds the criterion ids tasks cite. module defaults to the run's module."
    ),
    "read_research": (
        "Read the research note saved on a topic (RESEARCH-<topic>.md next to the module's specification); an "
        "unknown topic's error lists the topics there are. module defaults to the run's module. Changes nothing."
    ),
    "read_plan": (
        "Read the module's plan as recorded right now: dependencies, components (status, depends_on, which is "
        "selected) and each component's tasks with their ids and states. Use it to find ids and see what is left. "
        "module defaults to the run's module, the only one accepted."
    ),
    "log_research": (
        "Save what you learned about a topic as a research note, RESEARCH-<topic>.md next to the specification, "
        "listed in RESEARCH.md; later invocations read it with read_research. It replaces any earlier note on the "
        "topic: pass the whole note. module defaults to the run's module, the only one accepted."
    ),
    "report_progress": (
        "Tell the user, live, what you are doing: one or two sentences on what is done and what comes next. It is "
        "recorded and shown, and changes nothing else: it does not replace update_task_status. Returns 'noted'."
    ),
    "record_dependencies": (
        "Step 2: record what the module needs from outside itself (libraries, services, tools, other modules) "
        "and why. Each call replaces the list recorded before: pass every dependency at once. The module's own "
        "components are not dependencies (see depends_on in record_components). Next: record_components."
    ),
    "record_components": (
        "Step 3: record the module's components (parts built and verified one by one) and how much of each "
        "exists. By default it merges: a component is added, or updated when its slug is already recorded (its "
        "tasks stay), and the others stay; replace=true replaces the whole list. A refusal (same slug twice, a "
        "depends_on cycle, dropping started work) records nothing: fix and call again. Next: select_component."
    ),
    "select_component": (
        "Step 4: select a component to build (call once per component when the prompt allows several at once). "
        "Refused, nothing recorded, when it is unknown, already complete, or depends on a component not complete "
        "yet; the refusal lists the components that are ready. Next: record_tasks for it."
    ),
    "record_tasks": (
        "Step 5: record a component's tasks. Lopen builds them in order, one invocation each, and a reviewer "
        "judges each against its acceptance items. By default it merges: new names are appended with new ids, a "
        "pending task of the same name is updated (keeps its id); replace=true replaces all the pending tasks. "
        "Started and finished tasks never change. Refused, nothing recorded, when an acceptance item cites no "
        "spec criterion id or one the spec lacks: fix and call again."
    ),
    "update_task_status": (
        "Set your task's state: 'in-progress' when you start, 'complete' when done, 'failed' when you cannot "
        "finish (say why). 'complete' is accepted only after a verify_task_completion that passed in this same "
        "invocation, with the spec's tests run (bash) in it, on the files exactly as they are now; otherwise it "
        "is refused with the reason and nothing changes: fix, verify again, complete. task_id defaults to "
        "this invocation's task."
    ),
    "verify_task_completion": (
        "Have an independent reviewer judge your task now. Lopen collects the evidence itself: the files as they "
        "are, the diff since the task began, the spec's verify-tests command run; the reviewer checks it against "
        "the task's acceptance items. If it fails, fix the findings and call it again. A pass allows "
        "update_task_status complete in this invocation only, until a file changes. task_id defaults to this "
        "invocation's task."
    ),
    "verify_component_completion": (
        "Have a reviewer judge a component once all its tasks are complete: its diff since it began and every "
        "verify-* command of the spec, against its criteria. Refused (nothing judged) while one of its tasks is "
        "not complete. If it fails, report what is missing with report_progress. component defaults to this "
        "invocation's component, else the selected one."
    ),
    "verify_module_completion": (
        "Have a reviewer judge the whole module against every acceptance criterion of its specification, with "
        "every verify-* command run. Refused (nothing judged) while a component is not complete. If it fails, "
        "report what is missing with report_progress. module defaults to the run's module, the only one accepted."
    ),
}


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
        before_commit: Callable[[str, str], str] | None = None,
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
        # B6: the spec's verify-commit on the tree about to be committed: why it refuses, or ""
        self.before_commit = before_commit or (lambda _task, _invocation: "")
        self.passed: dict[tuple[str, str], str] = {}  # (scope, target) → the tree its passing verdict judged

    def tools(self, names: tuple[str, ...]) -> list[LopenTool]:
        table: dict[str, tuple[str, type[msgspec.Struct], Callable]] = {
            "get_current_context": (DESCRIPTIONS["get_current_context"], NoArguments, self.get_current_context),
            "read_spec": (DESCRIPTIONS["read_spec"], doc_tools.ReadSpecArgs, self._doc(doc_tools.read_spec)),
            "read_research": (
                DESCRIPTIONS["read_research"],
                doc_tools.ReadResearchArgs,
                self._doc(doc_tools.read_research),
            ),
            "read_plan": (DESCRIPTIONS["read_plan"], doc_tools.ReadPlanArgs, self.read_plan),
            "log_research": (DESCRIPTIONS["log_research"], doc_tools.LogResearchArgs, self.log_research),
            "report_progress": (DESCRIPTIONS["report_progress"], ReportProgressArgs, self.report_progress),
            "record_dependencies": (
                DESCRIPTIONS["record_dependencies"],
                RecordDependenciesArgs,
                self.record_dependencies,
            ),
            "record_components": (DESCRIPTIONS["record_components"], RecordComponentsArgs, self.record_components),
            "select_component": (DESCRIPTIONS["select_component"], SelectComponentArgs, self.select_component),
            "record_tasks": (DESCRIPTIONS["record_tasks"], RecordTasksArgs, self.record_tasks),
            "update_task_status": (DESCRIPTIONS["update_task_status"], UpdateTaskStatusArgs, self.update_task_status),
            "verify_task_completion": (DESCRIPTIONS["verify_task_completion"], VerifyTaskArgs, self.verify_task),
            "verify_component_completion": (
                DESCRIPTIONS["verify_component_completion"],
                VerifyComponentArgs,
                self.verify_component,
            ),
            "verify_module_completion": (
                DESCRIPTIONS["verify_module_completion"],
                VerifyModuleArgs,
                self.verify_module,
            ),
        }
        return [LopenTool(name, *table[name]) for name in names]

    def _doc(self, handler: Callable) -> Callable:
        return lambda args: handler(self._in_module(args), self.documents)

    def _record(self, *events: ev.Event) -> None:
        try:
            self.journal.record(*events)
        except Contradiction as exc:
            raise ToolError(f"refused: {exc.problem} (nothing was recorded; fix it and call again)") from None

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
        args = self._in_module(args)
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
        return f"recorded {plural(len(deps), 'dependency', 'dependencies')} (the whole list); next: record_components"

    def record_components(self, args: RecordComponentsArgs) -> str:
        """Merge the components into those recorded (matched by slug; the others stay), or replace them all
        with ``replace``. The event carries the whole resulting list, as the fold expects."""
        if not args.components:
            raise ToolError("pass at least one component in components")
        slugs = [slugify(c.name) for c in args.components]
        if len(set(slugs)) != len(slugs):
            raise ToolError(
                f"refused: component names must be distinct; got {', '.join(slugs)} "
                "(nothing was recorded; fix it and call again)"
            )
        given = {
            slug: ev.ComponentSpec(
                name=c.name, description=c.description, status=c.status, depends_on=tuple(c.depends_on)
            )
            for slug, c in zip(slugs, args.components, strict=True)
        }
        components = list(given.values())
        if not args.replace:
            recorded = self._state().components
            components = [given.pop(slug, _component_spec(node)) for slug, node in recorded.items()]
            components += given.values()
        self._record(ev.ComponentsRecorded(components=tuple(components), invocation_id=self.invocation_id))
        state = self._state()
        listed = "; ".join(_component_line(node) for node in state.components.values())
        return f"the module's components are now: {listed}. Next: select_component"

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
        tasks = state.component_tasks(component.slug)
        if tasks:
            return (
                f"selected {component.slug}; it has {plural(len(tasks), 'task')} already (read_plan shows them). "
                f"Next: record_tasks for {component.slug} to add or update tasks, or end the invocation"
            )
        return f"selected {component.slug}; next: record_tasks for {component.slug}"

    def record_tasks(self, args: RecordTasksArgs) -> str:
        """Merge the tasks into the component's list (new names appended, a pending task of the same name
        updated in place), or with ``replace`` replace its pending tasks. Started and finished tasks stay as
        they are; a task of the same name keeps its id; new tasks get ids never used before in the module.
        Every task's acceptance items cite the approved spec's criteria by id (when it has ids)."""
        state = self._state()
        name = self._component_name(args.component, state)
        component = state.component(name)
        if component is None:
            known = ", ".join(state.components) or "none yet"
            raise ToolError(f"no component '{name}'; components are: {known} (record it with record_components first)")
        if not args.tasks:
            raise ToolError("pass at least one task in tasks")
        keys = [slugify(t.name) for t in args.tasks]
        if len(set(keys)) != len(keys):
            raise ToolError(
                "refused: task names must be distinct within a call; got "
                + ", ".join(t.name for t in args.tasks)
                + " (nothing was recorded; fix it and call again)"
            )
        self._check_acceptance(args.tasks)
        current = state.component_tasks(component.slug)
        settled = {slugify(t.name) for t in current if t.state != "pending"}  # started or done: they stay
        given = {key: t for key, t in zip(keys, args.tasks, strict=True) if key not in settled}
        next_n = component.last_n + 1
        tasks: list[ev.TaskSpec] = []
        pending: dict[str, str] = {}
        for t in current:
            key = slugify(t.name)
            if t.state != "pending":
                tasks.append(_spec(t.id, t.name, t.description, t.subtasks, t.acceptance))
            elif args.replace:
                pending.setdefault(key, t.id)
            elif key in given and key not in pending:
                pending[key] = t.id
                new = given.pop(key)
                tasks.append(_spec(t.id, new.name, new.description, new.subtasks, new.acceptance))
            else:
                tasks.append(_spec(t.id, t.name, t.description, t.subtasks, t.acceptance))
        for key, t in given.items():
            task_id = pending.get(key) if args.replace else None
            if task_id is None:
                task_id, next_n = f"{component.slug}/{next_n}", next_n + 1
            tasks.append(_spec(task_id, t.name, t.description, t.subtasks, t.acceptance))
        self._record(ev.TasksRecorded(component=component.slug, tasks=tuple(tasks), invocation_id=self.invocation_id))
        now = self._state()
        listed = ", ".join(f"{t.id} {t.name} ({t.state})" for t in now.component_tasks(component.slug))
        return (
            f"the tasks of {component.slug} are now: {listed}. Next: record_tasks for another component you "
            "selected, or end the invocation with a one-line summary if planning is done"
        )

    def _check_acceptance(self, tasks: list[TaskArg]) -> None:
        """Refuse tasks whose acceptance items do not cite the approved spec's criteria (when it has ids)."""
        empty = [t.name for t in tasks if not [a for a in t.acceptance if a.strip()]]
        if empty:
            raise ToolError(
                f"refused: tasks without acceptance items: {', '.join(empty)}; give each task at least one "
                "check that proves it done (nothing was recorded; fix it and call again)"
            )
        ids = self._criterion_ids()
        if not ids:
            return
        problems: list[str] = []
        for t in tasks:
            cited, unknown = _citations(t.acceptance, ids)
            if unknown:
                problems.append(f"'{t.name}' cites {', '.join(unknown)}, which the spec does not have")
            elif not cited:
                problems.append(f"'{t.name}' cites no criterion")
        if problems:
            raise ToolError(
                "refused: each task's acceptance items must cite the spec's acceptance criteria by id, e.g. "
                f"'[{ids[0]}] …': {'; '.join(problems)}. The spec's criteria are {', '.join(ids)} "
                "(read_spec 'Acceptance Criteria'). Nothing was recorded; fix the tasks and call again."
            )

    def _criterion_ids(self) -> list[str]:
        """The ids of the approved spec's acceptance criteria, in the worktree ([] without a spec or ids)."""
        try:
            _, doc = load_spec(self.documents.root, self.module)
        except DocumentError:
            return []
        return list(dict.fromkeys(c.id for c in acceptance_criteria(doc) if c.id))

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
        return self._status_said(task.id, args.status)

    def _status_said(self, task_id: str, status: str) -> str:
        """What a recorded status change means, and what the model does next."""
        if status == "in-progress":
            return (
                f"{task_id} is now in-progress. Build it with its tests, run the tests, then call "
                "verify_task_completion; complete it only after that passes"
            )
        if status == "failed":
            return (
                f"{task_id} is now failed; Lopen retries it in a fresh invocation that is shown your reason. "
                "Nothing else to do in this invocation: end it with a one-line summary"
            )
        state = self._state()
        component = state.tasks[task_id].component if task_id in state.tasks else ""
        said = f"{task_id} is now complete; Lopen commits the verified files."
        if component and all(t.state == "complete" for t in state.component_tasks(component)):
            return (
                f"{said} Every task of {component} is complete: Lopen has the component verified next. "
                "Nothing else to do in this invocation: end it with a one-line summary"
            )
        return f"{said} Nothing else to do in this invocation: end it with a one-line summary"

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
        elif refused := self.before_commit(task_id, self.invocation_id):
            why = refused
            fix = (
                "Lopen runs it before committing, as a pre-commit hook: fix what it reports, call "
                f"verify_task_completion('{task_id}') again, then complete the task."
            )
        if why:
            self._record(ev.CompletionRefused(scope="task", target=task_id, why=why, invocation_id=self.invocation_id))
            raise ToolError(f"refused: {why}. {fix}")
        return verified or ""

    def verify_task(self, args: VerifyTaskArgs) -> str:
        task = self._task(args.task_id)
        return self._verify("task", task.id, args.notes)

    def verify_component(self, args: VerifyComponentArgs) -> str:
        args = msgspec.structs.replace(args, component=self._component_name(args.component))
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
        args = self._in_module(args)
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
        if verdict.passed:
            following = (
                f"mark {target} complete with update_task_status now, without changing any file"
                if scope == "task"
                else "nothing else to do for this verification"
            )
        elif verdict.reviewer_failed:
            following = "the reviewer failed, not your code: call this verify tool again"
        else:
            following = "fix what the findings and the unmet criteria say, run the tests, then verify again"
        return msgspec.json.encode(
            {
                "passed": verdict.passed,
                "summary": verdict.summary,
                "criteria": verdict.criteria,
                "findings": verdict.findings,
                "next": following,
            }
        ).decode()

    def _task(self, task_id: str) -> TaskNode:
        """The task ``task_id`` names (default: this invocation's), refused when it is another invocation's."""
        task_id = task_id or self.task
        if not task_id:
            raise ToolError(
                "pass task_id: this invocation has no task of its own; read_plan lists the ids ('<component>/<n>')"
            )
        task = self.journal.read(lambda s: s.tasks.get(task_id))
        if task is None:
            raise ToolError(f"no task '{task_id}'; the current task is '{self.task or 'none'}' (see read_plan)")
        if self.task and task.id != self.task:
            raise ToolError(f"this invocation works on task '{self.task}', not '{task_id}'")
        return task

    def _component_name(self, given: str, state: ModuleState | None = None) -> str:
        """``given``, else this invocation's component, else the selected one; refused when there is none."""
        name = given or self.component or (state or self._state()).selected
        if not name:
            raise ToolError(
                "pass component: this invocation has no component of its own and none is selected; "
                "name one read_plan lists (or call select_component first)"
            )
        return name

    def _in_module(self, args: M) -> M:
        """``args`` with its module defaulting to the run's."""
        return args if args.module else msgspec.structs.replace(args, module=self.module)

    def _check_module(self, module: str) -> None:
        if module and module != self.module:
            raise ToolError(f"this run builds module '{self.module}', not '{module}'")


def _spec(task_id: str, name: str, description: str, subtasks: list[str], acceptance: list[str]) -> ev.TaskSpec:
    return ev.TaskSpec(
        id=task_id, name=name, description=description, subtasks=tuple(subtasks), acceptance=tuple(acceptance)
    )


def _component_spec(node: ComponentNode) -> ev.ComponentSpec:
    return ev.ComponentSpec(
        name=node.name, description=node.description, status=node.status, depends_on=tuple(node.depends_on)
    )


def _component_line(node: ComponentNode) -> str:
    depends = f", depends on {', '.join(node.depends_on)}" if node.depends_on else ""
    return f"{node.slug} ({node.status}{depends})"


_BRACKETED_ID = re.compile(r"(?<![\w\])])\[([A-Za-z][\w.-]*\d)\]")  # the spec's own id syntax: [SLUG-05]


def _id_key(ident: str) -> str:
    """An id as compared: case-folded, its number without leading zeros (SLUG-5 is SLUG-05)."""
    return re.sub(r"0*(\d+)$", r"\1", ident.casefold())


def _citations(items: list[str], ids: list[str]) -> tuple[list[str], list[str]]:
    """The spec criteria (of ``ids``) that ``items`` cite, and the ids they cite that the spec does not have.

    An item cites an id in brackets (``[SLUG-05]``) or bare (``SLUG-05``), in any case. Unknown: an upper-case
    id in brackets, or a bare one with the prefix of a spec id (``SLUG-``), that is not one of ``ids``.
    """
    known = {_id_key(i): i for i in ids}
    prefixes = sorted({m.group(1) for i in ids if (m := re.match(r"^(.*[-_.])\d+$", i))}, key=len, reverse=True)
    patterns = [re.escape(i) for i in ids] + [re.escape(p) + r"\d+" for p in prefixes]
    bare = re.compile(r"(?<![\w-])(?:" + "|".join(patterns) + r")(?![\w-])", re.IGNORECASE)
    cited: list[str] = []
    unknown: list[str] = []
    for item in items:
        found = [m.group(0) for m in bare.finditer(item)]
        found += [m.group(1) for m in _BRACKETED_ID.finditer(item) if m.group(1) == m.group(1).upper()]
        for ident in found:
            spelled = known.get(_id_key(ident))
            if spelled is None:
                unknown.append(ident)
            else:
                cited.append(spelled)
    return list(dict.fromkeys(cited)), list(dict.fromkeys(unknown))
