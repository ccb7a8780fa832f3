"""The dispatcher's parts: a ``Rule`` per (concern, event type), composed into one table.

A concern (``plan``, ``scopes``, ``git`` …) gives each event it cares about one ``Rule``: the
*check* (why the event would contradict the state, or ``None``) beside the *effect* (how the event
changes the state), as ``eventsourcing`` keeps a mutator beside its event. ``compose`` merges the
concerns' tables into one dispatcher keyed by event type:

- ``check``: the event's checks, in the concerns' order (the first problem wins);
- ``apply``: the event's effects, in the same order (an event several concerns care about, such as
  ``TaskReopened``, has one effect per concern; no effect reads what another one writes).

An effect is called ``effect(state, event)``; a ``stamped`` one also gets the event's position in
the store, ``effect(state, event, seq)`` (only ``SpecApproved`` needs it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from events.fold import ModuleState

Check = Callable[["ModuleState", Any], "str | None"]
Effect = Callable[..., None]


class Rule(NamedTuple):
    """What one event means to one concern: ``check`` beside ``effect`` (either may be absent)."""

    check: Check | None = None
    effect: Effect | None = None
    stamped: bool = False  # the effect takes the event's seq too


Concern = Mapping[type, Rule]


class Dispatch(NamedTuple):
    """Every concern's rules, by event type: the checks, and the effects as (effect, stamped)."""

    checks: dict[type, tuple[Check, ...]]
    effects: dict[type, tuple[tuple[Effect, bool], ...]]

    @property
    def folded(self) -> frozenset[type]:
        """The event types the fold reads; any other type leaves it unchanged."""
        return frozenset(self.checks) | frozenset(self.effects)


def compose(*concerns: Concern) -> Dispatch:
    """One dispatcher from the concerns' tables, in the order given."""
    checks: dict[type, tuple[Check, ...]] = {}
    effects: dict[type, tuple[tuple[Effect, bool], ...]] = {}
    for concern in concerns:
        for kind, rule in concern.items():
            if rule.check is not None:
                checks[kind] = (*checks.get(kind, ()), rule.check)
            if rule.effect is not None:
                effects[kind] = (*effects.get(kind, ()), (rule.effect, rule.stamped))
    return Dispatch(checks, effects)
