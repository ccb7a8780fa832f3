"""Fixtures for the TUI's tests: a real SQLite store, and a run that a test scripts step by step.

``ScriptedRun`` is a ``RunHandle`` whose ``run()`` works through a list of steps on its own thread —
append events to the real store, hand streaming deltas to the TUI, ask a question, wait for the
test — and honours a recorded ``PauseRequested`` before each invocation and ``stop()``, like the
workflow does. It is a stand-in for the workflow only; the store, the bus, the feed and the app
are real.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from events import catalogue as ev
from events.fold import ModuleState
from events.recorded import module_stream
from events.store import EventStore
from lopen.copilot import results as stream
from lopen.tui.contract import ApprovalRequest, RunCallbacks, RunOutcome
from lopen.tui.options import TuiOptions

PROJECT, MODULE = "p0test", "slugify"
SESSION = "slugify-20260101-1"
OPTIONS = TuiOptions(landing=False, animate=False, who="tui:tester")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path) as opened:
        yield opened


def stream_id() -> str:
    return module_stream(PROJECT, MODULE)


def plan_events(session: str = SESSION) -> list[ev.Event]:
    """A session that plans one component of two tasks and starts the first."""
    return [
        ev.SessionStarted(session_id=session, models={"building": "scripted-opus"}),
        ev.StepEntered(session_id=session, phase="planning", step=3),
        ev.ComponentsRecorded(session_id=session, components=(ev.ComponentSpec(name="core"),)),
        ev.ComponentSelected(session_id=session, component="core"),
        ev.TasksRecorded(
            session_id=session,
            component="core",
            tasks=(
                ev.TaskSpec(id="core/1", name="Normalize text", acceptance=("SLUG-02 accents go",)),
                ev.TaskSpec(id="core/2", name="Join words"),
            ),
        ),
        ev.StepEntered(session_id=session, phase="building", step=6),
    ]


@dataclass
class Step:
    """One step of a scripted run: ``kind`` is events | delta | ask | approve | wait | invocation."""

    kind: str
    payload: Any = None


@dataclass
class ScriptedRun:
    store: EventStore
    callbacks: RunCallbacks
    steps: list[Step]
    project: str = PROJECT
    module: str = MODULE
    session_id: str = SESSION
    answers: list[Any] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    gates: dict[str, threading.Event] = field(default_factory=dict)

    def gate(self, name: str) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())

    def run(self) -> RunOutcome:
        stream_name = module_stream(self.project, self.module)
        for step in self.steps:
            if self.stopped.is_set():
                self.store.append(stream_name, [ev.SessionPaused(session_id=self.session_id, reason="stopped")])
                return RunOutcome(2, self.session_id, "stopped by the person; resume with r")
            if step.kind == "events":
                self.store.append(stream_name, list(step.payload))
            elif step.kind == "delta":
                self.callbacks.on_stream(step.payload)
            elif step.kind == "ask":
                self.answers.append(self.callbacks.ask(step.payload))
            elif step.kind == "approve":
                self.answers.append(self.callbacks.approve(step.payload))
            elif step.kind == "wait":
                self.gate(step.payload).wait(10)
            elif step.kind == "invocation":  # the workflow's rule: a recorded pause stops before it
                state = ModuleState(project=self.project, module=self.module)
                for rec in self.store.read_stream(stream_name):
                    state.apply(rec.event)
                if state.pause_requested:
                    self.store.append(
                        stream_name,
                        [ev.SessionPaused(session_id=self.session_id, reason=f"paused by {state.pause_requested}")],
                    )
                    return RunOutcome(2, self.session_id, "paused")
                self.store.append(stream_name, [ev.InvocationStarted(session_id=self.session_id, **step.payload)])
            elif step.kind == "raise":
                raise step.payload
        if self.stopped.is_set():
            self.store.append(stream_name, [ev.SessionPaused(session_id=self.session_id, reason="stopped")])
            return RunOutcome(2, self.session_id, "stopped by the person; resume with r")
        self.store.append(stream_name, [ev.SessionCompleted(session_id=self.session_id)])
        return RunOutcome(0, self.session_id, "module complete")

    def stop(self) -> None:
        self.stopped.set()
        for gate in self.gates.values():
            gate.set()


class Starter:
    """``start_run`` for tests: each call makes a ``ScriptedRun`` of the next script."""

    def __init__(self, store: EventStore, *scripts: list[Step]) -> None:
        self.store = store
        self.scripts = list(scripts)
        self.runs: list[ScriptedRun] = []
        self.calls: list[RunCallbacks] = []

    def __call__(self, callbacks: RunCallbacks) -> ScriptedRun:
        self.calls.append(callbacks)
        steps = self.scripts.pop(0) if self.scripts else []
        run = ScriptedRun(self.store, callbacks, steps)
        self.runs.append(run)
        return run


def tool_deltas(call_id: str, name: str, arguments: dict, result: str = "ok", success: bool = True) -> list[Step]:
    """A tool call as the gateway streams it, and as the workflow records it."""
    record = stream.ToolCallRecord(call_id, name, arguments, result, success, 0.5)
    return [
        Step("delta", stream.ToolStarted(call_id=call_id, name=name, arguments=arguments)),
        Step("delta", stream.ToolFinished(record=record)),
        Step(
            "events",
            [
                ev.ToolCalled(
                    session_id=SESSION,
                    tool=name,
                    arguments=arguments,
                    success=success,
                    duration=0.5,
                    result_summary=result,
                )
            ],
        ),
    ]


APPROVAL = ApprovalRequest(MODULE, "# Slugify Specification\n\n## Overview\n\nSlugs.\n", ("warning: Notes missing",))


async def settle(pilot: Any, until: Callable[[], bool], seconds: float = 10.0) -> None:
    """Let the app process messages until ``until()`` holds — the app and a run's thread interleave,
    so this waits for a condition (never for a fixed time): each round drains the app's message
    queue, yielding briefly to the other thread between rounds; fails after ``seconds``."""
    rounds = int(seconds / 0.02)
    for _ in range(rounds):
        if until():
            return
        await pilot.pause(0.02)
    assert until(), "the condition never held"


async def finished(pilot: Any) -> None:
    """Wait for the app's run threads to end, then for the app to handle their end."""
    import asyncio

    for thread in list(pilot.app.threads):
        await asyncio.to_thread(thread.join, 10)
        assert not thread.is_alive(), "the run did not end"
    await pilot.pause()
    await pilot.pause()
