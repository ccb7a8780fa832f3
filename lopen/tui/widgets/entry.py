"""The base of every activity-pane entry: a ``Static`` drawn from one ``lopen.tui.state.Entry``.

A subclass implements ``draw() -> Content``; ``sync(entry)`` redraws only when the entry's ``rev``
moved on, so a frame with a thousand entries redraws the two that changed. A redraw that cannot
change the entry's height (as many lines as before, none of them wrapping) repaints the entry alone:
no layout of the screen, which is what a running call's ticking clock and status changes cost.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content
from textual.widgets import Static

from lopen.tui.state import Entry
from lopen.tui.widgets import glyphs

LEVEL_STYLE = {"ok": "$success", "warn": "$warning", "error": "$error", "info": "$text-muted"}
LEVEL_MARK = {"ok": "ok", "warn": "warn", "error": "fail", "info": "mid"}


class EntryView(Static):
    """One entry; ``expanded`` is the person's choice (Enter), kept across redraws."""

    DEFAULT_CSS = """
    EntryView { height: auto; padding: 0 1; }
    """

    def __init__(self, entry: Entry, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.entry = entry
        self.drawn_rev = -1
        self.expanded = False
        self._height: int | None = None  # the lines last drawn when none wrapped, else None

    def on_mount(self) -> None:
        if self.drawn_rev != self.entry.rev:
            self.redraw()

    def draw_first(self) -> EntryView:
        """Draw the entry before it is mounted, so that it is laid out in the frame that mounts it."""
        self.drawn_rev = self.entry.rev
        self.update(self.draw())
        return self

    def sync(self, entry: Entry) -> None:
        if entry is not self.entry or entry.rev != self.drawn_rev:
            self.entry = entry
            self.redraw()

    def redraw(self) -> None:
        self.drawn_rev = self.entry.rev
        content = self.draw()
        lines = content.plain.split("\n")
        width = self.content_size.width
        height = len(lines) if width and all(cell_len(line) < width for line in lines) else None
        self.update(content, layout=height is None or height != self._height)
        self._height = height

    def draw(self) -> Content:
        raise NotImplementedError

    @property
    def symbols(self):
        return glyphs(self)
