"""The Guardrail (B1, B3, W7, W10): before every invocation go on, warn or pause; after it, count
failures (churn).

Its policy is its own: a pause asks the person once per run when the run is interactive (``ask``)
and remembers the answer (confirm-once); each trip is recorded once per run; a task's failures are
read from the one fold, so they add up across resumed runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import msgspec
import pykka

from actors.messages import Assessment, GuardDecision, StepOutcome
from actors.metrics import MetricsActor
from events import catalogue as ev
from events.journal import Journal
from lopen.config import Settings
from lopen.text import number, plural
from lopen.workflow.budgets import Limit, applying, figures, reached, used
from lopen.workflow.cycle import how_to_go_on

__all__ = ["GuardrailActor", "check_budget", "how_to_go_on"]

INSIDE = " — stopped inside the invocation"


def check_budget(limit: Limit, spent: float, warning: float, confirmation: float) -> GuardDecision | None:
    """Pause at ``confirmation`` of the budget (``lopen.workflow.budgets.reached``), warn at ``warning``."""
    if reached(spent, limit.budget, confirmation):
        return GuardDecision(action="pause", category="budget", detail=figures(limit, spent), setting=limit.setting)
    if reached(spent, limit.budget, warning):
        return GuardDecision(action="warn", category="budget", detail=figures(limit, spent), setting=limit.setting)
    return None


class GuardrailActor(pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        metrics: pykka.ActorProxy[MetricsActor],
        ask: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__()
        self.journal = journal
        self.settings = settings
        self.metrics = metrics
        self.ask = ask
        self.confirmed: set[str] = set()
        self.tripped: set[tuple[str, str]] = set()  # (category or churn key, level)
        self.failures: Counter[str] = Counter()
        self.forgiven: dict[str, int] = {}  # failures a person already said to go on past
        self.stopped = ""  # the last invocation was stopped inside by this budget

    def before(self, invocations: int, task: str = "") -> GuardDecision:
        """Before an invocation; ``invocations`` is how many this run has made (W10 counts the run),
        ``task`` the task it is for (its budgets apply too)."""
        settings = self.settings
        if invocations >= settings.workflow.max_iterations:
            detail = f"{plural(invocations, 'invocation')} in this run reached workflow.max_iterations"
            return self._trip(GuardDecision(action="pause", category="max_iterations", detail=detail), ask=False)
        module, spent = self.metrics.spending(task).get()
        budget = settings.budget
        limits = applying(budget, task)
        decisions = [
            check_budget(limit, used(limit, module, spent), budget.warning_threshold, budget.confirmation_threshold)
            for limit in limits
        ]
        hint = (
            f"Budget so far for this module: {plural(module.tokens, 'token')}, "
            f"{number(module.premium)} premium request{'' if module.premium == 1 else 's'}"
            + (f", ${module.money:.2f}" if module.money else "")
            + "."
        )
        stopped, self.stopped = self.stopped, ""
        for action in ("pause", "warn"):
            for decision in decisions:
                if decision and decision.action == action:
                    detail = decision.detail + (INSIDE if action == "pause" and stopped else "")
                    found = msgspec.structs.replace(decision, detail=detail)
                    return self._trip(found, hint=hint, confirm_key=_confirm_key(decision.setting, task))
        return GuardDecision(action="allow", budget_hint=hint)

    def limits(self, task: str = "") -> tuple[Limit, ...]:
        """The budgets the next invocation (of ``task``) is stopped inside at, after the model call that
        reaches one (``lopen.workflow.budgets``): those set, less those a person chose to go on past."""
        return tuple(
            limit
            for limit in applying(self.settings.budget, task)
            if _confirm_key(limit.setting, task) not in self.confirmed
        )

    def after(self, assessment: Assessment, outcome: StepOutcome) -> GuardDecision:
        """After an invocation: a step that failed ``workflow.failure_threshold`` times pauses (W7). One
        stopped inside by a budget is no failure: the next ``before`` pauses with the figures."""
        key = assessment.task or f"{assessment.kind}:{assessment.component}"
        if outcome.error_kind == "budget":
            self.stopped = outcome.detail
            return GuardDecision(action="allow")
        if outcome.ok:
            self.failures.pop(key, None)
            self.forgiven.pop(key, None)
            return GuardDecision(action="allow")
        if assessment.task:  # counted from the events: they add up across resumed runs
            self.failures[key] = self.journal.read(lambda s: s.tasks[assessment.task].failures)
        else:
            self.failures[key] += 1
        threshold = self.settings.workflow.failure_threshold
        since = self.failures[key] - self.forgiven.get(key, 0)
        if since < threshold:
            return GuardDecision(action="allow")
        reasons = ""
        if assessment.task:
            recorded = self.journal.read(lambda s: [r for r in s.tasks[assessment.task].reasons if r])
            reasons = "; ".join(recorded[-threshold:])
        detail = f"{key} failed {since} times (workflow.failure_threshold={threshold}): {reasons or outcome.detail}"
        decision = self._trip(
            GuardDecision(action="pause", category="churn", detail=detail), confirm_key=f"churn:{key}"
        )
        if decision.action != "pause":  # the person said go on: count afresh from here
            self.forgiven[key] = self.failures[key]
            self.confirmed.discard(f"churn:{key}")
        return decision

    def _trip(
        self, decision: GuardDecision, *, hint: str = "", ask: bool = True, confirm_key: str = ""
    ) -> GuardDecision:
        key = confirm_key or decision.category
        if decision.action == "pause" and key in self.confirmed:
            return GuardDecision(action="allow", category=decision.category, budget_hint=hint)
        if (key, decision.action) not in self.tripped:
            self.tripped.add((key, decision.action))  # once per run (and per task, for churn), not every invocation
            self.journal.record(
                ev.GuardrailTripped(category=decision.category, level=decision.action, detail=decision.detail)  # type: ignore[arg-type]
            )
        if decision.action == "pause" and ask and self.ask is not None and self.ask(f"{decision.detail}. Continue?"):
            self.confirmed.add(key)
            self.journal.record(
                ev.GuardrailTripped(
                    category=decision.category, level="warn", detail=f"{decision.detail}; the user chose to continue"
                )
            )
            return GuardDecision(action="allow", category=decision.category, budget_hint=hint)
        return GuardDecision(
            action=decision.action, category=decision.category, detail=decision.detail, budget_hint=hint
        )


def _confirm_key(setting: str, task: str) -> str:
    """What a person's yes covers: the module's budgets together (as before), a task's for that task."""
    return f"budget:{task}" if setting.endswith("_per_task") else "budget"
