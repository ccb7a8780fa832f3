"""The Foreman — the one run loop — on a real store, pykka style: the actor started with a real Journal
over SQLite in ``tmp_path``, the real Guardrail and Metrics, and small stand-ins for the actors that
would call a model (Planner, TaskRunner, lanes) that record what they were told and report by tell.

One slot builds on the module branch step by step; two slots build two components in lanes at once;
leases are renewed while a lane works and a lost claim stops its lane; how each kind of ending reads
(churn, an interruption, a lane that stops the run, a lane that gave up) comes from one place
(``lopen.workflow.cycle``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.foreman import ForemanActor, Interrupt, begin
from actors.guardrail import GuardrailActor
from actors.jobs import Reports
from actors.lane import LaneHandle, LaneResult, Tally
from actors.messages import Assessment, GuardDecision, RunResult, StepOutcome
from actors.metrics import MetricsActor
from events import catalogue as ev
from events.fold import Fence
from events.journal import Journal
from lopen.config import Settings, Workflow
from lopen.project import open_store
from lopen.workflow.cycle import churn_stop
from lopen.workflow.decide import Action, assess

MODULE = "auth"


class Assessor(pykka.ThreadingActor):
    """Where the module stands, from the one fold (the real Assessor adds the spec check)."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal

    def assess(self) -> Assessment:
        self.journal.refresh()
        return self.journal.read(assess)


class Planner(Reports, pykka.ThreadingActor):
    """Plans ``components`` (two tasks each) and selects the first; remembers each call."""

    def __init__(self, journal: Journal, components: tuple[str, ...]) -> None:
        super().__init__()
        self.journal = journal
        self.components = components
        self.calls: list[tuple[int, bool]] = []

    def plan(
        self, assessment: Assessment, hint: str, notes: tuple[str, ...], parallel: int = 1, lanes: bool = False
    ) -> StepOutcome:
        self.calls.append((parallel, lanes))
        self.journal.record(
            ev.ComponentsRecorded(components=tuple(ev.ComponentSpec(name=c) for c in self.components)),
            ev.ComponentSelected(component=self.components[0]),
            *(
                ev.TasksRecorded(component=c, tasks=tuple(ev.TaskSpec(id=f"{c}/{n}", name=f"T{n}") for n in (1, 2)))
                for c in self.components
            ),
        )
        return StepOutcome(ok=True, detail="planned")

    def told(self) -> list[tuple[int, bool]]:
        return self.calls


def complete(journal: Journal, task: str) -> None:
    journal.record(
        *(
            ev.TaskStatusChanged(task_id=task, from_state=a, to_state=b, tree="t" if b == "complete" else "")
            for a, b in (("pending", "in-progress"), ("in-progress", "complete"))
        ),
        ev.OracleVerdictRecorded(scope="task", target=task, passed=True, tree="t"),
    )


class Runner(Reports, pykka.ThreadingActor):
    """The TaskRunner: completes each task it is given and passes each verification, unless ``fail``
    (the outcome of every task) or ``verify_fails`` (of every verification); ``during`` runs inside each
    task (an interruption arriving)."""

    def __init__(
        self,
        journal: Journal,
        fail: StepOutcome | None = None,
        during: Callable[[], None] | None = None,
        verify_fails: StepOutcome | None = None,
    ) -> None:
        super().__init__()
        self.journal = journal
        self.fail = fail
        self.during = during
        self.verify_fails = verify_fails
        self.calls: list[str] = []

    def run_task(self, assessment: Assessment, hint: str, notes: tuple[str, ...]) -> StepOutcome:
        self.calls.append(assessment.task)
        if self.during is not None:
            self.during()
        if self.fail is not None:
            return self.fail
        complete(self.journal, assessment.task)
        return StepOutcome(ok=True, detail=f"{assessment.task} complete")

    def verify_scope(self, assessment: Assessment, hint: str, notes: tuple[str, ...]) -> StepOutcome:
        scope = "module" if assessment.kind == "module-verification" else "component"
        target = MODULE if scope == "module" else assessment.component
        self.calls.append(f"{scope}:{target}")
        if self.verify_fails is not None:
            return self.verify_fails
        self.journal.record(ev.OracleVerdictRecorded(scope=scope, target=target, passed=True, tree="t"))
        return StepOutcome(ok=True, detail=f"{scope} {target} verified")

    def told(self) -> list[str]:
        return self.calls


