"""The spec-approval gate (W4): the specification as it will be approved, its pattern-check gaps,
and an explicit Approve. Escape is "not now": nothing is approved."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown, Static

from lopen.term import plural
from lopen.tui.contract import ApprovalRequest
from lopen.tui.widgets import markdown_view


class ApprovalDialog(ModalScreen[bool]):
    BINDINGS = [
        Binding("a", "answer(True)", "Approve"),
        Binding("escape", "answer(False)", "Not now"),
    ]

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(classes="dialog")
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box wide", id="approval-box") as box:
            box.border_title = f"Approve the specification of {self.request.module}?"
            with VerticalScroll(classes="dialog-scroll"):
                yield Markdown(markdown_view(self.request.spec_text), id="spec")
            gaps = self.request.gaps
            text = (
                Content.assemble(
                    (f"{plural(len(gaps), 'gap')} in the spec pattern:", "bold $text-warning"),
                    *[f"\n  {g}" for g in gaps],
                )
                if gaps
                else Content.styled("The spec follows the pattern: no gaps.", "$text-success")
            )
            yield Static(text, id="gaps", classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Approve (a)", id="approve", variant="success")
                yield Button("Not now (Esc)", id="later", variant="default")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "approve")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
