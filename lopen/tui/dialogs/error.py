"""A critical error (auth, disk, store): what failed, why, and how to fix it. The run's state is
saved; closing the dialog leaves the screen open to look around."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from lopen.tui.widgets.error_box import error_content


class ErrorDialog(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close"), Binding("enter", "close", "Close", show=False)]

    def __init__(self, what: str, why: str = "", fix: str = "", title: str = "Critical error") -> None:
        super().__init__(classes="dialog")
        self.what, self.why, self.fix, self.title_text = what, why, fix, title

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box error", id="error-box") as box:
            box.border_title = self.title_text
            yield Static(error_content(self.what, self.why, self.fix), classes="dialog-body")
            yield Static("The run's state is saved: fix the cause, then resume (r).", classes="dialog-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close (Esc)", id="close", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
