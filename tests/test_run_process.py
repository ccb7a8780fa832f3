"""A run in its own process (lopen.app.run_process): the TUI's handle on a real child process.

The approval gate is the run's first question, asked before any model is started, so these run a real
child (``python -m lopen.app.run_child``) on a real project in about a second each: the question
crosses the pipe with the spec's text, the answer goes back, and a child that ends without saying how
is reported with what, why and fix. The whole run through the TUI is tests/e2e/test_tui_demo.py.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from story import MODULE, make_project

from lopen.app.run_contract import ApprovalRequest, RunCallbacks
from lopen.app.run_process import ProcessRun
from lopen.config import load_settings
from lopen.errors import LopenError


class Person:
    """The TUI's side: records what it was asked; ``on_approve`` decides the gate."""

    def __init__(self, on_approve) -> None:
        self.asked: list[ApprovalRequest] = []
        self.said: list[str] = []
        self.on_approve = on_approve

    def callbacks(self) -> RunCallbacks:
        def approve(request: ApprovalRequest) -> bool:
            self.asked.append(request)
            return self.on_approve()

        return RunCallbacks(ask=lambda _q: False, approve=approve, on_stream=lambda _e: None, say=self.said.append)


def start(root: Path, person: Person) -> ProcessRun:
    return ProcessRun(root, MODULE, load_settings(root), person.callbacks())


def test_the_approval_gate_crosses_the_pipe_and_a_refusal_comes_back_as_the_runs_error(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    person = Person(lambda: False)
    run = start(root, person)
    with pytest.raises(LopenError) as raised:
        run.run()
    (request,) = person.asked
    assert request.module == MODULE
    assert request.spec_text == (root / "docs" / "requirements" / MODULE / "SPECIFICATION.md").read_text()
    assert "is not approved" in raised.value.what and raised.value.how  # what, why and fix, as headless
    assert run.process is not None and run.process.returncode == 1
    run.store.close()


def test_a_child_killed_mid_run_is_reported_not_hung(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    run: ProcessRun

    def killed() -> bool:  # the child waits for this answer: kill it meanwhile
        assert run.process is not None
        os.kill(run.process.pid, signal.SIGKILL)
        run.process.wait()
        return True

    person = Person(killed)
    run = start(root, person)
    with pytest.raises(LopenError) as raised:
        run.run()
    assert "ended without saying how (exit code -9)" in raised.value.what
    assert f"lopen run {MODULE}" in raised.value.how
    run.store.close()


def test_a_stop_while_the_child_asks_ends_it_cleanly(tmp_path: Path) -> None:
    """Ctrl+C in the TUI while the run waits at the gate: the child hears SIGINT, the question is
    answered "no" when the TUI goes away, and the run ends with its error, not a traceback."""
    root = make_project(tmp_path / "project")
    run: ProcessRun
    asked = threading.Event()

    def stop_then_leave() -> bool:
        run.stop()
        asked.set()
        assert run.process is not None and run.process.stdin is not None
        run.process.stdin.close()  # the TUI is gone: nobody will answer
        return False

    person = Person(stop_then_leave)
    run = start(root, person)
    with pytest.raises(LopenError) as raised:
        run.run()
    assert asked.is_set()
    assert "is not approved" in raised.value.what
    assert run.process is not None and run.process.returncode == 1
    run.store.close()


def test_an_approval_at_the_gate_is_recorded_as_the_tuis_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Approved in the dialog: recorded through the app's command (as ``tui:<user>``), then the run
    goes on (the demo's project and scripted model, the real CLI) — stopped once its session is open
    (Ctrl+C in the TUI), so it ends paused, exit 130, and its session id came over the pipe. Started
    inside a CI job's trace (``TRACEPARENT``), the run records it, for its span to link to."""
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    monkeypatch.setenv("TRACEPARENT", caller)
    from events import catalogue as ev
    from events.store import EventStore
    from lopen.app.demo import MODULE as DEMO
    from lopen.app.demo import PLAYBOOK, demo_settings, prepare_project
    from lopen.scripted_model import ScriptedModelServer, load_playbook

    root = prepare_project(tmp_path / "demo")
    run: ProcessRun

    def said(line: str) -> None:
        if line.startswith("session "):
            run.stop()

    callbacks = RunCallbacks(ask=lambda _q: False, approve=lambda _r: True, on_stream=lambda _e: None, say=said)
    with ScriptedModelServer(load_playbook(PLAYBOOK)) as server:
        run = ProcessRun(root, DEMO, demo_settings(root, server.url), callbacks)
        outcome = run.run()
    run.store.close()
    assert outcome.code == 130, outcome
    assert run.session_id == outcome.session_id != ""
    with EventStore.open(root) as store:
        events = [rec.event for rec in store.read_all()]
    approvals = [e for e in events if isinstance(e, ev.SpecApproved)]
    controls = [e for e in events if isinstance(e, ev.ControlRequested) and e.action == "approve-spec"]
    assert len(approvals) == 1 and len(controls) == 1 and controls[0].caller.startswith("tui")
    assert [e.reason for e in events if isinstance(e, ev.SessionPaused)] == ["interrupted"]
    (started,) = [e for e in events if isinstance(e, ev.SessionStarted)]
    assert started.started_by.startswith("tui") and started.command == "run"  # who started it, and how
    assert started.traceparent == caller
