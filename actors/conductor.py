"""The Conductor: the loop of one module run. It does no work itself — it asks the Assessor where
the module stands and the Guardrail whether to go on, lets ``lopen.workflow.decide`` choose (a pure
function), hands the step to the Planner or the TaskRunner, and loops.

An interruption (Ctrl+C, SIGTERM: ``interrupt`` is set) is seen between steps and, through the
gateway's abort, in the middle of one: the session is recorded paused (``interrupted``) and the
journal closed, so nothing lands after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pykka

from actors.assessor import AssessorActor
from actors.guardrail import GuardrailActor, how_to_go_on
from actors.lane import Tally
from actors.messages import Assessment, GuardDecision, RunResult, StepOutcome, Stop
from actors.planner import PlannerActor
from actors.task_runner import TaskRunnerActor
from events import catalogue as ev
from events.journal import Journal, JournalClosed
from lopen.workflow.decide import Action, after, decide
from lopen.workflow.schedule import fan_out
from lopen.workflow.steps import STEP_NAMES, Kind, phase_of


class Interrupt:
    """Set from a signal handler or another thread (the TUI's Ctrl+C): which signal stopped the run
    ("" while it runs). ``on_set`` callbacks run once, when it is first set (abort the gateway …)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal = ""
        self._callbacks: list[Callable[[], None]] = []

    def on_set(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def set(self, signal: str) -> None:
        first = not self.event.is_set()
        self.signal = self.signal or signal
        self.event.set()
        if first:
            for callback in self._callbacks:
                callback()

    def __bool__(self) -> bool:
        return self.event.is_set()


class ConductorActor(pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        *,
        assessor: pykka.ActorProxy[AssessorActor],
        guardrail: pykka.ActorProxy[GuardrailActor],
        planner: pykka.ActorProxy[PlannerActor],
        task_runner: pykka.ActorProxy[TaskRunnerActor],
        say: Callable[[str], None],
        stop_before: str = "",
        interrupt: Interrupt | None = None,
        foreman: pykka.ActorProxy | None = None,
        parallelism: int = 1,
        tally: Tally | None = None,
    ) -> None:
        """``foreman`` (with ``parallelism`` above 1) takes the module whenever more than one component can
        be built at once (``lopen.workflow.schedule.fan_out``); ``tally`` counts the run's invocations
        across its lanes."""
        super().__init__()
        self.journal = journal
        self.assessor = assessor
        self.guardrail = guardrail
        self.planner = planner
        self.task_runner = task_runner
        self.say = say
        self.stop_before = stop_before
        self.interrupt = interrupt if interrupt is not None else Interrupt()
        self.foreman = foreman
        self.parallelism = parallelism
        self.tally = tally if tally is not None else Tally()  # this run's invocations (workflow.max_iterations)

    @property
    def invocations(self) -> int:
        return self.tally.value

    def run_module(self) -> RunResult:
        try:
            return self._loop()
        except JournalClosed:
            return self._end(self._interrupted())

    def _loop(self) -> RunResult:
        last_step = 0
        while True:
            if self.interrupt:
                return self._end(self._interrupted())
            found: Assessment | Stop = self.assessor.assess().get()
            if isinstance(found, Stop):
                self.journal.record(ev.SessionPaused(reason=found.reason, error_kind="spec"))
                reason = f"{found.reason}; {found.how}"
                return self._end(Action(kind="pause", exit_code=found.exit_code, reason=reason, error_kind="spec"))
            assessment = found
            self.journal.refresh()  # a pause asked for by another writer (the TUI, an MCP client)
            guard = GuardDecision(action="allow")
            if not assessment.complete:
                guard = self.guardrail.before(self.invocations).get()
            pause_requested = self.journal.read(lambda s: s.pause_requested)
            action = decide(
                assessment,
                guard,
                stop_before=self.stop_before,
                pause_requested=pause_requested,
                interrupted=self.interrupt.signal if self.interrupt else "",
            )
            if action.kind != "invoke":
                if action.kind == "pause" and guard.action == "pause" and guard.category:
                    action = Action(
                        kind="pause",
                        exit_code=2,
                        reason=f"{guard.detail}; {how_to_go_on(guard)}, then run again to resume",
                        error_kind=guard.category,
                    )
                return self._end(action)
            if self._fans_out():
                version = self.journal.version
                stop = self.foreman.run().get()  # type: ignore[union-attr]
                if stop is not None:
                    return self._end(stop)
                if self.journal.version != version:  # else nothing could be done in lanes: go on here
                    last_step = 6
                    continue
            if assessment.step != last_step:
                if last_step == 6 and assessment.step == 4:
                    self._enter(7, "components remain")
                self._enter(assessment.step, assessment.why)
                last_step = assessment.step
            outcome = self._dispatch(assessment, guard.budget_hint)
            self.say(("✓ " if outcome.ok else "✗ ") + outcome.detail)
            stop = after(outcome.ok, outcome.error_kind, outcome.detail)
            if stop is not None:
                return self._end(self._interrupted() if outcome.error_kind == "interrupted" else stop)
            churn = self.guardrail.after(assessment, outcome).get()
            if churn.action == "pause":
                return self._end(
                    Action(
                        kind="pause",
                        exit_code=2,
                        reason=f"{churn.detail}; {how_to_go_on(churn)}, then run again",
                        error_kind="churn",
                    )
                )

    def _fans_out(self) -> bool:
        if self.foreman is None:
            return False
        parallelism = self.parallelism
        return self.journal.read(lambda s: fan_out(s, parallelism))

    def _dispatch(self, assessment: Assessment, budget_hint: str) -> StepOutcome:
        notes: tuple[str, ...] = ()  # the invoker adds what the history holds for the next invocation
        self.tally.add()
        kind = Kind(assessment.kind)
        if kind is Kind.PLANNING:
            if self.parallelism > 1:  # the prompt says how many components are built at once
                return self.planner.plan(assessment, budget_hint, notes, parallel=self.parallelism).get()
            return self.planner.plan(assessment, budget_hint, notes).get()
        if kind is Kind.TASK:
            self.say(f"▶ task {assessment.task} ({assessment.why})")
            return self.task_runner.run_task(assessment, budget_hint, notes).get()
        return self.task_runner.verify_scope(assessment, budget_hint, notes).get()

    def _enter(self, step: int, why: str) -> None:
        phase = phase_of(step).value
        self.journal.record(ev.StepEntered(phase=phase, step=step, why=why))
        self.say(f"→ step {step}/7 {STEP_NAMES[step]} ({phase}): {why}")

    def _interrupted(self) -> Action:
        signal = self.interrupt.signal or "SIGINT"
        return Action(
            kind="pause", exit_code=143 if signal == "SIGTERM" else 130, reason="interrupted", error_kind="interrupted"
        )

    def _end(self, action: Action) -> RunResult:
        return end_session(self.journal, action, self.stop_before)


def end_session(journal: Journal, action: Action, stop_before: str = "") -> RunResult:
    """Record how the session ended (once) and close the journal: nothing lands after it."""
    if not journal.closed:
        event: ev.Event
        if action.kind == "complete":
            event = ev.SessionCompleted(reason=action.reason)
        elif action.kind == "fail":
            event = ev.SessionFailed(reason=action.reason, error_kind=action.error_kind)
        else:
            event = ev.SessionPaused(reason=action.reason, error_kind=action.error_kind)
        if action.kind != "pause" or action.error_kind != "spec":  # a spec stop recorded its own pause
            journal.record(event)
        journal.close()
    status = {"complete": "complete", "fail": "failed"}.get(action.kind, "paused")
    if action.kind == "pause" and stop_before and action.exit_code == 0:
        detail = f"{stop_before} is next: run `lopen build {journal.module}`"
    else:
        detail = action.reason
    return RunResult(exit_code=action.exit_code, status=status, detail=detail, session_id=journal.session_id)
