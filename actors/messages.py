"""Messages the actors exchange (immutable msgspec structs)."""

from __future__ import annotations

import msgspec


class Assessment(msgspec.Struct, frozen=True):
    """Where the module really stands and what to do next (W3)."""

    step: int
    kind: str  # a lopen.workflow.steps.Kind value, or "complete"
    why: str
    component: str = ""
    task: str = ""
    last_task_of_component: bool = False

    @property
    def complete(self) -> bool:
        return self.kind == "complete"


class GuardDecision(msgspec.Struct, frozen=True):
    """The Guardrail's answer before an invocation: go on, go on with a warning, or pause."""

    action: str  # allow | warn | pause
    category: str = ""
    detail: str = ""
    budget_hint: str = ""


class StepOutcome(msgspec.Struct, frozen=True):
    ok: bool
    detail: str = ""
    error_kind: str = ""


class VerifyRequest(msgspec.Struct, frozen=True):
    scope: str  # task | component | module
    target: str
    notes: str = ""
    invocation_id: str = ""


class RunResult(msgspec.Struct, frozen=True):
    """How a run ended: exit code 0 complete, 1 failed, 2 a person must act."""

    exit_code: int
    status: str
    detail: str
    session_id: str


class Totals(msgspec.Struct, frozen=True):
    """A module's spend across all its sessions: input + output tokens and premium requests."""

    tokens: int = 0
    premium: float = 0.0
