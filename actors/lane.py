"""A lane (P1): one component built on its own branch and worktree while others are built in theirs.

``LaneActor.build()`` takes its component from where its history stands
(``lopen.workflow.schedule.component_step``): its tasks in order (one fresh invocation each, through
the lane's own TaskRunner, Git actor and Oracle), its verification, then its merge onto the module
branch (the module's Git actor). A merge that conflicts gets one resolution task — recorded like any
task, verified by the oracle, committed as a merge of the module branch into the component's — and
when that invocation does not finish it, the component is built again on top of the module branch.
Before each invocation the lane asks the Guardrail (budgets, max iterations); a task failing again
and again (churn) stops this lane only: a failure blocks only its dependents.

The Foreman hands a lane its work with a tell (``actors.jobs``: the job ``build``) and the lane tells
it back how it ended (a ``LaneResult``); the Foreman asks it to stop between steps with ``stop``.

**The fence.** A lane works under its component's claim: its actors record through a ``FencedJournal``
(the claim's token travels with every event, the merge included) and check the claim before touching
the disk. The lane checks it before each step too; once the claim is another's — taken over after this
worker was paused past its lease — the lane ends at once, ``lost``, having recorded and changed nothing
more (its invocation in flight is aborted by the journal's ``on_lost``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

import msgspec
import pykka

from actors.git import GitActor, MergeResult
from actors.guardrail import GuardrailActor
from actors.jobs import Reports
from actors.messages import StepOutcome
from actors.task_runner import TaskRunnerActor
from events import catalogue as ev
from events.fold import Fence, ModuleState, scope_key
from events.journal import Fenced, FencedJournal, Journal
from lopen.workflow.cycle import churn_stop, conflicts_stop, guard_stop, settle
from lopen.workflow.decide import Action, Assessment
from lopen.workflow.schedule import DONE, MERGE, component_step
from lopen.workflow.steps import Kind

MAX_CONFLICTS = 3  # merge conflicts of one component before a person is asked


class Tally:
    """The invocations of one run, counted across its lanes (workflow.max_iterations counts them)."""

    def __init__(self, start: int = 0) -> None:
        self._n = start
        self._lock = threading.Lock()

    @property
    def value(self) -> int:
        return self._n

    def add(self) -> int:
        with self._lock:
            self._n += 1
            return self._n


class LaneResult(msgspec.Struct, frozen=True):
    """How a lane ended: ``merged`` (the component is done), ``stopped`` (asked to), ``gave-up`` (churn:
    this component needs a person), ``unplanned`` (no tasks), ``lost`` (its claim is another's now: the
    fence refused it; ``detail`` says why), or ``stop-run`` (``action`` stops the run)."""

    component: str
    outcome: str
    detail: str = ""
    action: Action | None = None


class LaneActor(Reports, pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        component: str,
        *,
        git: pykka.ActorProxy[GitActor],
        module_git: pykka.ActorProxy[GitActor],
        task_runner: pykka.ActorProxy[TaskRunnerActor],
        guardrail: pykka.ActorProxy[GuardrailActor],
        tally: Tally,
        say: Callable[[str], None],
        stop: threading.Event,
    ) -> None:
        super().__init__()
        self.journal = journal
        self.component = component
        self.git = git
        self.module_git = module_git
        self.task_runner = task_runner
        self.guardrail = guardrail
        self.tally = tally
        self.say = say
        self.halt = stop

    def build(self) -> LaneResult:
        """Build the component to its merge (or until told to stop); a refused fence ends it ``lost``."""
        try:
            return self._build()
        except Fenced as refused:
            if isinstance(self.journal, FencedJournal):
                self.journal.lose(refused.problem)
            return LaneResult(self.component, "lost", refused.problem)

    def _fence(self) -> Fence | None:
        return self.journal.fence if isinstance(self.journal, FencedJournal) else None

    def _build(self) -> LaneResult:
        slug = self.component
        self.git.ensure().get()
        while True:
            self.journal.hold()  # the claim is still this lane's (a paused worker learns here that it is not)
            if self.halt.is_set():
                return LaneResult(slug, "stopped")
            step = self.journal.read(lambda s: component_step(s, slug))
            if step.kind == DONE:
                self.git.retire().get()
                return LaneResult(slug, "merged", f"component {slug} is merged")
            if step.kind == Kind.PLANNING.value:
                return LaneResult(slug, "unplanned", step.why)
            if step.kind == MERGE:
                gave_up = self._merge()
                if gave_up is not None:
                    return gave_up
                continue
            guard = self.guardrail.before(self.tally.value, step.task).get()
            if guard.action in ("pause", "fail"):
                action = guard_stop(guard)
                return LaneResult(slug, "stop-run", action.reason, action)
            resolving = self.journal.read(lambda s: s.lanes[slug].resolution_task if slug in s.lanes else "")
            self.tally.add()
            outcome = self._run(step, guard.budget_hint)
            self.journal.hold()  # an invocation cut short because the claim was lost is no outcome to act on
            self.say(("✓ " if outcome.ok else "✗ ") + outcome.detail)
            stop = settle(outcome.ok, outcome.error_kind, outcome.detail)
            if stop is not None:
                return LaneResult(slug, "stop-run", outcome.detail, stop)
            if step.task and step.task == resolving and not outcome.ok:
                self._redo(f"its merge-conflict resolution {step.task} did not finish")
                continue
            churn = self.guardrail.after(step, outcome).get()
            if churn.action == "pause":
                return LaneResult(slug, "gave-up", churn_stop(churn).reason)

    def _run(self, step: Assessment, budget_hint: str) -> StepOutcome:
        if step.kind == Kind.TASK.value:
            self.say(f"▶ task {step.task} ({step.why})")
            return self.task_runner.run_task(step, budget_hint, ()).get()
        return self.task_runner.verify_scope(step, budget_hint, ()).get()

    # -- merging ------------------------------------------------------------------------------------

    def _merge(self) -> LaneResult | None:
        result: MergeResult = self.module_git.merge(self.component, self._fence()).get()
        if result.status == "merged":
            how = "fast-forward" if result.fast_forward else f"merge commit {result.sha[:8]}"
            self.say(f"⇢ merged {self.component} onto the module branch ({how})")
            return None
        slug = self.component
        conflicts = self.journal.read(lambda s: s.lanes[slug].conflicts)
        if conflicts >= MAX_CONFLICTS:
            branch = self.journal.read(lambda s: s.lanes[slug].branch)
            return LaneResult(slug, "gave-up", conflicts_stop(slug, conflicts + 1, result.files, branch))
        self._resolution(result)
        return None

    def _resolution(self, result: MergeResult) -> None:
        """The merge conflicted: a resolution task, started from the merge with its conflict markers."""
        slug = self.component

        def plan(state: ModuleState) -> tuple[list[ev.TaskSpec], str]:
            component = state.components[slug]
            kept = [t.spec() for t in state.component_tasks(slug)]
            return kept, f"{slug}/{component.last_n + 1}"

        kept, task_id = self.journal.read(plan)
        files = ", ".join(result.files)
        task = ev.TaskSpec(
            id=task_id,
            name="Resolve the merge conflicts with the module branch",
            description=(
                f"While {slug} was built, other components were merged onto the module branch, and merging it "
                f"into {slug} conflicts in: {files}. The worktree holds that merge, with git's conflict markers "
                "(<<<<<<< ======= >>>>>>>) in those files. Resolve every conflict so that both sides' work is "
                "kept and works together, run the tests, then verify and complete this task."
            ),
            subtasks=tuple(f"Resolve the conflict in {f}" for f in result.files),
            acceptance=("no conflict markers are left", "both sides' changes are kept", "the tests pass"),
        )
        self.journal.record(
            ev.TasksRecorded(component=slug, tasks=(*kept, task)),
            ev.ComponentMergeConflicted(component=slug, into=result.into, files=result.files, task_id=task_id),
        )
        self.git.load(result.tree).get()
        self.say(f"! merging {slug} conflicts in {files}: {task_id} resolves it")

    def _redo(self, why: str) -> None:
        """Build the component again on top of the module branch as it is now."""
        slug = self.component

        def events(state: ModuleState) -> tuple[list[ev.Event], str]:
            into = state.tip_of("")
            lane = state.lanes[slug]
            tasks = [t for t in state.component_tasks(slug) if t.id != lane.resolution_task]
            out: list[ev.Event] = [
                ev.TaskReopened(task_id=t.id, reason=f"component {slug} is built again: {why}")
                for t in state.component_tasks(slug)
                if t.state != "pending"
            ]
            out += [
                ev.TasksRecorded(
                    component=slug,
                    tasks=tuple(t.spec() for t in tasks),
                ),
                ev.ComponentMergeConflicted(component=slug, into=into, redo=True),
                ev.BranchEnsured(branch=lane.branch, created=True, base=into, worktree=lane.worktree, component=slug),
            ]
            if scope_key("component", slug) in state.scopes:
                out.append(ev.ScopeStarted(scope="component", target=slug, base_commit=into))
            return out, into

        recorded, into = self.journal.read(events)
        self.journal.record(*recorded)
        self.git.restart_at(into).get()
        self.say(f"! {slug} is built again on top of the module branch ({why})")


def _unfenced(why: str) -> None:
    """A lane without a fence (a test's) has nothing to cut short."""


class LaneHandle(NamedTuple):
    """A started lane: its actor, the flag that asks it to stop between steps, how to stop its actors, and
    ``lose(why)``: its claim is gone — refuse everything it would record or touch from now on, and abort
    its invocation in flight (``FencedJournal.lose``)."""

    lane: pykka.ActorProxy[LaneActor]
    stop: threading.Event
    close: Callable[[], None]
    lose: Callable[[str], None] = _unfenced


LaneFactory = Callable[[str, Tally, Fence], LaneHandle]
"""Starts the lane of a component under its claim (``Fence``): its worktree, Git actor, Oracle,
TaskRunner and LaneActor."""
