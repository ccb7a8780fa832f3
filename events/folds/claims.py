"""Claims: who holds a piece of the module's work (a component, the plan, the module's
verification), and until when (a lease). A live lease is exclusive; only its holder renews or
releases it.

Every claim gets a **token**: the number of claims the module's history held before it, plus one —
the same in every fold of the same history, never given twice. A holder carries its claim's token with
the work (a ``Fence``); the journal refuses what it records under that fence once the claim is another's,
was released, or its lease ran out (``Fence.problem``), so a worker that was paused past its lease and
taken over cannot record anything more for that work.

``ModuleState`` fields: ``claims`` (component slug, ``PLAN_ITEM`` or ``MODULE_ITEM`` → ``Claim``),
``claims_made`` (the last token given).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from events import catalogue as ev
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState

PLAN_ITEM = ":plan"  # a claim on the planning invocation (one at a time across workers)
MODULE_ITEM = ":module"  # a claim on the module's verification
RESERVED_ITEMS = (PLAN_ITEM, MODULE_ITEM)


class Claim(msgspec.Struct, kw_only=True):
    """Who holds a piece of the module's work, and until when (a lease, UTC seconds)."""

    worker: str
    until: float
    at: float = 0.0
    token: int = 0  # this claim's number in the module's history (the fence its holder carries)


class Fence(msgspec.Struct, frozen=True, kw_only=True):
    """A claim as its holder knows it: the item, the worker it was claimed under and its token.

    ``problem(state, now)`` is the fence's test: None while that very claim is the item's and its lease
    has not run out at ``now``; otherwise why the holder must stop. A claim taken again by the same
    worker has a new token, so the work started under the old one is fenced out too."""

    item: str
    worker: str
    token: int

    def problem(self, state: ModuleState, now: float) -> str | None:
        claim = state.claims.get(self.item)
        if claim is None:
            return f"{self.item} is no longer claimed by {self.worker} (released)"
        if claim.worker != self.worker or claim.token != self.token:
            return f"{self.item} was claimed again, by {claim.worker} (claim #{claim.token}, not #{self.token})"
        if claim.until <= now:
            return f"the lease of {self.worker} on {self.item} ran out at {_clock(claim.until)}"
        return None


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at)) + "Z"


def _check_claim(s: ModuleState, e: ev.ComponentClaimed) -> str | None:
    if e.component not in s.components and e.component not in RESERVED_ITEMS:
        return f"no component {e.component!r} in the plan"
    if e.component in s.components and s.component_done(e.component):
        return f"component {e.component} is already complete"
    held = s.live_claim(e.component, e.at)
    if held is not None and held.worker != e.worker:
        return f"{e.component} is claimed by {held.worker} until {_clock(held.until)} (a live lease)"
    return None


def _claimed(s: ModuleState, e: ev.ComponentClaimed) -> None:
    s.claims_made += 1
    s.claims[e.component] = Claim(worker=e.worker, until=e.lease_until, at=e.at, token=s.claims_made)


def _check_holder(s: ModuleState, e: ev.ComponentLeaseRenewed | ev.ComponentReleased) -> str | None:
    claim = s.claims.get(e.component)
    if claim is None:
        return f"{e.component} is not claimed"
    if claim.worker != e.worker:
        return f"{e.component} is claimed by {claim.worker}, not {e.worker}"
    return None


def _renewed(s: ModuleState, e: ev.ComponentLeaseRenewed) -> None:
    s.claims[e.component].until = e.lease_until


def _released(s: ModuleState, e: ev.ComponentReleased) -> None:
    s.claims.pop(e.component, None)


RULES: dict[type, Rule] = {
    ev.ComponentClaimed: Rule(_check_claim, _claimed),
    ev.ComponentLeaseRenewed: Rule(_check_holder, _renewed),
    ev.ComponentReleased: Rule(_check_holder, _released),
}
