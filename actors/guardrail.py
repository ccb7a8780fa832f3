"""The Guardrail (B1, B3, W7, W10): before every invocation go on, warn or pause; after it, count
failures (churn).

Its policy is its own: a pause asks the person once per run when the run is interactive (``ask``)
and remembers the answer (confirm-once); each trip is recorded once per run; a task's failures are
read from the one fold, so they add up across resumed runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pykka

from actors.messages import Assessment, GuardDecision, StepOutcome
from actors.metrics import MetricsActor
from events import catalogue as ev
from events.journal import Journal
from lopen.config import Settings
from lopen.text import number, plural
from lopen.workflow.cycle import how_to_go_on

__all__ = ["GuardrailActor", "check_budget", "how_to_go_on"]


def check_budget(used: float, budget: float, warning: float, confirmation: float, what: str) -> GuardDecision | None:
    if budget <= 0:
        return None
    share = used / budget
    figures = f"{what}: {number(used)} of {number(budget)} ({share:.0%})"
    if share >= confirmation:
        return GuardDecision(action="pause", category="budget", detail=figures)
    if share >= warning:
        return GuardDecision(action="warn", category="budget", detail=figures)
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

    def before(self, invocations: int) -> GuardDecision:
        """Before an invocation; ``invocations`` is how many this run has made (W10 counts the run)."""
        settings = self.settings
        if invocations >= settings.workflow.max_iterations:
            detail = f"{plural(invocations, 'invocation')} in this run reached workflow.max_iterations"
            return self._trip(GuardDecision(action="pause", category="max_iterations", detail=detail), ask=False)
        totals = self.metrics.module_totals().get()
        budget = settings.budget
        decisions = [
            check_budget(
                totals.tokens,
                budget.token_budget_per_module,
                budget.warning_threshold,
                budget.confirmation_threshold,
                "tokens",
            ),
            check_budget(
                totals.premium,
                budget.premium_budget_per_module,
                budget.warning_threshold,
                budget.confirmation_threshold,
                "premium requests",
            ),
        ]
        premium = f"{number(totals.premium)} premium request{'' if totals.premium == 1 else 's'}"
        hint = f"Budget so far for this module: {plural(totals.tokens, 'token')}, {premium}."
        for action in ("pause", "warn"):
            for decision in decisions:
                if decision and decision.action == action:
                    found = GuardDecision(action=action, category=decision.category, detail=decision.detail)
                    return self._trip(found, hint=hint)
        return GuardDecision(action="allow", budget_hint=hint)

    def allowance(self) -> tuple[int, str]:
        """The tokens the next invocation may use before the module's token budget pauses the run (its
        confirmation threshold), and which budget: the invocation is stopped there, so the budget holds
        inside a call. (0, "") without a token budget, or once the person chose to go on past it."""
        budget = self.settings.budget
        if budget.token_budget_per_module <= 0 or "budget" in self.confirmed:
            return 0, ""
        used = self.metrics.module_totals().get().tokens
        limit = int(budget.token_budget_per_module * budget.confirmation_threshold)
        why = f"budget.token_budget_per_module: {used:,} of {budget.token_budget_per_module:,} used before it"
        return limit - used, why

    def after(self, assessment: Assessment, outcome: StepOutcome) -> GuardDecision:
        """After an invocation: a step that failed ``workflow.failure_threshold`` times pauses (W7)."""
        key = assessment.task or f"{assessment.kind}:{assessment.component}"
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
