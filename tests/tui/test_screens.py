"""Every screen, key and dialog of the TUI, driven with Textual's pilot against a real SQLite store
and a scripted run (tests/tui/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, DataTable, Markdown, Static

from events import catalogue as ev
from events.errors import StoreWriteError
from events.store import EventStore
from lopen.copilot import results as stream
from lopen.tui import stub
from lopen.tui.app import LopenApp
from lopen.tui.contract import RunOutcome
from lopen.tui.conversation import Conversation
from lopen.tui.dialogs import ApprovalDialog, ConfirmDialog, ErrorDialog, KeysDialog, ResumeDialog, ViewerDialog
from lopen.tui.options import TuiOptions
from lopen.tui.screens.conversation import ConversationScreen
from lopen.tui.screens.gallery import GalleryScreen, dialogs
from lopen.tui.screens.landing import LandingScreen
from lopen.tui.screens.main import MainScreen
from lopen.tui.screens.picker import ModuleRow, Pick, PickerScreen
from lopen.tui.widgets.activity import ActivityPane
from lopen.tui.widgets.plan_tree import PlanTree
from lopen.tui.widgets.prompt import PromptArea
from lopen.tui.widgets.spec_gaps import SpecGaps
from lopen.tui.widgets.tool_call import ToolCallView
from lopen.tui.widgets.topbar import TopBar

from .conftest import (
    APPROVAL,
    MODULE,
    OPTIONS,
    PROJECT,
    SESSION,
    Starter,
    Step,
    finished,
    plan_events,
    settle,
    stream_id,
    tool_deltas,
)

EDIT = {"path": "/w/slugify/core.py", "old_str": "a\nb\n", "new_str": "a\nB\n"}


def history(store: EventStore) -> list[ev.Event]:
    return [rec.event for rec in store.read_stream(stream_id())]


def blocking_script() -> list[Step]:
    """Plan, one tool call, then wait for the test (a run busy in an invocation)."""
    return [
        Step("events", plan_events()),
        Step("invocation", {"invocation_id": "i1", "kind": "task", "task": "core/1", "model": "scripted-opus"}),
        *tool_deltas("c1", "edit", EDIT, "edited"),
        Step("wait", "busy"),
        Step("invocation", {"invocation_id": "i2", "kind": "task", "task": "core/2"}),
    ]


async def test_a_run_shows_its_tree_and_tool_calls_and_ctrl_p_pauses_it(store: EventStore) -> None:
    starter = Starter(store, blocking_script())
    app = LopenApp(OPTIONS).for_run(starter)
    async with app.run_test(size=(120, 40)) as pilot:
        # the deltas come at once, the events with the next read of the store: wait for both
        def tasks() -> list[str]:
            trees = app.screen.query(PlanTree)
            roots = trees.first().root.children if trees else []
            return [str(n.label) for n in roots[0].children] if roots else []

        await settle(pilot, lambda: bool(app.screen.query(ToolCallView)) and len(tasks()) == 2)
        assert isinstance(app.screen, MainScreen)
        (call,) = app.screen.query(ToolCallView)
        assert (call.entry.tool, call.entry.status) == ("edit", "ok")
        assert tasks() == ["○ Normalize text", "○ Join words"]
        assert app.screen.query_one(TopBar).data.run_state == "running"

        await pilot.press("ctrl+p")
        pause = [e for e in history(store) if isinstance(e, ev.PauseRequested)]
        assert [(p.requested_by, p.session_id) for p in pause] == [("tui:tester", SESSION)]
        await settle(pilot, lambda: app.screen.query_one(TopBar).data.pause_requested == "tui:tester")

        starter.runs[0].gate("busy").set()  # the invocation ends; the run meets the recorded pause
        await finished(pilot)
        assert isinstance(history(store)[-1], ev.SessionPaused)
        assert app.outcome == RunOutcome(2, SESSION, "paused")
        await settle(pilot, lambda: app.screen.query_one(TopBar).data.run_state == "paused")  # the next frame


async def test_r_resumes_a_paused_run_and_ctrl_c_stops_one_cleanly(store: EventStore) -> None:
    first = [Step("events", plan_events()), Step("events", [ev.SessionPaused(session_id=SESSION)])]
    second = [Step("events", [ev.SessionResumed(session_id=SESSION)]), Step("wait", "forever")]
    starter = Starter(store, first, second)
    app = LopenApp(OPTIONS).for_run(starter)
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot)
        assert not app.running
        await pilot.press("r")  # the prompt has the focus: a letter is text, never a hotkey
        assert len(starter.calls) == 1 and app.screen.query_one(PromptArea).text == "r"
        await pilot.press("ctrl+r")
        assert len(starter.calls) == 2 and starter.calls[1].resume == SESSION
        await settle(pilot, lambda: app.state is not None and app.state.run_state == "running")

        await pilot.press("ctrl+c")  # the run's stop(): it ends its step and pauses; the app leaves
        assert starter.runs[1].stopped.is_set()
        await finished(pilot)
    assert app.return_value == 2
    assert isinstance(history(store)[-1], ev.SessionPaused)


async def test_enter_queues_a_message_and_alt_enter_makes_a_new_line(store: EventStore) -> None:
    starter = Starter(store, blocking_script())
    app = LopenApp(OPTIONS).for_run(starter)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: app.state is not None and app.state.session_id == SESSION)
        prompt = app.screen.query_one(PromptArea)
        assert app.focused is prompt  # the run screen opens with the prompt focused
        await pilot.press("u", "s", "e", "alt+enter", "n", "f", "k", "d")
        assert prompt.text == "use\nnfkd"
        await pilot.press("enter")
        sentence = "Please keep functions under 30 lines, c q r ?"  # r resume, 3 a resource, c, q, ? …
        await pilot.press(*(" " if ch == " " else ch for ch in sentence.replace(",", "")))
        assert prompt.text == sentence.replace(",", "") and isinstance(app.screen, MainScreen)
        await pilot.press("enter")
        queued = [e for e in history(store) if isinstance(e, ev.UserMessageQueued)]
        assert [(q.text, q.session_id) for q in queued] == [
            ("use\nnfkd", SESSION),
            (sentence.replace(",", ""), SESSION),
        ]
        assert len(starter.calls) == 1 and not app.screen.has_class("-no-context")  # c toggled nothing
        assert prompt.text == ""
        await settle(pilot, lambda: any(e.kind == "user" for e in app.state.entries()))
        starter.runs[0].stop()
        await finished(pilot)


@pytest.mark.parametrize(
    ("command", "expect"),
    [
        ("/help", KeysDialog),
        ("/budget", ViewerDialog),
        ("/replay", ViewerDialog),
        ("/model", ViewerDialog),
    ],
)
async def test_slash_commands_open_their_views(store: EventStore, command: str, expect: type) -> None:
    store.append(stream_id(), plan_events())
    app = LopenApp(OPTIONS).for_run(Starter(store, []))
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot)
        app.screen.query_one(PromptArea).focus()
        await pilot.press(*command, "enter")
        await pilot.pause()
        assert isinstance(app.screen, expect)
        if command == "/replay":
            text = str(app.screen.query_one(Static).content)
            assert "TasksRecorded" in text and "SessionStarted" in text


async def test_slash_pause_model_and_unknown_commands(store: EventStore) -> None:
    """``/pause`` follows the one rule of ``lopen.app.commands.pause`` (the MCP tool's too): only a
    running session can be asked to pause — this run has ended, so it is refused and nothing is
    recorded (the TUI used to record a pause for any session)."""
    app = LopenApp(OPTIONS).for_run(Starter(store, [Step("events", plan_events())]))
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot)
        prompt = app.screen.query_one(PromptArea)
        prompt.focus()
        for line in ("/pause", "/model gpt-5", "/frobnicate"):
            prompt.text = line
            await pilot.press("enter")
        await pilot.pause()
        recorded = history(store)
        assert not any(isinstance(e, ev.PauseRequested) for e in recorded)
        assert any("no running session to pause" in str(n.message) for n in app._notifications)
        (control,) = [e for e in recorded if isinstance(e, ev.ControlRequested)]
        assert (control.action, control.detail, control.caller) == ("model", "gpt-5", "tui:tester")
        assert any("unknown command /frobnicate" in str(n.message) for n in app._notifications)


async def test_the_run_asks_and_the_dialog_answers(store: EventStore) -> None:
    script = [Step("ask", "Token budget at 91 %. Continue?"), Step("ask", "Task failed 3 times. Continue?")]
    starter = Starter(store, script)
    app = LopenApp(OPTIONS).for_run(starter)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert "91 %" in str(app.screen.query_one(".dialog-body", Static).content)
        await pilot.press("y")
        await settle(pilot, lambda: isinstance(app.screen, ConfirmDialog) and "3 times" in app.screen.question)
        await pilot.press("escape")
        await finished(pilot)
        assert starter.runs[0].answers == [True, False]


async def test_the_approval_gate_shows_the_spec_and_approves(store: EventStore) -> None:
    starter = Starter(store, [Step("approve", APPROVAL), Step("approve", APPROVAL)])
    app = LopenApp(OPTIONS).for_run(starter)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        assert "Notes missing" in str(app.screen.query_one("#gaps", Static).content)
        assert app.screen.query_one("#spec", Markdown).source.startswith("# Slugify Specification")
        await pilot.click("#approve")
        await settle(pilot, lambda: isinstance(app.screen, ApprovalDialog) and len(starter.runs[0].answers) == 1)
        await pilot.press("escape")
        await finished(pilot)
        assert starter.runs[0].answers == [True, False]


async def test_a_critical_error_shows_what_why_and_fix(store: EventStore) -> None:
    error = StoreWriteError("cannot append to the event store", "disk full", "free some space")
    app = LopenApp(OPTIONS).for_run(Starter(store, [Step("raise", error)]))
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot)
        assert isinstance(app.screen, ErrorDialog)
        text = str(app.screen.query_one(".dialog-body", Static).content)
        assert "cannot append" in text and "why: disk full" in text and "fix: free some space" in text
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_keys_resources_focus_and_expanding_a_tool_call(store: EventStore) -> None:
    starter = Starter(store, [Step("events", plan_events()), *tool_deltas("c1", "edit", EDIT)])
    app = LopenApp(OPTIONS, root=None).for_run(starter)
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot)
        assert isinstance(app.focused, PromptArea)
        await pilot.press("question_mark")  # in an empty prompt: the keys
        assert isinstance(app.screen, KeysDialog)
        await pilot.press("escape")
        await pilot.press("alt+1")
        assert isinstance(app.screen, ViewerDialog) and app.screen.title_text == "1 Plan"
        assert "core/1" in app.screen.text
        await pilot.press("escape")
        await pilot.press("f1")
        assert isinstance(app.screen, KeysDialog)
        await pilot.press("escape")

        await pilot.press("escape")  # out of the prompt: plain keys act
        assert isinstance(app.focused, ActivityPane)
        await pilot.press("1")
        assert isinstance(app.screen, ViewerDialog) and app.screen.title_text == "1 Plan"
        await pilot.press("escape")
        await pilot.press("tab")
        assert isinstance(app.focused, PlanTree)
        await pilot.press("tab")
        assert isinstance(app.focused, PromptArea)
        await pilot.press("escape")  # out of the prompt

        pane = app.screen.query_one(ActivityPane)
        pane.focus()
        await pilot.press("up")
        (call,) = app.screen.query(ToolCallView)
        assert pane.selected is call and call.has_class("-selected") and not call.expanded
        await pilot.press("enter")
        assert call.expanded and "+ B" in str(call.content)
        await pilot.press("enter")
        assert not call.expanded


async def test_the_landing_screen_goes_on_with_any_key(store: EventStore) -> None:
    options = TuiOptions(landing=True, animate=False)
    app = LopenApp(options).for_run(Starter(store, []))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, LandingScreen)
        assert "Lopen" in str(app.screen.query_one("#landing", Static).content)
        await pilot.press("space")
        assert isinstance(app.screen, MainScreen)


async def test_watching_is_read_only(store: EventStore) -> None:
    store.append(stream_id(), plan_events())
    app = LopenApp(TuiOptions(landing=False, animate=False, read_only=True)).for_watch(
        store, PROJECT, MODULE, SESSION, poll=False
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        before = len(history(store))
        offered = {b.binding.action for b in app.screen.active_bindings.values() if b.enabled and b.binding.show}
        assert not offered & {"pause", "app.resume"}  # a read-only screen offers no steering keys
        await pilot.press("ctrl+p", "r", "ctrl+r")
        assert len(history(store)) == before and app.running is False
        assert app.screen.query_one(PromptArea).disabled and isinstance(app.focused, ActivityPane)
        assert app.screen.query_one(TopBar).data.watching


async def test_the_picker_offers_to_resume_an_unfinished_session() -> None:
    rows = [ModuleRow("auth", "complete", "ok"), ModuleRow("slugify", "in progress", "ok", unfinished=SESSION)]
    picks: list[Pick | None] = []
    app = LopenApp(OPTIONS)
    app._first = lambda: app.push_screen(PickerScreen(rows), picks.append)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        assert table.row_count == 2
        await pilot.press("down", "enter")
        assert isinstance(app.screen, ResumeDialog)
        await pilot.press("r")
        await pilot.pause()
    assert picks == [Pick("slugify", resume=SESSION)]


async def test_the_picker_picks_a_module_without_a_session() -> None:
    picks: list[Pick | None] = []
    app = LopenApp(OPTIONS)
    app._first = lambda: app.push_screen(PickerScreen([ModuleRow("auth", "not started", "ok")]), picks.append)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
    assert picks == [Pick("auth")]


async def test_step_one_is_a_conversation_with_live_gaps_and_the_gate() -> None:
    answers: list[str] = []

    def draft(conversation: Conversation) -> RunOutcome:
        answers.append(conversation.ask("Who calls slugify?"))
        conversation.draft("# Slugify Specification\n\n## Overview\n\nSlugs for web apps.\n", "Overview")
        answers.append(str(conversation.approve()))
        return RunOutcome(0, "", "drafted")

    conversation = Conversation(MODULE)
    app = LopenApp(OPTIONS).for_conversation(conversation, draft)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: conversation.waiting)
        await pilot.pause()
        assert isinstance(app.screen, ConversationScreen)
        await pilot.press(*"web apps", "enter")
        await settle(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        assert "Acceptance Criteria" in str(app.screen.query_one("#gaps", Static).content)
        await pilot.press("a")
        await finished(pilot)
        assert answers == ["web apps", "True"]
        gaps = str(app.screen.query_one(SpecGaps).content)
        assert "front matter" in gaps and "Acceptance Criteria" in gaps
        assert [t.role for t in conversation.turns()] == ["model", "person", "draft", "note", "model"]


async def test_the_gallery_shows_every_widget_and_opens_every_dialog() -> None:
    app = LopenApp(OPTIONS).for_screen(GalleryScreen)
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause()
        gallery = app.screen
        assert gallery.query(TopBar) and gallery.query(PlanTree) and gallery.query(ToolCallView)
        for name in dialogs():
            gallery.query_one(f"#open-{name}", Button).press()
            await pilot.pause()
            assert app.screen is not gallery, name
            app.pop_screen()
            await pilot.pause()


async def test_no_color_and_ascii(tmp_path: Path) -> None:
    options = TuiOptions(landing=False, animate=False, color=False, ascii=True)
    with EventStore.open(tmp_path) as store:
        store.append(stream_id(), stub.stub_events()[1:10])
        app = LopenApp(options).for_watch(store, PROJECT, MODULE, poll=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert app.no_color
            tree = app.screen.query_one(PlanTree)
            labels = [str(n.label) for n in tree.root.children[0].children]
            assert labels[0].startswith("> ") and labels[1].startswith("o ")
            top = app.screen.query_one(TopBar).render().plain
            assert "***" in top and "●" not in top and "│" not in top


async def test_the_activity_pane_keeps_the_newest_entry_in_view_until_the_person_scrolls_up(tmp_path: Path) -> None:
    """Entries that grow after they were drawn (a narrower terminal wraps them) keep the newest line in
    view; scrolling up stops the following, End starts it again. CI once drew a running call below
    the pane's bottom edge: the pane had scrolled to the end before the call's line wrapped."""
    with EventStore.open(tmp_path) as store:
        store.append(stream_id(), stub.stub_events())
        app = LopenApp(OPTIONS).for_watch(store, PROJECT, MODULE, poll=False)
        async with app.run_test(size=(100, 24)) as pilot:
            pane = app.screen.query_one(ActivityPane)
            at_end = lambda: pane.max_scroll_y > 0 and pane.scroll_y == pane.max_scroll_y  # noqa: E731
            await settle(pilot, at_end)
            wide, tall = pane.size.width, pane.max_scroll_y
            await pilot.resize_terminal(70, 24)  # the context pane goes, the activity pane narrows
            await settle(pilot, lambda: pane.size.width != wide)
            await pilot.resize_terminal(40, 24)  # every long line wraps: the content grows
            await settle(pilot, lambda: pane.size.width < 40 and pane.max_scroll_y > tall)
            await settle(pilot, at_end)
            newest = list(pane.children)[-1]
            assert newest.region.bottom <= pane.content_region.bottom

            pane.focus()
            await pilot.press("pageup")
            mark = pane.scroll_y
            assert mark < pane.max_scroll_y
            app.feed.on_stream(stream.AssistantText(text="a word while the person reads above"))
            newest_says = lambda text: text in str(list(pane.children)[-1].content)  # noqa: E731
            await settle(pilot, lambda: newest_says("reads above"))
            await pilot.pause()
            assert pane.scroll_y == mark  # the person's place is kept

            await pilot.press("end")
            app.feed.on_stream(stream.ToolStarted(call_id="c9", name="bash", arguments={"command": "pytest -q"}))
            await settle(pilot, lambda: at_end() and newest_says("pytest -q"))
            assert list(pane.children)[-1].region.bottom <= pane.content_region.bottom


async def test_the_current_task_says_every_task_is_complete_once_none_is_left(store: EventStore) -> None:
    store.append(stream_id(), plan_events())
    app = LopenApp(OPTIONS).for_watch(store, PROJECT, MODULE, poll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.screen.query_one("#task", Static)
        await settle(pilot, lambda: "Normalize text" in str(panel.content))
        store.append(
            stream_id(),
            [
                ev.TaskStatusChanged(session_id=SESSION, task_id=task, from_state=before, to_state=after)
                for task in ("core/1", "core/2")
                for before, after in (("pending", "in-progress"), ("in-progress", "complete"))
            ],
        )
        await settle(pilot, lambda: "every task is complete" in str(panel.content))
        assert "plan is being made" not in str(panel.content)
