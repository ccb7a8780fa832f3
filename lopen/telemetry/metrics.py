"""Metrics from events: the same fold for live export and for ``lopen trace``, like the spans.

Each session is its own cumulative series (attribute ``lopen.session``): its points start at the
session's first event and are stamped with its latest, so a session exported live and exported
again later by ``lopen trace`` gives the same numbers at the same times.

===================================  =========  =============================================
metric                               kind       from
===================================  =========  =============================================
``gen_ai.client.token.usage``        histogram  each ``TokensUsed`` (one model call): input and
                                                output (``gen_ai.token.type``), by model and
                                                invocation kind
``gen_ai.client.operation.duration`` histogram  each ``InvocationFinished`` (``invoke_agent``)
``lopen.tasks.completed`` / ``.failed``  counter   ``TaskStatusChanged`` to complete / failed
``lopen.oracle.verdicts``            counter    ``OracleVerdictRecorded`` (``lopen.verdict.passed``)
``lopen.completions.refused``        counter    ``CompletionRefused``
``lopen.guardrail.trips``            counter    ``GuardrailTripped`` (category, level)
``lopen.premium_requests``           counter    ``TokensUsed.premium``, by model
``lopen.commits``                    counter    ``CommitRecorded``
``lopen.lines.changed``              counter    a task's ``CommitRecorded``: lines added and removed
                                                (``lopen.lines.kind``)
``lopen.budget.used``                gauge      the module's tokens / premium requests as a share
                                                of its budget (only for a budget that is set)
===================================  =========  =============================================

Plain data out (``Metric``); ``lopen.telemetry.otlp`` turns it into the SDK's ``MetricsData``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any, Literal

import msgspec

from events import catalogue as ev
from events.folds.tokens import TokenTotals
from events.recorded import Recorded
from lopen.telemetry.spans import PROVIDER

__all__ = ["DURATION_BOUNDS", "TOKEN_BOUNDS", "HistogramPoint", "Metric", "MetricsFold", "Point", "Usage"]

# The bucket boundaries the GenAI semantic conventions advise for these two histograms.
TOKEN_BOUNDS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BOUNDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)

Kind = Literal["counter", "histogram", "gauge"]
Usage = tuple[int, float]  # (tokens, premium requests) a module had spent
_DESCRIPTIONS: dict[str, tuple[Kind, str, str]] = {
    "gen_ai.client.token.usage": ("histogram", "{token}", "Tokens of one model call, by gen_ai.token.type."),
    "gen_ai.client.operation.duration": ("histogram", "s", "Duration of one invocation (invoke_agent)."),
    "lopen.tasks.completed": ("counter", "{task}", "Tasks that reached complete."),
    "lopen.tasks.failed": ("counter", "{task}", "Tasks that failed."),
    "lopen.oracle.verdicts": ("counter", "{verdict}", "Oracle verdicts, by lopen.verdict.passed."),
    "lopen.completions.refused": ("counter", "{refusal}", "Completion claims refused (B2, B4)."),
    "lopen.guardrail.trips": ("counter", "{trip}", "Guardrail trips, by category and level."),
    "lopen.premium_requests": ("counter", "{request}", "Premium requests, by model."),
    "lopen.commits": ("counter", "{commit}", "Commits Lopen made."),
    "lopen.lines.changed": ("counter", "{line}", "Lines task commits changed, by lopen.lines.kind."),
    "lopen.budget.used": ("gauge", "1", "Share of the module's budget spent, by lopen.budget.kind."),
}


class Point(msgspec.Struct, kw_only=True, gc=False):
    """One counter or gauge value of one attribute set, over [start, time]."""

    attributes: dict[str, Any]
    start: float
    time: float
    value: float


class HistogramPoint(msgspec.Struct, kw_only=True, gc=False):
    attributes: dict[str, Any]
    start: float
    time: float
    count: int = 0
    sum: float = 0.0
    min: float = 0.0
    max: float = 0.0
    bucket_counts: list[int] = []


class Metric(msgspec.Struct, kw_only=True, gc=False):
    name: str
    kind: Kind
    unit: str
    description: str
    bounds: tuple[float, ...] = ()  # histogram bucket boundaries
    points: list[Point | HistogramPoint] = []


class _Histogram:
    __slots__ = ("buckets", "count", "max", "min", "sum")

    def __init__(self, size: int) -> None:
        self.count = 0
        self.sum = 0.0
        self.min = self.max = 0.0
        self.buckets = [0] * (size + 1)

    def record(self, value: float, bounds: tuple[float, ...]) -> None:
        if not self.count or value < self.min:
            self.min = value
        if not self.count or value > self.max:
            self.max = value
        self.count += 1
        self.sum += value
        self.buckets[bisect.bisect_left(bounds, value)] += 1  # bucket i holds (bounds[i-1], bounds[i]]


class _Session:
    def __init__(self, base: dict[str, str], start: float, baseline: Usage) -> None:
        self.base = base
        self.start = start
        self.time = start
        self.sums: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
        self.histograms: dict[tuple[str, tuple[tuple[str, Any], ...]], _Histogram] = {}
        self.invocations: dict[str, tuple[str, str]] = {}  # invocation id → (kind, model)
        self.tokens = baseline[0]  # what the module had spent before the session
        self.spent = TokenTotals(premium=baseline[1])  # … plus the session's calls (the one token fold)


class MetricsFold:
    """Folds recorded events into cumulative metrics per session.

    ``budget`` is (token budget, premium budget) per module (0 = unlimited: no gauge);
    ``baseline(first_record)`` says what the module had spent before the session's first event
    (``module_usage_before``), so the budget gauge counts the module, not just the session.
    """

    def __init__(self, budget: Usage = (0, 0.0), baseline: Callable[[Recorded], Usage] | None = None) -> None:
        self.budget = budget
        self.baseline = baseline
        self._sessions: dict[tuple[str, str], _Session] = {}

    def feed(self, records: Iterable[Recorded]) -> bool:
        """Fold ``records`` in; True when a metric changed."""
        changed = False
        for rec in records:
            event = rec.event
            if not event.session_id:
                continue
            handler = _HANDLERS.get(type(event))
            key = (event.project, event.session_id)
            session = self._sessions.get(key)
            if session is None:
                if isinstance(event, ev.SessionDeleted):
                    continue
                base = {"lopen.project": event.project, "lopen.module": event.module, "lopen.session": event.session_id}
                baseline = self.baseline(rec) if self.baseline and any(self.budget) else (0, 0.0)
                session = self._sessions[key] = _Session(base, event.at, baseline)
            if event.at > session.time:
                session.time = event.at
            if handler is not None:
                handler(session, event)
                changed = True
        return changed

    def snapshot(self) -> list[Metric]:
        """Every metric with its points so far (cumulative since each session's start)."""
        metrics: dict[str, Metric] = {}

        def metric(name: str) -> Metric:
            found = metrics.get(name)
            if found is None:
                kind, unit, description = _DESCRIPTIONS[name]
                bounds = TOKEN_BOUNDS if name == "gen_ai.client.token.usage" else DURATION_BOUNDS
                found = metrics[name] = Metric(
                    name=name,
                    kind=kind,
                    unit=unit,
                    description=description,
                    bounds=bounds if kind == "histogram" else (),
                )
            return found

        for session in self._sessions.values():
            for (name, attrs), value in session.sums.items():
                attributes = {**session.base, **dict(attrs)}
                metric(name).points.append(
                    Point(attributes=attributes, start=session.start, time=session.time, value=value)
                )
            for (name, attrs), hist in session.histograms.items():
                metric(name).points.append(
                    HistogramPoint(
                        attributes={**session.base, **dict(attrs)},
                        start=session.start,
                        time=session.time,
                        count=hist.count,
                        sum=hist.sum,
                        min=hist.min,
                        max=hist.max,
                        bucket_counts=list(hist.buckets),
                    )
                )
            for kind, used, budget in (
                ("tokens", session.tokens + session.spent.total, self.budget[0]),
                ("premium_requests", session.spent.premium, self.budget[1]),
            ):
                if budget:
                    attributes = {**session.base, "lopen.budget.kind": kind}
                    metric("lopen.budget.used").points.append(
                        Point(attributes=attributes, start=session.start, time=session.time, value=used / budget)
                    )
        return list(metrics.values())


def _add(session: _Session, name: str, value: float, **attributes: Any) -> None:
    key = (name, tuple(attributes.items()))
    session.sums[key] = session.sums.get(key, 0) + value


def _observe(session: _Session, name: str, value: float, bounds: tuple[float, ...], **attributes: Any) -> None:
    key = (name, tuple(attributes.items()))
    hist = session.histograms.get(key)
    if hist is None:
        hist = session.histograms[key] = _Histogram(len(bounds))
    hist.record(value, bounds)


def _started(session: _Session, event: ev.InvocationStarted) -> None:
    session.invocations[event.invocation_id] = (event.kind, event.model)


def _finished(session: _Session, event: ev.InvocationFinished) -> None:
    kind, model = session.invocations.pop(event.invocation_id, ("", ""))
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": model,
        "lopen.invocation.kind": kind,
    }
    if event.outcome != "ok":
        attributes["error.type"] = event.error_kind or event.outcome
    _observe(session, "gen_ai.client.operation.duration", event.duration, DURATION_BOUNDS, **attributes)


