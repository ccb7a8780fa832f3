"""Stub data for the gallery, the snapshot tests and the docs' screenshots: a module mid-build.

``stub_events()`` is a realistic history (plan, two components, tasks, an invocation with tool
calls, verdicts, a refusal) of the bundled ``slugify`` example; ``stub_state()`` folds it into a
``ScreenState`` — through the real fold, so the stub can never show what a real run could not —
and adds the live part (a narrative message and a tool call still running) as streaming deltas.
Times are fixed, so screenshots are stable.
"""

from __future__ import annotations

import msgspec

from events import catalogue as ev
from events.recorded import Recorded, module_stream
from lopen.copilot import results as stream
from lopen.tui.contract import ApprovalRequest, HeaderInfo
from lopen.tui.state import DiffLine, ScreenState

PROJECT, MODULE, SESSION = "demo0project", "slugify", "slugify-20260101-1"
T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC

INFO = HeaderInfo(provider="openai (scripted)", auth="BYOK", token_budget=400_000, premium_budget=50)

SPEC = """---
name: slugify
description: Turn any text into a URL slug.
---

# Slugify Specification

## Overview

`slugify(text)` turns any text into a lowercase, ASCII, dash-separated slug.

## Acceptance Criteria

- [ ] [SLUG-01] `slugify("Hello, World!")` returns `"hello-world"`
- [ ] [SLUG-02] accented letters lose their accents

## Dependencies

None.
"""

EDIT_ARGS = {
    "path": "/work/slugify/slugify/core.py",
    "old_str": "def slugify(text):\n    return text.lower()\n",
    "new_str": 'def slugify(text, sep="-"):\n    words = normalize(text).split()\n    return sep.join(words)\n',
}


