"""The scripted model: an OpenAI-compatible chat-completions server that plays a playbook.

It stands in for the model only (``lopen demo`` and every end-to-end test): the Copilot CLI,
in BYOK mode, sends its chat-completions requests here and gets scripted assistant turns —
text, tool calls, usage numbers, or faults. The format is documented in
``docs/scripted-model.md``. Standard library HTTP server plus msgspec; no other dependencies.
"""

from lopen.scripted_model.playbook import (
    Match,
    Playbook,
    PlaybookError,
    RequestView,
    Rule,
    ToolCall,
    Turn,
    Usage,
    load_playbook,
    parse_playbook,
)
from lopen.scripted_model.server import UNMATCHED_TEXT, LoggedRequest, ScriptedModelServer, main

__all__ = [
    "UNMATCHED_TEXT",
    "LoggedRequest",
    "Match",
    "Playbook",
    "PlaybookError",
    "RequestView",
    "Rule",
    "ScriptedModelServer",
    "ToolCall",
    "Turn",
    "Usage",
    "load_playbook",
    "main",
    "parse_playbook",
]