def _tokens(session: _Session, event: ev.TokensUsed) -> None:
    kind = session.invocations.get(event.invocation_id, ("", ""))[0]
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": event.model,
        "lopen.invocation.kind": kind,
    }
    _observe(
        session, "gen_ai.client.token.usage", event.input, TOKEN_BOUNDS, **common, **{"gen_ai.token.type": "input"}
    )
    _observe(
        session, "gen_ai.client.token.usage", event.output, TOKEN_BOUNDS, **common, **{"gen_ai.token.type": "output"}
    )
    if event.premium:
        _add(session, "lopen.premium_requests", event.premium, **{"gen_ai.request.model": event.model})
    session.spent.add(event)


def _task(session: _Session, event: ev.TaskStatusChanged) -> None:
    if event.to_state == "complete":
        _add(session, "lopen.tasks.completed", 1)
    elif event.to_state == "failed":
        _add(session, "lopen.tasks.failed", 1)


def _verdict(session: _Session, event: ev.OracleVerdictRecorded) -> None:
    _add(
        session,
        "lopen.oracle.verdicts",
        1,
        **{"lopen.verdict.passed": event.passed, "lopen.verdict.scope": event.scope},
    )


def _refused(session: _Session, event: ev.CompletionRefused) -> None:
    _add(session, "lopen.completions.refused", 1, **{"lopen.scope": event.scope})


