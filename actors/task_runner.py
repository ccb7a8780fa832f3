"""The TaskRunner (step 6): one fresh invocation per task, and the verification at a component's and
the module's boundary (the oracle asked directly; a failed verdict becomes a fix task).

Before a task's invocation it records the scopes that begin (``ScopeStarted`` with the branch tip:
the oracle's diff starts there) and tells the model what a cut-off or failed earlier invocation left
in the worktree; the Git actor checks git's own files and HEAD (a model's earlier tampering, another
lane's). After it, the Git actor puts git's files, HEAD and the branch back if the model moved them; a
completed task has been committed by the Git actor (exactly its verified tree) and the worktree is
reset to that commit; an unfinished one is recorded failed with the reason — unless a budget stopped
its invocation inside: then it stays in progress, its work in the worktree, and the run pauses.
"""

from __future__ import annotations

from collections.abc import Callable

import pykka

from actors.git import GitActor
from actors.jobs import Reports
from actors.messages import Assessment, StepOutcome, VerifyRequest
from events import catalogue as ev
from events.fold import ModuleState, scope_key
from events.journal import Journal
from lopen.workflow.invoke import Invoker
from lopen.workflow.oracle import Verdict
from lopen.workflow.rubric import cited
from lopen.workflow.steps import Kind

SHOWN = 20
# An invocation stopped by these is no failed attempt of its task (the provider's side, or a budget):
# the task stays in progress and the run pauses (or fails, with no model left) as ``decide.after`` says.
NOT_THE_TASKS = ("budget", "auth", "rate_limited", "transient", "model_unavailable")
SUBTASK_CHARS = 600


def task_text(task) -> str:  # type: ignore[no-untyped-def]
    lines = [f"Task {task.id}: {task.name}", "", task.description]
    if task.subtasks:
        lines += ["", "Subtasks:", *(f"- [ ] {s}" for s in task.subtasks)]
    if task.acceptance:
        lines += ["", "Acceptance:", *(f"- {a}" for a in task.acceptance)]
    return "\n".join(lines).strip()


