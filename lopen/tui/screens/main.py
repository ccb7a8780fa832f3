"""The run screen (U1): top bar, activity pane, context pane, prompt, and the keys.

    ┌ top bar: version, model, context gauge, tokens/premium vs budget, branch, provider, step ┐
    │ Activity (narrative, tool calls, verdicts, errors)  │ Current task / Plan / Resources   │
    │ Prompt                                                                                  │
    └ footer: the keys                                                                        ┘

The screen only draws: ``show(state, changed)`` redraws the parts ``changed`` names from a
``ScreenState``. What the keys do lives in the app (``LopenApp``): steering is the app's business,
because it outlives any one screen. Graceful narrowing uses Textual's breakpoints: below 100
columns the context pane narrows, below 80 it hides (``c`` toggles it); below 32 rows the context
pane's boxes shrink.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer

from lopen.tui.resources import Resource, resources_of
from lopen.tui.state import ScreenState
from lopen.tui.widgets.activity import ActivityPane
from lopen.tui.widgets.plan_tree import PlanTree
from lopen.tui.widgets.prompt import PromptArea
from lopen.tui.widgets.resource_list import ResourceList
from lopen.tui.widgets.task_panel import TaskPanel
from lopen.tui.widgets.topbar import TopBar, TopBarData


class MainScreen(Screen[None]):
    """The prompt has the focus whenever the screen is shown (a watcher's: the activity pane): what is
    typed goes into it, every letter and digit. Keys act with a modifier from anywhere (Ctrl+R resume,
    Ctrl+P pause, Ctrl+C stop, F1 keys, Alt+1–9 resources), ``?`` in an empty prompt, and as plain
    letters once Escape or Tab took the focus out of the prompt."""

    AUTO_FOCUS = "PromptArea"
    HORIZONTAL_BREAKPOINTS = [(0, "-tiny"), (80, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    BINDINGS = [
        Binding("ctrl+r", "app.resume", "Resume", priority=True),
        Binding("f1", "app.keys", "Keys", priority=True),
        *[
            Binding(f"alt+{n}", f"app.open_resource({n})", f"Resource {n}", show=False, priority=True)
            for n in range(1, 10)
        ],
        Binding("r", "app.resume", "Resume", show=False),
        Binding("question_mark", "app.keys", "Keys", show=False),
        Binding("slash", "command", "Command", show=False),
        Binding("c", "toggle_context", "Context", show=False),
        Binding("q", "app.leave", "Quit", show=False),
        *[Binding(str(n), f"app.open_resource({n})", f"Resource {n}", show=False) for n in range(1, 10)],
    ]

    def __init__(self, root: Path | None = None, watching: bool = False) -> None:
        super().__init__()
        self.root = root
        self.watching = watching
        self.resources: list[Resource] = []
        self._context_hidden = False

    def compose(self) -> ComposeResult:
        yield TopBar(id="topbar")
        with Horizontal(id="body"):
            yield ActivityPane(id="activity")
            with Vertical(id="context"):
                yield TaskPanel(id="task")
                yield PlanTree(id="plan")
                yield ResourceList(id="resources")
        yield PromptArea(id="prompt")
        yield Footer()

    def on_mount(self) -> None:
        for widget_id, title in (("#task", "Current task"), ("#plan", "Plan"), ("#resources", "Resources")):
            self.query_one(widget_id).border_title = title
        if self.watching:
            prompt = self.query_one(PromptArea)
            prompt.disabled = True
            prompt.placeholder = "watching: read-only (lopen watch)"
            self.query_one(ActivityPane).focus()

    def show(self, state: ScreenState, changed: set[str]) -> None:
        """Redraw the parts of the screen ``changed`` names ("top", "activity", "context")."""
        if not self.is_mounted:
            return
        if "top" in changed:
            self.query_one(TopBar).show(TopBarData.of(state, watching=self.watching))
        if "activity" in changed:
            self.query_one(ActivityPane).sync(state.entries())
        if "context" in changed:
            tasks = state.fold.tasks.values()
            finished = bool(tasks) and all(task.state == "complete" for task in tasks)
            self.query_one(TaskPanel).show(state.current_task(), finished)
            self.query_one(PlanTree).show(state.fold)
            self.resources = resources_of(state, self.root)
            self.query_one(ResourceList).show(self.resources)

    def action_toggle_context(self) -> None:
        """``c``: hide or show the context pane (hidden by default below 80 columns)."""
        self._context_hidden = not self._context_hidden
        self.set_class(self._context_hidden, "-no-context")
        self.set_class(not self._context_hidden, "-show-context")

    def action_command(self) -> None:
        prompt = self.query_one(PromptArea)
        if prompt.disabled:
            return
        prompt.focus()
        if not prompt.text:
            prompt.insert("/")
