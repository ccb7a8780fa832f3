"""The screen's data is the one fold plus the followed session's activity (lopen.tui.state)."""

from __future__ import annotations

import msgspec

from events import catalogue as ev
from events.fold import ModuleState
from events.recorded import Recorded
from events.store import EventStore
from lopen.copilot import results as stream
from lopen.tui.state import ScreenState, diff_of, short_args

from .conftest import MODULE, PROJECT, SESSION, plan_events, stream_id


def records(events: list[ev.Event], start: int = 1) -> list[Recorded]:
    return [
        Recorded(n, stream_id(), n, msgspec.structs.replace(e, project=PROJECT, module=MODULE))
        for n, e in enumerate(events, start)
    ]


def test_the_plan_is_the_one_fold() -> None:
    events = [
        *plan_events(),
        ev.TaskStatusChanged(session_id=SESSION, task_id="core/1", from_state="pending", to_state="in-progress"),
    ]
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(records(events))
    fold = ModuleState(project=PROJECT, module=MODULE)
    for rec in records(events):
        fold.apply(rec.event, rec.seq)
    fold.version = len(events)
    assert state.fold == fold
    assert state.current_task().id == "core/1"
    assert (state.step, state.session_id, state.run_state) == (6, SESSION, "running")


def test_a_duplicate_event_is_folded_once() -> None:
    state = ScreenState(PROJECT, MODULE)
    recs = records(plan_events())
    state.apply_all(recs)
    assert not state.apply(recs[2])
    assert len([e for e in state.entries() if e.title == "1 component recorded"]) == 1


def test_token_totals_match_the_tokens_projection(store: EventStore) -> None:
    events = [
        *plan_events(),
        ev.InvocationStarted(session_id=SESSION, invocation_id="i1", kind="task"),
        ev.TokensUsed(session_id=SESSION, invocation_id="i1", input=100, output=20, premium=1.0, call_id="a"),
        ev.TokensUsed(session_id=SESSION, invocation_id="i1", input=50, output=5, premium=0.5, call_id="b"),
        ev.ContextWindowMeasured(session_id=SESSION, invocation_id="i1", used=900, limit=1000),
    ]
    store.projections.for_project(PROJECT)
    store.append(stream_id(), events)
    store.projections.catch_up()
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(store.read_stream(stream_id()))
    assert state.tokens("session") == store.projections.tokens.session(SESSION, PROJECT)
    assert state.tokens("module") == store.projections.tokens.module(MODULE, PROJECT)
    assert (state.context_used, state.context_limit) == (900, 1000)


def test_a_streamed_tool_call_and_its_recorded_event_are_one_line() -> None:
    arguments = {"command": "pytest -q"}
    record = stream.ToolCallRecord("c1", "bash", arguments, "3 passed", True, 0.7)
    recorded = ev.ToolCalled(session_id=SESSION, tool="bash", arguments=arguments, duration=0.7)
    for order in ("finished-first", "recorded-first"):
        state = ScreenState(PROJECT, MODULE)
        state.apply_all(records(plan_events()))
        state.apply_stream(stream.ToolStarted(call_id="c1", name="bash", arguments=arguments))
        (line,) = [e for e in state.entries() if e.kind == "tool"]
        assert line.status == "running" and state.live_tools() == [line]
        if order == "finished-first":
            state.apply_stream(stream.ToolFinished(record=record))
            state.apply(records([recorded], start=7)[0])
        else:
            state.apply(records([recorded], start=7)[0])
            state.apply_stream(stream.ToolFinished(record=record))
        assert [e.status for e in state.entries() if e.kind == "tool"] == ["ok"], order
        assert line.duration == 0.7 and line.args == "pytest -q"


def test_a_tool_call_recorded_before_its_deltas_arrive_is_one_line() -> None:
    """The run's deltas come over its pipe and its events from the store: an event may come first."""
    arguments = {"command": "pytest -q"}
    record = stream.ToolCallRecord("c1", "bash", arguments, "3 passed", True, 0.7)
    recorded = ev.ToolCalled(session_id=SESSION, tool="bash", call_id="c1", arguments=arguments, duration=0.7)
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(records([*plan_events(), recorded]))
    state.apply_stream(stream.ToolStarted(call_id="c1", name="bash", arguments=arguments))
    state.apply_stream(stream.ToolFinished(record=record))
    assert [(e.status, e.args) for e in state.entries() if e.kind == "tool"] == [("ok", "pytest -q")]
    assert state.live_tools() == []


