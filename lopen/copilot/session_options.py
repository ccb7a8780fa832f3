"""The SDK session options of one invocation: which of the CLI's tools it gets and what the CLI's
own system prompt says around Lopen's.

The Copilot CLI is built for a person at a terminal: its prompt says "ask for guidance if
uncertain", offers sub-agents, skills and a SQL todo list, adds a co-author trailer to commits and
injects the repository's agent instructions unseen. Lopen runs it headless, one task at a time, and
keeps the plan, the commits and the record itself, so a *builder* session (``request.builder``):

- offers only the CLI tools its invocation kind needs (``request.cli_tools``) next to Lopen's own;
- turns skills, the co-author trailer and the CLI's own reading of instruction files off (Lopen
  puts the repository's instructions into its own, recorded, system message);
- replaces the CLI's interactive guidelines and its code-change rules with Lopen's ``guidance`` and
  appends Lopen's system message (the SDK's ``customize`` mode: the CLI's identity, environment,
  safety and tool sections stay).

Without ``builder`` the CLI's defaults apply and Lopen's system message is appended (or replaces the
whole prompt: ``system_mode="replace"``, the oracle's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lopen.copilot.mcp_servers import available_tools
from lopen.copilot.results import InvocationRequest

# The CLI's prompt sections Lopen rewrites in a builder session (the SDK's SystemMessageSection ids).
REPLACED_SECTIONS = ("guidelines", "code_change_rules")
REMOVED_SECTIONS = ("custom_instructions",)
# In place of the CLI's closing instructions (which say to install dependencies and answer the user).
LAST_INSTRUCTIONS = (
    "Keep going until this invocation's work is done and verified through Lopen's tools, or end it with a "
    "reason through them. Put independent tool calls in one response."
)


def session_options(
    request: InvocationRequest, lopen_tools: Sequence[str], mcp_servers: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``CopilotClient.create_session`` beyond the model, tools and handlers;
    ``mcp_servers`` (the session's, ``lopen.copilot.mcp_servers``) adds their listed tools to the offer."""
    options: dict[str, Any] = {}
    if request.cli_tools is not None:
        options["available_tools"] = [*request.cli_tools, *lopen_tools, *available_tools(mcp_servers or {})]
    if not request.builder:
        options["system_message"] = {"mode": request.system_mode, "content": request.system_message}
        return options
    sections: dict[str, dict[str, str]] = {name: {"action": "remove"} for name in REMOVED_SECTIONS}
    for name in REPLACED_SECTIONS:
        sections[name] = {"action": "remove"}
    if request.guidance:
        sections["guidelines"] = {"action": "replace", "content": request.guidance}
    sections["last_instructions"] = {"action": "replace", "content": LAST_INSTRUCTIONS}
    options["system_message"] = {"mode": "customize", "sections": sections, "content": request.system_message}
    options["enable_skills"] = False
    options["coauthor_enabled"] = False
    options["skip_custom_instructions"] = True
    return options
