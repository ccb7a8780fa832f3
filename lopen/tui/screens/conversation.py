"""Step 1 as a conversation (TUI-22): the turns on the left, the draft and its live gaps on the
right, the prompt below. The person answers the model's questions in the prompt; the draft pane
re-renders, and the spec check re-runs, on every draft the model makes.

Drawing only: the app moves a :class:`~lopen.tui.conversation.Conversation`'s changes here
(``show``) and routes the prompt's text to ``Conversation.answer``.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Markdown, Static

from lopen.tui.conversation import Conversation
from lopen.tui.widgets import glyphs, markdown_view
from lopen.tui.widgets.conversation_log import ConversationLog
from lopen.tui.widgets.prompt import PromptArea
from lopen.tui.widgets.spec_gaps import SpecGaps
from lopen.tui.widgets.step_dots import step_dots


class ConversationScreen(Screen[None]):
    AUTO_FOCUS = "PromptArea"
    BINDINGS = [Binding("question_mark", "app.keys", "Keys", show=False)]

    def __init__(self, conversation: Conversation) -> None:
        super().__init__()
        self.conversation = conversation
        self._draft = None

    def compose(self) -> ComposeResult:
        yield Static(id="conversation-title")
        with Horizontal(id="conversation-body"):
            yield ConversationLog(id="turns")
            with Vertical(id="draft-pane"):
                with VerticalScroll(id="draft-scroll") as scroll:
                    scroll.border_title = "Draft: SPECIFICATION.md"
                    yield Markdown("", id="draft")
                yield SpecGaps(id="gaps")
        yield PromptArea(id="prompt")
        yield Footer()

    def on_mount(self) -> None:
        title = step_dots(1, glyphs(self), "Requirements")
        self.query_one("#conversation-title", Static).update(
            title + f"  Draft Specification of {self.conversation.module}"
        )
        self.show()

    def show(self) -> None:
        if not self.is_mounted:
            return
        self.query_one(ConversationLog).sync(self.conversation.turns())
        text = self.conversation.draft_text
        if text != self._draft:
            self._draft = text
            self.query_one("#draft", Markdown).update(markdown_view(text) or "_Nothing drafted yet._")
            self.query_one(SpecGaps).show(self.conversation.gaps(), drafted=bool(text.strip()))
        prompt = self.query_one(PromptArea)
        prompt.placeholder = (
            "Answer the question — Enter sends, Alt+Enter new line"
            if self.conversation.waiting
            else "Waiting for the model…"
        )

    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        if not self.conversation.answer(message.text):
            self.notify("No question is waiting for an answer yet.", severity="warning")
        self.show()
