"""The Metrics actor (L5): the module's token and premium-request totals, kept current from the bus.

It starts from the token projection's module row (every session of the module) and adds each
`TokensUsed` event of its module's history as it is appended (one per model call) to a copy of that
row — the one token fold, ``events.folds.tokens.TokenTotals`` — so the Guardrail's budget check
before every invocation costs no store read.
"""

from __future__ import annotations

import msgspec
import pykka

from actors.messages import Totals
from events import catalogue as ev
from events.bus import Subscription
from events.folds.tokens import TokenTotals
from events.recorded import Recorded, module_stream
from events.store import EventStore


class MetricsActor(pykka.ThreadingActor):
    def __init__(self, store: EventStore, project: str, module: str) -> None:
        super().__init__()
        self.store = store
        self.project = project
        self.module = module
        self.stream = module_stream(project, module)
        self.spent = TokenTotals()
        self.totals = Totals()
        self.subscription: Subscription | None = None

    def on_start(self) -> None:
        projections = self.store.projections
        projections.catch_up()
        position = projections.position("tokens")  # the row holds exactly the events up to here
        row = projections.tokens.module(self.module, self.project)
        self.spent = msgspec.structs.replace(row) if row else TokenTotals()
        self.totals = _totals(self.spent)
        me = self.actor_ref.proxy()
        stream = self.stream
        self.subscription = self.store.subscribe(
            lambda rec: me.observe(rec) if rec.stream_id == stream and isinstance(rec.event, ev.TokensUsed) else None,
            after=position,
        )

    def on_stop(self) -> None:
        if self.subscription is not None:
            self.subscription.cancel()

    def observe(self, recorded: Recorded) -> None:
        event = recorded.event
        if isinstance(event, ev.TokensUsed):
            self.spent.add(event)
            self.totals = _totals(self.spent)

    def module_totals(self) -> Totals:
        return self.totals


def _totals(spent: TokenTotals) -> Totals:
    return Totals(tokens=spent.total, premium=spent.premium)
