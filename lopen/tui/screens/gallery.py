"""``lopen tui gallery``: every widget with stub data, and a button for every dialog and screen (U3).

The gallery is how a change to a widget is looked at, and what the snapshot tests photograph; the
stub data (``lopen.tui.stub``) is a real history folded by the real fold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Static

from lopen.tui import stub
from lopen.tui.conversation import Turn
from lopen.tui.dialogs import ApprovalDialog, ConfirmDialog, ErrorDialog, KeysDialog, ResumeDialog, ViewerDialog
from lopen.tui.resources import resources_of
from lopen.tui.screens.landing import LandingScreen
from lopen.tui.screens.picker import ModuleRow, PickerScreen
from lopen.tui.state import Entry
from lopen.tui.widgets.activity import view_for
from lopen.tui.widgets.conversation_log import ConversationLog
from lopen.tui.widgets.diff_view import DiffView
from lopen.tui.widgets.gauge import Gauge
from lopen.tui.widgets.plan_tree import PlanTree
from lopen.tui.widgets.prompt import PromptArea
from lopen.tui.widgets.resource_list import ResourceList
from lopen.tui.widgets.spec_gaps import SpecGaps
from lopen.tui.widgets.step_dots import StepDots
from lopen.tui.widgets.task_panel import TaskPanel
from lopen.tui.widgets.tool_call import ToolCallView
from lopen.tui.widgets.topbar import TopBar, TopBarData

STUB_ROWS = [
    ModuleRow("auth", "complete", "ok", tasks="7/7 tasks"),
    ModuleRow("slugify", "in progress", "ok, 1 warning", unfinished=stub.SESSION, tasks="1/3 tasks"),
    ModuleRow("billing", "not started", "2 errors (Overview, Acceptance Criteria)"),
]


def dialogs() -> dict[str, Callable[[], Screen[Any]]]:
    """Every dialog and secondary screen, by the name of its button."""
    return {
        "confirm": lambda: ConfirmDialog("Token budget at 91 % (364,000 of 400,000). Continue this run?", "Budget"),
        "approval": lambda: ApprovalDialog(stub.STUB_APPROVAL),
        "error": lambda: ErrorDialog(
            "Copilot rejected the credentials (401)",
            "GH_TOKEN has expired",
            "create a token with the Copilot Requests permission and export GH_TOKEN",
        ),
        "resume": lambda: ResumeDialog("slugify", stub.SESSION, "1/3 tasks"),
        "keys": KeysDialog,
        "viewer": lambda: ViewerDialog("1 Plan", "# Plan: slugify\n\n- [x] core/1 Normalize text\n"),
        "landing": lambda: LandingScreen("slugify"),
        "picker": lambda: PickerScreen(STUB_ROWS),
    }


class GalleryScreen(Screen[None]):
    BINDINGS = [Binding("q", "app.quit", "Quit"), Binding("escape", "app.quit", "Quit", show=False)]

    def compose(self) -> ComposeResult:
        state = stub.stub_state()
        data = TopBarData.of(state)
        with VerticalScroll(id="gallery"):
            yield Static("Every widget of Lopen's TUI with stub data; the buttons open the dialogs.", classes="caption")
            with Horizontal(id="gallery-buttons"):
                for name in dialogs():
                    yield Button(name, id=f"open-{name}")
            yield self._caption("TopBar (U1)")
            bar = TopBar(classes="sample")
            bar.data = data
            yield bar
            yield self._caption("StepDots at steps 1, 4, 7")
            yield StepDots(1, "Requirements")
            yield StepDots(4, "Planning")
            yield StepDots(7, "Building")
            yield self._caption("Gauge: fine, warning (≥ 80 %), alarm (≥ 90 %), unlimited")
            yield Gauge("ctx", 30_000, 128_000)
            yield Gauge("tok", 330_000, 400_000)
            yield Gauge("premium", 46, 50)
            yield Gauge("tok", 45_000, 0)
            yield self._caption("Activity entries: notice, narrative, tool calls, verdicts, error, message")
            for entry in state.entries():
                if entry.kind != "notice" or entry.level != "info":
                    yield view_for(entry)
            yield self._caption("A tool call expanded: its diff, with line numbers")
            edit = next(e for e in state.entries() if e.tool == "edit")
            yield _expanded(edit)
            yield self._caption("DiffView")
            yield DiffView(stub.STUB_DIFF, classes="sample")
            yield self._caption("TaskPanel: the current task and its acceptance items")
            panel = TaskPanel(classes="sample")
            yield panel
            yield self._caption("PlanTree: module → components → tasks → subtasks")
            tree = PlanTree(classes="sample")
            yield tree
            yield self._caption("ResourceList: 1–9 open a viewer")
            resources = ResourceList(classes="sample")
            yield resources
            yield self._caption("SpecGaps: the spec check, live in step 1")
            gaps = SpecGaps(classes="sample")
            yield gaps
            yield self._caption("ConversationLog: step 1's turns")
            log = ConversationLog(classes="sample")
            yield log
            yield self._caption("PromptArea")
            yield PromptArea()
        yield Footer()
        self._fill = (panel, tree, resources, gaps, log, state)

    def on_mount(self) -> None:
        panel, tree, resources, gaps, log, state = self._fill
        panel.show(state.current_task())
        tree.show(state.fold)
        resources.show(resources_of(state, None))
        from lopen.app.queries import draft_gaps

        gaps.show(draft_gaps(stub.SPEC, "slugify"))
        log.sync(
            [
                Turn("model", "Who calls slugify, and with what kind of text?", 1),
                Turn("person", "Web apps, with titles in any language.", 2),
                Turn("draft", "drafted Overview", 3),
            ]
        )

    def _caption(self, text: str) -> Static:
        return Static(text, classes="caption")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        name = (event.button.id or "").removeprefix("open-")
        make = dialogs().get(name)
        if make is not None:
            self.app.push_screen(make())


def _expanded(entry: Entry) -> ToolCallView:
    view = ToolCallView(entry, id="gallery-expanded")
    view.expanded = True
    return view
