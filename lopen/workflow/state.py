"""The workflow's view of its own session, folded from the session's events.

The Assessor decides from this view plus the repository; it is rebuilt from the store on every
start, so it holds nothing a replay could not give back.
"""

from __future__ import annotations

import msgspec

from events import catalogue as ev
from lopen.workflow.toolbox import ComponentView, PlanView, TaskView, slugify


class _Task(msgspec.Struct):
    spec: ev.TaskSpec
    component: str
    state: str = "pending"
    commit: str = ""
    failures: int = 0
    reasons: list[str] = []


class _Component(msgspec.Struct):
    slug: str
    spec: ev.ComponentSpec
    tasks: list[str] = []


class RunState:
    def __init__(self, module: str = "") -> None:
        self.module_name = module
        self.components: dict[str, _Component] = {}
        self.tasks: dict[str, _Task] = {}
        self.selected = ""
        self.verified: set[tuple[str, str]] = set()
        self.baselines: dict[tuple[str, str], str] = {}
        self.last_good_commit = ""
        self.branch_base = ""
        self.step = 0
        self.invocations = 0
        self.notes: list[str] = []
        self.queued: dict[str, str] = {}
        self.spec_baseline: dict[str, str] = {}
        self.replan_from = 0
        self.invocation_kind = ""
        self.commands: list[str] = []  # bash commands of the current invocation
        self.unavailable: set[str] = set()  # models that fell back: skipped for the rest of the session

    def apply(self, event: ev.Event) -> None:
        handler = getattr(self, "_on_" + type(event).__name__, None)
        if handler is not None:
            handler(event)

    def _on_ComponentsRecorded(self, e: ev.ComponentsRecorded) -> None:
        for spec in e.components:
            slug = slugify(spec.name)
            existing = self.components.get(slug)
            self.components[slug] = _Component(slug=slug, spec=spec, tasks=existing.tasks if existing else [])

    def _on_ComponentSelected(self, e: ev.ComponentSelected) -> None:
        self.selected = e.component

    def _on_TasksRecorded(self, e: ev.TasksRecorded) -> None:
        """The component's whole task list as of now: known ids keep their state and commit."""
        component = self.components.get(e.component)
        for spec in e.tasks:
            known = self.tasks.get(spec.id)
            self.tasks[spec.id] = _Task(
                spec=spec,
                component=e.component,
                state=known.state if known else "pending",
                commit=known.commit if known else "",
                failures=known.failures if known else 0,
                reasons=known.reasons if known else [],
            )
        if component is not None:
            component.tasks = [spec.id for spec in e.tasks]

    def _on_SpecApproved(self, e: ev.SpecApproved) -> None:
        self.spec_baseline = dict(e.section_hashes)

    def _on_SpecDriftDetected(self, e: ev.SpecDriftDetected) -> None:
        self.spec_baseline = dict(e.section_hashes)
        if e.reentry_step:
            self.replan_from = min(self.replan_from or e.reentry_step, e.reentry_step)
            self.verified = {key for key in self.verified if key[0] == "task"}

    def _on_TaskStatusChanged(self, e: ev.TaskStatusChanged) -> None:
        task = self.tasks.get(e.task_id)
        if task is not None:
            task.state = e.to_state
            if e.to_state == "failed":
                task.failures += 1
                task.reasons.append(e.reason)
        if e.to_state != "complete":
            self.verified.discard(("task", e.task_id))

    def _on_CommitRecorded(self, e: ev.CommitRecorded) -> None:
        if e.task_id in self.tasks:
            self.tasks[e.task_id].commit = e.sha
            self.last_good_commit = e.sha

    def _on_BranchEnsured(self, e: ev.BranchEnsured) -> None:
        self.branch_base = self.branch_base or e.base

    def _on_TaskReopened(self, e: ev.TaskReopened) -> None:
        task = self.tasks.get(e.task_id)
        if task is not None:
            task.state, task.commit = "pending", ""
        self.verified.discard(("task", e.task_id))
        if task is not None:
            self.verified.discard(("component", task.component))
        self.verified.discard(("module", self.module_name))

    def _on_OracleVerdictRecorded(self, e: ev.OracleVerdictRecorded) -> None:
        key = (e.scope, e.target)
        if e.passed:
            self.verified.add(key)
        else:
            self.verified.discard(key)

    def _on_StepEntered(self, e: ev.StepEntered) -> None:
        self.step = e.step

    def _on_InvocationStarted(self, e: ev.InvocationStarted) -> None:
        self.invocations += 1
        self.invocation_kind = e.kind
        self.commands = []
        self.notes = []  # the invocation that starts now was given them (see ModuleRun.pending_notes)

    def _on_ModelFellBack(self, e: ev.ModelFellBack) -> None:
        self.unavailable.add(e.from_model)

    def _on_ToolCalled(self, e: ev.ToolCalled) -> None:
        command = e.arguments.get("command") if e.tool == "bash" else None
        if isinstance(command, str):
            self.commands.append(command)

    def _on_InvocationFinished(self, e: ev.InvocationFinished) -> None:
        if self.invocation_kind == "planning" and e.outcome == "ok":
            self.replan_from = 0

    def _on_UserMessageQueued(self, e: ev.UserMessageQueued) -> None:
        self.queued[e.message_id] = e.text

    def _on_UserMessageDelivered(self, e: ev.UserMessageDelivered) -> None:
        self.queued.pop(e.message_id, None)

    def _on_CorrectiveInstructionIssued(self, e: ev.CorrectiveInstructionIssued) -> None:
        self.notes.append(e.instruction)

    def plan(self) -> PlanView:
        components = []
        for component in self.components.values():
            tasks = tuple(
                TaskView(
                    id=t.spec.id,
                    name=t.spec.name,
                    component=component.slug,
                    state=t.state,
                    description=t.spec.description,
                    subtasks=t.spec.subtasks,
                    acceptance=t.spec.acceptance,
                )
                for t in (self.tasks[i] for i in component.tasks)
            )
            complete = (
                bool(tasks)
                and all(t.state == "complete" for t in tasks)
                and (("component", component.slug) in self.verified)
            )
            status = (
                "complete" if complete or (component.spec.status == "done" and not tasks) else (component.spec.status)
            )
            components.append(ComponentView(slug=component.slug, name=component.spec.name, status=status, tasks=tasks))
        return PlanView(components=tuple(components), selected=self.selected)
