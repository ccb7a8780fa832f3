"""Claims: who holds a piece of the module's work (a component, the plan, the module's
verification), and until when (a lease). A live lease is exclusive; only its holder renews or
releases it.

``ModuleState`` field: ``claims`` (component slug, ``PLAN_ITEM`` or ``MODULE_ITEM`` → ``Claim``).
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
    s.claims[e.component] = Claim(worker=e.worker, until=e.lease_until, at=e.at)


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
