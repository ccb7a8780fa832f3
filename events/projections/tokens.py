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
KINDS = ("invocation", "session", "module")


def _rows(t: Tokens, invocation_id: str, session_id: str, module: str) -> list[TokenTotals]:
    """The rows an event adds to (its invocation's, session's, module's), marked changed."""
    found = t.memo.get((invocation_id, session_id, module))
    if found is None:
        keys = [
            f"{kind}:{ident}" for kind, ident in zip(KINDS, (invocation_id, session_id, module), strict=True) if ident
        ]
        rows = []
        for key in keys:
            row = t.get(key)
            if row is None:
                row = TokenTotals()
                t.put(key, row)
            rows.append(row)
        found = t.memo[(invocation_id, session_id, module)] = (keys, rows)
    t.dirty.update(found[0])
    return found[1]


def _started(t: Tokens, seq: int, e: ev.InvocationStarted) -> None:
    for row in _rows(t, e.invocation_id, e.session_id, e.module):
        row.invocations += 1


def _used(t: Tokens, seq: int, e: ev.TokensUsed) -> None:
    tokens_in, tokens_out, cache_read, cache_write, premium = e.input, e.output, e.cache_read, e.cache_write, e.premium
    for row in _rows(t, e.invocation_id, e.session_id, e.module):
        row.input += tokens_in
        row.output += tokens_out
        row.cache_read += cache_read
        row.cache_write += cache_write
        row.premium += premium


def _window(t: Tokens, seq: int, e: ev.ContextWindowMeasured) -> None:
    # a per-invocation figure (and the session's latest); the module row keeps none
    for row in _rows(t, e.invocation_id, e.session_id, ""):
        row.context_used, row.context_limit = e.used, e.limit


PROJECTION = Projection(
    name="tokens",
    row=TokenTotals,
    handlers={ev.InvocationStarted: _started, ev.TokensUsed: _used, ev.ContextWindowMeasured: _window},
)
