"""The budgets (B1, issue 23): which apply to an invocation, how much of each is used, and when one
is reached — one rule for the Guardrail's check before an invocation and the check after every model
call inside it, so the two can never disagree.

A budget is a setting under ``budget.``: tokens (input + output), premium requests or US dollars, per
module (every session of it) or per task (every invocation of the task and its oracle checks). It is
*reached* at ``budget.confirmation_threshold`` of it, where the run pauses (or asks a person):

>>> from lopen.config.model import Budget
>>> limits = applying(Budget(token_budget_per_module=30_000, money_budget_per_task=2.0), "core/1")
>>> [limit.setting for limit in limits]
['budget.token_budget_per_module', 'budget.money_budget_per_task']
>>> module, task = Totals(tokens=31_200), Totals(money=0.5)
>>> first_reached(limits, module, task, 0.9)
'budget.token_budget_per_module: 31,200 of 30,000 (104%)'
>>> figures(limits[1], used(limits[1], module, task))
'budget.money_budget_per_task (core/1): $0.50 of $2.00 (25%)'
"""

from __future__ import annotations

from typing import Literal

import msgspec

from events.folds.tokens import dollars
from lopen.config.model import Budget
from lopen.text import number

__all__ = ["Limit", "Totals", "applying", "figures", "first_reached", "reached", "used"]

Measure = Literal["tokens", "premium", "money"]
MEASURES: tuple[Measure, ...] = ("tokens", "premium", "money")
SETTING = {"tokens": "token_budget", "premium": "premium_budget", "money": "money_budget"}


class Totals(msgspec.Struct, frozen=True):
    """A module's (or a task's) spend across all its sessions: input + output tokens, premium requests
    and US dollars (the priced calls')."""

    tokens: int = 0
    premium: float = 0.0
    money: float = 0.0


class Limit(msgspec.Struct, frozen=True):
    """One budget set for the next invocation: ``budget.<measure>_budget_per_<scope>``."""

    setting: str
    scope: Literal["module", "task"]
    measure: Measure
    budget: float
    task: str = ""


def applying(budget: Budget, task: str = "") -> tuple[Limit, ...]:
    """The budgets that are set (not 0) and apply: the module's, and the task's when there is one."""
    found = []
    for scope in ("module", "task"):
        if scope == "task" and not task:
            continue
        for measure in MEASURES:
            name = f"{SETTING[measure]}_per_{scope}"
            value = float(getattr(budget, name))
            if value > 0:
                found.append(Limit(f"budget.{name}", scope, measure, value, task if scope == "task" else ""))  # type: ignore[arg-type]
    return tuple(found)


def used(limit: Limit, module: Totals, task: Totals) -> float:
    """How much of ``limit``'s measure its scope has spent."""
    totals = module if limit.scope == "module" else task
    return float({"tokens": totals.tokens, "premium": totals.premium, "money": totals.money}[limit.measure])


def reached(spent: float, budget: float, share: float) -> bool:
    """Whether ``spent`` is at ``share`` of ``budget`` or past it (a budget of 0 is never reached)."""
    return budget > 0 and spent / budget >= share


def figures(limit: Limit, spent: float) -> str:
    """``budget.token_budget_per_module: 31,200 of 30,000 (104%)`` — the task named for a task's budget."""
    where = f" ({limit.task})" if limit.task else ""
    if limit.measure == "money":
        amounts = f"{dollars(spent)} of {dollars(limit.budget)}"
    elif limit.measure == "premium":
        amounts = f"{number(spent)} of {number(limit.budget)}"
    else:
        amounts = f"{spent:,.0f} of {limit.budget:,.0f}"
    return f"{limit.setting}{where}: {amounts} ({spent / limit.budget:.0%})"


def first_reached(limits: tuple[Limit, ...], module: Totals, task: Totals, share: float) -> str:
    """The figures of the first budget reached at ``share`` ("" when none is)."""
    for limit in limits:
        spent = used(limit, module, task)
        if reached(spent, limit.budget, share):
            return figures(limit, spent)
    return ""
