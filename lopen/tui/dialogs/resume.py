"""The resume-session dialog: a module has an unfinished session — resume it, or start a new one?

The answer is ``"resume"``, ``"new"`` or ``"cancel"`` (Escape)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ResumeDialog(ModalScreen[str]):
    BINDINGS = [
        Binding("r", "answer('resume')", "Resume"),
        Binding("n", "answer('new')", "New session"),
        Binding("escape", "answer('cancel')", "Cancel"),
    ]

    def __init__(self, module: str, session_id: str, summary: str = "") -> None:
        super().__init__(classes="dialog")
        self.module, self.session_id, self.summary = module, session_id, summary

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="resume-box") as box:
            box.border_title = "Resume?"
            text = f"Module {self.module} has an unfinished session, {self.session_id}."
            if self.summary:
                text += f"\n{self.summary}"
            yield Static(text, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Resume (r)", id="resume", variant="primary")
                yield Button("New session (n)", id="new")
                yield Button("Cancel (Esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#resume", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id))

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer)