class TaskRunnerActor(Reports, pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        invoker: Invoker,
        git: pykka.ActorProxy[GitActor],
        verify: Callable[[VerifyRequest], Verdict] | None = None,
    ) -> None:
        """``verify`` asks this worktree's Oracle for a verdict (component and module boundaries)."""
        super().__init__()
        self.journal = journal
        self.invoker = invoker
        self.git = git
        self.verify = verify

    def run_task(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        state = self.journal.snapshot()
        task = state.tasks[assessment.task]
        self._start_scopes(task.id, task.component)
        if task.state == "failed" and task.reasons and task.reasons[-1]:  # what the tool result promised
            notes = (*notes, f"The last invocation of {task.id} failed: {task.reasons[-1]}")
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
        self.git.check().get()
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
        if outcome.error_kind in NOT_THE_TASKS:  # not the task's failure: it stays in progress, resumable
            self.git.guard().get()
            return StepOutcome(ok=False, detail=f"{task.id}: {outcome.detail}", error_kind=outcome.error_kind)
        self.git.guard().get()
        after = self.journal.read(lambda s: s.tasks[task.id].state)
        if after == "complete":
            self.git.settle().get()
            self.git.reset_to_tip().get()
            commit = self.journal.read(lambda s: s.tasks[task.id].commit)
            return StepOutcome(ok=True, detail=f"{task.id} complete" + (f", commit {commit[:8]}" if commit else ""))
        reason = outcome.detail
        if outcome.ok:  # the model stopped on its own: its last words say why (a question, a doubt)
            said = " ".join(outcome.detail.split())
            reason = "the invocation ended without completing the task" + (
                f"; its last message: {said}" if said else ""
            )
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
        """A component's or the module's boundary: Lopen asks the oracle itself (no main-model invocation:
        there is nothing for a model to do but call one tool). A verdict that fails for the code's sake
        becomes work: a fix task of the component, planned and built like any task, carrying the error
        findings and the unmet criteria. One the reviewer failed (no readable answer) is tried again."""
        kind = Kind(assessment.kind)
        scope, target = (
            ("module", self.journal.module) if kind is Kind.MODULE_VERIFICATION else ("component", assessment.component)
        )
        if self.verify is None:
            return StepOutcome(ok=False, detail=f"{scope} verification is not available in this run")
        self.journal.refresh()  # another worker may have verified it a moment ago
        if self.journal.read(lambda s: s.verified(scope, target)):
            return StepOutcome(ok=True, detail=f"{scope} {target} verified")
        self._start_boundary(scope, target)
        verdict = self.verify(VerifyRequest(scope=scope, target=target))
        if self.journal.read(lambda s: s.verified(scope, target)):
            return StepOutcome(ok=True, detail=f"{scope} {target} verified")
        if verdict.reviewer_failed:
            return StepOutcome(ok=False, detail=f"{scope} {target}: {verdict.summary}")
        planned = self.journal.read(lambda s: fix_task_events(s, scope, target, verdict))
        if planned is None:
            return StepOutcome(ok=False, detail=f"{scope} {target} did not pass verification: {verdict.summary}")
        events, fix = planned
        self.journal.record(*events)
        return StepOutcome(
            ok=False, detail=f"{scope} {target} did not pass verification: {verdict.summary[:200]}; {fix} fixes it"
        )

    def _start_boundary(self, scope: str, target: str) -> None:
        """A scope verified without any task of its own (a resumed store): its diff starts at the branch base."""

        def owed(state: ModuleState) -> list[ev.Event]:
            if scope_key(scope, target) in state.scopes:
                return []
            base = state.branch_base if scope == "module" else state.tip_of(target)
            return [ev.ScopeStarted(scope=scope, target=target, base_commit=base)]  # type: ignore[arg-type]

        started = self.journal.read(owed)
        if started:
            self.journal.record(*started)


def fix_task_events(state: ModuleState, scope: str, target: str, verdict: Verdict) -> tuple[list[ev.Event], str] | None:
    """The events that turn a failed ``scope`` verdict into a fix task, and its id (None: no component to
    give it to). A component's fix goes to it; the module's to the component owning the first unmet
    criterion, else the last component of the plan, which is selected so it is built next."""
    if scope == "component":
        slug = target
    else:
        unmet = [c.id for c in verdict.criteria if not c.met]
        owners = [
            slug
            for ident in unmet
            for slug, component in state.components.items()
            if cited(
                "\n".join([component.description, *(a for t in state.component_tasks(slug) for a in t.acceptance)]),
                [ident],
            )
        ]
        slug = owners[0] if owners else next(reversed(state.components), "")
    component = state.components.get(slug)
    if component is None:
        return None
    attempt = state.attempts(scope, target)
    task_id = f"{slug}/{component.last_n + 1}"
    errors = [f for f in verdict.findings if f.severity == "error"] or verdict.findings
    unmet = [c for c in verdict.criteria if not c.met]
    acceptance = tuple(f"[{c.id}] is met: {c.evidence}" if c.evidence else f"[{c.id}] is met" for c in unmet)
    task = ev.TaskSpec(
        id=task_id,
        name=f"Fix what {scope} verification found (attempt {attempt})",
        description=(
            f"The reviewer did not pass the {scope} `{target}`: {verdict.summary}\n"
            "Fix each finding below in the code and its tests; the criteria it names are the specification's."
        ),
        subtasks=tuple(
            (f"{f.location}: " if f.location else "") + f.description[:SUBTASK_CHARS] for f in errors[:SHOWN]
        ),
        acceptance=(*acceptance, "every finding of the failed verification is fixed and the verify commands pass"),
    )
    kept = tuple(t.spec() for t in state.component_tasks(slug))
    events: list[ev.Event] = [ev.TasksRecorded(component=slug, tasks=(*kept, task))]
    if state.selected != slug and not state.blocked_by(slug) and not state.lanes:
        events.append(ev.ComponentSelected(component=slug, reason=f"{task_id} fixes what {scope} verification found"))
    return events, task_id
