"""A lane — one component on its own branch — on a real store, pykka style: the LaneActor started with a
real Journal over SQLite in ``tmp_path``, the real Guardrail and Metrics, and small stand-ins for its
Git actors and TaskRunner that record what they were told.

It builds its tasks in order, verifies and merges its component, and tells whoever handed it the job
how it ended (``JobEnded`` with a ``LaneResult``); it stops between steps when asked; the Guardrail's
pause, churn and a critical error end it with the texts of ``lopen.workflow.cycle``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.git import MergeResult
from actors.guardrail import GuardrailActor
from actors.jobs import Reports, hand
from actors.lane import LaneActor, LaneResult, Tally
from actors.messages import Assessment, GuardDecision, JobEnded, StepOutcome
from actors.metrics import MetricsActor
from events import catalogue as ev
from events.journal import Journal
from lopen.config import Settings, Workflow
from lopen.project import open_store
from lopen.workflow.cycle import churn_stop, guard_stop

MODULE = "auth"
SLUG = "core"


class Git(pykka.ThreadingActor):
    """The lane's Git actor: its branch starts at the module's base; it records what it was told."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal
        self.calls: list[str] = []

    def ensure(self, created: bool = False) -> str:
        self.calls.append("ensure")
        if SLUG not in self.journal.read(lambda s: s.lanes):
            self.journal.record(
                ev.BranchEnsured(branch=f"lopen/{MODULE}--{SLUG}", created=True, base="base0", component=SLUG)
            )
        return "base0"

    def retire(self) -> None:
        self.calls.append("retire")

    def told(self) -> list[str]:
        return self.calls


class ModuleGit(pykka.ThreadingActor):
    """The module's Git actor: merges the component (a fast-forward to its tip)."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal

    def merge(self, component: str, fence: object = None) -> MergeResult:
        tip = self.journal.read(lambda s: s.lanes[component].tip or s.lanes[component].base)
        parent = self.journal.read(lambda s: s.tip or s.branch_base)
        self.journal.record(ev.ComponentMerged(component=component, sha=tip, parent=parent, component_tip=tip))
        return MergeResult(status="merged", sha=tip, fast_forward=True)


class Runner(pykka.ThreadingActor):
    """The lane's TaskRunner: completes tasks and passes verifications, or answers ``fail`` to all."""

    def __init__(self, journal: Journal, fail: StepOutcome | None = None, on_call: Any = None) -> None:
        super().__init__()
        self.journal = journal
        self.fail = fail
        self.on_call = on_call
        self.calls: list[str] = []

    def run_task(self, assessment: Assessment, hint: str, notes: tuple[str, ...]) -> StepOutcome:
        self.calls.append(assessment.task)
        if self.on_call is not None:
            self.on_call()
        if self.fail is not None:
            return self.fail
        self.journal.record(
            ev.TaskStatusChanged(task_id=assessment.task, from_state="pending", to_state="in-progress"),
            ev.TaskStatusChanged(task_id=assessment.task, from_state="in-progress", to_state="complete", tree="t"),
            ev.OracleVerdictRecorded(scope="task", target=assessment.task, passed=True, tree="t"),
        )
        return StepOutcome(ok=True, detail=f"{assessment.task} complete")

    def verify_scope(self, assessment: Assessment, hint: str, notes: tuple[str, ...]) -> StepOutcome:
        self.calls.append(f"component:{assessment.component}")
        if self.fail is not None:
            return self.fail
        self.journal.record(ev.OracleVerdictRecorded(scope="component", target=assessment.component, passed=True))
        return StepOutcome(ok=True, detail="verified")

    def told(self) -> list[str]:
        return self.calls


