"""The base of every activity-pane entry: a ``Static`` drawn from one ``lopen.tui.state.Entry``.

A subclass implements ``draw() -> Content``; ``sync(entry)`` redraws only when the entry's ``rev``
moved on, so a frame with a thousand entries redraws the two that changed.
"""

from __future__ import annotations

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

    def on_mount(self) -> None:
        self.redraw()

    def sync(self, entry: Entry) -> None:
        if entry is not self.entry or entry.rev != self.drawn_rev:
            self.entry = entry
            self.redraw()

    def redraw(self) -> None:
        self.drawn_rev = self.entry.rev
        self.update(self.draw())

    def draw(self) -> Content:
        raise NotImplementedError

    @property
    def symbols(self):
        return glyphs(self)