def _guardrail(session: _Session, event: ev.GuardrailTripped) -> None:
    attributes = {"lopen.guardrail.category": event.category, "lopen.guardrail.level": event.level}
    _add(session, "lopen.guardrail.trips", 1, **attributes)


def _commit(session: _Session, event: ev.CommitRecorded) -> None:
    _add(session, "lopen.commits", 1)
    if event.task_id:  # P2: git diff --numstat of the task's verified tree against its parent
        _add(session, "lopen.lines.changed", event.added, **{"lopen.lines.kind": "added"})
        _add(session, "lopen.lines.changed", event.removed, **{"lopen.lines.kind": "removed"})


_HANDLERS: dict[type, Callable[[_Session, Any], None]] = {
    ev.InvocationStarted: _started,
    ev.InvocationFinished: _finished,
    ev.TokensUsed: _tokens,
    ev.TaskStatusChanged: _task,
    ev.OracleVerdictRecorded: _verdict,
    ev.CompletionRefused: _refused,
    ev.GuardrailTripped: _guardrail,
    ev.CommitRecorded: _commit,
}


def module_usage_before(read_stream: Callable[..., Iterable[Recorded]]) -> Callable[[Recorded], Usage]:
    """A ``baseline`` for ``MetricsFold``: what the module had spent before ``first`` (from its history).

    ``read_stream`` is ``EventStore.read_stream``; the module's stream is read once per session.
    """

    def before(first: Recorded) -> Usage:
        spent = TokenTotals()
        if first.version > 1:
            for rec in read_stream(first.stream_id, 0, first.version - 1):
                event = rec.event
                if type(event) is ev.TokensUsed:
                    spent.add(event)
        return spent.total, spent.premium

    return before
