"""Spans and metrics from recorded events: the tree, the GenAI attributes, deterministic ids."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telemetry_events import CALLS, ORACLE, PLANNING, PROJECT, SESSION, T0, TASK, as_recorded, session_events

from events import catalogue as ev
from events.store import Appended
from lopen.telemetry import ids
from lopen.telemetry.metrics import TOKEN_BOUNDS, MetricsFold
from lopen.telemetry.spans import Span, SpanBuilder, build_spans


def by_name(spans: list[Span]) -> dict[str, Span]:
    named = {s.name: s for s in spans}
    assert len(named) == len(spans), [s.name for s in spans]
    return named


def test_the_tree_is_run_step_invocation_tool_with_the_oracle_under_its_verify_tool() -> None:
    spans = by_name(build_spans(as_recorded(session_events())))

    run = spans["run slugify"]
    assert run.parent_id == 0
    parent = {name: next((p.name for p in spans.values() if p.span_id == s.parent_id), "") for name, s in spans.items()}
    assert parent == {
        "run slugify": "",
        "step 2 planning": "run slugify",
        "invoke_agent planning": "step 2 planning",
        "execute_tool read_spec": "invoke_agent planning",
        "step 6 building": "run slugify",
        "invoke_agent task": "step 6 building",
        "execute_tool create": "invoke_agent task",
        "execute_tool bash": "invoke_agent task",
        "execute_tool verify_task_completion": "invoke_agent task",
        "invoke_agent oracle": "execute_tool verify_task_completion",
        "verification command": "invoke_agent oracle",
        "git commit": "invoke_agent task",
        "task core/1": "step 6 building",
        "guardrail retry": "invoke_agent task",
        "completion refused": "invoke_agent task",
    }
    assert {s.trace_id for s in spans.values()} == {ids.trace_id(PROJECT, SESSION)}


def test_invocation_spans_carry_the_genai_attributes_and_the_summed_tokens() -> None:
    spans = by_name(build_spans(as_recorded(session_events())))
    for name, invocation in (
        ("invoke_agent planning", PLANNING),
        ("invoke_agent task", TASK),
        ("invoke_agent oracle", ORACLE),
    ):
        attributes = spans[name].attributes
        calls = [c for c in CALLS if c[0] == invocation]
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["gen_ai.usage.input_tokens"] == sum(c[1] for c in calls)
        assert attributes["gen_ai.usage.output_tokens"] == sum(c[2] for c in calls)
        assert attributes["gen_ai.conversation.id"] == invocation
        assert attributes["lopen.usage.calls"] == len(calls)
        assert attributes["lopen.usage.premium_requests"] == sum(c[4] for c in calls)
        priced = invocation != ORACLE
        assert attributes["lopen.usage.cost_usd"] == pytest.approx(sum(c[1] for c in calls) / 1e6 if priced else 0)
        assert attributes.get("lopen.usage.unpriced_calls", 0) == (0 if priced else len(calls))
        assert attributes["lopen.project"] == PROJECT and attributes["lopen.session"] == SESSION
        assert spans[name].kind == "client"
    task = spans["invoke_agent task"].attributes
    assert task["gen_ai.request.model"] == "scripted-opus"
    assert (task["lopen.task"], task["lopen.component"], task["lopen.step"]) == ("core/1", "core", 6)
    assert task["gen_ai.usage.cache_read.input_tokens"] == 200
    assert spans["invoke_agent planning"].attributes["lopen.sections_sent"] == ["Overview", "Dependencies"]

    oracle = spans["invoke_agent oracle"].attributes
    assert oracle["gen_ai.request.model"] == "scripted-mini"
    assert (oracle["lopen.verdict.passed"], oracle["lopen.verdict.confidence"]) == (True, 0.9)
    assert (oracle["lopen.verdict.scope"], oracle["lopen.verdict.target"], oracle["lopen.verdict.findings"]) == (
        "task",
        "core/1",
        1,
    )
    tool = spans["execute_tool bash"].attributes
    assert (tool["gen_ai.operation.name"], tool["gen_ai.tool.name"], tool["gen_ai.tool.call.id"]) == (
        "execute_tool",
        "bash",
        "call_t2",
    )
    assert tool["lopen.tool.exit_code"] == 0
    commit = spans["git commit"].attributes
    assert (commit["vcs.ref.head.revision"], commit["lopen.task"]) == ("a" * 40, "core/1")
    assert (commit["lopen.lines.added"], commit["lopen.lines.removed"], commit["lopen.files.changed"]) == (12, 3, 2)


def test_ids_are_derived_so_the_workflow_can_name_the_invocation_span_before_it_exists() -> None:
    spans = by_name(build_spans(as_recorded(session_events())))
    _, trace, span, flags = ids.traceparent(PROJECT, SESSION, TASK).split("-")
    assert (int(trace, 16), int(span, 16), flags) == (
        spans["invoke_agent task"].trace_id,
        spans["invoke_agent task"].span_id,
        "01",
    )
    other = by_name(build_spans(as_recorded(session_events(session="slugify-20261126-2"))))
    assert other["invoke_agent task"].trace_id != spans["invoke_agent task"].trace_id
    assert by_name(build_spans(as_recorded(session_events()))) == spans  # again: the very same ids


def test_times_are_the_events_own_times() -> None:
    spans = by_name(build_spans(as_recorded(session_events())))
    assert (spans["run slugify"].start, spans["run slugify"].end) == (T0, T0 + 14)
    assert (spans["step 2 planning"].start, spans["step 2 planning"].end) == (T0 + 1, T0 + 5)
    assert (spans["step 6 building"].start, spans["step 6 building"].end) == (T0 + 5, T0 + 14)
    assert (spans["invoke_agent task"].start, spans["invoke_agent task"].end) == (T0 + 5.5, T0 + 13)
    verify = spans["execute_tool verify_task_completion"]
    assert (verify.start, verify.end) == (T0 + 8, T0 + 11)
    assert verify.start <= spans["invoke_agent oracle"].start <= spans["invoke_agent oracle"].end <= verify.end


def test_guardrail_trips_and_refusals_are_span_events_of_the_invocation() -> None:
    spans = by_name(build_spans(as_recorded(session_events())))
    events = [(e.name, e.at) for e in spans["invoke_agent task"].events]
    assert events == [
        ("lopen.task.status", T0 + 5.6),
        ("lopen.guardrail", T0 + 7.5),
        ("lopen.completion_refused", T0 + 7.7),
        ("lopen.task.status", T0 + 11.5),
    ]
    trip = spans["invoke_agent task"].events[1].attributes
    assert (trip["lopen.guardrail.category"], trip["lopen.guardrail.level"]) == ("retry", "warn")


def test_a_task_is_a_span_from_its_first_in_progress_to_its_completion() -> None:
    spans = by_name(build_spans(as_recorded(session_events())))
    task = spans["task core/1"]
    assert (task.start, task.end, task.status) == (T0 + 5.6, T0 + 11.5, "unset")
    attributes = task.attributes
    assert (attributes["lopen.task"], attributes["lopen.task.outcome"], attributes["lopen.component"]) == (
        "core/1",
        "complete",
        "core",
    )
    assert (attributes["lopen.step"], attributes["lopen.phase"], attributes["lopen.session"]) == (
        6,
        "building",
        SESSION,
    )


def test_a_failed_task_span_has_error_status_and_a_retry_is_a_new_span() -> None:
    events = session_events()
    done = next(i for i, e in enumerate(events) if isinstance(e, ev.TaskStatusChanged) and e.to_state == "complete")
    moves = [
        ev.TaskStatusChanged(
            at=T0 + 11.2, session_id=SESSION, task_id="core/1", from_state="in-progress", to_state="failed",
            reason="the tests fail",
        ),
        ev.TaskStatusChanged(
            at=T0 + 11.3, session_id=SESSION, task_id="core/1", from_state="failed", to_state="in-progress"
        ),
    ]  # fmt: skip
    spans = build_spans(as_recorded(events[:done] + moves + events[done:]))
    tasks = sorted((s for s in spans if s.name == "task core/1"), key=lambda s: s.start)
    assert [(t.start, t.end, t.status, t.attributes["lopen.task.outcome"]) for t in tasks] == [
        (T0 + 5.6, T0 + 11.2, "error", "failed"),
        (T0 + 11.3, T0 + 11.5, "unset", "complete"),
    ]
    assert tasks[0].status_message == "the tests fail" and tasks[1].attributes["lopen.task.retry"] is True


def test_a_task_still_in_progress_when_the_run_pauses_ends_with_it_unfinished() -> None:
    events = [*session_events(end=False)[:-4], ev.SessionPaused(at=T0 + 12, session_id=SESSION, reason="paused")]
    task = by_name(build_spans(as_recorded(events)))["task core/1"]
    assert (task.end, task.attributes["lopen.task.outcome"], task.attributes["lopen.unfinished"]) == (
        T0 + 12,
        "unfinished",
        True,
    )


def test_guardrail_trips_and_refused_completions_are_spans_with_the_decision_as_attributes() -> None:
    spans = by_name(build_spans(as_recorded(session_events())))
    trip = spans["guardrail retry"]
    assert (trip.start, trip.end) == (T0 + 7.5, T0 + 7.5)
    assert {k: v for k, v in trip.attributes.items() if k.startswith("lopen.guardrail")} == {
        "lopen.guardrail.category": "retry",
        "lopen.guardrail.level": "warn",
        "lopen.guardrail.detail": "scripted-opus: rate_limited, retry 1 by the cli",
    }
    refused = spans["completion refused"]
    assert (refused.attributes["lopen.target"], refused.attributes["lopen.why"]) == (
        "core/1",
        "no passing verification yet",
    )
    assert refused.attributes["lopen.invocation.id"] == TASK


def test_measured_appends_are_spans_under_what_was_open_when_they_were_appended() -> None:
    records = as_recorded(session_events())
    seq = {type(r.event).__name__ + getattr(r.event, "invocation_id", ""): r.seq for r in records}

    def measured(first: int, count: int = 1) -> Appended:
        batch = [r for r in records if first <= r.seq < first + count]
        return Appended(batch, batch[0].event.at, 0.002, 1, "sqlite")

    appends = {
        seq["SessionStarted"]: measured(seq["SessionStarted"]),  # opens the run
        seq["ToolCalled" + TASK]: measured(seq["ToolCalled" + TASK], 2),  # inside the task invocation
        seq["SessionCompleted"]: measured(seq["SessionCompleted"]),  # ends the run
    }
    builder = SpanBuilder()
    spans = builder.feed(records, appends) + builder.finish()
    assert appends == {}  # each taken
    named = {s.span_id: s for s in spans}
    stored = sorted((s for s in spans if s.name == "store append"), key=lambda s: s.start)
    assert [named[s.parent_id].name for s in stored] == ["run slugify", "invoke_agent task", "step 6 building"]
    second = stored[1]
    assert (second.end - second.start) == pytest.approx(0.002, abs=1e-6)
    assert second.attributes["db.operation.name"] == "append"
    assert second.attributes["db.operation.batch.size"] == 2
    assert second.attributes["lopen.store.first_seq"] == seq["ToolCalled" + TASK]
    assert second.attributes["lopen.session"] == SESSION
    assert by_name([s for s in spans if s.name != "store append"]) == by_name(build_spans(records))


def test_content_only_when_asked_and_always_redacted() -> None:
    plain = by_name(build_spans(as_recorded(session_events())))
    assert "gen_ai.tool.call.arguments" not in plain["execute_tool bash"].attributes
    assert "lopen.verdict.summary" not in plain["invoke_agent oracle"].attributes

    captured = by_name(build_spans(as_recorded(session_events()), capture_content=True))
    assert msgspec.json.decode(captured["execute_tool bash"].attributes["gen_ai.tool.call.arguments"]) == {
        "command": "pytest -q"
    }
    assert captured["execute_tool bash"].attributes["gen_ai.tool.call.result"] == "1 passed"
    summary = captured["invoke_agent oracle"].attributes["lopen.verdict.summary"]
    assert "sk-abcdef" not in summary and "[REDACTED]" in summary


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=29), max_size=8))
def test_fed_in_any_batches_the_spans_are_the_same(cuts: list[int]) -> None:
    """Live export folds the bus's batches as they come; `lopen trace` folds the whole session."""
    records = as_recorded(session_events())
    whole = build_spans(records)
    builder = SpanBuilder()
    pieces: list[Span] = []
    edges = [0, *sorted(set(cuts)), len(records)]
    for start, stop in itertools.pairwise(edges):
        pieces += builder.feed(records[start:stop])
    pieces += builder.finish()
    key = lambda s: s.span_id  # noqa: E731
    assert sorted(pieces, key=key) == sorted(whole, key=key)


