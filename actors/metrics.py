"""The Metrics actor (L5): the module's and each task's spend — tokens, premium requests, money —
kept current from the bus.

It starts from the token projection's module and task rows (every session of the module) and adds
each `TokensUsed` event of its module's history as it is appended (one per model call) to copies of
those rows — the one token fold, ``events.folds.tokens.TokenTotals`` — so the Guardrail's budget
check before every invocation, and the check after every model call inside one, cost no store read.

The bus calls back on the appending thread and the actor's mailbox is first in, first out: a thread
that records a `TokensUsed` and then asks ``totals`` gets figures that include that call.
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
        self.tasks: dict[str, TokenTotals] = {}
        self.task_of: dict[str, str] = {}  # invocation id -> its task ("" = none)
        self.subscription: Subscription | None = None

    def on_start(self) -> None:
        projections = self.store.projections
        projections.catch_up()
        position = projections.position("tokens")  # the rows hold exactly the events up to here
        tokens = projections.tokens
        row = tokens.module(self.module, self.project)
        self.spent = msgspec.structs.replace(row) if row else TokenTotals()
        self.totals = _totals(self.spent)
        self.tasks = {task: msgspec.structs.replace(r) for task, r in tokens.tasks(self.module, self.project).items()}
        me = self.actor_ref.proxy()
        stream = self.stream
        wanted = (ev.TokensUsed, ev.InvocationStarted)
        self.subscription = self.store.subscribe(
            lambda rec: me.observe(rec) if rec.stream_id == stream and isinstance(rec.event, wanted) else None,
            after=position,
        )

    def on_stop(self) -> None:
        if self.subscription is not None:
            self.subscription.cancel()

    def observe(self, recorded: Recorded) -> None:
        event = recorded.event
        if isinstance(event, ev.InvocationStarted):
            self.task_of[event.invocation_id] = event.task
        elif isinstance(event, ev.TokensUsed):
            self.spent.add(event)
            self.totals = _totals(self.spent)
            task = self._task_of(event.invocation_id)
            if task:
                self.tasks.setdefault(task, TokenTotals()).add(event)

    def _task_of(self, invocation_id: str) -> str:
        if invocation_id not in self.task_of:  # started before this actor: its projection row knows
            row = self.store.projections.tokens.invocation(invocation_id, self.project)
            self.task_of[invocation_id] = row.task if row else ""
        return self.task_of[invocation_id]

    def module_totals(self) -> Totals:
        return self.totals

    def task_totals(self, task: str) -> Totals:
        found = self.tasks.get(task)
        return _totals(found) if found else Totals()

    def spending(self, task: str) -> tuple[Totals, Totals]:
        """The module's totals and ``task``'s, in one ask."""
        return self.totals, self.task_totals(task)


def _totals(spent: TokenTotals) -> Totals:
    return Totals(tokens=spent.total, premium=spent.premium, money=spent.cost)
