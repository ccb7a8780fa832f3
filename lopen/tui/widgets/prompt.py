"""The prompt (U1): Enter sends, Alt+Enter (or Ctrl+J, Shift+Enter) starts a new line.

What is sent becomes a ``PromptArea.Submitted`` message; the screen decides: a slash command, or a
message queued for the next invocation (W11). Up on the first line recalls earlier entries.
Escape leaves the prompt (focus goes back to the activity pane); ``?`` in an empty prompt shows the keys.
Every other key typed here is text: a hotkey never fires from the prompt (see ``MainScreen``).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea

NEWLINE_KEYS = frozenset({"alt+enter", "ctrl+j", "shift+enter", "ctrl+enter"})
PLACEHOLDER = "Message for the next invocation — Enter sends, Alt+Enter new line, /help for commands"


class PromptArea(TextArea):
    DEFAULT_CSS = """
    PromptArea { height: auto; min-height: 3; max-height: 8; border: round $accent 40%; }
    PromptArea:focus { border: round $accent; }
    """

    @dataclass
    class Submitted(Message):
        prompt: PromptArea
        text: str

    def __init__(self, **kwargs: object) -> None:
        super().__init__(soft_wrap=True, tab_behavior="focus", placeholder=PLACEHOLDER, **kwargs)  # type: ignore[arg-type]
        self.sent: list[str] = []
        self._recall = 0

    def on_mount(self) -> None:
        self.cursor_blink = getattr(self.app, "animate", True)  # a still cursor for stable screenshots

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.submit()
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "question_mark" and not self.text:
            event.stop()
            event.prevent_default()
            self.app.action_keys()  # type: ignore[attr-defined]
            return
        if event.key == "escape":
            event.stop()
            event.prevent_default()
            self.screen.focus_next()
            return
        if event.key == "up" and self.cursor_location[0] == 0 and self.sent:
            event.stop()
            event.prevent_default()
            self._recall = min(self._recall + 1, len(self.sent))
            self.text = self.sent[-self._recall]
            return
        await super()._on_key(event)

    def submit(self) -> None:
        text = self.text.strip()
        if not text:
            return
        self.sent.append(text)
        self._recall = 0
        self.clear()
        self.post_message(self.Submitted(self, text))
