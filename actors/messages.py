"""Messages the actors exchange (immutable msgspec structs).

The workflow's own value types live with its rules: ``lopen.workflow.decide.Assessment`` (where the
module stands) and ``GuardDecision`` (the Guardrail's answer); these are the rest. The last four are
how the run loop is driven (``actors.foreman``): a run begins, jobs end, time passes — told, never
waited for.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
import pykka

from lopen.workflow.budgets import Totals
from lopen.workflow.decide import Assessment, GuardDecision

__all__ = [
    "Assessment",
    "Begin",
    "GuardDecision",
    "Job",
    "JobEnded",
    "RunResult",
    "StepOutcome",
    "Stop",
    "Tick",
    "Totals",
    "VerifyRequest",
]


class StepOutcome(msgspec.Struct, frozen=True):
    ok: bool
    detail: str = ""
    error_kind: str = ""


class Stop(msgspec.Struct, frozen=True):
    """The Assessor's answer when the run must stop before any step (e.g. an unapproved spec edit)."""

    exit_code: int
    reason: str
    how: str = ""


class VerifyRequest(msgspec.Struct, frozen=True):
    scope: str  # task | component | module
    target: str
    notes: str = ""
    invocation_id: str = ""


class RunResult(msgspec.Struct, frozen=True):
    """How a run ended: exit code 0 complete, 1 failed, 2 a person must act, 130/143 interrupted."""

    exit_code: int
    status: str
    detail: str
    session_id: str


class Begin(NamedTuple):
    """To the Foreman: start the run; ``done`` is set to how it ended (``RunResult``, or None when a
    `lopen worker` found nothing left to do) — the app layer waits on it."""

    done: pykka.Future[Any]


class Job(NamedTuple):
    """To a worker actor (``actors.jobs.Reports``): call ``method(*args, **kwargs)`` and tell
    ``reply_to`` a ``JobEnded`` with ``key`` when it returns."""

    key: str
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    reply_to: pykka.ActorRef[Any]


class JobEnded(NamedTuple):
    """From a worker actor to the Foreman: the job ``key`` ended with ``result`` (a ``StepOutcome``,
    a lane's ``LaneResult``), or with ``error``."""

    key: str
    result: Any = None
    error: BaseException | None = None


class Tick(NamedTuple):
    """From the Foreman's ticker (``actors.ticker``), or an interruption: time to look again."""

    n: int = 0
