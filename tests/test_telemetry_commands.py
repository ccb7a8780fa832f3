"""Each command that changes state is a trace of its own (`lopen spec approve`, `lopen revert`, an MCP
client's pause…), naming who asked, with a span per store append; joined to TRACEPARENT when given.
A real OTLP/HTTP receiver (tests/otlp_receiver.py), the real CLI in a subprocess, real git and SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import story
from otlp_receiver import OtlpReceiver, ReceivedSpan
from test_revert import BRANCH, MODULE, build_project

from events import catalogue as ev
from events.recorded import module_stream
from events.store import EventStore

PARENT_TRACE, PARENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def lopen(root: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with this checkout's code (PYTHONPATH passed on)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "USER": "ada", "NO_COLOR": "1", "COLUMNS": "200"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def approvable(root: Path) -> Path:
    """A project with the story's module `slugify` specified and not yet approved."""
    story.make_project(root)
    spec = root / "docs" / "requirements" / "slugify" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(story.SPEC, encoding="utf-8")
    return root


def command_span(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_spec_approve_and_projections_rebuild_export_a_trace_naming_who_asked(tmp_path: Path) -> None:
    root = approvable(tmp_path / "project")
    with OtlpReceiver() as receiver:
        done = lopen(root, "spec", "approve", "slugify", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        rebuilt = lopen(root, "projections", "rebuild", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        spans = receiver.spans()
    assert done.returncode == 0, done.stderr
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "warning" not in done.stderr + rebuilt.stderr

    rebuild = command_span(spans, "lopen projections rebuild")
    assert (rebuild.attributes["lopen.actor"], rebuild.attributes["lopen.projections.identical"]) == ("cli:ada", True)
    assert rebuild.attributes["lopen.projections.events"] == 2  # the approval and who asked for it
    spans = [s for s in spans if s.trace_id != rebuild.trace_id]  # a trace per command

    approve = command_span(spans, "lopen spec approve")
    assert approve.parent_id == ""  # a root: no TRACEPARENT given
    assert approve.attributes["lopen.actor"] == "cli:ada"
    assert (approve.attributes["lopen.module"], approve.attributes["lopen.project"]) == ("slugify", story.PROJECT)
    assert approve.attributes["lopen.spec.hash"] and approve.status == 0
    (append,) = [s for s in spans if s.name == "store append"]
    assert (append.trace_id, append.parent_id) == (approve.trace_id, approve.span_id)
    assert append.attributes["lopen.store.events"] == ["ControlRequested", "SpecApproved"]
    assert append.attributes["db.collection.name"] == module_stream(story.PROJECT, "slugify")
    assert approve.start <= append.start <= append.end <= approve.end
    assert {s.service for s in spans} == {"lopen"}


def test_revert_joins_the_trace_given_in_traceparent(tmp_path: Path) -> None:
    project = build_project(tmp_path)
    project.store.close()
    with OtlpReceiver() as receiver:
        done = lopen(
            project.root,
            "revert",
            MODULE,
            "--to",
            "core/1",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            TRACEPARENT=f"00-{PARENT_TRACE}-{PARENT_SPAN}-01",
        )
        spans = receiver.spans()
    assert done.returncode == 0, done.stderr
    assert f"reverted {BRANCH}" in done.stdout

    revert = command_span(spans, "lopen revert")
    assert (revert.trace_id, revert.parent_id) == (PARENT_TRACE, PARENT_SPAN)
    attributes = revert.attributes
    assert (attributes["lopen.actor"], attributes["lopen.face"]) == ("cli:ada", "cli")
    assert (attributes["lopen.revert.from"], attributes["lopen.revert.to"]) == (
        project.shas["core/2"],
        project.shas["core/1"],
    )
    assert attributes["lopen.revert.reopened"] == ["core/2"]
    assert attributes["lopen.session"] == project.session_id
    appends = [s for s in spans if s.name == "store append"]
    assert appends and all((s.trace_id, s.parent_id) == (PARENT_TRACE, revert.span_id) for s in appends)
    recorded = {name for s in appends for name in s.attributes["lopen.store.events"]}
    assert {"TaskReopened", "ControlRequested"} <= recorded


def test_a_refused_command_is_an_error_span_and_a_dead_collector_one_warning(tmp_path: Path) -> None:
    project = build_project(tmp_path)
    project.store.close()
    with OtlpReceiver() as receiver:
        done = lopen(project.root, "revert", MODULE, "--to", "nope/1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        spans = receiver.spans()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    revert = command_span(spans, "lopen revert")
    assert (revert.status, revert.attributes["error.type"]) == (2, "LopenError")  # STATUS_CODE_ERROR
    assert "nope/1" in revert.status_message

    dead = receiver.url  # closed now: nothing listens there
    done = lopen(project.root, "revert", MODULE, "--to", "core/1", OTEL_EXPORTER_OTLP_ENDPOINT=dead)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: telemetry")]
    assert len(warnings) == 1 and f"cannot export to {dead}" in warnings[0], done.stderr
    assert "Traceback" not in done.stderr


def test_without_an_endpoint_a_command_loads_no_opentelemetry(tmp_path: Path) -> None:
    root = approvable(tmp_path / "project")
    done = lopen(root, "spec", "approve", "slugify", PYTHONPROFILEIMPORTTIME="1")
    assert done.returncode == 0, done.stderr
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "import time:" in line}
    assert "lopen.app.commands" in modules  # the traced use case ran
    assert not {
        m for m in modules if m.startswith(("opentelemetry", "lopen.telemetry.otlp", "lopen.telemetry.commands"))
    }


def test_an_mcp_clients_pause_is_traced_with_the_client_as_actor(tmp_path: Path) -> None:
    from lopen.mcp.server import Operations

    root = story.make_project(tmp_path / "project")
    spec = root / "docs" / "requirements" / "greet" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text(story.SPEC.replace("name: slugify", "name: greet"), encoding="utf-8")
    with EventStore.open(root) as store:
        store.append(module_stream(story.PROJECT, "greet"), [ev.SessionStarted(session_id="greet-20261126-1")])
    with OtlpReceiver() as receiver:
        env = {"PATH": os.environ["PATH"], "HOME": str(root), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        ops = Operations(root, env)
        ops.pause_run("greet", "mcp:copilot-chat 1.2", "time for lunch")
        ops.queue_message("greet", "use the new helper", "mcp:copilot-chat 1.2")
        spans = receiver.spans()
    pause, message = command_span(spans, "pause_run"), command_span(spans, "queue_message")
    for span in (pause, message):
        assert (span.attributes["lopen.actor"], span.attributes["lopen.face"]) == ("mcp:copilot-chat 1.2", "mcp")
        assert span.attributes["lopen.session"] == "greet-20261126-1"
    assert pause.trace_id != message.trace_id  # a trace per call
    appends = [s for s in spans if s.name == "store append"]
    assert {s.parent_id for s in appends} == {pause.span_id, message.span_id}
