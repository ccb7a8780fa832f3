"""The one token fold: every sum of the per-call ``TokensUsed`` goes through ``TokenTotals.add``.

A model call is recorded once, as ``TokensUsed`` (input, output, cache read and write, premium
requests). Whoever needs totals — per invocation, session or module (the tokens projection), the
module's budget (the Metrics actor), a span's usage or a session's budget gauge (telemetry), the
gateway's per-model tally, the TUI's header — keeps a ``TokenTotals`` and adds calls to it, so the
numbers agree everywhere by construction:

>>> totals = TokenTotals()
>>> totals.add(ev.TokensUsed(input=1000, output=100, premium=1.0))
>>> (totals.total, totals.premium, totals.calls)
(1100, 1.0, 1)
"""

from __future__ import annotations

import msgspec

from events import catalogue as ev

__all__ = ["TokenTotals"]


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

    @property
    def total(self) -> int:
        return self.input + self.output

    def add(self, event: ev.TokensUsed) -> None:
        """Add one recorded model call."""
        self.count(event.input, event.output, event.cache_read, event.cache_write, event.premium)

    def count(self, input: int, output: int, cache_read: int = 0, cache_write: int = 0, premium: float = 0.0) -> None:
        """Add one model call's usage (``add`` for a recorded call; the gateway's tally before it is
        recorded). The only code in Lopen that sums token fields."""
        self.input += input
        self.output += output
        self.cache_read += cache_read
        self.cache_write += cache_write
        self.premium += premium
        self.calls += 1
