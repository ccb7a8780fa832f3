"""The keys and slash commands (``?`` or ``/help``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from lopen.tui.controller import SLASH_COMMANDS

KEYS: tuple[tuple[str, str], ...] = (
    ("Enter / Alt+Enter", "in the prompt (it has the focus): send, queued for the next invocation / new line"),
    ("Ctrl+P", "pause after the current invocation (recorded)"),
    ("Ctrl+C", "stop cleanly (state saved); twice to leave at once"),
    ("Ctrl+R", "resume a paused or stopped run (r outside the prompt)"),
    ("Alt+1-9", "open a resource: plan, spec, sections, research (1-9 outside the prompt)"),
    ("F1", "this help (? in an empty prompt or outside it)"),
    ("Esc / Tab", "leave the prompt / move between activity, plan and prompt"),
    ("Up / Down, Enter", "outside the prompt: move between tool calls; expand one"),
    ("/", "type a slash command"),
    ("q / Ctrl+Q", "leave when no run is going (q outside the prompt)"),
)


def keys_content() -> Content:
    width = max(len(k) for k, _ in KEYS)
    lines = [Content.assemble((f"{k:<{width}}  ", "bold $accent"), v) for k, v in KEYS]
    lines.append(Content(""))
    cw = max(len(c) for c in SLASH_COMMANDS)
    lines += [Content.assemble((f"{c:<{cw}}  ", "bold $accent"), d) for c, d in SLASH_COMMANDS.items()]
    return Content("\n").join(lines)


class KeysDialog(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("question_mark", "close", "Close", show=False),
        Binding("q", "close", "Close", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(classes="dialog")

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="keys-box") as box:
            box.border_title = "Keys"
            box.border_subtitle = "Esc closes"
            yield Static(keys_content(), classes="dialog-body")

    def action_close(self) -> None:
        self.dismiss(None)
