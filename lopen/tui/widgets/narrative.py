"""The model's own words: its messages as they stream, the progress it reports, and its reasoning (an entry
titled ``reasoning``: what the provider gives of its thinking, drawn muted, apart from what it said)."""

from __future__ import annotations

from textual.content import Content

from lopen.tui.widgets.entry import EntryView


class NarrativeView(EntryView):
    DEFAULT_CSS = """
    NarrativeView { border-left: thick $accent 50%; margin: 0 0 0 1; color: $foreground; }
    """

    def draw(self) -> Content:
        text = self.entry.detail.strip()
        if self.entry.title:
            return Content.assemble((f"{self.entry.title}: ", "bold dim italic"), (text, "dim italic"))
        return Content(text)
