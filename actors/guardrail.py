"""The Guardrail (B1, W10): before every invocation, go on, warn, or pause."""

from __future__ import annotations

import pykka

from actors.messages import GuardDecision
from actors.metrics import MetricsActor
from lopen.workflow.run import ModuleRun


def check_budget(used: float, budget: float, warning: float, confirmation: float, what: str) -> GuardDecision | None:
    if budget <= 0:
        return None
    share = used / budget
    figures = f"{what}: {used:g} of {budget:g} ({share:.0%})"
    if share >= confirmation:
        return GuardDecision(action="pause", category="budget", detail=figures)
    if share >= warning:
        return GuardDecision(action="warn", category="budget", detail=figures)
    return None


class GuardrailActor(pykka.ThreadingActor):
    def __init__(self, run: ModuleRun, metrics: pykka.ActorProxy[MetricsActor]) -> None:
        super().__init__()
        self.run = run
        self.metrics = metrics

    def check(self, invocations: int) -> GuardDecision:
        settings = self.run.settings
        if invocations >= settings.workflow.max_iterations:
            return GuardDecision(
                action="pause",
                category="max_iterations",
                detail=f"{invocations} invocations reached workflow.max_iterations",
            )
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
        hint = f"Budget so far for this module: {totals.tokens} tokens, {totals.premium:g} premium requests."
        for action in ("pause", "warn"):
            for decision in decisions:
                if decision and decision.action == action:
                    return GuardDecision(
                        action=action, category=decision.category, detail=decision.detail, budget_hint=hint
                    )
        return GuardDecision(action="allow", budget_hint=hint)
