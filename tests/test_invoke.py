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
from lopen.config.model import Copilot
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


SPEC_WITH_HOOKS = SPEC + "\n## Skills & Hooks\n\n- verify-tests: `python -m pytest -q`\n"


def started(journal: Journal) -> list[ev.InvocationStarted]:
    return [r.event for r in journal.store.read_stream(journal.stream) if isinstance(r.event, ev.InvocationStarted)]


def test_the_repositorys_agent_instructions_are_sent_by_lopen_and_recorded(journal: Journal) -> None:
    root = journal.store.root
    (root / "AGENTS.md").write_text("Run ./check.sh before each commit.\n")
    (root / ".github").mkdir()
    (root / ".github" / "copilot-instructions.md").write_text("Prefer dataclasses.\n")
    gateway = Gateway()
    Invoker(journal, gateway, Settings(), root, project_root=root).invoke(Kind.PLANNING, 2)

    (request,) = gateway.requests
    conventions = request.system_message.split("## The project's conventions")[1]
    assert "Run ./check.sh before each commit." in conventions and "Prefer dataclasses." in conventions
    assert "Lopen's rules above win" in request.system_message
    (event,) = started(journal)
    assert [label.split("@")[0] for label in event.instructions] == ["AGENTS.md", ".github/copilot-instructions.md"]
    assert event.cli_tools == ("view", "grep", "glob")  # planning reads, it does not write


def test_the_instructions_can_be_turned_off(journal: Journal) -> None:
    root = journal.store.root
    (root / "AGENTS.md").write_text("Run ./check.sh before each commit.\n")
    settings = Settings(copilot=Copilot(repository_instructions=False))
    gateway = Gateway()
    Invoker(journal, gateway, settings, root, project_root=root).invoke(Kind.PLANNING, 2)
    assert "check.sh" not in gateway.requests[0].system_message
    assert started(journal)[0].instructions == ()


def test_a_task_prompt_says_where_it_works_what_lopen_runs_and_that_verification_follows(journal: Journal) -> None:
    root = journal.store.root
    (root / "docs" / "requirements" / "auth" / "SPECIFICATION.md").write_text(SPEC_WITH_HOOKS)
    gateway = Gateway()
    invoker = Invoker(journal, gateway, Settings(), root, project_root=root)
    invoker.invoke(
        Kind.TASK, 6, component="core", task="core/1", task_text="Task core/1: Sign", last_task_of_component=True
    )

    (request,) = gateway.requests
    assert f"The working directory, {root}, is the project's root" in request.system_message
    assert "on the branch lopen/auth" in request.system_message
    assert "is not to be edited — not even its checkboxes" in request.system_message
    assert "packages cannot be installed" in request.system_message
    assert "`python -m pytest -q`" in request.prompt and "Lopen has the whole component verified" in request.prompt
    assert request.prompt.count("Task core/1: Sign") == 1  # the task's text once
    assert request.builder and "bash" in (request.cli_tools or ()) and "task" not in (request.cli_tools or ())


def test_without_the_builder_setting_the_cli_keeps_its_own_prompt_and_tools(journal: Journal) -> None:
    gateway = Gateway()
    settings = Settings(copilot=Copilot(builder_prompt=False))
    Invoker(journal, gateway, settings, journal.store.root).invoke(Kind.PLANNING, 2)
    (request,) = gateway.requests
    assert (request.builder, request.cli_tools, request.guidance) == (False, None, "")