def stub_events() -> list[ev.Event]:
    s = SESSION
    at = iter(T0 + n for n in range(1000))
    tasks = (
        ev.TaskSpec(
            id="core/1",
            name="Normalize text",
            subtasks=("strip accents", "lowercase"),
            acceptance=("SLUG-02 accented letters lose their accents",),
        ),
        ev.TaskSpec(
            id="core/2",
            name="Join words with a separator",
            acceptance=('SLUG-01 slugify("Hello, World!") == "hello-world"', "SLUG-03 custom separator"),
        ),
        ev.TaskSpec(id="core/3", name="Export the public API"),
    )
    return [
        ev.SpecApproved(spec_hash="h", section_hashes={"Overview": "a"}, approver="ada", at=next(at)),
        ev.SessionStarted(
            session_id=s,
            models={"building": "scripted-opus", "oracle": "scripted-mini"},
            protection="bwrap",
            worktree="/work/slugify/.lopen/worktrees/slugify",
            at=next(at),
        ),
        ev.BranchEnsured(
            session_id=s,
            branch="lopen/slugify",
            created=True,
            base="abc1234",
            worktree="/work/slugify/.lopen/worktrees/slugify",
            at=next(at),
        ),
        ev.StepEntered(session_id=s, phase="planning", step=3, why="no components recorded yet", at=next(at)),
        ev.ComponentsRecorded(
            session_id=s,
            components=(
                ev.ComponentSpec(name="core", description="the library"),
                ev.ComponentSpec(name="cli", description="python -m slugify", depends_on=("core",)),
            ),
            at=next(at),
        ),
        ev.ComponentSelected(session_id=s, component="core", reason="cli depends on core", at=next(at)),
        ev.TasksRecorded(session_id=s, component="core", tasks=tasks, at=next(at)),
        ev.StepEntered(session_id=s, phase="building", step=6, why="core/1 is pending", at=next(at)),
        ev.InvocationStarted(
            session_id=s,
            invocation_id="i1",
            kind="task",
            model="scripted-opus",
            step=6,
            component="core",
            task="core/1",
            at=next(at),
        ),
        ev.TaskStatusChanged(session_id=s, task_id="core/1", from_state="pending", to_state="in-progress", at=next(at)),
        ev.ToolCalled(
            session_id=s,
            invocation_id="i1",
            tool="read_spec",
            call_id="c1",
            arguments={"module": "slugify", "section": "Acceptance Criteria"},
            duration=0.02,
            result_summary="## Acceptance Criteria …",
            at=next(at),
        ),
        ev.TokensUsed(
            session_id=s,
            invocation_id="i1",
            model="scripted-opus",
            input=18_200,
            output=2_100,
            premium=1.0,
            call_id="u1",
            at=next(at),
        ),
        ev.ContextWindowMeasured(session_id=s, invocation_id="i1", used=24_300, limit=128_000, at=next(at)),
        ev.ToolCalled(
            session_id=s,
            invocation_id="i1",
            tool="bash",
            call_id="c2",
            arguments={"command": "python -m pytest -q tests/test_normalize.py"},
            success=False,
            exit_code=1,
            duration=0.84,
            result_summary="E   AssertionError: 'Cafe' != 'cafe'\n1 failed",
            at=next(at),
        ),
        ev.ToolCalled(
            session_id=s,
            invocation_id="i1",
            tool="edit",
            call_id="c3",
            arguments=EDIT_ARGS,
            duration=0.05,
            result_summary="edited slugify/core.py",
            at=next(at),
        ),
        ev.ToolCalled(
            session_id=s,
            invocation_id="i1",
            tool="bash",
            call_id="c4",
            arguments={"command": "python -m pytest -q"},
            duration=1.21,
            result_summary="6 passed in 0.31s",
            at=next(at),
        ),
        ev.OracleVerdictRecorded(
            session_id=s,
            scope="task",
            target="core/1",
            passed=False,
            confidence=0.82,
            summary="normalize() keeps the accents of composed characters",
            findings=(ev.Finding(severity="major", description="'é' stays 'é'", location="slugify/normalize.py:12"),),
            at=next(at),
        ),
        ev.CompletionRefused(
            session_id=s,
            scope="task",
            target="core/1",
            why="the oracle rejected the claim: fix the findings first",
            at=next(at),
        ),
        ev.UserMessageQueued(session_id=s, message_id="m1", text="Use unicodedata.normalize('NFKD').", at=next(at)),
        ev.OracleVerdictRecorded(
            session_id=s,
            scope="task",
            target="core/1",
            passed=True,
            confidence=0.93,
            summary="accents stripped; 6 tests pass",
            at=next(at),
        ),
        ev.TaskStatusChanged(
            session_id=s, task_id="core/1", from_state="in-progress", to_state="complete", tree="t1", at=next(at)
        ),
        ev.CommitRecorded(
            session_id=s,
            sha="9f3c2a1b77",
            message="feat(slugify): Normalize text in core",
            task_id="core/1",
            branch="lopen/slugify",
            at=next(at),
        ),
        ev.InvocationFinished(session_id=s, invocation_id="i1", duration=42.0, at=next(at)),
        ev.InvocationStarted(
            session_id=s,
            invocation_id="i2",
            kind="task",
            model="scripted-opus",
            step=6,
            component="core",
            task="core/2",
            sections_sent=("Overview", "Acceptance Criteria"),
            at=next(at),
        ),
        ev.TaskStatusChanged(session_id=s, task_id="core/2", from_state="pending", to_state="in-progress", at=next(at)),
        ev.TokensUsed(
            session_id=s,
            invocation_id="i2",
            model="scripted-opus",
            input=21_000,
            output=3_400,
            premium=1.0,
            call_id="u2",
            at=next(at),
        ),
        ev.ContextWindowMeasured(session_id=s, invocation_id="i2", used=31_500, limit=128_000, at=next(at)),
    ]


def stub_records(events: list[ev.Event] | None = None) -> list[Recorded]:
    stream_id = module_stream(PROJECT, MODULE)
    events = stub_events() if events is None else events
    return [
        Recorded(n, stream_id, n, msgspec.structs.replace(e, module=MODULE, project=PROJECT))
        for n, e in enumerate(events, 1)
    ]


def stub_state(live: bool = True) -> ScreenState:
    """The stub history folded, plus (``live``) a narrative message and a running tool call."""
    state = ScreenState(PROJECT, MODULE, info=INFO, clock=lambda: 0.0)
    state.apply_all(stub_records())
    if live:
        state.apply_stream(
            stream.AssistantText(
                text="core/1 is done and committed. Next: join the words of normalize() with the separator, "
                "then run the tests."
            )
        )
        state.apply_stream(
            stream.ToolStarted(
                call_id="c9", name="bash", arguments={"command": "python -m pytest -q tests/test_core.py"}
            )
        )
    return state


STUB_DIFF = [
    DiffLine("-", 1, None, "def slugify(text):"),
    DiffLine("-", 2, None, "    return text.lower()"),
    DiffLine("+", None, 1, 'def slugify(text, sep="-"):'),
    DiffLine("+", None, 2, "    words = normalize(text).split()"),
    DiffLine("+", None, 3, "    return sep.join(words)"),
]

STUB_APPROVAL = ApprovalRequest(MODULE, SPEC, ("warning: Notes: section missing; expected constraints",))
