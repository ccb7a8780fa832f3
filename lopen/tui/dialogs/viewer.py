"""A read-only viewer for a resource (plan, spec, a section, research) or the session's replay."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from lopen.tui.widgets import markdown_view


class ViewerDialog(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close"), Binding("q", "close", "Close", show=False)]

    def __init__(self, title: str, text: str, markdown: bool = True) -> None:
        super().__init__(classes="dialog")
        self.title_text, self.text, self.markdown = title, text, markdown

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box wide", id="viewer-box") as box:
            box.border_title = self.title_text
            box.border_subtitle = "Esc closes"
            with VerticalScroll(classes="dialog-scroll"):
                yield Markdown(markdown_view(self.text)) if self.markdown else Static(self.text, markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
