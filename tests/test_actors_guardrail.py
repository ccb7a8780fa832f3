"""The Guardrail (B1, B3, W7, W10) with a real Metrics actor on a real SQLite store: budgets warn and
pause, max_iterations counts this run's invocations, churn adds up a task's failures across resumed
runs (folded from the events), a pause asks a person once (confirm-once) and each trip is recorded
once per run. The Conductor's part of W10 (it counts the run's invocations) is here too.

No sleeps: the bus hands usage to the Metrics actor as a message before ``record`` returns, so the
Guardrail's ask to Metrics (FIFO) sees it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.conductor import ConductorActor
from actors.guardrail import GuardrailActor
from actors.jobs import Reports
from actors.messages import Assessment, StepOutcome
from actors.metrics import MetricsActor
from events import catalogue as ev
from events.journal import Journal
from lopen.config import Budget, Settings, Workflow
from lopen.project import open_store

MODULE = "auth"
TASK = Assessment(step=6, kind="task", why="task core/1 is failed", component="core", task="core/1")
FAILED = StepOutcome(ok=False, detail="core/1 failed: tests red")


class Asker:
    """A person at the keyboard who answers every question the same way, and the questions asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.questions: list[str] = []

    def __call__(self, question: str) -> bool:
        self.questions.append(question)
        return self.answer


