"""A demo run's spans and metrics reach a real OTLP receiver (issue 11's acceptance test): the run
composes telemetry (lopen.app.engine), the Copilot CLI's own spans hang under Lopen's invocation
spans, and `lopen trace` rebuilds the same tree from the store."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from otlp_receiver import OtlpReceiver, ReceivedSpan

from events import catalogue as ev
from events.selection import session_records
from lopen.project import open_store
from lopen.telemetry import ids

pytestmark = pytest.mark.e2e


def lopen(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOPEN_"))}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=600
    )


def tree(spans: list[ReceivedSpan]) -> set[tuple]:
    return {(s.trace_id, s.span_id, s.parent_id, s.name, s.start, s.end, tuple(sorted(s.attributes))) for s in spans}


def derived(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    """Lopen's spans folded from events (what `lopen trace` rebuilds): all but the measured appends."""
    return [s for s in spans if s.service == "lopen" and s.name != "store append"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory, cli_path):
    """One demo run exporting to a receiver: (root, project, session id, its records, the receiver)."""
    receiver = OtlpReceiver().__enter__()
    root = tmp_path_factory.mktemp("otel-demo") / "project"
    done = lopen(
        "demo",
        "--dir",
        str(root),
        cwd=root.parent,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        # a budget far from reach whose warning comes at once: one guardrail trip (budget, warn) to trace
        LOPEN_BUDGET__TOKEN_BUDGET_PER_MODULE="10000000",
        LOPEN_BUDGET__WARNING_THRESHOLD="0.000001",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "warning" not in done.stderr, done.stderr
    store, project = open_store(root)
    with store:
        store.projections.catch_up()
        (session,) = store.projections.sessions.all()
        records = list(session_records(store, project, session.id))
    yield root, project, session.id, records, receiver
    receiver.__exit__(None, None, None)


def test_a_demo_run_is_one_trace_with_the_clis_calls_inside(demo) -> None:
    _, project, session_id, records, receiver = demo
    spans = receiver.spans()
    trace = f"{ids.trace_id(project, session_id):032x}"
    mine = {s.span_id: s for s in spans if s.service == "lopen"}
    cli = [s for s in spans if s.service == "github-copilot"]
    assert {s.trace_id for s in mine.values()} == {trace}
    assert cli and {s.trace_id for s in cli} == {trace}

    names = {s.name for s in mine.values()}
    assert {"run slugify", "step 2 planning", "step 6 building", "invoke_agent planning", "invoke_agent task"} <= names
    assert {"invoke_agent oracle", "git commit", "execute_tool verify_task_completion"} <= names

    def parent(span: ReceivedSpan) -> ReceivedSpan | None:
        return mine.get(span.parent_id)

    for span in mine.values():
        if span.name == "invoke_agent oracle":  # a task's under its verify tool; a boundary's under its step
            under = "execute_tool verify_task_completion" if span.attributes.get("lopen.task") else "step "
            assert parent(span).name.startswith(under), span.attributes
        if span.name.startswith("execute_tool"):
            assert parent(span).name.startswith("invoke_agent")
        if span.name in ("invoke_agent planning", "invoke_agent task"):
            assert parent(span).name.startswith("step ")

    # token attributes equal the recorded TokensUsed of each invocation
    used: dict[str, tuple[int, int]] = {}
    for rec in records:
        if isinstance(rec.event, ev.TokensUsed):
            tokens_in, tokens_out = used.get(rec.event.invocation_id, (0, 0))
            used[rec.event.invocation_id] = (tokens_in + rec.event.input, tokens_out + rec.event.output)
    invocations = {s.attributes["lopen.invocation.id"]: s for s in mine.values() if s.name.startswith("invoke_agent")}
    started = {r.event.invocation_id for r in records if isinstance(r.event, ev.InvocationStarted)}
    assert set(invocations) == started and set(used) <= started
    for invocation_id, (tokens_in, tokens_out) in used.items():
        attributes = invocations[invocation_id].attributes
        assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
            tokens_in,
            tokens_out,
        )

    # the CLI's own invoke_agent spans hang under Lopen's invocation spans, one conversation each
    for agent in (s for s in cli if s.name.startswith("invoke_agent")):
        owner = mine[agent.parent_id]
        assert owner.name.startswith("invoke_agent")
        assert agent.attributes["gen_ai.conversation.id"] == owner.attributes["gen_ai.conversation.id"]

    # and the metrics: token usage sums to what was recorded
    usage = receiver.metrics("gen_ai.client.token.usage")
    lopen_points = [p for m in usage for p in m.histogram.data_points if "lopen.session" in str(p.attributes)]
    assert lopen_points
    assert receiver.metrics("lopen.tasks.completed") and receiver.metrics("lopen.commits")


def test_lopen_trace_of_the_demo_session_yields_the_same_tree(demo) -> None:
    root, _, session_id, _, live = demo
    with OtlpReceiver() as again:
        done = lopen("trace", session_id, "--endpoint", again.url, cwd=root)
        assert done.returncode == 0, done.stderr
        rebuilt = again.spans()
    assert tree(rebuilt) == tree(derived(live.spans()))


def test_the_demo_has_a_span_per_task_per_guardrail_trip_and_per_store_append(demo) -> None:
    _, _, session_id, records, receiver = demo
    mine = {s.span_id: s for s in receiver.spans() if s.service == "lopen"}

    started = [
        r.event for r in records if isinstance(r.event, ev.TaskStatusChanged) and r.event.to_state == "in-progress"
    ]
    tasks = [s for s in mine.values() if s.name.startswith("task ")]
    assert started and sorted(s.attributes["lopen.task"] for s in tasks) == sorted(e.task_id for e in started)
    for span in tasks:
        assert span.name == f"task {span.attributes['lopen.task']}"
        assert span.attributes["lopen.task.outcome"] == "complete" and span.status == 0
        assert mine[span.parent_id].name.startswith("step ")
        done = next(
            r.event for r in records
            if isinstance(r.event, ev.TaskStatusChanged)
            and r.event.task_id == span.attributes["lopen.task"]
            and r.event.to_state == "complete"
        )  # fmt: skip
        assert span.end == round(done.at * 1e9)

    trips = [r.event for r in records if isinstance(r.event, ev.GuardrailTripped)]
    assert ("budget", "warn") in {(e.category, e.level) for e in trips}  # the fixture's budget warning
    guardrails = [s for s in mine.values() if s.name.startswith("guardrail ")]
    assert sorted(
        (s.attributes["lopen.guardrail.category"], s.attributes["lopen.guardrail.level"]) for s in guardrails
    ) == sorted((e.category, e.level) for e in trips)

    appends = [s for s in mine.values() if s.name == "store append"]
    measured = {
        seq
        for s in appends
        for seq in range(s.attributes["lopen.store.first_seq"], s.attributes["lopen.store.last_seq"] + 1)
    }
    assert measured >= {r.seq for r in records if r.event.session_id}  # every event of the run: measured appends
    for span in appends:
        assert span.attributes["lopen.session"] == session_id and span.parent_id in mine
        assert span.start <= span.end and span.attributes["db.system.name"] == "sqlite"


def test_a_demo_against_a_dead_collector_finishes_with_one_warning(tmp_path: Path, cli_path: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    root = tmp_path / "project"
    done = lopen("demo", "--dir", str(root), cwd=tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=dead)
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if "telemetry" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: telemetry: cannot export to"), done.stderr
    assert "Traceback" not in done.stderr
