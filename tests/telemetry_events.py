"""A synthetic session for the telemetry tests, built from the catalogue's own structs.

It has what the span tree must show: a planning invocation with a tool call, a task invocation with
tool calls, a guardrail trip and a refused completion, an oracle invocation under its verify tool
(with a verification command and a verdict), a commit, per-call ``TokensUsed``, and the session's end.
"""

from __future__ import annotations

from pathlib import Path

from events import catalogue as ev
from events.recorded import Recorded, module_stream
from events.store import EventStore

PROJECT = "proj-1"
MODULE = "slugify"
SESSION = "slugify-20261126-1"
T0 = 1_795_000_000.0
PLANNING, TASK, ORACLE = "planning-0000aaaa", "task-0000bbbb", "oracle-0000cccc"

# (invocation, input, output, cache_read, premium) of each model call
CALLS = [
    (PLANNING, 2000, 120, 500, 1.0),
    (PLANNING, 2100, 80, 0, 0.0),
    (TASK, 3000, 300, 0, 1.0),
    (ORACLE, 900, 60, 0, 0.0),
    (TASK, 3500, 40, 200, 0.0),
]


def session_events(session: str = SESSION, t0: float = T0, *, end: bool = True) -> list[ev.Event]:
    """The session's events in order (times ``t0`` + seconds); ``end=False`` leaves it unfinished."""

    def at(seconds: float) -> float:
        return t0 + seconds

    calls = iter(CALLS)

    def tokens(seconds: float, n: int) -> ev.TokensUsed:
        invocation, tokens_in, tokens_out, cache, premium = next(calls)
        model = "scripted-mini" if invocation == ORACLE else "scripted-opus"
        return ev.TokensUsed(
            at=at(seconds),
            session_id=session,
            invocation_id=invocation,
            model=model,
            input=tokens_in,
            output=tokens_out,
            cache_read=cache,
            premium=premium,
            call_id=f"call-{n}",
            cost=tokens_in / 1_000_000 if model == "scripted-opus" else 0.0,  # $1 per million input, say
            priced=model == "scripted-opus",  # the oracle's model is unpriced
        )

    s = session
    events: list[ev.Event] = [
        ev.SessionStarted(at=at(0), session_id=s, lopen_version="0.1.0", models={"planning": "scripted-opus"}),
        ev.StepEntered(at=at(1), session_id=s, phase="planning", step=2, why="plan the module"),
        ev.InvocationStarted(
            at=at(1.5), session_id=s, invocation_id=PLANNING, phase="planning", step=2, kind="planning",
            model="scripted-opus", prompt_size=5000, sections_sent=("Overview", "Dependencies"),
        ),
        ev.ToolCalled(
            at=at(2.0), session_id=s, invocation_id=PLANNING, tool="read_spec",
            arguments={"module": MODULE, "section": "Overview"}, result_summary="# Overview …", duration=0.2,
            call_id="call_p1",
        ),
        tokens(2.5, 1),
        ev.ComponentsRecorded(at=at(3.0), session_id=s, components=(ev.ComponentSpec(name="core"),)),
        ev.TasksRecorded(
            at=at(3.1), session_id=s, component="core", tasks=(ev.TaskSpec(id="core/1", name="Normalize text"),)
        ),
        tokens(3.5, 2),
        ev.InvocationFinished(at=at(4.0), session_id=s, invocation_id=PLANNING, duration=2.5),
        ev.StepEntered(at=at(5.0), session_id=s, phase="building", step=6),
        ev.InvocationStarted(
            at=at(5.5), session_id=s, invocation_id=TASK, phase="building", step=6, kind="task",
            model="scripted-opus", component="core", task="core/1",
        ),
        ev.TaskStatusChanged(
            at=at(5.6), session_id=s, task_id="core/1", from_state="pending", to_state="in-progress",
            invocation_id=TASK,
        ),
        ev.ToolCalled(
            at=at(6.0), session_id=s, invocation_id=TASK, tool="create",
            arguments={"path": "slugify/core.py", "file_text": "def slugify(text): ...\n"}, duration=0.1,
            call_id="call_t1",
        ),
        ev.ToolCalled(
            at=at(7.0), session_id=s, invocation_id=TASK, tool="bash", arguments={"command": "pytest -q"},
            result_summary="1 passed", duration=0.8, exit_code=0, call_id="call_t2",
        ),
        tokens(7.2, 3),
        ev.GuardrailTripped(
            at=at(7.5), session_id=s, category="retry", level="warn",
            detail="scripted-opus: rate_limited, retry 1 by the cli",
        ),
        ev.CompletionRefused(
            at=at(7.7), session_id=s, scope="task", target="core/1", why="no passing verification yet",
            invocation_id=TASK,
        ),
        ev.InvocationStarted(
            at=at(8.2), session_id=s, invocation_id=ORACLE, kind="oracle", model="scripted-mini",
            parent_invocation=TASK, task="core/1",
        ),
        tokens(9.0, 4),
        ev.VerificationEvidenceRecorded(
            at=at(9.5), session_id=s, scope="task", target="core/1", command="pytest -q", exit_code=0,
            duration=0.5, invocation_id=ORACLE,
        ),
        ev.OracleVerdictRecorded(
            at=at(10.0), session_id=s, scope="task", target="core/1", passed=True, confidence=0.9,
            summary="the tests pass; token sk-abcdefghijklmnopqrstu was seen", model="scripted-mini",
            findings=(ev.Finding(severity="low", description="naming"),), invocation_id=ORACLE,
            parent_invocation=TASK,
        ),
        ev.InvocationFinished(at=at(10.5), session_id=s, invocation_id=ORACLE, duration=2.3),
        ev.ToolCalled(
            at=at(11.0), session_id=s, invocation_id=TASK, tool="verify_task_completion",
            arguments={"task": "core/1"}, result_summary='{"passed": true}', duration=3.0, call_id="call_t3",
        ),
        ev.TaskStatusChanged(
            at=at(11.5), session_id=s, task_id="core/1", from_state="in-progress", to_state="complete",
            invocation_id=TASK,
        ),
        ev.CommitRecorded(
            at=at(12.0), session_id=s, sha="a" * 40, message="feat(slugify): Normalize text in core",
            task_id="core/1", tree="b" * 40, branch="lopen/slugify", added=12, removed=3, files=2,
        ),
        tokens(12.5, 5),
        ev.InvocationFinished(at=at(13.0), session_id=s, invocation_id=TASK, duration=7.5),
    ]  # fmt: skip
    if end:
        events.append(ev.SessionCompleted(at=at(14.0), session_id=s, reason="module complete"))
    return events


def as_recorded(
    events: list[ev.Event], project: str = PROJECT, module: str = MODULE, first_seq: int = 1
) -> list[Recorded]:
    """The events as the store would hand them out (project and module filled, seq and version set)."""
    stream = module_stream(project, module)
    import msgspec

    return [
        Recorded(first_seq + i, stream, i + 1, msgspec.structs.replace(e, project=project, module=module))
        for i, e in enumerate(events)
    ]


def fill_store(root: Path, events: list[ev.Event], project: str = PROJECT, module: str = MODULE) -> None:
    """Append ``events`` to the module's history in the SQLite store under ``root``, one by one."""
    with EventStore.open(root) as store:
        stream = module_stream(project, module)
        for event in events:
            store.append(stream, [event])
