"""The one token fold: every sum of the per-call ``TokensUsed`` goes through ``TokenTotals.add``.

A model call is recorded once, as ``TokensUsed`` (input, output, cache read and write, premium
requests). Whoever needs totals — per invocation, session or module (the tokens projection), the
module's budget (the Metrics actor), a span's usage or a session's budget gauge (telemetry), the
gateway's per-model tally, the TUI's header — keeps a ``TokenTotals`` and adds calls to it, so the
numbers agree everywhere by construction:

>>> totals = TokenTotals()
>>> totals.add(ev.TokensUsed(input=1000, output=100, premium=1.0, cost=0.0045, priced=True))
>>> totals.add(ev.TokensUsed(model="my-own-model", input=500, output=10))
>>> (totals.total, totals.premium, totals.calls, totals.cost, totals.unpriced)
(1610, 1.0, 2, 0.0045, 1)
>>> totals.money
'$0.0045 (1 call unpriced)'

Money is summed here, never computed: each call's ``cost`` was priced once, when it was recorded
(``lopen.workflow.prices``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import reduce
from operator import add

import msgspec

from events import catalogue as ev

__all__ = ["TokenTotals", "add_call", "add_calls", "dollars", "money"]


class TokenTotals(msgspec.Struct, kw_only=True):
    """Totals of model calls. ``invocations`` / ``oracle_invocations`` and the context window are kept
    by the tokens projection (they come from other events); ``calls`` counts the calls added."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    premium: float = 0.0  # premium requests
    invocations: int = 0
    oracle_invocations: int = 0
    calls: int = 0  # model calls (one TokensUsed each)
    context_used: int = 0
    context_limit: int = 0
    cost: float = 0.0  # US dollars, the priced calls'
    unpriced: int = 0  # calls whose model had no price (they add 0 to cost)
    task: str = ""  # an invocation row's task (the task row its calls add to); "" elsewhere

    @property
    def total(self) -> int:
        return self.input + self.output

    @property
    def money(self) -> str:
        """The cost as a person reads it: ``$1.23``, with the calls no price covered said."""
        return money(self.cost, self.unpriced, self.calls)

    def add(self, event: ev.TokensUsed) -> None:
        """Add one recorded model call."""
        add_call((self,), event)

    def count(self, input: int, output: int, cache_read: int = 0, cache_write: int = 0, premium: float = 0.0) -> None:
        """Add one model call's usage (``add`` for a recorded call; the gateway's tally before it is
        recorded). With ``add_calls``, the only code in Lopen that sums token fields."""
        self.input += input
        self.output += output
        self.cache_read += cache_read
        self.cache_write += cache_write
        self.premium += premium
        self.calls += 1


def add_call(totals: Iterable[TokenTotals], event: ev.TokensUsed) -> None:
    """Add one recorded model call to each of ``totals`` (``TokenTotals.add``)."""
    add_calls(totals, (event,))


def add_calls(totals: Iterable[TokenTotals], calls: Sequence[ev.TokensUsed]) -> None:
    """Add recorded model calls, in order, to each of ``totals``: exactly what adding them one by one does
    (the integers summed first, the money and premium requests added call by call in the same order, so
    every float rounds as it would). The tokens projection adds a run of an invocation's calls to its
    invocation's, session's, module's and task's rows at once: a rebuild does it for every call."""
    input = output = cache_read = cache_write = unpriced = 0
    premiums: list[float] = []
    costs: list[float] = []
    for call in calls:
        input += call.input
        output += call.output
        cache_read += call.cache_read
        cache_write += call.cache_write
        premiums.append(call.premium)
        if call.priced:
            costs.append(call.cost)
        else:
            unpriced += 1
    n = len(calls)
    for row in totals:
        row.input += input
        row.output += output
        row.cache_read += cache_read
        row.cache_write += cache_write
        row.premium = reduce(add, premiums, row.premium)  # left to right, as += call by call
        row.calls += n
        if costs:
            row.cost = reduce(add, costs, row.cost)
        row.unpriced += unpriced


def dollars(amount: float) -> str:
    """``$1.23``; amounts under a cent keep two significant places (``$0.0045``)."""
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.2g}"


def money(cost: float, unpriced: int, calls: int) -> str:
    """A cost with what it leaves out: ``unpriced`` when no call had a price."""
    if calls and unpriced >= calls:
        return "unpriced"
    shown = dollars(cost)
    if unpriced:
        shown += f" ({unpriced} call{'s' if unpriced != 1 else ''} unpriced)"
    return shown