def test_an_unfinished_session_ends_at_its_last_event_and_a_resumed_one_starts_a_new_run() -> None:
    events = session_events(end=False)[:-3]  # the task invocation is still open: no commit, no finish
    resumed = [
        ev.SessionResumed(at=T0 + 100, session_id=SESSION, reason="resume"),
        ev.StepEntered(at=T0 + 101, session_id=SESSION, phase="building", step=6),
        ev.SessionCompleted(at=T0 + 102, session_id=SESSION),
    ]
    spans = build_spans(as_recorded(events + resumed))
    runs = [s for s in spans if s.name == "run slugify"]
    assert [(r.start, r.end, r.attributes["lopen.run.outcome"]) for r in runs] == [
        (T0, T0 + 11.5, "unfinished"),
        (T0 + 100, T0 + 102, "completed"),
    ]
    task = next(s for s in spans if s.name == "invoke_agent task")
    assert (task.end, task.attributes["lopen.unfinished"]) == (T0 + 11.5, True)
    assert len({s.span_id for s in spans}) == len(spans)


def test_an_oracle_whose_verify_tool_never_reported_hangs_under_its_invocation() -> None:
    events = [e for e in session_events() if not (isinstance(e, ev.ToolCalled) and e.tool.startswith("verify_"))]
    spans = by_name(build_spans(as_recorded(events)))
    assert spans["invoke_agent oracle"].parent_id == spans["invoke_agent task"].span_id


