"""A message the person typed: queued for the next invocation (W11), never injected mid-run."""

from __future__ import annotations

from textual.content import Content

from lopen.tui.widgets.entry import EntryView


class UserMessageView(EntryView):
    DEFAULT_CSS = """
    UserMessageView { color: $text-accent; }
    """

    def draw(self) -> Content:
        return Content.assemble(
            (f"{self.symbols.user} ", "bold $accent"), (self.entry.detail, "bold"), (f"  ({self.entry.title})", "dim")
        )
