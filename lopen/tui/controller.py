"""Steering: what the keys and the prompt do to a run, as recorded commands (W11).

The TUI changes a run only by appending events to the module's history — the same way an MCP
client would — or by calling the run's own ``stop``:

- Ctrl+P / ``/pause``: ``PauseRequested(requested_by=…)``; the run pauses before its next invocation;
- Enter in the prompt: ``UserMessageQueued``; delivered in the next invocation, never injected;
- ``/model NAME``: ``ControlRequested(action="model", detail=NAME)`` for the next invocation;
- Ctrl+C: the run's ``stop()`` (the headless Ctrl+C path).

``parse_command`` turns a prompt line into a :class:`Command`; the app decides what each does
(some open a dialog). Nothing here imports Textual.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from events import catalogue as ev
from events.recorded import module_stream
from events.store import EventStore

SLASH_COMMANDS: dict[str, str] = {
    "/pause": "pause after the current invocation (Ctrl+P)",
    "/resume": "resume a paused run (r)",
    "/revert": "go back to the last task-completion commit (asks first)",
    "/model": "/model NAME: use NAME from the next invocation on; /model alone shows the models",
    "/budget": "show tokens and premium requests against the budget",
    "/replay": "show this session's recorded events",
    "/help": "show the keys and commands (?)",
    "/quit": "stop the run cleanly and leave (Ctrl+C)",
}


@dataclass(frozen=True)
class Command:
    """A prompt line: a slash command with its argument, or a message (``name == ""``)."""

    name: str
    argument: str = ""
    error: str = ""


def parse_command(line: str) -> Command:
    """``"/model gpt-5"`` → Command("/model", "gpt-5"); plain text → a message; an unknown
    slash command carries an error naming the known ones."""
    text = line.strip()
    if not text.startswith("/") or text.startswith("//"):
        return Command("", text.removeprefix("/") if text.startswith("//") else text)
    name, _, argument = text.partition(" ")
    name = name.lower()
    if name not in SLASH_COMMANDS:
        known = " ".join(SLASH_COMMANDS)
        return Command(name, argument.strip(), error=f"unknown command {name}; try {known}")
    return Command(name, argument.strip())


class Steering:
    """Appends the TUI's recorded commands to one module's history.

    ``session_id`` is a function so the events land in the session the screen follows right now.
    ``read_only`` (``lopen watch``) refuses every command with a reason instead of appending.
    """

    def __init__(
        self,
        store: EventStore,
        project: str,
        module: str,
        who: str,
        session_id: Callable[[], str],
        read_only: bool = False,
    ) -> None:
        self.store = store
        self.stream = module_stream(project, module)
        self.who = who
        self.session_id = session_id
        self.read_only = read_only

    def _append(self, event: ev.Event) -> None:
        if self.read_only:
            raise ReadOnly
        self.store.append(self.stream, [event])

    def pause(self, reason: str = "Ctrl+P in the TUI") -> None:
        self._append(ev.PauseRequested(requested_by=self.who, reason=reason, session_id=self.session_id()))

    def queue_message(self, text: str) -> str:
        message_id = f"m-{uuid.uuid4().hex[:12]}"
        self._append(ev.UserMessageQueued(message_id=message_id, text=text, session_id=self.session_id()))
        return message_id

    def control(self, action: str, detail: str = "") -> None:
        self._append(ev.ControlRequested(action=action, caller=self.who, detail=detail, session_id=self.session_id()))


class ReadOnly(Exception):
    """This screen only watches (``lopen watch``): it records nothing."""

    def __str__(self) -> str:
        return "read-only: this screen watches a run and records nothing (pause it from the TUI that runs it)"
