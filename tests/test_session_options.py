"""The CLI retargeted to a headless builder (lopen.copilot.session_options, lopen.workflow.steps.CLI_TOOLS)."""

from __future__ import annotations

from lopen.copilot.results import InvocationRequest
from lopen.copilot.session_options import session_options
from lopen.workflow.prompts import GUIDANCE
from lopen.workflow.steps import CLI_TOOLS, Kind

LOPEN = ["read_plan", "update_task_status"]


def test_a_builder_session_gets_only_its_kinds_cli_tools_and_no_skills_trailer_or_instruction_files() -> None:
    request = InvocationRequest(
        models=["m"],
        prompt="p",
        system_message="LOPEN",
        cli_tools=CLI_TOOLS[Kind.TASK],
        builder=True,
        guidance=GUIDANCE,
    )
    options = session_options(request, LOPEN)
    assert options["available_tools"] == [*CLI_TOOLS[Kind.TASK], *LOPEN]
    assert (options["enable_skills"], options["coauthor_enabled"], options["skip_custom_instructions"]) == (
        False,
        False,
        True,
    )
    system = options["system_message"]
    assert system["mode"] == "customize" and system["content"] == "LOPEN"
    sections = system["sections"]
    assert sections["guidelines"] == {"action": "replace", "content": GUIDANCE}
    assert sections["custom_instructions"] == {"action": "remove"}
    assert sections["code_change_rules"] == {"action": "remove"}
    assert "ask" not in sections["last_instructions"]["content"].lower().split()


def test_the_cli_tools_of_each_kind() -> None:
    never = {"task", "skill", "sql", "read_agent", "list_agents", "write_agent", "ask_user"}
    for kind, tools in CLI_TOOLS.items():
        assert not never & set(tools), kind
    assert not {"bash", "create", "edit"} & set(CLI_TOOLS[Kind.PLANNING])
    assert {"bash", "create", "edit", "view"} <= set(CLI_TOOLS[Kind.TASK])
    assert CLI_TOOLS[Kind.ORACLE] == ()


def test_without_builder_the_clis_defaults_apply() -> None:
    request = InvocationRequest(models=["m"], prompt="p", system_message="LOPEN")
    assert session_options(request, LOPEN) == {"system_message": {"mode": "append", "content": "LOPEN"}}


def test_the_oracle_gets_no_tool_at_all_and_replaces_the_whole_prompt() -> None:
    request = InvocationRequest(models=["m"], prompt="p", system_message="R", system_mode="replace", cli_tools=())
    assert session_options(request, []) == {
        "available_tools": [],
        "system_message": {"mode": "replace", "content": "R"},
    }


def test_the_guidance_never_asks_for_a_person() -> None:
    assert "Never ask a question" in GUIDANCE and "guidance if uncertain" not in GUIDANCE


def test_a_builder_session_is_offered_the_listed_tools_of_its_mcp_servers() -> None:
    """The CLI hides an MCP tool a builder session's available_tools does not name (<server>-<tool>, or
    <server>/* for all of a server's), whatever the server's own tools filter says."""
    request = InvocationRequest(models=["m"], prompt="p", cli_tools=("view",), builder=True)
    servers = {"docs": {"tools": ["search", "read_page"]}, "tracker": {"tools": ["*"]}}
    options = session_options(request, LOPEN, servers)
    assert options["available_tools"] == ["view", *LOPEN, "docs-search", "docs-read_page", "tracker/*"]
