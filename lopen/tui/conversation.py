"""Step 1 as a conversation (CLI-03/TUI-22): the controller between a drafting run and the screen.

The drafting run (the model invocations of Requirement Gathering, wired by the workflow) talks to
the person through a :class:`Conversation`, from its own thread::

    def draft(conversation: Conversation) -> RunOutcome:          # runs in a worker thread
        answer = conversation.ask("Who calls slugify, and with what input?")   # blocks for the answer
        conversation.say("Drafting the Overview…")
        conversation.draft(spec_markdown_so_far)                    # the draft pane and its gaps update
        if conversation.approve():                                  # the gate (W4): the approval dialog
            ...record SpecApproved...
        return RunOutcome(0, session_id, "approved")

    code = run_conversation(root, module, draft)

The screen shows every turn as it happens, the draft rendered, and the gaps of the spec check
(``lopen.documents.spec_check``) recomputed on every draft, live. The person answers in the prompt;
closing the screen makes a pending ``ask`` raise :class:`ConversationClosed`, so the run ends.

Recording: every turn goes through ``record`` (when given) as soon as it happens — the run decides
how a turn becomes events (see the report on issue 13: the catalogue has no question/answer event
yet; answers can travel as ``UserMessageQueued``).

Thread-safe; imports nothing of Textual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lopen.tui.contract import ApprovalRequest

Role = Literal["model", "person", "draft", "note"]


class ConversationClosed(Exception):
    """The person closed the conversation: the drafting run should end (its turns are recorded)."""


@dataclass(frozen=True)
class Turn:
    """One turn: the model asks or says (``model``), the person answers (``person``), a section
    was drafted (``draft``), or a fact (``note``: approved, gaps fixed …)."""

    role: Role
    text: str
    n: int


class Conversation:
    def __init__(
        self,
        module: str,
        notify: Callable[[], None] | None = None,
        record: Callable[[Turn], None] | None = None,
    ) -> None:
        self.module = module
        self.notify: Callable[[], None] = notify or (lambda: None)
        self.record = record or (lambda _turn: None)
        self.approver: Callable[[ApprovalRequest], bool] = lambda _request: False
        self._lock = threading.Lock()
        self._turns: list[Turn] = []
        self._draft = ""
        self._question: Turn | None = None
        self._answer: str | None = None
        self._answered = threading.Condition(self._lock)
        self._closed = False

    # -- the drafting run's side (any thread) ----------------------------------------------------------

    def ask(self, question: str, timeout: float | None = None) -> str:
        """Show ``question`` and wait for the person's answer (ConversationClosed when closed)."""
        turn = self._add("model", question)
        with self._lock:
            self._question, self._answer = turn, None
        self.notify()
        with self._answered:
            if not self._answered.wait_for(lambda: self._answer is not None or self._closed, timeout):
                raise TimeoutError(f"no answer to {question!r} in {timeout} s")
            if self._answer is None:
                raise ConversationClosed(self.module)
            answer, self._answer, self._question = self._answer, None, None
        return answer

    def say(self, text: str) -> None:
        self._add("model", text)
        self.notify()

    def draft(self, markdown: str, section: str = "") -> None:
        """The spec as drafted so far (the whole document); ``section`` names what was just written."""
        with self._lock:
            self._draft = markdown
        if section:
            self._add("draft", f"drafted {section}")
        self.notify()

    def approve(self) -> bool:
        """The spec-approval gate: the approval dialog, with the draft and its gaps. True = approved."""
        request = ApprovalRequest(self.module, self.draft_text, tuple(g.render() for g in self.gaps()))
        approved = self.approver(request)
        self._add("note", "specification approved" if approved else "approval deferred")
        self.notify()
        return approved

    # -- the screen's side (the app's thread) ------------------------------------------------------------

    def answer(self, text: str) -> bool:
        """The person's answer to the pending question; False when no question is pending."""
        with self._answered:
            if self._question is None or self._closed:
                return False
            self._answer = text
            self._answered.notify_all()
        self._add("person", text)
        self.notify()
        return True

    def close(self) -> None:
        with self._answered:
            self._closed = True
            self._answered.notify_all()

    @property
    def waiting(self) -> bool:
        """A question waits for the person's answer."""
        with self._lock:
            return self._question is not None and self._answer is None

    @property
    def draft_text(self) -> str:
        with self._lock:
            return self._draft

    def turns(self) -> list[Turn]:
        with self._lock:
            return list(self._turns)

    def gaps(self) -> list:  # list[lopen.documents.Gap]
        """The spec check's gaps of the current draft (empty before anything is drafted)."""
        from lopen.app.queries import draft_gaps

        return draft_gaps(self.draft_text, self.module)

    def _add(self, role: Role, text: str) -> Turn:
        with self._lock:
            turn = Turn(role, text, len(self._turns) + 1)
            self._turns.append(turn)
        self.record(turn)
        return turn
