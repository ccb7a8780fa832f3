"""The Conductor's loop on a real store, with the real Guardrail and Metrics and stand-ins for the
actors that would call a model: what it records when it starts a step, how each kind of ending is
recorded (once, and nothing after it), and that queued messages and corrective notes reach the next
invocation once (W11)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.conductor import ConductorActor, Interrupt
from actors.guardrail import GuardrailActor
from actors.jobs import Reports
from actors.messages import Assessment, RunResult, StepOutcome, Stop
from actors.metrics import MetricsActor
from events import catalogue as ev
from events.journal import Journal, JournalClosed
from lopen.config import Settings, Workflow
from lopen.project import open_store

MODULE = "auth"
PLAN = Assessment(step=4, kind="planning", why="no component selected yet")
TASK = Assessment(step=6, kind="task", why="task core/1 is pending", component="core", task="core/1")
DONE = Assessment(step=7, kind="complete", why="every component is complete and the module is verified")


class Script(pykka.ThreadingActor):
    """An Assessor that answers from a script (the last answer repeats). Like the real one, it first
    folds in what other writers appended (a pause asked for over MCP)."""

    def __init__(self, journal: Journal, answers: list[Assessment | Stop]) -> None:
        super().__init__()
        self.journal = journal
        self.answers = answers

    def assess(self) -> Assessment | Stop:
        self.journal.refresh()
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class Worker(Reports, pykka.ThreadingActor):
    """The Planner and the TaskRunner: records that an invocation started (as the Invoker does), keeps
    the notes it was given, and answers with the next scripted outcome (the last repeats)."""

    def __init__(self, journal: Journal, outcomes: list[StepOutcome], on_call=None) -> None:
        super().__init__()
        self.journal = journal
        self.outcomes = outcomes
        self.notes: list[tuple[str, ...]] = []
        self.on_call = on_call

    def _work(self, kind: str, notes: tuple[str, ...]) -> StepOutcome:
        self.journal.record(ev.InvocationStarted(invocation_id=f"{kind}-{len(self.notes) + 1}", kind=kind))
        self.notes.append(notes)
        if self.on_call is not None:
            self.on_call(len(self.notes))
        return self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]

    def plan(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        return self._work("planning", notes)

    def run_task(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        return self._work("task", notes)

    def verify_scope(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        return self._work(assessment.kind, notes)

    def given(self) -> list[tuple[str, ...]]:
        return self.notes


class World:
    def __init__(self, root: Path) -> None:
        (root / ".lopen").mkdir()
        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, MODULE)
        self.session = self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.refs: list[pykka.ActorRef] = []
        self.said: list[str] = []

    def start(self, cls: type[pykka.ThreadingActor], *args: object, **kwargs: object) -> pykka.ActorProxy:
        ref = cls.start(*args, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def run(
        self,
        answers: list[Assessment | Stop],
        outcomes: list[StepOutcome] | None = None,
        *,
        settings: Settings | None = None,
        interrupt: Interrupt | None = None,
        on_call=None,
    ) -> tuple[RunResult, list[tuple[str, ...]]]:
        worker = self.start(Worker, self.journal, outcomes or [StepOutcome(ok=True, detail="ok")], on_call)
        metrics = self.start(MetricsActor, self.store, self.project, MODULE)
        conductor = self.start(
            ConductorActor,
            self.journal,
            assessor=self.start(Script, self.journal, answers),
            guardrail=self.start(GuardrailActor, self.journal, settings or Settings(), metrics, None),
            planner=worker,
            task_runner=worker,
            say=self.said.append,
            interrupt=interrupt,
        )
        return conductor.run_module().get(timeout=60), worker.given().get()

    def events(self, *kinds: type[ev.Event]) -> list:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kinds)]

    def endings(self) -> list[tuple[str, str]]:
        ends = self.events(ev.SessionPaused, ev.SessionCompleted, ev.SessionFailed)
        return [(type(e).__name__, e.error_kind if hasattr(e, "error_kind") else "") for e in ends]

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


def test_a_complete_module_completes_the_session_without_an_invocation(world: World) -> None:
    result, given = world.run([DONE])
    assert (result.exit_code, result.status, result.session_id) == (0, "complete", world.session)
    assert given == [] and world.endings() == [("SessionCompleted", "")]
    assert world.journal.closed


def test_steps_are_entered_and_recorded_as_the_module_moves_on(world: World) -> None:
    result, given = world.run([PLAN, TASK, PLAN, DONE])
    assert result.exit_code == 0 and len(given) == 3
    entered = [(e.step, e.phase) for e in world.events(ev.StepEntered)]
    assert entered == [(4, "planning"), (6, "building"), (7, "building"), (4, "planning")]


def test_an_unapproved_spec_edit_stops_the_run_for_a_person(world: World) -> None:
    stop = Stop(2, "the specification changed since it was approved (Overview)", "lopen spec approve auth")
    result, given = world.run([stop])
    assert (result.exit_code, result.status) == (2, "paused") and given == []
    assert "lopen spec approve auth" in result.detail
    assert world.endings() == [("SessionPaused", "spec")]


@pytest.mark.parametrize(("signal", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interruption_pauses_the_session_and_nothing_lands_after_it(world: World, signal: str, code: int) -> None:
    interrupt = Interrupt()

    def interrupted_during(call: int) -> None:
        interrupt.set(signal)  # Ctrl+C arrives while the first invocation runs

    result, given = world.run([TASK], interrupt=interrupt, on_call=interrupted_during)

    assert (result.exit_code, result.status, result.detail) == (code, "paused", "interrupted")
    assert len(given) == 1  # no invocation after the interruption
    assert world.endings() == [("SessionPaused", "interrupted")]
    assert world.journal.closed
    with pytest.raises(JournalClosed):
        world.journal.record(ev.ProgressReported(progress="late"))


@pytest.mark.parametrize(
    ("error_kind", "code", "ending"),
    [
        ("fatal", 1, "SessionFailed"),
        ("auth", 2, "SessionPaused"),
        ("rate_limited", 2, "SessionPaused"),
        ("interrupted", 130, "SessionPaused"),
    ],
)
def test_an_invocation_error_ends_the_run_as_decided(world: World, error_kind: str, code: int, ending: str) -> None:
    result, given = world.run([TASK], [StepOutcome(ok=False, detail="boom", error_kind=error_kind)])
    assert result.exit_code == code and len(given) == 1
    assert world.endings() == [(ending, error_kind)]


def test_a_person_s_pause_request_stops_before_the_next_invocation(world: World) -> None:
    def asked_to_pause(call: int) -> None:
        Journal(world.store, world.project, MODULE).record(ev.PauseRequested(requested_by="mcp:alice"))

    result, given = world.run([TASK], on_call=asked_to_pause)
    assert (result.exit_code, result.status) == (2, "paused") and "mcp:alice" in result.detail
    assert len(given) == 1


def test_churn_pauses_the_run_with_how_to_go_on(world: World) -> None:
    settings = Settings(workflow=Workflow(failure_threshold=2))
    verification = Assessment(step=6, kind="component-verification", why="", component="core")
    result, given = world.run([verification], [StepOutcome(ok=False, detail="not verified")], settings=settings)
    assert (result.exit_code, result.status) == (2, "paused") and len(given) == 2
    assert "failed 2 times" in result.detail and "fix the cause or edit the plan" in result.detail
    assert world.endings() == [("SessionPaused", "churn")]
