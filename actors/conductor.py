"""The Conductor: the loop of one module run. It does no work itself — it asks the Assessor
where the module stands, the Guardrail whether to go on, hands the step to the Planner or the
TaskRunner, records what happened, and loops."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import msgspec
import pykka

from actors.assessor import AssessorActor
from actors.guardrail import GuardrailActor
from actors.messages import Assessment, GuardDecision, RunResult, StepOutcome
from actors.planner import PlannerActor
from actors.task_runner import TaskRunnerActor
from events import catalogue as ev
from lopen.workflow.run import ModuleRun
from lopen.workflow.steps import STEP_NAMES, Kind, phase_of

CRITICAL = {"auth": "authentication failed", "fatal": "the model call failed", "model_unavailable": "no model left"}


class ConductorActor(pykka.ThreadingActor):
    def __init__(
        self,
        run: ModuleRun,
        *,
        assessor: pykka.ActorProxy[AssessorActor],
        guardrail: pykka.ActorProxy[GuardrailActor],
        planner: pykka.ActorProxy[PlannerActor],
        task_runner: pykka.ActorProxy[TaskRunnerActor],
        say: Callable[[str], None],
        stop_before: str = "",
        ask: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.assessor = assessor
        self.guardrail = guardrail
        self.planner = planner
        self.task_runner = task_runner
        self.say = say
        self.stop_before = stop_before
        self.ask = ask
        self.confirmed: set[str] = set()
        self.tripped: set[tuple[str, str]] = set()
        self.failures: Counter[str] = Counter()

    def run_module(self) -> RunResult:
        last_step = self.run.current_step()
        while True:
            assessment: Assessment = self.assessor.assess().get()
            if assessment.complete:
                self.run.record(ev.SessionCompleted(reason=assessment.why))
                return self._end(0, "complete", assessment.why)
            if self.stop_before and phase_of(assessment.step).value == self.stop_before:
                self.run.record(ev.SessionPaused(reason=f"stopped before {self.stop_before} as asked"))
                return self._end(0, "paused", f"{self.stop_before} is next: run `lopen build {self.run.module}`")
            if assessment.step != last_step:
                if last_step == 6 and assessment.step == 4:
                    self._enter(7, "components remain")
                self._enter(assessment.step, assessment.why)
                last_step = assessment.step
            decision = self.guardrail.check(self.run.invocation_count()).get()
            if decision.action == "pause" and decision.category in self.confirmed:
                decision = msgspec.structs.replace(decision, action="allow")  # the user said go on, once
            if decision.action != "allow" and (decision.category, decision.action) not in self.tripped:
                self.tripped.add((decision.category, decision.action))  # once per run, not every invocation
                self.run.record(
                    ev.GuardrailTripped(category=decision.category, level=decision.action, detail=decision.detail)
                )
                if decision.action == "pause":  # a warning's line comes from the renderer, off the event
                    self.say(f"! {decision.category}: {decision.detail}")
            if decision.action == "pause" and self._confirmed(decision.category, decision.detail):
                decision = msgspec.structs.replace(decision, action="allow")
            if decision.action == "pause":
                how = f"{_how_to_go_on(decision)}, then run again to resume"
                self.run.record(ev.SessionPaused(reason=f"{decision.category}: {decision.detail}"))
                return self._end(2, "paused", f"{decision.detail}; {how}")
            outcome = self._dispatch(assessment, decision.budget_hint)
            key = assessment.task or f"{assessment.kind}:{assessment.component}"
            if outcome.ok:
                self.say(f"✓ {outcome.detail}")
                self.failures.pop(key, None)
                continue
            self.say(f"✗ {outcome.detail}")
            if outcome.error_kind in CRITICAL:
                self.run.record(ev.SessionFailed(reason=outcome.detail, error_kind=outcome.error_kind))
                return self._end(1, "failed", f"{CRITICAL[outcome.error_kind]}: {outcome.detail}")
            if outcome.error_kind in ("rate_limited", "transient"):
                self.run.record(ev.SessionPaused(reason=outcome.detail, error_kind=outcome.error_kind))
                return self._end(2, "paused", f"{outcome.detail}; run again later to resume")
            # a task's failures are counted from the events, so they add up across resumed runs
            self.failures[key] = self.run.task_failures(assessment.task) if assessment.task else self.failures[key] + 1
            threshold = self.run.settings.workflow.failure_threshold
            if self.failures[key] >= threshold and self._confirmed(f"churn:{key}", f"{key} failed {threshold} times"):
                self.failures[key] = 0
            if self.failures[key] >= threshold:
                reasons = "; ".join(self.run.failure_reasons(assessment.task)[-threshold:]) or outcome.detail
                detail = f"{key} failed {self.failures[key]} times (workflow.failure_threshold={threshold}): {reasons}"
                self.run.record(
                    ev.GuardrailTripped(category="churn", level="pause", detail=detail), ev.SessionPaused(reason=detail)
                )
                return self._end(2, "paused", f"{detail}; fix the cause or edit the plan, then run again")

    def _confirmed(self, category: str, detail: str) -> bool:
        """Interactive runs ask once per run whether to go on past a pause; headless runs never ask."""
        if category in self.confirmed:
            return True
        if self.ask is None or category == "max_iterations" or not self.ask(f"{detail}. Continue?"):
            return False
        self.confirmed.add(category)
        self.run.record(
            ev.GuardrailTripped(
                category=category.split(":")[0], level="warn", detail=f"{detail}; the user chose to continue"
            )
        )
        return True

    def _dispatch(self, assessment: Assessment, budget_hint: str) -> StepOutcome:
        notes = self.run.pending_notes()
        kind = Kind(assessment.kind)
        if kind is Kind.PLANNING:
            return self.planner.plan(assessment, budget_hint, notes).get()
        if kind is Kind.TASK:
            self.say(f"▶ task {assessment.task} ({assessment.why})")
            return self.task_runner.run_task(assessment, budget_hint, notes).get()
        return self.task_runner.verify_scope(assessment, budget_hint, notes).get()

    def _enter(self, step: int, why: str) -> None:
        phase = phase_of(step).value
        self.run.record(ev.StepEntered(phase=phase, step=step, why=why))
        self.say(f"→ step {step}/7 {STEP_NAMES[step]} ({phase}): {why}")

    def _end(self, code: int, status: str, detail: str) -> RunResult:
        return RunResult(exit_code=code, status=status, detail=detail, session_id=self.run.session_id)


def _how_to_go_on(decision: GuardDecision) -> str:
    """The setting that lets a paused run go on: the budget that ran out, or max_iterations."""
    if decision.category == "max_iterations":
        return "raise workflow.max_iterations (lopen config set workflow.max_iterations N, or --max-iterations N)"
    key = "premium" if decision.detail.startswith("premium") else "token"
    return f"raise the budget (lopen config set budget.{key}_budget_per_module N)"
