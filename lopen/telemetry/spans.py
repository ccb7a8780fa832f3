"""Spans from events: one pure fold, the same for live export and for ``lopen trace``.

Every action Lopen takes is an event with its time (``events.catalogue``), so a run's trace is a
function of its events. ``SpanBuilder`` folds ``Recorded`` events, in store order, into finished
``Span`` records; ``build_spans`` runs it over a whole session. The live exporter feeds it the bus's
batches as they are appended, ``lopen trace`` feeds it a session read back from the store: the same
events give the same spans, with the same ids (``lopen.telemetry.ids``) and the events' own times,
however the events were batched.

The tree (one trace per session, GenAI semantic conventions where they apply)::

    run <module>                          SessionStarted/Resumed … SessionPaused/Completed/Failed
      step <n> <phase>                    StepEntered … the next StepEntered or the run's end
        task <id>                         its first TaskStatusChanged to in-progress … complete/failed
        invoke_agent <kind>               InvocationStarted … InvocationFinished (+ its TokensUsed)
          execute_tool <tool>             ToolCalled (it ends at ``at``, lasted ``duration``)
            invoke_agent oracle           the oracle its verify_* tool asked (``parent_invocation``)
          verification command            VerificationEvidenceRecorded
          git commit                      CommitRecorded (under the invocation of its task)
          guardrail <category>            GuardrailTripped (a point: start = end)
          completion refused              CompletionRefused: back-pressure on a completion claim
          store append                    one ``EventStore.append`` (live export only, below)

``store append`` spans are measured, not derived: the store records no time for an append, so only
the live exporter, which observes each append of its process (``EventStore.observe_appends``), can
build them; ``feed(records, appends)`` takes those measurements keyed by the batch's first ``seq``,
and ``lopen trace`` has none to give. An append span hangs under the invocation its first event
names, else the step, else the run.

Guardrail trips, refused completions, task status changes, model fallbacks, corrective
instructions, spec drift and denied permissions are span events on the innermost open span (the
invocation they name, else the latest open invocation, else the step, else the run). Span
attributes under ``lopen.*`` name the project, module, session, step, task and component (on every
span but the tool calls, the most numerous, whose parent invocation carries them).

Message content (tool arguments and results, verdict summaries, progress notes, commit messages)
goes into spans only with ``capture_content`` (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``),
always through ``events.redaction.redact_text``.

A span is emitted once, when it ends. An oracle span waits for its verify tool's ``ToolCalled``
(recorded when the tool returns, after the oracle finished) to know its parent. What is still open
when the events stop (``finish``) ends at the session's last event, marked ``lopen.unfinished``.

Nothing here imports OpenTelemetry: ``lopen.telemetry.otlp`` turns ``Span`` into the SDK's
``ReadableSpan``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from events import catalogue as ev
from events.folds.sessions import STATUS
from events.folds.tokens import TokenTotals
from events.recorded import Recorded
from events.redaction import redact_text
from lopen.telemetry.ids import parse_traceparent, span_id, trace_id

if TYPE_CHECKING:
    from events.store import Appended

__all__ = ["PROVIDER", "Span", "SpanBuilder", "SpanEvent", "append_span", "build_spans"]

PROVIDER = "github_copilot"  # gen_ai.provider.name: every model call goes through the Copilot CLI
CONTENT_LIMIT = 4000  # characters of one captured content attribute
Attributes = dict[str, Any]  # str | bool | int | float | list[str]


class SpanEvent(msgspec.Struct, frozen=True, gc=False):
    """A point in time inside a span (a guardrail trip, a status change …)."""

    name: str
    at: float
    attributes: Attributes = {}


class Span(msgspec.Struct, kw_only=True, gc=False):
    """One finished span, as plain data. Times are UTC seconds (the events' ``at``)."""

    trace_id: int
    span_id: int
    parent_id: int = 0  # 0 = the root of its trace
    name: str
    kind: Literal["internal", "client"] = "internal"
    start: float
    end: float = 0.0
    attributes: Attributes = {}
    events: list[SpanEvent] = []
    links: list[tuple[int, int]] = []  # (trace id, span id) of spans elsewhere this one relates to
    status: Literal["unset", "error"] = "unset"
    status_message: str = ""

    def fail(self, message: str) -> None:
        self.status = "error"
        self.status_message = message


_NO_RUN = (ev.SessionPaused, ev.SessionCompleted, ev.SessionFailed, ev.SessionDeleted)  # never open a run
_OPENS_RUN = frozenset({ev.SessionStarted, ev.SessionResumed})


class _Usage(TokenTotals, kw_only=True):
    """An invocation's usage (the one token fold) and the model that answered last."""

    model: str = ""


class _Trace:
    """What is open in one session's trace."""

    def __init__(self, project: str, module: str, session: str) -> None:
        self.id = trace_id(project, session)
        self.base: Attributes = {"lopen.project": project, "lopen.module": module, "lopen.session": session}
        self.module = module
        self.run: Span | None = None
        self.step: Span | None = None
        self.invocations: dict[str, Span] = {}  # open, by invocation id
        self.order: list[str] = []  # open non-oracle invocations, oldest first
        self.usage: dict[str, _Usage] = {}
        self.tasks: dict[str, str] = {}  # open invocation id → its task
        self.awaiting: dict[str, list[str]] = {}  # invocation id → its oracles waiting for the verify tool
        self.waiting: set[str] = set()  # those oracles
        self.held: dict[str, Span] = {}  # finished oracle spans waiting for their parent, by invocation id
        self.task_spans: dict[str, Span] = {}  # open, by task id
        self.last_at = 0.0

    def invocation_span(self, invocation_id: str) -> int:
        return span_id(self.id, "invocation", invocation_id)

    def innermost(self) -> Span | None:
        if self.order:
            return self.invocations[self.order[-1]]
        return self.step or self.run


class SpanBuilder:
    """Folds recorded events into finished spans, incrementally: ``feed`` returns the spans that
    ended, ``finish`` ends what is still open. Events of any number of sessions may interleave; events
    recorded outside a session (``session_id == ""``) are not part of any trace."""

    def __init__(self, *, capture_content: bool = False) -> None:
        self.capture_content = capture_content
        self._traces: dict[tuple[str, str], _Trace] = {}
        self._out: list[Span] = []
        self._handlers: dict[type, Callable[[_Trace, int, Any], None]] = {
            ev.SessionStarted: self._run_started,
            ev.SessionResumed: self._run_started,
            ev.SessionPaused: self._run_ended,
            ev.SessionCompleted: self._run_ended,
            ev.SessionFailed: self._run_ended,
            ev.StepEntered: self._step,
            ev.InvocationStarted: self._invocation_started,
            ev.InvocationFinished: self._invocation_finished,
            ev.TokensUsed: self._tokens,
            ev.ContextWindowMeasured: self._context,
            ev.ToolCalled: self._tool,
            ev.OracleVerdictRecorded: self._verdict,
            ev.VerificationEvidenceRecorded: self._evidence,
            ev.CommitRecorded: self._commit,
            ev.GuardrailTripped: self._guardrail,
            ev.CompletionRefused: self._refused,
            ev.TaskStatusChanged: self._task_status,
            ev.ModelFellBack: self._fallback,
            ev.CorrectiveInstructionIssued: self._corrective,
            ev.SpecDriftDetected: self._drift,
            ev.PermissionDecided: self._permission,
            ev.ProgressReported: self._progress,
        }

    # -- the fold ---------------------------------------------------------------------------------

    def feed(self, records: Iterable[Recorded], appends: MutableMapping[int, Appended] | None = None) -> list[Span]:
        """Fold ``records`` (in store order) in; return the spans that ended. ``appends``: the measured
        appends (live export), by the ``seq`` of their first event; those met here are taken out of it."""
        handlers = self._handlers
        traces = self._traces
        for rec in records:
            event = rec.event
            appended = appends.pop(rec.seq, None) if appends else None
            if not event.session_id:
                continue
            key = (event.project, event.session_id)
            trace = traces.get(key)
            if trace is None:
                if isinstance(event, _NO_RUN):
                    continue
                trace = traces[key] = _Trace(event.project, event.module, event.session_id)
            kind = type(event)
            if trace.run is None and kind not in _OPENS_RUN and not isinstance(event, _NO_RUN):
                self._open_run(trace, rec.seq, event)  # a run whose start is not in these events
            if appended is not None and trace.run is not None and kind not in _OPENS_RUN:
                self._append(trace, appended, event)  # under what was open when it was appended
                appended = None
            handler = handlers.get(kind)
            if handler is not None:
                handler(trace, rec.seq, event)
            if appended is not None and trace.run is not None:  # it opened the run: under the new run
                self._append(trace, appended, event)
            if event.at > trace.last_at:
                trace.last_at = event.at
            if trace.run is None:  # the run ended: nothing of it is open any more (a long-lived process
                del traces[key]  # folding many sessions keeps no state for finished ones)
        out, self._out = self._out, []
        return out

    def finish(self) -> list[Span]:
        """End every open span at its session's last event (``lopen.unfinished``); return them."""
        for trace in self._traces.values():
            if trace.run is not None:
                self._close_run(trace, trace.last_at, "unfinished")
        out, self._out = self._out, []
        return out

    # -- run and step -----------------------------------------------------------------------------

    def _open_run(self, trace: _Trace, seq: int, event: ev.Event) -> None:
        attributes = dict(trace.base)
        caller = parse_traceparent(getattr(event, "traceparent", ""))  # the CI job's or script's span
        if isinstance(event, ev.SessionStarted):
            attributes.update(
                {
                    "lopen.version": event.lopen_version,
                    "lopen.resumed_from": event.resumed_from,
                    "lopen.protection": event.protection,
                    "lopen.worker": event.worker,
                }
            )
            attributes.update({f"lopen.models.{role}": model for role, model in event.models.items()})
        elif isinstance(event, ev.SessionResumed):
            attributes["lopen.resumed"] = True
        trace.run = Span(
            trace_id=trace.id,
            span_id=span_id(trace.id, "run", str(seq)),
            name=f"run {trace.module}",
            start=event.at,
            attributes={k: v for k, v in attributes.items() if v != ""},
            events=[],
            links=[(caller[0], caller[1])] if caller else [],
        )

    def _run_started(self, trace: _Trace, seq: int, event: ev.Event) -> None:
        if trace.run is not None:  # the previous run never recorded its end (a crash)
            self._close_run(trace, trace.last_at, "unfinished")
        self._open_run(trace, seq, event)

    def _run_ended(self, trace: _Trace, seq: int, event: ev.Event) -> None:
        if trace.run is not None:  # e.g. `lopen revert` pausing a finished session: no run to end
            self._close_run(trace, event.at, STATUS[type(event)], event)  # the status it ends in

    def _close_run(self, trace: _Trace, at: float, outcome: str, event: ev.Event | None = None) -> None:
        for invocation_id in list(trace.invocations):
            self._end_invocation(trace, invocation_id, at, unfinished=True)
        for parent in list(trace.awaiting):
            self._release_oracles(trace, parent, trace.invocation_span(parent))
        for task_id in list(trace.task_spans):
            self._end_task(trace, task_id, at, "unfinished")
        self._end_step(trace, at)
        run = trace.run
        assert run is not None
        run.end = at
        run.attributes["lopen.run.outcome"] = outcome
        reason = getattr(event, "reason", "")
        if reason:
            run.attributes["lopen.run.reason"] = reason
        if outcome == "failed":
            run.fail(reason or getattr(event, "error_kind", "") or "failed")
        elif outcome == "unfinished":
            run.attributes["lopen.unfinished"] = True
        self._out.append(run)
        trace.run = None

    def _step(self, trace: _Trace, seq: int, event: ev.StepEntered) -> None:
        self._end_step(trace, event.at)
        assert trace.run is not None
        attributes = {**trace.base, "lopen.step": event.step, "lopen.phase": event.phase}
        if event.why:
            attributes["lopen.step.why"] = event.why
        trace.step = Span(
            trace_id=trace.id,
            span_id=span_id(trace.id, "step", str(seq)),
            parent_id=trace.run.span_id,
            name=f"step {event.step} {event.phase}".rstrip(),
            start=event.at,
            attributes=attributes,
            events=[],
        )

    def _end_step(self, trace: _Trace, at: float) -> None:
        if trace.step is not None:
            trace.step.end = at
            self._out.append(trace.step)
            trace.step = None

    # -- invocations ------------------------------------------------------------------------------

    def _invocation_started(self, trace: _Trace, seq: int, event: ev.InvocationStarted) -> None:
        invocation_id = event.invocation_id
        if invocation_id in trace.invocations:
            return  # recorded twice: the first one stands
        parent_invocation = event.parent_invocation
        if event.kind == "oracle" and parent_invocation in trace.invocations:
            parent_id = 0  # decided when its verify tool's ToolCalled arrives (or its parent ends)
            trace.awaiting.setdefault(parent_invocation, []).append(invocation_id)
            trace.waiting.add(invocation_id)
        elif parent_invocation:
            parent_id = trace.invocation_span(parent_invocation)
        else:
            outer = trace.step or trace.run
            parent_id = outer.span_id if outer else 0
        attributes = {
            **trace.base,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": event.kind or "invocation",
            "gen_ai.request.model": event.model,
            "gen_ai.conversation.id": invocation_id,
            "lopen.invocation.id": invocation_id,
            "lopen.invocation.kind": event.kind,
            "lopen.step": event.step,
            "lopen.phase": event.phase,
            "lopen.component": event.component,
            "lopen.task": event.task,
            "lopen.prompt.size": event.prompt_size,
            "lopen.parent_invocation": parent_invocation,
        }
        if event.sections_sent:
            attributes["lopen.sections_sent"] = list(event.sections_sent)
        trace.invocations[invocation_id] = Span(
            trace_id=trace.id,
            span_id=trace.invocation_span(invocation_id),
            parent_id=parent_id,
            name=f"invoke_agent {event.kind or 'invocation'}",
            kind="client",
            start=event.at,
            attributes={k: v for k, v in attributes.items() if v not in ("", 0)},
            events=[],
        )
        trace.usage[invocation_id] = _Usage()
        if event.kind not in ev.HELPER_KINDS:
            trace.order.append(invocation_id)
            trace.tasks[invocation_id] = event.task

    def _invocation_finished(self, trace: _Trace, seq: int, event: ev.InvocationFinished) -> None:
        span = trace.invocations.get(event.invocation_id)
        if span is None:
            return
        span.attributes["lopen.outcome"] = event.outcome
        if event.outcome != "ok":
            span.attributes["error.type"] = event.error_kind or event.outcome
            span.fail(event.error_kind or event.outcome)
        self._end_invocation(trace, event.invocation_id, event.at)

    def _end_invocation(self, trace: _Trace, invocation_id: str, at: float, *, unfinished: bool = False) -> None:
        span = trace.invocations.pop(invocation_id)
        span.end = at
        if unfinished:
            span.attributes["lopen.unfinished"] = True
        usage = trace.usage.pop(invocation_id)
        if usage.calls:
            attributes = span.attributes
            attributes["gen_ai.usage.input_tokens"] = usage.input
            attributes["gen_ai.usage.output_tokens"] = usage.output
            if usage.cache_read:
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read
            if usage.cache_write:
                attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write
            attributes["gen_ai.response.model"] = usage.model
            attributes["lopen.usage.calls"] = usage.calls
            attributes["lopen.usage.premium_requests"] = usage.premium
            attributes["lopen.usage.cost_usd"] = usage.cost  # the priced calls' (lopen.workflow.prices)
            if usage.unpriced:
                attributes["lopen.usage.unpriced_calls"] = usage.unpriced
        if invocation_id in trace.tasks:
            trace.order.remove(invocation_id)
            del trace.tasks[invocation_id]
        if invocation_id in trace.waiting:
            trace.held[invocation_id] = span  # its parent is known when its verify tool returns
        else:
            self._out.append(span)
        if invocation_id in trace.awaiting:  # its oracles' verify tool never reported: hang them here
            self._release_oracles(trace, invocation_id, span.span_id)

    def _release_oracles(self, trace: _Trace, parent_invocation: str, parent_id: int) -> None:
        for oracle in trace.awaiting.pop(parent_invocation, []):
            trace.waiting.discard(oracle)
            open_span = trace.invocations.get(oracle)
            if open_span is not None:
                open_span.parent_id = parent_id
            elif (held := trace.held.pop(oracle, None)) is not None:
                held.parent_id = parent_id
                self._out.append(held)

    def _tokens(self, trace: _Trace, seq: int, event: ev.TokensUsed) -> None:
        usage = trace.usage.get(event.invocation_id)
        if usage is not None:
            usage.add(event)
            usage.model = event.model or usage.model

    def _context(self, trace: _Trace, seq: int, event: ev.ContextWindowMeasured) -> None:
        span = trace.invocations.get(event.invocation_id)
        if span is not None:
            span.attributes["lopen.context.used"] = event.used
            span.attributes["lopen.context.limit"] = event.limit

    # -- inside an invocation ---------------------------------------------------------------------

    def _parent_of(self, trace: _Trace, invocation_id: str) -> int:
        if invocation_id:
            return trace.invocation_span(invocation_id)
        outer = trace.innermost()
        return outer.span_id if outer else 0

    def _tool(self, trace: _Trace, seq: int, event: ev.ToolCalled) -> None:
        attributes: Attributes = {  # the most numerous spans: project, module, session are on their parents
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool,
            "gen_ai.tool.type": "function",
            "lopen.tool.success": event.success,
        }
        if event.call_id:
            attributes["gen_ai.tool.call.id"] = event.call_id
        if event.exit_code is not None:
            attributes["lopen.tool.exit_code"] = event.exit_code
        if event.agent_id:
            attributes["lopen.agent.id"] = event.agent_id
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = self._content(msgspec.json.encode(event.arguments).decode())
            attributes["gen_ai.tool.call.result"] = self._content(event.result_summary)
        span = Span(
            trace_id=trace.id,
            span_id=span_id(trace.id, "tool", str(seq)),
            parent_id=self._parent_of(trace, event.invocation_id),
            name=f"execute_tool {event.tool}",
            start=event.at - max(event.duration, 0.0),
            end=event.at,
            attributes=attributes,
            events=[],
        )
        if not event.success:
            span.fail("the tool reported an error")
        self._out.append(span)
        if event.tool.startswith("verify_") and event.invocation_id in trace.awaiting:
            self._release_oracles(trace, event.invocation_id, span.span_id)

    def _verdict(self, trace: _Trace, seq: int, event: ev.OracleVerdictRecorded) -> None:
        attributes: Attributes = {
            "lopen.verdict.passed": event.passed,
            "lopen.verdict.confidence": event.confidence,
            "lopen.verdict.scope": event.scope,
            "lopen.verdict.target": event.target,
            "lopen.verdict.attempt": event.attempt,
            "lopen.verdict.findings": len(event.findings),
        }
        if event.model:
            attributes["lopen.verdict.model"] = event.model
        if self.capture_content and event.summary:
            attributes["lopen.verdict.summary"] = self._content(event.summary)
        span = trace.invocations.get(event.invocation_id) or trace.held.get(event.invocation_id)
        if span is not None:
            span.attributes.update(attributes)
        else:  # a verdict without its own oracle invocation: a point on the span it belongs to
            self._point(trace, event.parent_invocation, "lopen.verdict", event.at, attributes)

    def _evidence(self, trace: _Trace, seq: int, event: ev.VerificationEvidenceRecorded) -> None:
        attributes: Attributes = {
            **trace.base,
            "lopen.command": event.command,
            "lopen.command.exit_code": event.exit_code,
            "lopen.verdict.scope": event.scope,
            "lopen.verdict.target": event.target,
            "lopen.command.reused": event.reused,
        }
        span = Span(
            trace_id=trace.id,
            span_id=span_id(trace.id, "check", str(seq)),
            parent_id=self._parent_of(trace, event.invocation_id),
            name="verification command",
            start=event.at - (0.0 if event.reused else max(event.duration, 0.0)),
            end=event.at,
            attributes=attributes,
            events=[],
        )
        if event.exit_code != 0:
            span.fail(f"exit code {event.exit_code}")
        self._out.append(span)

    def _commit(self, trace: _Trace, seq: int, event: ev.CommitRecorded) -> None:
        owner = next((i for i in reversed(trace.order) if trace.tasks[i] == event.task_id and event.task_id), None)
        parent = trace.invocations[owner] if owner else trace.innermost()
        attributes: Attributes = {**trace.base, "vcs.ref.head.revision": event.sha, "lopen.commit.tree": event.tree}
        if event.branch:
            attributes["vcs.ref.head.name"] = event.branch
        if event.task_id:
            attributes["lopen.task"] = event.task_id
            attributes["lopen.lines.added"] = event.added  # P2: git diff --numstat <parent> <tree>
            attributes["lopen.lines.removed"] = event.removed
            attributes["lopen.files.changed"] = event.files
        if event.parent:
            attributes["lopen.commit.parent"] = event.parent
        if self.capture_content and event.message:
            attributes["lopen.commit.message"] = self._content(event.message)
        self._out.append(
            Span(
                trace_id=trace.id,
                span_id=span_id(trace.id, "commit", str(seq)),
                parent_id=parent.span_id if parent else 0,
                name="git commit",
                start=event.at,
                end=event.at,
                attributes=attributes,
                events=[],
            )
        )

    # -- span events ------------------------------------------------------------------------------

    def _point(self, trace: _Trace, invocation_id: str, name: str, at: float, attributes: Attributes) -> None:
        """A span event on the invocation named (when open), else on the innermost open span."""
        span = trace.invocations.get(invocation_id) if invocation_id else None
        span = span or trace.innermost()
        if span is not None:
            span.events.append(SpanEvent(name, at, attributes))

    def _decision(
        self, trace: _Trace, seq: int, kind: str, name: str, invocation_id: str, at: float, attributes: Attributes
    ) -> None:
        """A decision as a span of its own (a point in time) under the invocation it names, else the
        innermost open span."""
        parent = trace.invocations.get(invocation_id) if invocation_id else None
        parent = parent or trace.innermost()
        extra: Attributes = {"lopen.invocation.id": invocation_id} if invocation_id else {}
        self._out.append(
            Span(
                trace_id=trace.id,
                span_id=span_id(trace.id, kind, str(seq)),
                parent_id=parent.span_id if parent else 0,
                name=name,
                start=at,
                end=at,
                attributes={**trace.base, **attributes, **extra},
                events=[],
            )
        )

    def _guardrail(self, trace: _Trace, seq: int, event: ev.GuardrailTripped) -> None:
        attributes = {"lopen.guardrail.category": event.category, "lopen.guardrail.level": event.level}
        if event.detail:
            attributes["lopen.guardrail.detail"] = event.detail
        self._point(trace, "", "lopen.guardrail", event.at, attributes)
        name = f"guardrail {event.category}".rstrip()
        self._decision(trace, seq, "guardrail", name, event.invocation_id, event.at, attributes)

    def _refused(self, trace: _Trace, seq: int, event: ev.CompletionRefused) -> None:
        attributes = {"lopen.scope": event.scope, "lopen.target": event.target, "lopen.why": event.why}
        self._point(trace, event.invocation_id, "lopen.completion_refused", event.at, attributes)
        self._decision(trace, seq, "refused", "completion refused", event.invocation_id, event.at, attributes)

    def _task_status(self, trace: _Trace, seq: int, event: ev.TaskStatusChanged) -> None:
        attributes = {"lopen.task": event.task_id, "lopen.task.from": event.from_state, "lopen.task.to": event.to_state}
        if event.reason:
            attributes["lopen.reason"] = event.reason
        self._point(trace, event.invocation_id, "lopen.task.status", event.at, attributes)
        if event.to_state == "in-progress" and event.task_id not in trace.task_spans:
            self._open_task(trace, seq, event)
        elif event.to_state in ("complete", "failed") and event.task_id in trace.task_spans:
            self._end_task(trace, event.task_id, event.at, event.to_state, event.reason)

    # -- tasks ------------------------------------------------------------------------------------

    def _open_task(self, trace: _Trace, seq: int, event: ev.TaskStatusChanged) -> None:
        outer = trace.step or trace.run
        attributes: Attributes = {**trace.base, "lopen.task": event.task_id}
        invocation = trace.invocations.get(event.invocation_id) if event.invocation_id else None
        for source in (outer, invocation):
            for key in ("lopen.step", "lopen.phase", "lopen.component"):
                if source is not None and key in source.attributes:
                    attributes[key] = source.attributes[key]
        if event.from_state == "failed":
            attributes["lopen.task.retry"] = True
        trace.task_spans[event.task_id] = Span(
            trace_id=trace.id,
            span_id=span_id(trace.id, "task", str(seq)),
            parent_id=outer.span_id if outer else 0,
            name=f"task {event.task_id}",
            start=event.at,
            attributes=attributes,
            events=[],
        )

    def _end_task(self, trace: _Trace, task_id: str, at: float, outcome: str, reason: str = "") -> None:
        span = trace.task_spans.pop(task_id)
        span.end = at
        span.attributes["lopen.task.outcome"] = outcome
        if outcome == "failed":
            span.fail(reason or "the task failed")
        elif outcome == "unfinished":
            span.attributes["lopen.unfinished"] = True
        self._out.append(span)

    # -- store appends (measured live) ------------------------------------------------------------

    def _append(self, trace: _Trace, appended: Appended, first: ev.Event) -> None:
        invocation_id = getattr(first, "invocation_id", "")
        parent = trace.invocations.get(invocation_id) if invocation_id else None
        parent = parent or trace.step or trace.run
        self._out.append(append_span(trace.id, parent.span_id if parent else 0, appended, trace.base))

    def _fallback(self, trace: _Trace, seq: int, event: ev.ModelFellBack) -> None:
        attributes = {"lopen.model.from": event.from_model, "lopen.model.to": event.to_model, "lopen.why": event.why}
        self._point(trace, event.invocation_id, "lopen.model_fallback", event.at, attributes)

    def _corrective(self, trace: _Trace, seq: int, event: ev.CorrectiveInstructionIssued) -> None:
        attributes = {"lopen.category": event.category}
        if self.capture_content:
            attributes["lopen.instruction"] = self._content(event.instruction)
        self._point(trace, event.invocation_id, "lopen.corrective_instruction", event.at, attributes)

    def _drift(self, trace: _Trace, seq: int, event: ev.SpecDriftDetected) -> None:
        attributes: Attributes = {"lopen.reentry_step": event.reentry_step}
        for name, sections in (
            ("changed", event.changed_sections),
            ("added", event.added_sections),
            ("removed", event.removed_sections),
        ):
            if sections:
                attributes[f"lopen.sections.{name}"] = list(sections)
        self._point(trace, "", "lopen.spec_drift", event.at, attributes)

    def _permission(self, trace: _Trace, seq: int, event: ev.PermissionDecided) -> None:
        if not event.allowed:  # every request is recorded; only a refusal is worth a mark on the trace
            attributes = {"lopen.permission.kind": event.kind, "lopen.permission.target": event.target}
            if event.reason:
                attributes["lopen.reason"] = event.reason
            self._point(trace, event.invocation_id, "lopen.permission_denied", event.at, attributes)

    def _progress(self, trace: _Trace, seq: int, event: ev.ProgressReported) -> None:
        if self.capture_content:
            attributes = {"lopen.progress": self._content(event.progress)}
            self._point(trace, event.invocation_id, "lopen.progress", event.at, attributes)

    @staticmethod
    def _content(text: str) -> str:
        text = redact_text(text)
        return text if len(text) <= CONTENT_LIMIT else text[: CONTENT_LIMIT - 1] + "…"


def append_span(trace: int, parent_id: int, appended: Appended, base: Attributes | None = None) -> Span:
    """The ``store append`` span of one measured append (``EventStore.observe_appends``), in ``trace``
    under ``parent_id``; attributes after the OpenTelemetry database conventions."""
    records = appended.records
    first, last = records[0], records[-1]
    return Span(
        trace_id=trace,
        span_id=span_id(trace, "append", str(first.seq)),
        parent_id=parent_id,
        name="store append",
        kind="client",
        start=appended.started,
        end=appended.started + appended.duration,
        attributes={
            **(base or {}),
            "db.system.name": appended.backend,
            "db.operation.name": "append",
            "db.collection.name": first.stream_id,
            "db.operation.batch.size": len(records),
            "lopen.store.first_seq": first.seq,
            "lopen.store.last_seq": last.seq,
            "lopen.store.version": last.version,
            "lopen.store.attempts": appended.attempts,
            "lopen.store.events": sorted({type(r.event).__name__ for r in records}),
        },
        events=[],
    )


def build_spans(records: Iterable[Recorded], *, capture_content: bool = False) -> list[Span]:
    """Every span of ``records`` (e.g. ``events.selection.session_records``), open ones ended at the last event."""
    builder = SpanBuilder(capture_content=capture_content)
    return builder.feed(records) + builder.finish()
