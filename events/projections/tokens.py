"""Token totals (L5): per invocation, per session and per module.

Row keys: ``invocation:<id>``, ``session:<id>``, ``module:<name>``. ``invocations``
counts ``InvocationStarted``; the context window is the latest measurement.
"""

from __future__ import annotations

import msgspec

from events import catalogue as ev
from events.projections.base import Projection, Table


class TokenTotals(msgspec.Struct, kw_only=True):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    premium: float = 0.0  # premium requests
    invocations: int = 0
    context_used: int = 0
    context_limit: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output


Tokens = Table[TokenTotals]


def keys(e: ev.Event, invocation_id: str) -> list[str]:
    """The rows an event adds to: its invocation, its session, its module."""
    found = [f"invocation:{invocation_id}"] if invocation_id else []
    if e.session_id:
        found.append(f"session:{e.session_id}")
    if e.module:
        found.append(f"module:{e.module}")
    return found


def _row(t: Tokens, key: str) -> TokenTotals:
    row = t.get(key)
    if row is None:
        row = TokenTotals()
    t.put(key, row)
    return row


def _started(t: Tokens, seq: int, e: ev.InvocationStarted) -> None:
    for key in keys(e, e.invocation_id):
        _row(t, key).invocations += 1


def _used(t: Tokens, seq: int, e: ev.TokensUsed) -> None:
    for key in keys(e, e.invocation_id):
        row = _row(t, key)
        row.input += e.input
        row.output += e.output
        row.cache_read += e.cache_read
        row.cache_write += e.cache_write
        row.premium += e.premium


def _window(t: Tokens, seq: int, e: ev.ContextWindowMeasured) -> None:
    for key in keys(e, e.invocation_id):
        if not key.startswith("module:"):
            row = _row(t, key)
            row.context_used, row.context_limit = e.used, e.limit


PROJECTION = Projection(
    name="tokens",
    row=TokenTotals,
    handlers={ev.InvocationStarted: _started, ev.TokensUsed: _used, ev.ContextWindowMeasured: _window},
)
