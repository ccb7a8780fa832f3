"""Snapshots of the TUI (pytest-textual-snapshot): the run screen at 80×24 and 160×48, in ASCII and
monochrome, step 1's conversation, the picker and a dialog. Stub data with fixed times: a changed
snapshot is a changed screen. Look at the difference with `pytest --snapshot-report`, accept it with
`pytest tests/tui/test_snapshots.py --snapshot-update`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Markdown

from events.recorded import module_stream
from events.store import EventStore
from lopen.copilot import results as stream
from lopen.tui import stub
from lopen.tui.app import LopenApp
from lopen.tui.contract import RunOutcome
from lopen.tui.conversation import Conversation
from lopen.tui.dialogs import ConfirmDialog
from lopen.tui.options import TuiOptions
from lopen.tui.screens.gallery import STUB_ROWS
from lopen.tui.screens.picker import PickerScreen
from lopen.tui.widgets import markdown_view
from lopen.tui.widgets.activity import ActivityPane

from .conftest import settle

OPTIONS = TuiOptions(landing=False, animate=False, who="tui:tester")


@pytest.fixture
def stub_store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path) as store:
        store.append(module_stream(stub.PROJECT, stub.MODULE), stub.stub_events())
        yield store


def run_screen(store: EventStore, options: TuiOptions = OPTIONS) -> LopenApp:
    """The run screen on the stub history, through the real store, bus and feed (as during a run)."""
    app = LopenApp(options, stub.INFO)
    app._first = lambda: app.bind_module(store, stub.PROJECT, stub.MODULE)
    return app


async def live(pilot) -> None:
    app = pilot.app
    await pilot.pause()
    app.feed.on_stream(stream.AssistantText(text="core/1 is committed. Next: join the words with the separator."))
    app.feed.on_stream(stream.ToolStarted(call_id="c9", name="bash", arguments={"command": "python -m pytest -q"}))
    pane = app.screen.query_one(ActivityPane)

    def drawn() -> bool:  # the running call is laid out and the pane is at its bottom
        calls = pane.tool_calls()
        return bool(calls and calls[-1].entry.tool == "bash" and calls[-1].region.height) and (
            pane.scroll_y == pane.max_scroll_y
        )

    await settle(pilot, drawn)
    await pilot.pause()


def test_run_screen_80x24(snap_compare, stub_store: EventStore) -> None:
    assert snap_compare(run_screen(stub_store), terminal_size=(80, 24), run_before=live)


def test_run_screen_160x48(snap_compare, stub_store: EventStore) -> None:
    assert snap_compare(run_screen(stub_store), terminal_size=(160, 48), run_before=live)


def test_run_screen_ascii_monochrome_80x24(snap_compare, stub_store: EventStore) -> None:
    options = TuiOptions(landing=False, animate=False, color=False, ascii=True)
    assert snap_compare(run_screen(stub_store, options), terminal_size=(80, 24), run_before=live)


def test_run_screen_with_the_budget_dialog_160x48(snap_compare, stub_store: EventStore) -> None:
    async def ask(pilot) -> None:
        await live(pilot)
        pilot.app.push_screen(ConfirmDialog("Token budget at 91 % (364,000 of 400,000). Continue?", "Budget"))
        await pilot.pause()

    assert snap_compare(run_screen(stub_store), terminal_size=(160, 48), run_before=ask)


def test_picker_80x24(snap_compare) -> None:
    app = LopenApp(OPTIONS).for_screen(lambda: PickerScreen(STUB_ROWS))
    assert snap_compare(app, terminal_size=(80, 24))


def test_conversation_160x48(snap_compare) -> None:
    conversation = Conversation(stub.MODULE)
    app = LopenApp(OPTIONS)

    async def talk(pilot) -> None:
        await pilot.pause()
        conversation.say("Who calls slugify, and with what kind of text?")
        conversation._add("person", "Web apps, with titles in any language.")
        conversation.draft(stub.SPEC, "Overview")
        await pilot.pause()
        await pilot.app.screen.query_one("#draft", Markdown).update(markdown_view(stub.SPEC))  # rendered in full
        await pilot.pause()

    model_thinks = threading.Event()  # the drafting run stays busy while the screen is photographed
    app.for_conversation(conversation, lambda c: RunOutcome(0, "", str(model_thinks.wait())))
    assert snap_compare(app, terminal_size=(160, 48), run_before=talk)
