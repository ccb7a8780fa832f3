"""The real Copilot CLI accepts the scripted model's answers and runs its tool calls for real.

This is the only place the scripted model meets the SDK directly (the gateway has its own tests):
it pins down what the demo relies on — a Lopen-style custom tool, the CLI's own `bash`, `create`
and `edit` acting in the session's working directory, exact usage numbers, a 429 the CLI
retries — both with and without streaming.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

PLAYBOOK = """
[playbook]
name = "cli-smoke"
models = ["scripted"]
default_usage = { prompt_tokens = 1000, completion_tokens = 100 }

[[rule]]
name = "rate-limited-once"
match = { user_contains = "[smoke]" }
max_uses = 1
  [[rule.turn]]
  fault = "rate_limit"
  retry_after = 0

[[rule]]
name = "smoke"
  [rule.match]
  user_contains = "[smoke]"
  system_contains = "SMOKE-SYSTEM"
  tools_include = ["echo_tool", "bash", "create", "edit"]

  [[rule.turn]]
  text = "Checking the echo tool first."
  tool_calls = [ { name = "echo_tool", arguments = { text = "ping" } } ]
  usage = { prompt_tokens = 2000, completion_tokens = 50, cached_tokens = 500 }

  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "bash"
    arguments = { command = "mkdir -p src/pkg", description = "Make the package folder" }

  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "create"
    arguments = { path = "src/pkg/hello.py", file_text = "print('hello')\\n" }

  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "edit"
    arguments = { path = "src/pkg/hello.py", old_str = "hello", new_str = "hello, world" }

  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "bash"
    arguments = { command = "cp src/pkg/hello.py copy.py && cat copy.py", description = "Copy it" }

  [[rule.turn]]
  text = "All done."
  usage = { prompt_tokens = 3000, completion_tokens = 20, cached_tokens = 2500 }
"""


async def run_session(cli_path: str, url: str, workdir: Path, home: Path, streaming: bool) -> dict[str, Any]:
    from copilot import CopilotClient, RuntimeConnection
    from copilot.session import PermissionHandler
    from copilot.tools import Tool, ToolInvocation, ToolResult

    echoed: list[Any] = []
    usage_events: list[Any] = []

    async def echo(invocation: ToolInvocation) -> ToolResult:
        echoed.append(invocation.arguments)
        return ToolResult(text_result_for_llm=f"echo: {invocation.arguments['text']}")

    def on_event(event: Any) -> None:
        if event.type.value == "assistant.usage":
            usage_events.append(event.data)

    connection = RuntimeConnection.for_stdio(path=cli_path)
    connection.env = {
        **os.environ,
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": url,
        "COPILOT_MODEL": "scripted",
        "COPILOT_HOME": str(home),
    }
    client = CopilotClient(connection=connection)
    await client.start()
    try:
        session = await client.create_session(
            on_permission_request=PermissionHandler.approve_all,
            model="scripted",
            provider={"type": "openai", "base_url": url, "api_key": "sk-scripted-test"},
            tools=[
                Tool(
                    name="echo_tool",
                    description="Echo the text back.",
                    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                    handler=echo,
                )
            ],
            working_directory=str(workdir),
            system_message={"mode": "append", "content": "SMOKE-SYSTEM: you are under test."},
            streaming=streaming,
            on_event=on_event,
        )
        try:
            reply = await session.send_and_wait("[smoke] build the hello package", timeout=90)
        finally:
            await session.disconnect()
    finally:
        await client.stop()
    return {"reply": reply.data.content if reply else None, "echoed": echoed, "usage": usage_events}


@pytest.mark.parametrize("streaming", [False, True], ids=["non-streaming", "streaming"])
def test_the_real_cli_plays_a_playbook(cli_path: str, scripted: Any, tmp_path: Path, streaming: bool) -> None:
    server = scripted(PLAYBOOK)
    workdir = tmp_path / "work"
    workdir.mkdir()
    outcome = asyncio.run(run_session(cli_path, server.url, workdir, tmp_path / "home", streaming))

    assert outcome["reply"] == "All done."
    assert outcome["echoed"] == [{"text": "ping"}]
    assert (workdir / "src" / "pkg" / "hello.py").read_text() == "print('hello, world')\n"
    assert (workdir / "copy.py").read_text() == "print('hello, world')\n"

    log = server.chat_requests
    assert [(r.response_kind, r.rule, r.turn) for r in log] == [
        ("rate_limit", "rate-limited-once", 0),
        *[("ok", "smoke", turn) for turn in range(6)],
    ]
    assert all(r.stream is streaming and r.warning is None for r in log)
    results = log[-1].tool_results()
    assert results[0] == "echo: ping"
    assert results[2].startswith(f"Created file {workdir}/src/pkg/hello.py")
    assert results[4].startswith("print('hello, world')\n") and "exit code 0" in results[4]

    usage = outcome["usage"]
    assert [u.input_tokens for u in usage] == [2000, 1000, 1000, 1000, 1000, 3000]
    assert sum(u.output_tokens for u in usage) == 50 + 4 * 100 + 20
    assert sum(u.cache_read_tokens or 0 for u in usage) == 500 + 2500
