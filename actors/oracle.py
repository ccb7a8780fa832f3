"""The Oracle (T8–T10): collects the evidence itself and asks a cheap model for a verdict.

The evidence (``lopen.workflow.evidence``) names the git tree judged; the verdict is recorded with
it, so a completion — and Lopen's commit — can be bound to exactly that tree. The oracle's session
has no tools at all and is recorded as its own invocation (``kind="oracle"``) under the invocation
whose verify tool asked; attempt numbers are folded from the recorded verdicts, so they go on
counting across runs. Evidence that fails by itself (the approved spec edited in the tree) fails the
verdict without a model call.
"""

from __future__ import annotations

import msgspec
import pykka

from actors.messages import VerifyRequest
from events import catalogue as ev
from events.journal import Journal
from lopen.workflow import oracle
from lopen.workflow.evidence import EvidenceCollector
from lopen.workflow.invoke import Invoker

RAW_KEPT = 4000


class OracleActor(pykka.ThreadingActor):
    def __init__(self, journal: Journal, collector: EvidenceCollector, invoker: Invoker) -> None:
        super().__init__()
        self.journal = journal
        self.collector = collector
        self.invoker = invoker

    def verify(self, request: VerifyRequest) -> oracle.Verdict:
        evidence = self.collector.collect(request.scope, request.target, request.notes, request.invocation_id)
        oracle_invocation, model = "", ""
        if evidence.problems:
            verdict = oracle.Verdict(passed=False, confidence=1.0, summary="; ".join(evidence.problems))
        else:
            oracle_invocation, result = self.invoker.invoke_oracle(
                oracle.prompt(evidence),
                oracle.SYSTEM,
                request.invocation_id,
                scope=request.scope,
                target=request.target,
                instructions=evidence.conventions,
            )
            model = result.model
            if result.error is not None:
                verdict = oracle.Verdict(
                    passed=False,
                    confidence=0.0,
                    summary=f"the reviewer could not answer ({result.error.message}). This is not a fault in your "
                    "code: call the verify tool again later",
                    reviewer_failed=True,
                )
            else:
                verdict = oracle.judge(oracle.parse_verdict(result.final_message), evidence)
        verdict = msgspec.structs.replace(verdict, tree=evidence.tree)
        attempt = self.journal.read(lambda s: s.attempts(request.scope, request.target)) + 1
        self.journal.record(
            ev.OracleVerdictRecorded(
                scope=request.scope,  # type: ignore[arg-type]
                target=request.target,
                passed=verdict.passed,
                confidence=verdict.confidence,
                summary=verdict.summary,
                findings=tuple(
                    ev.Finding(severity=f.severity, category=f.category, description=f.description, location=f.location)
                    for f in verdict.findings
                ),
                criteria=tuple(ev.CriterionJudged(id=c.id, met=c.met, evidence=c.evidence) for c in verdict.criteria),
                model=model,
                attempt=attempt,
                tree=evidence.tree,
                base_commit=evidence.base,
                raw=verdict.raw[:RAW_KEPT],
                invocation_id=oracle_invocation,
                parent_invocation=request.invocation_id,
            )
        )
        return verdict