class Lane(Reports, pykka.ThreadingActor):
    """A lane: ``act(slug, stop, journal)`` is its whole build (the default completes its tasks and
    verifies it, which with no branch of its own counts as merged)."""

    def __init__(self, journal: Journal, slug: str, stop: threading.Event, act: Callable[..., LaneResult]) -> None:
        super().__init__()
        self.journal, self.slug, self.halt, self.act = journal, slug, stop, act

    def build(self) -> LaneResult:
        return self.act(self.slug, self.halt, self.journal)


def wait_for(condition: Callable[[], object], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def build(slug: str, stop: threading.Event, journal: Journal) -> LaneResult:
    for n in (1, 2):
        complete(journal, f"{slug}/{n}")
    journal.record(ev.OracleVerdictRecorded(scope="component", target=slug, passed=True, tree="t"))
    return LaneResult(slug, "merged", f"component {slug} is merged")


class World:
    def __init__(self, root: Path) -> None:
        (root / ".lopen").mkdir()
        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, MODULE)
        self.session = self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.refs: list[pykka.ActorRef[Any]] = []
        self.said: list[str] = []
        self.stops: dict[str, threading.Event] = {}

    def start(self, cls: type[pykka.ThreadingActor], *args: object, **kwargs: object) -> pykka.ActorProxy[Any]:
        ref = cls.start(*args, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def lanes(self, act: Callable[..., LaneResult]) -> Callable[[str, Tally, Fence], LaneHandle]:
        def start(slug: str, tally: Tally, fence: Fence) -> LaneHandle:
            stop = threading.Event()
            self.stops[slug] = stop
            lane = self.start(Lane, self.journal, slug, stop, act)
            return LaneHandle(lane, stop, lambda: None)

        return start

    def foreman(
        self,
        *,
        components: tuple[str, ...] = ("core",),
        runner: pykka.ActorProxy[Any] | None = None,
        settings: Settings | None = None,
        **options: Any,
    ) -> tuple[pykka.ActorProxy[Any], pykka.ActorProxy[Any], pykka.ActorProxy[Any]]:
        metrics = self.start(MetricsActor, self.store, self.project, MODULE)
        planner = self.start(Planner, self.journal, components)
        runner = runner or self.start(Runner, self.journal)
        foreman = self.start(
            ForemanActor,
            self.journal,
            assessor=self.start(Assessor, self.journal),
            guardrail=self.start(GuardrailActor, self.journal, settings or Settings(), metrics, None),
            planner=planner,
            task_runner=runner,
            say=self.said.append,
            worker="host:1",
            **options,
        )
        return foreman, planner, runner

    def run(self, **options: Any) -> tuple[RunResult, list[str]]:
        foreman, _, runner = self.foreman(**options)
        return begin(foreman).get(timeout=60), runner.told().get()

    def events(self, *kinds: type[ev.Event]) -> list[Any]:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kinds)]

    def ending(self) -> ev.Event:
        ends = self.events(ev.SessionPaused, ev.SessionCompleted, ev.SessionFailed)
        assert len(ends) == 1
        return ends[0]

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


# -- one slot: the module branch, step by step ---------------------------------------------------------


def test_one_slot_plans_builds_the_tasks_in_order_verifies_and_completes(world: World) -> None:
    result, calls = world.run()
    assert (result.exit_code, result.status, result.session_id) == (0, "complete", world.session)
    assert calls == ["core/1", "core/2", "component:core", "module:auth"]
    entered = [(e.step, e.why) for e in world.events(ev.StepEntered)]
    assert entered == [
        (2, "no components recorded yet"),
        (6, "task core/1 is pending"),
        (7, "every component is complete"),
    ]
    assert isinstance(world.ending(), ev.SessionCompleted) and world.journal.closed
    assert not world.events(ev.ComponentClaimed)  # one slot builds on the module branch: no lanes, no claims


