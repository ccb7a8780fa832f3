"""Messages the actors exchange (immutable msgspec structs).

The workflow's own value types live with its rules: ``lopen.workflow.decide.Assessment`` (where the
module stands) and ``GuardDecision`` (the Guardrail's answer); these are the rest.
"""

from __future__ import annotations

import msgspec

from lopen.workflow.decide import Assessment, GuardDecision

__all__ = ["Assessment", "GuardDecision", "RunResult", "StepOutcome", "Stop", "Totals", "VerifyRequest"]


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


class Totals(msgspec.Struct, frozen=True):
    """A module's spend across all its sessions: input + output tokens and premium requests."""

    tokens: int = 0
    premium: float = 0.0
