"""The activity pane (U1): what the run does, newest at the bottom.

``sync(entries)`` reconciles the pane with the followed session's entries
(``ScreenState.entries()``): it mounts new ones, redraws changed ones (by ``rev``), and drops ones
that left (older than the last ``VISIBLE`` or of another session). While the view is at the bottom
the pane follows new entries; scrolled up, it stays put until the person comes back down (End).
Up/Down select a tool call (the pane has the focus, not each call: Tab moves on to the next pane);
Enter expands or collapses the selected one.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size

from lopen.tui.state import Entry
from lopen.tui.widgets.entry import EntryView
from lopen.tui.widgets.error_box import ErrorView
from lopen.tui.widgets.narrative import NarrativeView
from lopen.tui.widgets.notice import NoticeView
from lopen.tui.widgets.tool_call import ToolCallView
from lopen.tui.widgets.user_message import UserMessageView
from lopen.tui.widgets.verdict import VerdictView

VISIBLE = 120  # entries drawn as widgets: layout cost grows with them (bin/bench-tui); the store keeps all
SLACK = 40  # pruned in batches, so a busy pane relayouts for pruning once per SLACK entries
TICK_SECONDS = 0.5  # a running call's spinner and clock: each tick is a frame, and frames cost the run CPU

VIEWS: dict[str, type[EntryView]] = {
    "narrative": NarrativeView,
    "tool": ToolCallView,
    "verdict": VerdictView,
    "error": ErrorView,
    "notice": NoticeView,
    "user": UserMessageView,
}


def view_for(entry: Entry) -> EntryView:
    return VIEWS[entry.kind](entry, id=f"entry-{entry.id}")


class ActivityPane(VerticalScroll, can_focus=True):
    BINDINGS = [
        Binding("up", "previous_call", "Previous call", show=False),
        Binding("down", "next_call", "Next call", show=False),
        Binding("enter", "toggle_call", "Expand", show=False),
        Binding("end", "scroll_end", "Newest", show=False),
    ]

    DEFAULT_CSS = """
    ActivityPane { border: round $primary 40%; border-title-color: $text-primary; }
    ActivityPane:focus-within { border: round $primary; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "Activity"
        self._views: dict[int, EntryView] = {}
        self.selected: ToolCallView | None = None

    def on_mount(self) -> None:
        if getattr(self.app, "animate", True):
            self.set_interval(TICK_SECONDS, self._tick)

    def watch_virtual_size(self, size: Size) -> None:
        """Follow the newest entry whenever the entries are taller than the pane.

        Anchored, the pane stays at its bottom whatever grows (a new entry, a line that wraps on a
        narrower terminal) until the person scrolls up; back at the bottom (End), it follows again.
        Entries that fit are not anchored: Textual would draw them at the pane's bottom edge.
        """
        overflows = size.height > self.scrollable_content_region.height
        if overflows and not self.is_anchored:
            self.anchor()
        elif not overflows and self.is_anchored:
            self.anchor(False)
            self.scroll_home(animate=False, immediate=True)

    def _tick(self) -> None:
        for view in self._views.values():
            if isinstance(view, ToolCallView) and view.running:
                view.tick()

    def sync(self, entries: Sequence[Entry]) -> None:
        keep = VISIBLE + SLACK if len(self._views) <= VISIBLE + SLACK else VISIBLE
        entries = entries[-keep:]
        wanted = {e.id for e in entries}
        gone = [view for key, view in self._views.items() if key not in wanted]
        for view in gone:
            del self._views[view.entry.id]
            if view is self.selected:
                self.selected = None
        if gone:
            self.remove_children(gone)
        fresh: list[EntryView] = []
        for entry in entries:
            view = self._views.get(entry.id)
            if view is None:
                view = self._views[entry.id] = view_for(entry).draw_first()
                fresh.append(view)
            else:
                view.sync(entry)
        if fresh:
            self.mount_all(fresh)

    def tool_calls(self) -> list[ToolCallView]:
        return [v for v in self._views.values() if isinstance(v, ToolCallView)]

    def _move(self, step: int) -> None:
        calls = self.tool_calls()
        if not calls:
            return
        current = self.selected
        index = calls.index(current) if current in calls else (len(calls) if step < 0 else -1)
        self.select(calls[max(0, min(len(calls) - 1, index + step))])

    def select(self, call: ToolCallView | None) -> None:
        if self.selected is not None:
            self.selected.remove_class("-selected")
        self.selected = call
        if call is not None:
            call.add_class("-selected")
            call.scroll_visible(animate=False)

    def action_toggle_call(self) -> None:
        if self.selected is not None and self.selected.is_attached:
            self.selected.toggle()

    def action_previous_call(self) -> None:
        self._move(-1)

    def action_next_call(self) -> None:
        self._move(1)
