"""The invoker (one invocation): what the history owes the next prompt is delivered in it, once, and
recorded with that invocation's id; usage is recorded per model call as it streams (W11, L5, S9).
A stand-in gateway answers; the journal and the store are real."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from events import catalogue as ev
from events.journal import Journal
from events.store import EventStore
from lopen.config import Settings
from lopen.copilot.results import ContextWindow, InvocationResult, Usage, UsageReported
from lopen.workflow.invoke import Invoker
from lopen.workflow.steps import Kind

SPEC = """---
name: auth
description: Tokens.
---

# Auth

## Overview

Signs tokens.

## Acceptance Criteria

- [ ] [AUTH-01] Tokens are signed.
"""


class Gateway:
    """Answers every invocation at once, reporting two model calls; keeps the requests it got."""

    def __init__(self) -> None:
        self.requests = []

    def __call__(self, request, tools, emit) -> InvocationResult:
        self.requests.append(request)
        emit(UsageReported("m", 100, 10, 0, 0, call_id=f"c{len(self.requests)}a", first_of_attempt=True))
        emit(UsageReported("m", 120, 5, 0, 0, call_id=f"c{len(self.requests)}b"))
        return InvocationResult(
            model="m", final_message="done", tool_calls=[], usage=Usage(), context=ContextWindow(), duration=0.1,
            attempts=[],
        )  # fmt: skip


@pytest.fixture
def journal(tmp_path: Path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    spec = tmp_path / "docs" / "requirements" / "auth" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text(SPEC)
    store = EventStore.open(tmp_path)
    journal = Journal(store, "p1", "auth")
    journal.open_session(ev.SessionStarted())
    yield journal
    store.close()


def test_queued_messages_and_notes_go_into_the_next_prompt_once_delivered_with_its_id(journal: Journal) -> None:
    journal.record(
        ev.UserMessageQueued(message_id="m1", text="use argon2, not bcrypt"),
        ev.CorrectiveInstructionIssued(category="git", instruction="Do not commit."),
    )
    gateway = Gateway()
    invoker = Invoker(journal, gateway, Settings(), journal.store.root)

    first = invoker.invoke(Kind.PLANNING, 2, notes=("what the caller adds",))
    second = invoker.invoke(Kind.PLANNING, 2)

    for note in ("Do not commit.", "what the caller adds", "Message from the user: use argon2, not bcrypt"):
        assert note in gateway.requests[0].system_message
        assert note not in gateway.requests[1].system_message  # once
    delivered = [
        r.event for r in journal.store.read_stream(journal.stream) if isinstance(r.event, ev.UserMessageDelivered)
    ]
    assert [(e.message_id, e.invocation_id) for e in delivered] == [("m1", first.invocation_id)]
    assert second.ok


def test_usage_is_recorded_per_call_with_one_premium_charge_per_prompt(journal: Journal) -> None:
    invoker = Invoker(journal, Gateway(), Settings(), journal.store.root)
    outcome = invoker.invoke(Kind.PLANNING, 2)
    used = [r.event for r in journal.store.read_stream(journal.stream) if isinstance(r.event, ev.TokensUsed)]
    assert [(e.call_id, e.input, e.invocation_id) for e in used] == [
        ("c1a", 100, outcome.invocation_id),
        ("c1b", 120, outcome.invocation_id),
    ]
    assert [e.premium for e in used] == [1.0, 0.0]  # "m" is a premium model: its prompt costs one request
