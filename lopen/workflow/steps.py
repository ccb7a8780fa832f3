"""The workflow table (W2): phases, steps, invocation kinds and the tools each kind gets (T11)."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    REQUIREMENT_GATHERING = "requirement_gathering"
    PLANNING = "planning"
    BUILDING = "building"
    COMPLETE = "complete"


STEP_NAMES: dict[int, str] = {
    1: "Draft Specification",
    2: "Determine Dependencies",
    3: "Identify Components",
    4: "Select Next Component",
    5: "Break Into Tasks",
    6: "Iterate Through Tasks",
    7: "Repeat",
}


def phase_of(step: int) -> Phase:
    if step == 1:
        return Phase.REQUIREMENT_GATHERING
    if step <= 5:
        return Phase.PLANNING
    return Phase.BUILDING


class Kind(StrEnum):
    """What one invocation is for; the scripted model and the tool sets key on it."""

    SPEC = "spec"
    RESEARCH = "research"  # before planning (step 2), when the spec's References name topics
    PLANNING = "planning"
    TASK = "task"
    COMPONENT_VERIFICATION = "component-verification"
    MODULE_VERIFICATION = "module-verification"
    ORACLE = "oracle"
    SUMMARY = "summary"  # a spec section that does not fit a prompt, summarised (lopen.documents.summaries)


READ_TOOLS = ("get_current_context", "read_spec", "read_research", "read_plan")

TOOLSETS: dict[Kind, tuple[str, ...]] = {
    Kind.SPEC: ("get_current_context", "read_research", "log_research", "report_progress"),
    Kind.RESEARCH: (*READ_TOOLS, "log_research", "report_progress"),
    Kind.PLANNING: (
        *READ_TOOLS,
        "log_research",
        "report_progress",
        "record_dependencies",
        "record_components",
        "select_component",
        "record_tasks",
    ),
    Kind.TASK: (*READ_TOOLS, "report_progress", "log_research", "update_task_status", "verify_task_completion"),
    Kind.COMPONENT_VERIFICATION: (*READ_TOOLS, "report_progress", "verify_component_completion"),
    Kind.MODULE_VERIFICATION: (*READ_TOOLS, "report_progress", "verify_module_completion"),
    Kind.ORACLE: (),
    Kind.SUMMARY: (),
}


# The kinds whose sessions get the user's MCP servers (mcp.servers): the model's building and its checks of
# what it built. Never the oracle (it judges from the spec and the tree alone), nor the spec's, research's
# or planning's: what they produce must follow from the approved spec and the recorded research.
MCP_KINDS: frozenset[Kind] = frozenset({Kind.TASK, Kind.COMPONENT_VERIFICATION, Kind.MODULE_VERIFICATION})

# The Copilot CLI's own tools each kind is offered (copilot.builder_prompt): reading for planning and
# verification and research, files and a shell for writing; never sub-agents, skills or the SQL todo list (Lopen
# keeps the plan), never a question to a person (nobody answers a headless invocation).
READ_ONLY_CLI_TOOLS = ("view", "grep", "glob")
URL_TOOL = "web_fetch"  # the CLI's URL tool: offered to research only when sandbox.allow_urls names hosts
WRITING_CLI_TOOLS = ("bash", "read_bash", "stop_bash", "list_bash", *READ_ONLY_CLI_TOOLS, "create", "edit")
CLI_TOOLS: dict[Kind, tuple[str, ...]] = {
    Kind.SPEC: WRITING_CLI_TOOLS,
    Kind.RESEARCH: (*READ_ONLY_CLI_TOOLS, URL_TOOL),
    Kind.PLANNING: READ_ONLY_CLI_TOOLS,
    Kind.TASK: WRITING_CLI_TOOLS,
    Kind.COMPONENT_VERIFICATION: READ_ONLY_CLI_TOOLS,
    Kind.MODULE_VERIFICATION: READ_ONLY_CLI_TOOLS,
    Kind.ORACLE: (),
    Kind.SUMMARY: (),
}


def toolset(kind: Kind) -> tuple[str, ...]:
    return TOOLSETS[kind]