def test_a_recorded_tool_call_alone_makes_a_line_and_a_failure_is_marked() -> None:
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(
        records(
            [
                *plan_events(),
                ev.ToolCalled(session_id=SESSION, tool="bash", arguments={"command": "false"}, success=False),
            ]
        )
    )
    (line,) = [e for e in state.entries() if e.kind == "tool"]
    assert (line.status, line.level) == ("failed", "error")


def test_an_invocation_that_ends_closes_its_live_calls() -> None:
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(
        records(
            [*plan_events(), ev.InvocationStarted(session_id=SESSION, invocation_id="i1", kind="task", task="core/1")]
        )
    )
    state.apply_stream(stream.ToolStarted(call_id="c1", name="bash", arguments={}))
    state.apply(records([ev.InvocationFinished(session_id=SESSION, invocation_id="i1", outcome="error")], 8)[0])
    assert [e.status for e in state.entries() if e.kind == "tool"] == ["failed"]
    assert any(e.kind == "error" for e in state.entries())


def test_it_follows_the_newest_session_unless_pinned() -> None:
    second = "slugify-20260101-2"
    history = records([*plan_events(), ev.SessionPaused(session_id=SESSION), ev.SessionStarted(session_id=second)])
    following = ScreenState(PROJECT, MODULE)
    following.apply_all(history)
    assert following.session_id == second and following.run_state == "running"
    pinned = ScreenState(PROJECT, MODULE, session_id=SESSION)
    pinned.apply_all(history)
    assert pinned.session_id == SESSION and pinned.run_state == "paused"
    assert any(e.title.startswith("Step 6/7") for e in pinned.entries())


def test_verdicts_keep_their_findings_and_messages_their_text() -> None:
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(
        records(
            [
                *plan_events(),
                ev.OracleVerdictRecorded(
                    session_id=SESSION,
                    scope="task",
                    target="core/1",
                    passed=False,
                    confidence=0.8,
                    summary="accents stay",
                    findings=(ev.Finding(severity="major", description="é stays"),),
                ),
                ev.UserMessageQueued(session_id=SESSION, message_id="m1", text="use NFKD"),
            ]
        )
    )
    verdict = next(e for e in state.entries() if e.kind == "verdict")
    assert (verdict.status, verdict.findings, verdict.result) == ("failed", ["major: é stays"], "80%")
    assert next(e for e in state.entries() if e.kind == "user").detail == "use NFKD"


def test_the_research_notes_are_an_entry_of_the_feed_at_the_change_to_planning() -> None:
    state = ScreenState(PROJECT, MODULE)
    notes = (
        ev.ResearchNote(topic="unicode-nfkd", title="Unicode NFKD", summary="Split, then drop the marks."),
        ev.ResearchNote(topic="argparse", title="argparse exits 2"),
    )
    state.apply_all(
        records(
            [
                *plan_events(),
                ev.ResearchCompleted(
                    session_id=SESSION, invocation_id="research-1", topics=("a", "b", "c"), notes=notes
                ),
            ]
        )
    )
    entry = state.entries()[-1]
    assert (entry.kind, entry.level) == ("notice", "ok")
    assert entry.title == "research on 3 topics: 2 notes for planning and the tasks"
    assert entry.detail == "unicode-nfkd: Unicode NFKD — Split, then drop the marks.\nargparse: argparse exits 2"


def test_diffs_have_line_numbers() -> None:
    created = diff_of("create", {"path": "a.py", "file_text": "one\ntwo\n"})
    assert [(d.sign, d.new, d.text) for d in created] == [("+", 1, "one"), ("+", 2, "two")]
    edited = diff_of("edit", {"path": "a.py", "old_str": "a\nb\nc", "new_str": "a\nB\nc"})
    assert [(d.sign, d.old, d.new, d.text) for d in edited] == [
        (" ", 1, 1, "a"),
        ("-", 2, None, "b"),
        ("+", None, 2, "B"),
        (" ", 3, 3, "c"),
    ]
    assert diff_of("bash", {"command": "ls"}) == []


def test_short_args_pick_what_matters() -> None:
    assert short_args("bash", {"command": "pytest   -q\n tests"}) == "pytest -q tests"
    assert short_args("view", {"path": "/w/a.py", "view_range": [1, 3]}) == "/w/a.py"
    assert short_args("read_spec", {"module": "m", "section": "Overview"}) == "module=m section=Overview"
    assert short_args("bash", {"command": "x" * 100}, width=10) == "x" * 9 + "…"