def test_a_failed_run_and_a_failed_invocation_have_error_status() -> None:
    events = session_events(end=False)
    events[-1] = ev.InvocationFinished(
        at=T0 + 13, session_id=SESSION, invocation_id=TASK, outcome="error", error_kind="auth"
    )
    events.append(ev.SessionFailed(at=T0 + 14, session_id=SESSION, reason="not signed in", error_kind="auth"))
    spans = by_name(build_spans(as_recorded(events)))
    assert (spans["invoke_agent task"].status, spans["invoke_agent task"].attributes["error.type"]) == ("error", "auth")
    assert (spans["run slugify"].status, spans["run slugify"].status_message) == ("error", "not signed in")


def test_metrics_are_token_and_duration_histograms_counters_and_the_budget_gauge() -> None:
    fold = MetricsFold(budget=(100_000, 10.0), baseline=lambda first: (50_000, 3.0))
    fold.feed(as_recorded(session_events()))
    metrics = {m.name: m for m in fold.snapshot()}

    usage = metrics["gen_ai.client.token.usage"]
    assert usage.kind == "histogram" and usage.bounds == TOKEN_BOUNDS
    by_type: dict[str, tuple[int, float]] = {}
    for point in usage.points:
        kind = point.attributes["gen_ai.token.type"]
        count, total = by_type.get(kind, (0, 0))
        by_type[kind] = (count + point.count, total + point.sum)
    assert by_type == {"input": (5, sum(c[1] for c in CALLS)), "output": (5, sum(c[2] for c in CALLS))}

    duration = metrics["gen_ai.client.operation.duration"]
    assert sorted((p.attributes["lopen.invocation.kind"], p.sum) for p in duration.points) == [
        ("oracle", 2.3),
        ("planning", 2.5),
        ("task", 7.5),
    ]

    def total(name: str, **attributes: object) -> float:
        points = metrics[name].points if name in metrics else []
        return sum(p.value for p in points if all(p.attributes.get(k) == v for k, v in attributes.items()))

    assert total("lopen.tasks.completed") == 1
    assert total("lopen.tasks.failed") == 0
    assert total("lopen.oracle.verdicts", **{"lopen.verdict.passed": True}) == 1
    assert total("lopen.completions.refused") == 1
    assert total("lopen.guardrail.trips", **{"lopen.guardrail.category": "retry"}) == 1
    assert total("lopen.premium_requests") == 2
    assert total("lopen.commits") == 1
    assert total("lopen.lines.changed", **{"lopen.lines.kind": "added"}) == 12
    assert total("lopen.lines.changed", **{"lopen.lines.kind": "removed"}) == 3
    used = sum(c[1] + c[2] for c in CALLS)
    gauge = {p.attributes["lopen.budget.kind"]: p.value for p in metrics["lopen.budget.used"].points}
    assert gauge == {"tokens": (50_000 + used) / 100_000, "premium_requests": (3.0 + 2) / 10}
    assert {(p.start, p.time) for m in metrics.values() for p in m.points} == {(T0, T0 + 14)}
    assert all(p.attributes["lopen.session"] == SESSION for m in metrics.values() for p in m.points)


def test_no_budget_no_gauge() -> None:
    fold = MetricsFold()
    fold.feed(as_recorded(session_events()))
    assert "lopen.budget.used" not in {m.name for m in fold.snapshot()}
