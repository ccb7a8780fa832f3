"""Steering: what the keys and the prompt do to a run, as the one door's commands (W11).

The TUI changes a run only through ``lopen.app.commands`` — the same functions, with the same rules,
an MCP client's tools call — or by calling the run's own ``stop``:

- Ctrl+P / ``/pause``: ``commands.pause`` (the module must have a running session); the run pauses
  before its next invocation;
- Enter in the prompt: ``commands.queue_message``; delivered in the next invocation, never injected;
- ``/model NAME``: ``commands.control(action="model", detail=NAME)`` for the next invocation;
- Ctrl+C: the run's ``stop()`` (the headless Ctrl+C path).

``parse_command`` turns a prompt line into a :class:`Command`; the app decides what each does
(some open a dialog). Nothing here imports Textual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lopen.app import commands
from lopen.app.context import Project

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
    """The TUI's commands on one module, recorded with ``who`` (``tui:<user>``) as the actor.

    ``session_id`` is a function: ``/model`` lands in the session the screen follows right now.
    ``read_only`` (``lopen watch``) refuses every command with a reason instead of recording it.
    """

    def __init__(
        self,
        project: Project,
        module: str,
        who: str,
        session_id: Callable[[], str],
        read_only: bool = False,
    ) -> None:
        self.project = project
        self.module = module
        self.who = who
        self.session_id = session_id
        self.read_only = read_only

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnly

    def pause(self, reason: str = "Ctrl+P in the TUI") -> None:
        self._writable()
        commands.pause(self.project, self.module, self.who, reason)

    def queue_message(self, text: str) -> str:
        self._writable()
        return commands.queue_message(self.project, self.module, text, self.who).message_id

    def control(self, action: str, detail: str = "") -> None:
        self._writable()
        commands.control(self.project, self.module, self.who, action, detail, self.session_id())


class ReadOnly(Exception):
    """This screen only watches (``lopen watch``): it records nothing."""

    def __str__(self) -> str:
        return "read-only: this screen watches a run and records nothing (pause it from the TUI that runs it)"
