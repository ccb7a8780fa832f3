"""The Oracle (T8–T10): collects evidence itself and asks a cheap model for a verdict."""

from __future__ import annotations

import pykka

from actors.messages import VerifyRequest
from events import catalogue as ev
from lopen.copilot import InvocationRequest
from lopen.copilot.gateway import Gateway
from lopen.workflow import oracle
from lopen.workflow.models import premium_requests
from lopen.workflow.run import ModuleRun


class OracleActor(pykka.ThreadingActor):
    def __init__(self, run: ModuleRun, gateway: Gateway) -> None:
        super().__init__()
        self.run = run
        self.gateway = gateway
        self.attempts: dict[tuple[str, str], int] = {}

    def verify(self, request: VerifyRequest) -> oracle.Verdict:
        key = (request.scope, request.target)
        self.attempts[key] = attempt = self.attempts.get(key, 0) + 1
        evidence = self.run.evidence(request.scope, request.target, request.notes)
        for command in evidence.commands:
            self.run.record(
                ev.VerificationEvidenceRecorded(
                    scope=request.scope,
                    target=request.target,
                    command=command.command,
                    exit_code=command.exit_code,
                    output_tail=command.output_tail,
                    duration=command.duration,
                )
            )
        models = [self.run.settings.models.oracle, *self.run.settings.models.fallback]
        result = self.gateway.invoke(
            InvocationRequest(
                models=models,
                prompt=oracle.prompt(evidence),
                system_message=oracle.SYSTEM,
                system_mode="replace",
                working_directory=str(self.run.root),
            ),
            (),
        )
        if result.error is not None:
            verdict = oracle.Verdict(
                passed=False, confidence=0.0, summary=f"the oracle could not answer: {result.error.message}"
            )
        else:
            verdict = oracle.parse_verdict(result.final_message)
        failing = [c for c in evidence.commands if not c.passed]
        if verdict.passed and failing:
            verdict = oracle.Verdict(
                passed=False,
                confidence=verdict.confidence,
                raw=verdict.raw,
                summary=f"`{failing[0].command}` failed (exit {failing[0].exit_code})",
                findings=verdict.findings,
            )
        invocation_id = f"oracle-{request.invocation_id}"
        events: list[ev.Event] = [
            ev.TokensUsed(
                invocation_id=invocation_id,
                model=model,
                input=u.input,
                output=u.output,
                cache_read=u.cache_read,
                cache_write=u.cache_write,
                premium=premium_requests(model),
            )
            for model, u in result.usage.per_model.items()
        ]
        events.append(
            ev.OracleVerdictRecorded(
                scope=request.scope,
                target=request.target,
                passed=verdict.passed,
                confidence=verdict.confidence,
                summary=verdict.summary,
                findings=tuple(
                    ev.Finding(severity=f.severity, category=f.category, description=f.description, location=f.location)
                    for f in verdict.findings
                ),
                model=result.model,
                attempt=attempt,
            )
        )
        self.run.record(*events)
        return verdict
