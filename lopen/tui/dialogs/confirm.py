"""A yes/no question from the run: the budget or churn confirmation (B1, W7).

Only an explicit yes goes on (``y`` or the Continue button); ``n``, Escape or closing is no — the
same rule as the headless prompt.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No", show=False),
    ]

    def __init__(self, question: str, title: str = "Confirm", yes: str = "Continue", no: str = "Stop") -> None:
        super().__init__(classes="dialog")
        self.question, self.title_text, self.yes, self.no = question, title, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="confirm-box") as box:
            box.border_title = self.title_text
            yield Static(self.question, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="warning")
                yield Button(f"{self.no} (n)", id="no", variant="primary")
            yield Label("Escape = no", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
