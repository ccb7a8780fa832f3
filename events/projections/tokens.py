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


def _rows(t: Tokens, e: ev.Event, invocation_id: str) -> list[TokenTotals]:
    """The rows an event adds to: its invocation's, its session's and its module's (marked changed)."""
    found = t.memo.get((invocation_id, e.session_id, e.module))
    if found is None:
        keys = [f"invocation:{invocation_id}"] if invocation_id else []
        if e.session_id:
            keys.append(f"session:{e.session_id}")
        if e.module:
            keys.append(f"module:{e.module}")
        rows = []
        for key in keys:
            row = t.get(key)
            if row is None:
                row = TokenTotals()
                t.put(key, row)
            rows.append(row)
        found = t.memo[(invocation_id, e.session_id, e.module)] = (keys, rows)
    t.dirty.update(found[0])
    return found[1]


def _started(t: Tokens, seq: int, e: ev.InvocationStarted) -> None:
    for row in _rows(t, e, e.invocation_id):
        row.invocations += 1


def _used(t: Tokens, seq: int, e: ev.TokensUsed) -> None:
    for row in _rows(t, e, e.invocation_id):
        row.input += e.input
        row.output += e.output
        row.cache_read += e.cache_read
        row.cache_write += e.cache_write
        row.premium += e.premium


def _window(t: Tokens, seq: int, e: ev.ContextWindowMeasured) -> None:
    # the module row keeps no context window: it is a per-invocation (and latest per-session) figure
    for row in _rows(t, msgspec.structs.replace(e, module=""), e.invocation_id):
        row.context_used, row.context_limit = e.used, e.limit


PROJECTION = Projection(
    name="tokens",
    row=TokenTotals,
    handlers={ev.InvocationStarted: _started, ev.TokensUsed: _used, ev.ContextWindowMeasured: _window},
)