class Probe(pykka.ThreadingActor):
    """Stands for the Foreman: keeps what it is told."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[Any] = []

    def on_receive(self, message: Any) -> None:
        self.got.append(message)

    def told(self) -> list[Any]:
        return self.got


class World:
    def __init__(self, root: Path) -> None:
        (root / ".lopen").mkdir()
        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, MODULE)
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.journal.record(
            ev.BranchEnsured(branch=f"lopen/{MODULE}", base="base0"),
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name=SLUG),)),
            ev.TasksRecorded(component=SLUG, tasks=tuple(ev.TaskSpec(id=f"{SLUG}/{n}", name=f"T{n}") for n in (1, 2))),
        )
        self.refs: list[pykka.ActorRef[Any]] = []
        self.said: list[str] = []
        self.stop_flag = threading.Event()

    def start(self, cls: type[pykka.ThreadingActor], *args: object, **kwargs: object) -> pykka.ActorProxy[Any]:
        ref = cls.start(*args, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def lane(
        self, runner: pykka.ActorProxy[Any] | None = None, settings: Settings | None = None, tally: Tally | None = None
    ) -> tuple[pykka.ActorProxy[Any], pykka.ActorProxy[Any], pykka.ActorProxy[Any]]:
        metrics = self.start(MetricsActor, self.store, self.project, MODULE)
        git = self.start(Git, self.journal)
        runner = runner or self.start(Runner, self.journal)
        lane = self.start(
            LaneActor,
            self.journal,
            SLUG,
            git=git,
            module_git=self.start(ModuleGit, self.journal),
            task_runner=runner,
            guardrail=self.start(GuardrailActor, self.journal, settings or Settings(), metrics, None),
            tally=tally or Tally(),
            say=self.said.append,
            stop=self.stop_flag,
        )
        return lane, git, runner

    def events(self, *kinds: type[ev.Event]) -> list[Any]:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kinds)]

    def stop(self) -> None:
        for ref in reversed(self.refs):
            ref.stop()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        w.stop()
        w.store.close()


def test_a_lane_builds_its_tasks_in_order_verifies_merges_and_tells_how_it_ended(world: World) -> None:
    assert issubclass(LaneActor, Reports)  # a job told to it is told back when it ends
    lane, git, runner = world.lane()
    probe = world.start(Probe)
    hand(lane, "lane:core", "build", reply_to=probe.actor_ref)
    ended = wait_told(probe)
    assert ended == JobEnded("lane:core", LaneResult(SLUG, "merged", "component core is merged"))
    assert runner.told().get() == ["core/1", "core/2", "component:core"]
    assert git.told().get() == ["ensure", "retire"]
    assert [e.component for e in world.events(ev.ComponentMerged)] == [SLUG]
    assert any("merged core onto the module branch (fast-forward)" in line for line in world.said)


def test_a_lane_asked_to_stop_stops_before_its_next_step(world: World) -> None:
    runner = world.start(Runner, world.journal, None, world.stop_flag.set)  # asked to stop during core/1
    lane, _, _ = world.lane(runner)
    assert lane.build().get(timeout=30) == LaneResult(SLUG, "stopped")
    assert runner.told().get() == ["core/1"]


def test_the_guardrail_s_pause_stops_the_run_with_the_one_text(world: World) -> None:
    lane, _, runner = world.lane(settings=Settings(workflow=Workflow(max_iterations=1)), tally=Tally(1))
    result = lane.build().get(timeout=30)
    tripped = world.events(ev.GuardrailTripped)[0]
    action = guard_stop(GuardDecision(action="pause", category="max_iterations", detail=tripped.detail))
    assert result == LaneResult(SLUG, "stop-run", action.reason, action)
    assert action.reason.endswith("--max-iterations N), then run again to resume") and action.exit_code == 2
    assert runner.told().get() == []


def test_churn_gives_this_lane_up_only(world: World) -> None:
    fails = StepOutcome(ok=False, detail="not verified")
    world.journal.record(
        *(
            ev.TaskStatusChanged(task_id=f"{SLUG}/{n}", from_state=a, to_state=b, tree="t" if b == "complete" else "")
            for n in (1, 2)
            for a, b in (("pending", "in-progress"), ("in-progress", "complete"))
        ),
        *(ev.OracleVerdictRecorded(scope="task", target=f"{SLUG}/{n}", passed=True, tree="t") for n in (1, 2)),
    )
    runner = world.start(Runner, world.journal, fails)
    lane, _, _ = world.lane(runner, settings=Settings(workflow=Workflow(failure_threshold=2)))
    result = lane.build().get(timeout=30)
    churn = GuardDecision(action="pause", category="churn", detail=world.events(ev.GuardrailTripped)[0].detail)
    assert result == LaneResult(SLUG, "gave-up", churn_stop(churn).reason)
    assert result.detail.endswith("not verified; fix the cause or edit the plan, then run again")
    assert runner.told().get() == ["component:core", "component:core"]


def test_a_critical_error_stops_the_run(world: World) -> None:
    runner = world.start(Runner, world.journal, StepOutcome(ok=False, detail="no answer", error_kind="fatal"))
    lane, _, _ = world.lane(runner)
    result = lane.build().get(timeout=30)
    assert (result.outcome, result.detail) == ("stop-run", "no answer")
    assert result.action is not None and (result.action.kind, result.action.exit_code) == ("fail", 1)
    assert result.action.reason == "the model call failed: no answer"


def wait_told(probe: pykka.ActorProxy[Any], timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe.told().get()
        if got:
            return got[0]
        time.sleep(0.02)
    raise AssertionError("the lane told nothing")
