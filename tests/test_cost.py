"""Cost in money and budgets inside a call (issue 23), one rule at a time: a call's price, the one fold
that sums it, the budgets that apply and when one is reached, the cap that stops an invocation there,
and the top bar that shows the cost."""

from __future__ import annotations

import pytest
from textual.content import Content

from events import catalogue as ev
from events.folds.tokens import TokenTotals, dollars, money
from lopen.config import Budget
from lopen.config.model import Price
from lopen.copilot.caps import InvocationCap
from lopen.tui.symbols import Symbols
from lopen.tui.widgets.topbar import TopBarData, top_lines
from lopen.workflow.budgets import Totals, applying, first_reached, reached
from lopen.workflow.models import premium_for_call
from lopen.workflow.prices import DEFAULT_PRICES, call_cost, price_of, prices

OPUS = Price(input=5.0, cached_input=0.5, output=25.0, premium=3.0)


def test_a_call_costs_its_uncached_input_cached_input_and_output_at_the_price_per_million():
    assert call_cost(OPUS, input=10_000, output=1_000, cache_read=4_000) == pytest.approx(
        (6_000 * 5.0 + 4_000 * 0.5 + 1_000 * 25.0) / 1_000_000
    )
    assert call_cost(OPUS, input=100, output=0, cache_read=500) == pytest.approx(100 * 0.5 / 1e6)  # never below 0


def test_the_configured_prices_replace_a_models_defaults_and_an_unknown_model_is_unpriced():
    table = prices({"claude-opus-4.6": OPUS, "my-model": Price(input=1, output=2)})
    assert table["claude-opus-4.6"] == OPUS and table["gpt-5"] == DEFAULT_PRICES["gpt-5"]
    assert price_of(table, "CLAUDE-OPUS-4.6") == OPUS
    assert price_of(table, "nobody-priced-this") is None


def test_the_premium_multiplier_comes_from_the_price_table_when_it_has_one():
    table = {"scripted-opus": Price(input=1, output=1, premium=3.0), "plain": Price(input=1, output=1)}
    assert premium_for_call("scripted-opus", first_of_attempt=True, prices=table) == 3.0
    assert premium_for_call("scripted-opus", first_of_attempt=False, prices=table) == 0.0  # a tool turn
    assert premium_for_call("plain", first_of_attempt=True, prices=table) == 1.0  # the built-in rule
    assert premium_for_call("claude-opus-4.6", first_of_attempt=True) == 3.0


def test_the_fold_sums_cost_and_counts_the_calls_no_price_covered():
    totals = TokenTotals()
    totals.add(ev.TokensUsed(model="a", input=1000, output=10, cost=0.25, priced=True))
    totals.add(ev.TokensUsed(model="a", input=1000, output=10, cost=0.5, priced=True))
    totals.add(ev.TokensUsed(model="b", input=10, output=1))  # recorded without a price
    assert (totals.cost, totals.unpriced, totals.calls, totals.total) == (0.75, 1, 3, 2031)
    assert totals.money == "$0.75 (1 call unpriced)"
    assert money(0.0, 2, 2) == "unpriced" and money(0.0, 0, 0) == "$0.00"
    assert dollars(1234.5) == "$1,234.50" and dollars(0.0042) == "$0.0042"


def test_budgets_apply_per_module_always_and_per_task_with_a_task():
    budget = Budget(token_budget_per_module=100, premium_budget_per_task=2, money_budget_per_task=1.5)
    assert [limit.setting for limit in applying(budget)] == ["budget.token_budget_per_module"]
    assert [(limit.setting, limit.task) for limit in applying(budget, "core/1")] == [
        ("budget.token_budget_per_module", ""),
        ("budget.premium_budget_per_task", "core/1"),
        ("budget.money_budget_per_task", "core/1"),
    ]


def test_a_budget_is_reached_at_the_confirmation_share_with_its_figures():
    limits = applying(Budget(token_budget_per_module=30_000, money_budget_per_task=2.0), "core/1")
    assert first_reached(limits, Totals(tokens=26_999), Totals(money=1.79), 0.9) == ""
    assert first_reached(limits, Totals(tokens=27_000), Totals(), 0.9) == (
        "budget.token_budget_per_module: 27,000 of 30,000 (90%)"
    )
    assert first_reached(limits, Totals(), Totals(money=1.8), 0.9) == (
        "budget.money_budget_per_task (core/1): $1.80 of $2.00 (90%)"
    )
    assert not reached(10**9, 0, 0.9)


def test_the_cap_stops_on_the_first_call_a_budget_check_names_and_says_it_was_a_budget():
    answers = iter(["", "budget.token_budget_per_module: 31,200 of 30,000 (104%) — stopped inside the invocation"])
    cap = InvocationCap(max_turns=100, budget=lambda: next(answers))
    assert cap.tokens(1000, 10) == ""
    assert cap.tokens(1000, 10).startswith("budget.token_budget_per_module: 31,200")
    assert cap.by_budget and cap.tokens(1000, 10) == ""  # said once


def test_its_own_token_cap_is_not_a_budget():
    cap = InvocationCap(max_tokens=1000, budget=lambda: "never asked")
    assert "copilot.max_tokens_per_invocation" in cap.tokens(990, 10)
    assert not cap.by_budget


def _second_line(data: TopBarData) -> str:
    second: Content = top_lines(data, Symbols(), 200)[1]
    return second.plain


def test_the_top_bar_shows_the_modules_cost_and_its_money_budget():
    assert _second_line(TopBarData(step=6, money="$0.42")).endswith("$0.42")
    assert _second_line(TopBarData(step=6, money="$0.42", money_budget=5)).endswith("$0.42/$5.00")
    assert "$" not in _second_line(TopBarData(step=6))  # before any model call
