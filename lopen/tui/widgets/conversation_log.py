"""The turns of step 1's conversation: the model's questions, the person's answers, drafted sections."""

from __future__ import annotations

from collections.abc import Sequence

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from lopen.tui.conversation import Turn
from lopen.tui.widgets import glyphs

ROLE_STYLE = {"model": "", "person": "bold $text-accent", "draft": "$text-success", "note": "dim"}


class TurnView(Static):
    DEFAULT_CSS = """
    TurnView { height: auto; padding: 0 1; margin: 0 0 1 0; }
    TurnView.-model { border-left: thick $accent 50%; }
    TurnView.-person { text-align: right; }
    """

    def __init__(self, turn: Turn) -> None:
        super().__init__(classes=f"-{turn.role}")
        self.turn = turn

    def on_mount(self) -> None:
        symbols = glyphs(self)
        prefix = {"person": f"{symbols.user} ", "draft": f"{symbols.ok} ", "note": f"{symbols.mid} "}
        self.update(
            Content.assemble((prefix.get(self.turn.role, ""), "bold"), (self.turn.text, ROLE_STYLE[self.turn.role]))
        )


class ConversationLog(VerticalScroll):
    DEFAULT_CSS = """
    ConversationLog { border: round $primary 40%; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "Conversation"
        self.count = 0

    def sync(self, turns: Sequence[Turn]) -> None:
        fresh = [TurnView(t) for t in turns[self.count :]]
        self.count = len(turns)
        if fresh:
            self.mount_all(fresh)
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
