"""The model's own words: its messages as they stream, and the progress it reports."""

from __future__ import annotations

from textual.content import Content

from lopen.tui.widgets.entry import EntryView


class NarrativeView(EntryView):
    DEFAULT_CSS = """
    NarrativeView { border-left: thick $accent 50%; margin: 0 0 0 1; color: $foreground; }
    """

    def draw(self) -> Content:
        return Content(self.entry.detail.strip())