class World:
    def __init__(self, root: Path) -> None:
        (root / ".lopen").mkdir()
        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, MODULE)
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.journal.record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)),
            ev.ComponentSelected(component="core"),
            ev.TasksRecorded(
                component="core",
                tasks=(ev.TaskSpec(id="core/1", name="One"), ev.TaskSpec(id="core/2", name="Two")),
            ),
        )
        self.refs: list[pykka.ActorRef] = []
        self.calls = 0

    def start(self, cls: type[pykka.ThreadingActor], *args: object, **kwargs: object) -> pykka.ActorProxy:
        ref = cls.start(*args, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def guardrail(self, settings: Settings, ask: Asker | None = None, journal: Journal | None = None):
        metrics = self.start(MetricsActor, self.store, self.project, MODULE)
        return self.start(GuardrailActor, journal or self.journal, settings, metrics, ask)

    def spend(self, tokens: int, premium: float = 0.0) -> None:
        self.calls += 1
        self.journal.record(
            ev.TokensUsed(invocation_id="task-1", model="m", input=tokens, premium=premium, call_id=f"c{self.calls}")
        )

    def fail(self, task_id: str, reason: str, journal: Journal | None = None) -> None:
        journal = journal or self.journal
        state = journal.read(lambda s: s.tasks[task_id].state)
        journal.record(
            ev.TaskStatusChanged(task_id=task_id, from_state=state, to_state="in-progress"),
            ev.TaskStatusChanged(task_id=task_id, from_state="in-progress", to_state="failed", reason=reason),
        )

    def trips(self) -> list[tuple[str, str, str]]:
        return [
            (r.event.category, r.event.level, r.event.detail)
            for r in self.store.read_stream(self.journal.stream)
            if isinstance(r.event, ev.GuardrailTripped)
        ]

    def stop(self) -> None:
        for ref in reversed(self.refs):
            ref.stop()
        self.refs.clear()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        w.stop()
        w.store.close()


def budget(tokens: int = 0, premium: int = 0) -> Settings:
    return Settings(budget=Budget(token_budget_per_module=tokens, premium_budget_per_module=premium))


def workflow(**kwargs: int) -> Settings:
    return Settings(workflow=Workflow(**kwargs))


# -- budgets (B1) ----------------------------------------------------------------------------------


def test_under_80_percent_goes_on_with_a_budget_hint(world: World) -> None:
    world.spend(700, premium=1)
    decision = world.guardrail(budget(tokens=1000)).before(0).get()
    assert decision.action == "allow" and decision.category == ""
    assert "700 tokens, 1 premium request." in decision.budget_hint
    assert world.trips() == []


def test_a_zero_budget_is_unlimited(world: World) -> None:
    world.spend(10**9, premium=10**6)
    assert world.guardrail(budget()).before(0).get().action == "allow"
    assert world.trips() == []


def test_80_percent_warns_once_per_run(world: World) -> None:
    world.spend(850)  # spent by an earlier session: Metrics starts from the projection
    guard = world.guardrail(budget(tokens=1000))

    first = guard.before(0).get()
    again = guard.before(1).get()

    assert (first.action, first.category, first.detail) == (
        "warn",
        "budget",
        "budget.token_budget_per_module: 850 of 1,000 (85%)",
    )
    assert again.action == "warn"
    assert world.trips() == [("budget", "warn", "budget.token_budget_per_module: 850 of 1,000 (85%)")]


def test_90_percent_pauses_a_headless_run(world: World) -> None:
    guard = world.guardrail(budget(tokens=1000))
    assert guard.before(0).get().action == "allow"
    world.spend(500)
    world.spend(450)  # spent in this run: Metrics follows the bus

    decision = guard.before(1).get()

    assert (decision.action, decision.category, decision.detail) == (
        "pause",
        "budget",
        "budget.token_budget_per_module: 950 of 1,000 (95%)",
    )
    assert world.trips() == [("budget", "pause", "budget.token_budget_per_module: 950 of 1,000 (95%)")]


def test_the_premium_budget_counts_premium_requests(world: World) -> None:
    world.spend(1, premium=9)
    decision = world.guardrail(budget(premium=10)).before(0).get()
    assert (decision.action, decision.detail) == ("pause", "budget.premium_budget_per_module: 9 of 10 (90%)")


def test_a_person_who_says_go_on_is_asked_once(world: World) -> None:
    world.spend(950)
    person = Asker(True)
    guard = world.guardrail(budget(tokens=1000), person)

    first = guard.before(0).get()
    world.spend(30)
    again = guard.before(1).get()

    assert (first.action, again.action) == ("allow", "allow")
    assert person.questions == ["budget.token_budget_per_module: 950 of 1,000 (95%). Continue?"]
    assert world.trips() == [
        ("budget", "pause", "budget.token_budget_per_module: 950 of 1,000 (95%)"),
        ("budget", "warn", "budget.token_budget_per_module: 950 of 1,000 (95%); the user chose to continue"),
    ]


def test_a_person_who_says_stop_pauses_the_run(world: World) -> None:
    world.spend(950)
    person = Asker(False)
    decision = world.guardrail(budget(tokens=1000), person).before(0).get()
    assert decision.action == "pause" and len(person.questions) == 1
    assert world.trips() == [("budget", "pause", "budget.token_budget_per_module: 950 of 1,000 (95%)")]


# -- max_iterations (W10) --------------------------------------------------------------------------


def test_max_iterations_pauses_without_asking(world: World) -> None:
    person = Asker(True)
    guard = world.guardrail(workflow(max_iterations=3), person)

    assert guard.before(2).get().action == "allow"
    decision = guard.before(3).get()
    guard.before(3).get()

    assert (decision.action, decision.category) == ("pause", "max_iterations")
    assert "3 invocations in this run" in decision.detail
    assert person.questions == []  # a person raises the limit; it is not a yes/no question
    assert world.trips() == [("max_iterations", "pause", decision.detail)]


# -- churn (B3, W7) ----------------------------------------------------------------------------------


def test_a_task_failing_threshold_times_pauses_naming_the_reasons(world: World) -> None:
    guard = world.guardrail(workflow(failure_threshold=3))
    for n in (1, 2):
        world.fail("core/1", f"reason {n}")
        assert guard.after(TASK, FAILED).get().action == "allow"
    world.fail("core/1", "reason 3")

    decision = guard.after(TASK, FAILED).get()

    assert (decision.action, decision.category) == ("pause", "churn")
    assert decision.detail == "core/1 failed 3 times (workflow.failure_threshold=3): reason 1; reason 2; reason 3"
    assert world.trips() == [("churn", "pause", decision.detail)]


def test_failures_add_up_across_resumed_runs(world: World) -> None:
    world.fail("core/1", "first run")
    world.fail("core/1", "second run")  # two earlier runs, each failed the task once and stopped

    journal = Journal(world.store, world.project, MODULE)  # this run: a new process reads the history
    guard = world.guardrail(workflow(failure_threshold=3), journal=journal)
    world.fail("core/1", "third run", journal)

    decision = guard.after(TASK, FAILED).get()
    assert decision.action == "pause" and "failed 3 times" in decision.detail
    assert "first run; second run; third run" in decision.detail


def test_churn_asks_once_then_counts_afresh(world: World) -> None:
    person = Asker(True)
    guard = world.guardrail(workflow(failure_threshold=2), person)
    for n in range(1, 3):
        world.fail("core/1", f"r{n}")
        guard.after(TASK, FAILED).get()
    assert len(person.questions) == 1 and "core/1 failed 2 times" in person.questions[0]

    world.fail("core/1", "r3")
    assert guard.after(TASK, FAILED).get().action == "allow"  # one failure since the person said go on
    assert len(person.questions) == 1
    world.fail("core/1", "r4")
    assert guard.after(TASK, FAILED).get().action == "allow"  # two more: asked again
    assert len(person.questions) == 2 and "core/1 failed 2 times" in person.questions[1]


def test_a_step_without_a_task_counts_its_failures_in_the_run(world: World) -> None:
    verification = Assessment(step=6, kind="component-verification", why="", component="core")
    guard = world.guardrail(workflow(failure_threshold=2))
    assert guard.after(verification, StepOutcome(ok=False, detail="not verified")).get().action == "allow"
    decision = guard.after(verification, StepOutcome(ok=False, detail="not verified")).get()
    assert decision.action == "pause" and decision.detail.startswith("component-verification:core failed 2 times")


def test_each_task_s_churn_trip_is_recorded(world: World) -> None:
    guard = world.guardrail(workflow(failure_threshold=1), Asker(True))
    world.fail("core/1", "x")
    guard.after(TASK, FAILED).get()
    world.fail("core/2", "y")
    guard.after(Assessment(step=6, kind="task", why="", component="core", task="core/2"), FAILED).get()
    paused = [detail for category, level, detail in world.trips() if (category, level) == ("churn", "pause")]
    assert [d.split()[0] for d in paused] == ["core/1", "core/2"]


# -- the Conductor counts this run's invocations (W10) ----------------------------------------------


class AlwaysTask(Reports, pykka.ThreadingActor):
    """An Assessor for which the module always has a task to do."""

    def assess(self) -> Assessment:
        return TASK


class CountingRunner(Reports, pykka.ThreadingActor):
    """A TaskRunner whose tasks always fail (the Guardrail's churn threshold is set out of reach)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    def run_task(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        self.runs += 1
        return StepOutcome(ok=False, detail="not yet")

    def count(self) -> int:
        return self.runs


def test_the_conductor_pauses_after_max_iterations_invocations_of_this_run(world: World) -> None:
    settings = workflow(max_iterations=3, failure_threshold=50)
    said: list[str] = []

    def run() -> tuple[object, int]:
        journal = Journal(world.store, world.project, MODULE)
        session = journal.read(lambda s: s.unfinished_session())
        assert session is not None
        journal.resume_session(session, "test")
        runner = world.start(CountingRunner)
        conductor = world.start(
            ConductorActor,
            journal,
            assessor=world.start(AlwaysTask),
            guardrail=world.guardrail(settings, journal=journal),
            planner=world.start(AlwaysTask),
            task_runner=runner,
            say=said.append,
        )
        result = conductor.run_module().get(timeout=60)
        return result, runner.count().get()

    first, runs = run()
    assert runs == 3
    assert (first.exit_code, first.status) == (2, "paused") and "max_iterations" in first.detail
    paused = [r.event for r in world.store.read_stream(world.journal.stream) if isinstance(r.event, ev.SessionPaused)]
    assert [p.error_kind for p in paused] == ["max_iterations"]

    second, runs = run()  # a resumed run counts its own invocations, not the history's
    assert runs == 3 and second.exit_code == 2