def test_tool_lines_show_paths_relative_to_the_worktree_and_keep_a_long_paths_end() -> None:
    """Issue 23: the TUI's tool lines showed absolute worktree paths, cut in the middle of the name."""
    tree = "/tmp/lopen-demo-x1/.lopen/worktrees/slugify"
    lane = tree + ".components/core@vm-42"
    events = [
        *plan_events(),
        ev.BranchEnsured(session_id=SESSION, branch="lopen/slugify", worktree=tree),
        ev.BranchEnsured(session_id=SESSION, branch="lopen/slugify--core", worktree=lane, component="core"),
        ev.ToolCalled(session_id=SESSION, tool="view", arguments={"path": f"{tree}/slugify/normalize.py"}, call_id="1"),
        ev.ToolCalled(session_id=SESSION, tool="create", arguments={"path": f"{lane}/slugify/core.py"}, call_id="2"),
        ev.ToolCalled(
            session_id=SESSION, tool="bash", arguments={"command": f"cd {tree} && python -m pytest -q"}, call_id="3"
        ),
        ev.ToolCalled(session_id=SESSION, tool="view", arguments={"path": "/etc/hosts"}, call_id="4"),
    ]
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(records(events))
    shown = [e.args for e in state.entries() if e.kind == "tool"]
    assert shown == ["slugify/normalize.py", "slugify/core.py", "cd . && python -m pytest -q", "/etc/hosts"]
    deep = "/" + "/".join(["folder"] * 20) + "/the_file_that_matters.py"
    assert short_args("view", {"path": deep}, width=30).endswith("the_file_that_matters.py")
    assert (
        short_args("view", {"path": deep}, width=30).startswith("…")
        and len(short_args("view", {"path": deep}, width=30)) == 30
    )


def test_what_the_model_said_is_shown_from_the_store_once_whichever_copy_comes_first() -> None:
    """Issue 22: `lopen watch` (another process) never showed the model's narration, only the run's own
    TUI did, from the stream. Now the store's ModelSaid is drawn, and the live copy of a message and its
    recorded copy make one entry, in either order."""
    from lopen.copilot import results as stream

    watched = ScreenState(PROJECT, MODULE)
    said = [
        ev.ModelSaid(session_id=SESSION, text="I will write normalize() first."),
        ev.ModelSaid(session_id=SESSION, text=" "),
    ]
    watched.apply_all(records([*plan_events(), *said]))
    assert [e.detail for e in watched.entries() if e.kind == "narrative"] == ["I will write normalize() first."]

    own = ScreenState(PROJECT, MODULE)
    own.apply_all(records(plan_events()))
    own.apply_stream(stream.AssistantText(text="Live first."))  # the pipe before the store
    own.apply_all(records([ev.ModelSaid(session_id=SESSION, text="Live first.")], start=100))
    own.apply_all(records([ev.ModelSaid(session_id=SESSION, text="Stored first.")], start=101))  # the store first
    own.apply_stream(stream.AssistantText(text="Stored first."))
    own.apply_stream(stream.AssistantText(text="A sub-agent's.", agent_id="a1"))
    narrative = [e.detail for e in own.entries() if e.kind == "narrative"]
    assert narrative == ["Live first.", "Stored first.", "A sub-agent's."]


def test_the_models_reasoning_is_shown_apart_from_what_it_said() -> None:
    """What the provider gives of the model's thinking (``ModelReasoned``) was recorded but never drawn:
    it is now a narrative entry titled ``reasoning`` (a sub-agent's, like its words, only in the store)."""
    state = ScreenState(PROJECT, MODULE)
    state.apply_all(
        records(
            [
                *plan_events(),
                ev.ModelReasoned(session_id=SESSION, text="The tests import normalize; write it first."),
                ev.ModelReasoned(session_id=SESSION, text="A helper's plan.", agent_id="a1"),
                ev.ModelSaid(session_id=SESSION, text="I will write normalize() first."),
            ]
        )
    )
    narrative = [(e.title, e.detail) for e in state.entries() if e.kind == "narrative"]
    assert narrative == [
        ("reasoning", "The tests import normalize; write it first."),
        ("", "I will write normalize() first."),
    ]