def test_churn_pauses_with_the_one_text(world: World) -> None:
    settings = Settings(workflow=Workflow(failure_threshold=2))
    runner = world.start(Runner, world.journal, verify_fails=StepOutcome(ok=False, detail="not verified"))
    result, calls = world.run(runner=runner, settings=settings)
    assert (result.exit_code, result.status) == (2, "paused")
    assert calls == ["core/1", "core/2", "component:core", "component:core"]
    ending = world.ending()
    assert isinstance(ending, ev.SessionPaused) and ending.error_kind == "churn"
    tripped = [e for e in world.events(ev.GuardrailTripped) if e.category == "churn"]
    churn = GuardDecision(action="pause", category="churn", detail=tripped[0].detail)
    assert (
        result.detail
        == churn_stop(churn).reason
        == (
            "component-verification:core failed 2 times (workflow.failure_threshold=2): not verified; "
            "fix the cause or edit the plan, then run again"
        )
    )


@pytest.mark.parametrize(("signal", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interruption_stops_the_run_with_its_exit_code(world: World, signal: str, code: int) -> None:
    interrupt = Interrupt()
    runner = world.start(Runner, world.journal, None, lambda: interrupt.set(signal))
    result, calls = world.run(runner=runner, interrupt=interrupt)
    assert (result.exit_code, result.detail) == (code, "interrupted")
    assert calls == ["core/1"]  # nothing is handed out after the interruption
    ending = world.ending()
    assert isinstance(ending, ev.SessionPaused) and ending.error_kind == "interrupted"


# -- slots and lanes ----------------------------------------------------------------------------------


def test_two_slots_build_two_components_at_once_then_verify_the_module(world: World) -> None:
    together = threading.Barrier(2, timeout=10)

    def both(slug: str, stop: threading.Event, journal: Journal) -> LaneResult:
        together.wait()  # each lane waits for the other: they run at once
        return build(slug, stop, journal)

    foreman, planner, runner = world.foreman(components=("a", "b"), parallelism=2, lanes=world.lanes(both))
    result = begin(foreman).get(timeout=60)
    assert (result.exit_code, result.status) == (0, "complete")
    assert planner.told().get() == [(2, False)]
    assert runner.told().get() == ["module:auth"]  # the lanes built the components; the module branch verifies
    claims = sorted((e.component, e.worker) for e in world.events(ev.ComponentClaimed))
    assert claims == [("a", "host:1/1"), ("b", "host:1/2")]
    released = sorted((e.component, e.reason) for e in world.events(ev.ComponentReleased))
    assert released == [("a", "merged"), ("b", "merged")]
    assert "building a, b in parallel lanes" in [e.why for e in world.events(ev.StepEntered)]


def test_a_lease_is_renewed_while_a_lane_works_and_a_lost_claim_stops_its_lane(world: World) -> None:
    builds: list[str] = []

    def act(slug: str, stop: threading.Event, journal: Journal) -> LaneResult:
        builds.append(slug)
        if slug == "a" and builds.count("a") == 1:  # a's first lane works until it is asked to stop
            assert stop.wait(10), "the lane of a lost claim is asked to stop"
            return LaneResult(slug, "stopped")
        return build(slug, stop, journal)

    foreman, _, _ = world.foreman(components=("a", "b"), parallelism=2, lanes=world.lanes(act), lease=0.3)
    done = begin(foreman)
    other = Journal(world.store, world.project, MODULE)
    assert wait_for(lambda: world.events(ev.ComponentLeaseRenewed))  # renewed every third of a lease
    other.refresh()
    other.record(  # another worker takes a over (as if a's lease had run out)
        ev.ComponentReleased(component="a", worker="host:1/1", reason="lease ran out", by="host:2"),
        ev.ComponentClaimed(component="a", worker="host:2/1", lease_until=time.time() + 60),
    )
    assert wait_for(lambda: "a" in world.stops and world.stops["a"].is_set())
    assert any(
        "[a] another worker took it over" in line or "another worker took it over" in line for line in world.said
    )
    other.refresh()
    other.record(ev.ComponentReleased(component="a", worker="host:2/1", reason="gave it back"))
    result = done.get(timeout=60)  # a is built again here once the other worker let it go
    assert (result.exit_code, result.status) == (0, "complete")
    assert builds.count("a") == 2 and builds.count("b") == 1


def test_a_dead_process_s_claims_are_all_released_at_once_and_its_session_abandoned(world: World) -> None:
    """kill -9 of a two-lane run: the next worker asks once whether that process lives, releases both its
    claims at once (not one now and the other after its lease), ends its session ``abandoned`` and builds
    both components itself."""
    dead = Journal(world.store, world.project, MODULE)
    dead_session = dead.open_session(ev.SessionStarted(lopen_version="test", worker="host:9"))
    Planner(dead, ("a", "b")).plan(None, "", ())  # type: ignore[arg-type]  # the dead process had planned …
    for n, slug in enumerate(("a", "b"), 1):  # … and claimed both components for its two lanes
        dead.record(ev.ComponentClaimed(component=slug, worker=f"host:9/{n}", lease_until=time.time() + 600))
    asked: list[str] = []

    def alive(worker: str) -> bool | None:
        asked.append(worker)
        return False if worker.startswith("host:9") else None

    world.journal.refresh()
    foreman, _, _ = world.foreman(components=("a", "b"), parallelism=2, lanes=world.lanes(build), alive=alive)
    result = begin(foreman).get(timeout=60)
    assert (result.exit_code, result.status) == (0, "complete")
    released = sorted((e.component, e.worker, e.reason) for e in world.events(ev.ComponentReleased) if e.by)
    assert released == [
        ("a", "host:9/1", "its process host:9 is gone"),
        ("b", "host:9/2", "its process host:9 is gone"),
    ]
    assert asked.count("host:9") == 1  # one question for the process, whatever number of lanes it held
    (abandoned,) = world.events(ev.SessionAbandoned)
    assert abandoned.session_id == dead_session and "host:9 is gone" in abandoned.reason
    assert world.events(ev.SessionCompleted)[0].session_id == world.session  # the live session is not touched
    claims = sorted((e.component, e.worker) for e in world.events(ev.ComponentClaimed) if e.worker.startswith("host:1"))
    assert claims == [("a", "host:1/1"), ("b", "host:1/2")]


def test_a_lane_that_stops_the_run_stops_the_other_lanes_and_ends_the_run(world: World) -> None:
    failing = Action(kind="fail", exit_code=1, reason="authentication failed: no token", error_kind="auth")

    def act(slug: str, stop: threading.Event, journal: Journal) -> LaneResult:
        if slug == "a":
            return LaneResult(slug, "stop-run", failing.reason, failing)
        assert stop.wait(10)
        return LaneResult(slug, "stopped")

    foreman, _, runner = world.foreman(components=("a", "b"), parallelism=2, lanes=world.lanes(act))
    result = begin(foreman).get(timeout=60)
    assert (result.exit_code, result.status, result.detail) == (1, "failed", failing.reason)
    assert world.stops["b"].is_set()
    ending = world.ending()
    assert isinstance(ending, ev.SessionFailed) and ending.error_kind == "auth"
    assert runner.told().get() == []


def test_a_lane_that_gave_up_pauses_the_run_only_after_the_others_end(world: World) -> None:
    a_gave_up = threading.Event()

    def act(slug: str, stop: threading.Event, journal: Journal) -> LaneResult:
        if slug == "a":
            a_gave_up.set()
            return LaneResult(slug, "gave-up", "a/1 failed 3 times; fix the cause or edit the plan, then run again")
        assert a_gave_up.wait(10)
        stop.wait(0.3)  # b goes on after a gave up
        return build(slug, stop, journal)

    foreman, _, _ = world.foreman(components=("a", "b"), parallelism=2, lanes=world.lanes(act))
    result = begin(foreman).get(timeout=60)
    assert (result.exit_code, result.status) == (2, "paused")
    assert result.detail == "a: a/1 failed 3 times; fix the cause or edit the plan, then run again"
    assert not world.stops["b"].is_set()  # b was not stopped: it finished
    kinds = [type(r.event).__name__ for r in world.store.read_stream(world.journal.stream)]
    assert kinds.index("SessionPaused") > max(i for i, k in enumerate(kinds) if k == "OracleVerdictRecorded")
    ending = world.ending()
    assert isinstance(ending, ev.SessionPaused) and ending.error_kind == "churn"
