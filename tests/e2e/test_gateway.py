"""The gateway through the real Copilot CLI, with the scripted model standing in for the model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import msgspec
import pytest

from lopen.copilot import InvocationRequest, LopenTool
from lopen.copilot.results import ErrorKind, ModelFellBack, RetryScheduled, StreamEvent

pytestmark = pytest.mark.e2e


class EchoArgs(msgspec.Struct, forbid_unknown_fields=True):
    text: str


def echo_tool(handler=None) -> LopenTool:
    return LopenTool("echo", "Echo the text back.", EchoArgs, handler or (lambda args: f"echo says {args.text}"))


ECHO_PLAYBOOK = """
[playbook]
name = "echo"
models = ["scripted-main", "scripted-other"]
default_usage = { prompt_tokens = 1000, completion_tokens = 100 }

[[rule]]
name = "echo"
match = { user_contains = "please echo" }
  [[rule.turn]]
  text = "Calling echo."
  tool_calls = [ { name = "echo", arguments = { text = "hello" } } ]
  usage = { prompt_tokens = 1200, completion_tokens = 30, cached_tokens = 200 }
  [[rule.turn]]
  text = "All done."
  usage = { prompt_tokens = 1300, completion_tokens = 12 }

[[rule]]
name = "bad-args"
match = { user_contains = "bad arguments" }
  [[rule.turn]]
  tool_calls = [ { name = "echo", arguments = { text = 42, extra = true } } ]
  [[rule.turn]]
  text = "I saw the error and stopped."
"""


def request(prompt: str, models: list[str] | None = None) -> InvocationRequest:
    return InvocationRequest(models=models or ["scripted-main"], prompt=prompt, system_message="You are tested.")


def test_tool_result_reaches_the_model_and_usage_is_exact(scripted, gateway_for):
    server = scripted(ECHO_PLAYBOOK)
    gateway = gateway_for(server)
    events: list[StreamEvent] = []
    result = gateway.invoke(request("please echo"), [echo_tool()], on_event=events.append)

    assert result.error is None
    assert result.final_message == "All done."
    assert [(c.name, c.arguments, c.result, c.success) for c in result.tool_calls] == [
        ("echo", {"text": "hello"}, "echo says hello", True)
    ]
    second = server.chat_requests[-1].body["messages"]
    assert any(m["role"] == "tool" and m["content"] == "echo says hello" for m in second)
    assert (result.usage.input, result.usage.output, result.usage.cache_read) == (2500, 42, 200)
    assert result.usage.per_model["scripted-main"].calls == 2
    assert result.context.limit > 0 and result.context.used > 0
    assert any(type(e).__name__ == "ToolFinished" for e in events)


def test_invalid_arguments_become_a_failed_result_and_the_session_continues(scripted, gateway_for):
    server = scripted(ECHO_PLAYBOOK)
    result = gateway_for(server).invoke(request("bad arguments"), [echo_tool()])

    assert result.error is None
    assert result.final_message == "I saw the error and stopped."
    (call,) = result.tool_calls
    assert not call.success
    tool_message = next(m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool")
    assert "invalid arguments for echo" in tool_message["content"]
    assert '"text"' in tool_message["content"]  # says what is expected


def test_a_handler_that_raises_becomes_a_failed_result(scripted, gateway_for):
    def explode(args: EchoArgs) -> str:  # a failure the model can act on (an internal error is not told: tools.py)
        raise OSError("the disk is on fire")

    server = scripted(ECHO_PLAYBOOK)
    result = gateway_for(server).invoke(request("please echo"), [echo_tool(explode)])

    assert result.error is None and result.final_message == "All done."
    assert not result.tool_calls[0].success
    tool_message = next(m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool")
    assert "the disk is on fire" in tool_message["content"]


def test_rate_limit_is_retried_and_the_retry_is_visible(scripted, gateway_for):
    playbook = """
[playbook]
name = "rate-limited"
models = ["scripted-main"]
[[rule]]
name = "limit"
max_uses = 2
  [[rule.turn]]
  fault = "rate_limit"
  retry_after = 1
[[rule]]
name = "answer"
  [[rule.turn]]
  text = "Finally."
"""
    server = scripted(playbook)
    events: list[StreamEvent] = []
    result = gateway_for(server).invoke(request("anything"), on_event=events.append)

    assert result.error is None and result.final_message == "Finally."
    kinds = [r.response_kind for r in server.chat_requests]
    assert kinds == ["rate_limit", "rate_limit", "ok"]
    retries = [e for e in events if isinstance(e, RetryScheduled)]
    assert len(retries) == 2 and all(r.reason == "rate_limit" for r in retries)


def test_a_model_still_rate_limited_after_the_retry_budget_falls_back_to_the_next(scripted, gateway_for):
    playbook = """
[playbook]
name = "limited"
models = ["scripted-main", "scripted-other"]
[[rule]]
name = "limit"
  [rule.match]
  model = "scripted-main"
  [[rule.turn]]
  fault = "rate_limit"
  retry_after = 0
[[rule]]
name = "answer"
  [[rule.turn]]
  text = "Answered by the other."
"""
    server = scripted(playbook)
    events: list[StreamEvent] = []
    gateway = gateway_for(server, retry_attempts=1)
    result = gateway.invoke(request("anything", models=["scripted-main", "scripted-other"]), on_event=events.append)

    assert result.error is None and result.model == "scripted-other"
    assert result.final_message == "Answered by the other."
    (fell,) = [e for e in events if isinstance(e, ModelFellBack)]
    assert (fell.from_model, fell.to_model) == ("scripted-main", "scripted-other")
    assert fell.why.startswith("still rate-limited after 1 retries: ")
    by_gateway = [e for e in events if isinstance(e, RetryScheduled) and e.by == "gateway"]
    assert [(r.model, r.reason) for r in by_gateway] == [("scripted-main", "rate_limited")]  # the budget, then on
    assert [a.model for a in result.attempts] == ["scripted-main", "scripted-main", "scripted-other"]


def test_an_absent_model_falls_back_to_the_next_with_a_warning(scripted, gateway_for):
    server = scripted(ECHO_PLAYBOOK)
    events: list[StreamEvent] = []
    result = gateway_for(server).invoke(
        request("please echo", models=["no-such-model", "scripted-other"]), [echo_tool()], on_event=events.append
    )

    assert result.error is None and result.model == "scripted-other"
    fallbacks = [e for e in events if isinstance(e, ModelFellBack)]
    assert [(f.from_model, f.to_model) for f in fallbacks] == [("no-such-model", "scripted-other")]
    assert [a.model for a in result.attempts] == ["no-such-model", "scripted-other"]
    assert result.attempts[0].error.kind is ErrorKind.MODEL_UNAVAILABLE


def test_no_model_left_is_a_clear_model_unavailable_error(scripted, gateway_for):
    server = scripted(ECHO_PLAYBOOK)
    result = gateway_for(server).invoke(request("please echo", models=["gone-1", "gone-2"]))
    assert result.error is not None and result.error.kind is ErrorKind.MODEL_UNAVAILABLE
    assert "gone-1" in result.error.message and "gone-2" in result.error.message


def test_a_dropped_connection_is_classified_transient(scripted, gateway_for):
    playbook = """
[playbook]
name = "drops"
models = ["scripted-main"]
[[rule]]
name = "drop"
  [[rule.turn]]
  fault = "drop"
"""
    server = scripted(playbook)
    result = gateway_for(server, retry_attempts=0).invoke(request("anything"))
    assert result.error is not None
    assert result.error.kind is ErrorKind.TRANSIENT
    assert all(r.response_kind == "drop" for r in server.chat_requests)


def test_a_tool_handler_can_open_a_second_session_without_deadlock(scripted, gateway_for):
    """The oracle case: a handler (on the gateway's loop) waits for another session on the same client."""
    playbook = (
        ECHO_PLAYBOOK
        + """
[[rule]]
name = "inner"
match = { user_contains = "inner session" }
  [[rule.turn]]
  text = "inner verdict: fine"
"""
    )
    server = scripted(playbook)
    gateway = gateway_for(server)

    def nested(args: EchoArgs) -> str:
        return gateway.invoke(request("inner session")).final_message

    started = time.monotonic()
    result = gateway.invoke(request("please echo"), [echo_tool(nested)])
    assert result.error is None
    assert result.tool_calls[0].result == "inner verdict: fine"
    assert time.monotonic() - started < 60


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is not alive
        return stat.read().split()[2] != "Z"


def test_closing_the_gateway_stops_the_cli_process(scripted, gateway_for):
    gateway = gateway_for(scripted(ECHO_PLAYBOOK))
    pid = gateway.cli_pid
    assert pid and _alive(pid)
    gateway.close()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


@pytest.mark.parametrize("ending", ["ctrl-c", "exception"])
def test_no_cli_process_survives_ctrl_c_or_an_exception(scripted, cli_path, tmp_path, ending):
    server = scripted(ECHO_PLAYBOOK)
    script = textwrap.dedent(f"""
        import sys, time
        from lopen.copilot.gateway import Gateway, GatewayConfig, ProviderConfig
        config = GatewayConfig(cli_path={cli_path!r}, default_model="scripted-main",
            provider=ProviderConfig(base_url={server.url!r}), copilot_home={str(tmp_path / "home")!r})
        gateway = Gateway(config).start()
        print(gateway.cli_pid, flush=True)
        if {ending!r} == "exception":
            sys.stdin.readline()  # the test has seen the CLI alive
            raise RuntimeError("something broke")
        time.sleep(60)
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    pid = int(child.stdout.readline())
    assert _alive(pid)
    if ending == "ctrl-c":
        child.send_signal(signal.SIGINT)
    else:
        child.stdin.write("go\n")
        child.stdin.flush()
    child.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), json.dumps({"stderr": child.stderr.read()[-500:]})


SUBAGENT_PLAYBOOK = """
[playbook]
name = "subagent"
models = ["scripted-main"]

[[rule]]
name = "sub"
match = { user_contains = "SUB-AGENT WORK" }
  [[rule.turn]]
  text = "Running it."
  tool_calls = [ { name = "bash", arguments = { command = "echo from-the-sub-agent", description = "say it" } } ]
  usage = { prompt_tokens = 700, completion_tokens = 20 }
  [[rule.turn]]
  text = "The sub-agent is done."
  usage = { prompt_tokens = 800, completion_tokens = 10 }

[[rule]]
name = "main"
match = { user_contains = "delegate it" }
  [[rule.turn]]
  text = "Delegating."
  usage = { prompt_tokens = 1000, completion_tokens = 40 }
    [[rule.turn.tool_calls]]
    name = "task"
    [rule.turn.tool_calls.arguments]
    name = "helper"
    description = "run the sub work"
    prompt = "SUB-AGENT WORK: echo a line"
    agent_type = "task"
    mode = "sync"
    model = "scripted-main"
  [[rule.turn]]
  text = "All done."
  usage = { prompt_tokens = 1100, completion_tokens = 5 }
"""


def test_a_sub_agents_calls_and_usage_are_reported_with_its_agent_id(scripted, gateway_for, tmp_path):
    """Issue 15: a sub-agent started through the CLI's `task` tool — its model calls and tool calls are
    reported (attributed by agent id), so they are recorded and counted, never dropped."""
    server = scripted(SUBAGENT_PLAYBOOK)
    gateway = gateway_for(server)
    events: list[StreamEvent] = []
    result = gateway.invoke(
        msgspec.structs.replace(request("delegate it"), working_directory=str(tmp_path)), [], on_event=events.append
    )

    assert result.error is None, result.error
    assert result.final_message == "All done."  # the session's own answer, not the sub-agent's
    usage = [e for e in events if type(e).__name__ == "UsageReported"]
    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    assert len(usage) == len(answered) == 4
    assert sum(u.input for u in usage) == sum(r.usage.prompt_tokens for r in answered) == 3600
    by_agent = {u.agent_id for u in usage}
    assert "" in by_agent and len(by_agent) == 2  # the session's calls and the sub-agent's
    assert sum(u.first_of_attempt for u in usage) == 1  # one user prompt: one premium charge
    sub_tools = [c for c in result.tool_calls if c.agent_id]
    assert [c.name for c in sub_tools] == ["bash"] and "from-the-sub-agent" in sub_tools[0].result
    assert [c.name for c in result.tool_calls if not c.agent_id] == ["task"]


RETRY_PLAYBOOK = """
[playbook]
name = "retry"
models = ["scripted-main"]

[[rule]]
name = "fails-after-a-call"
match = { user_contains = "flaky work", from_turn = 1 }
max_uses = 6
  [[rule.turn]]
  fault = "drop"

[[rule]]
name = "work"
match = { user_contains = "flaky work" }
  [[rule.turn]]
  text = "Calling echo."
  tool_calls = [ { name = "echo", arguments = { text = "hello" } } ]
  usage = { prompt_tokens = 900, completion_tokens = 30 }
  [[rule.turn]]
  text = "All done."
  usage = { prompt_tokens = 950, completion_tokens = 12 }
"""


def test_a_gateway_retry_keeps_the_usage_of_every_attempt(scripted, gateway_for):
    """Issue 15: the first attempt made a model call before the CLI gave up; the gateway's retry is a
    new attempt. Both attempts' calls are reported, and each attempt's first call is a new prompt."""
    server = scripted(RETRY_PLAYBOOK)
    gateway = gateway_for(server, retry_attempts=1)
    events: list[StreamEvent] = []
    result = gateway.invoke(request("flaky work"), [echo_tool()], on_event=events.append)

    assert result.error is None, result.error
    assert len(result.attempts) == 2 and result.attempts[0].error is not None
    usage = [e for e in events if type(e).__name__ == "UsageReported"]
    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    assert len(usage) == len(answered) == 3  # turn 0 of the failed attempt, then turns 0 and 1
    assert sum(u.input for u in usage) == sum(r.usage.prompt_tokens for r in answered) == 2750
    assert [u.first_of_attempt for u in usage] == [True, True, False]


BUILDER_PLAYBOOK = """
[playbook]
name = "builder"
models = ["scripted-main"]
default_usage = { prompt_tokens = 1000, completion_tokens = 100 }

[[rule]]
name = "answer"
  [[rule.turn]]
  text = "Done."
"""


def test_a_builder_session_sends_only_its_tools_lopens_guidance_and_not_the_repositorys_instructions(
    scripted, gateway_for, tmp_path
):
    """The CLI injects a repository's AGENTS.md into its own prompt unseen; a builder session turns that
    off (Lopen sends the instructions itself, recorded) and offers only the CLI tools its kind needs."""
    from lopen.copilot.session_options import LAST_INSTRUCTIONS
    from lopen.workflow.prompts import GUIDANCE
    from lopen.workflow.steps import CLI_TOOLS, Kind

    project = tmp_path / "repo"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    marker = "Run ./check.sh and commit with --signoff"
    (project / "AGENTS.md").write_text(f"# Agents\n\n{marker}\n")
    server = scripted(BUILDER_PLAYBOOK)
    gateway = gateway_for(server)

    plain = InvocationRequest(
        models=["scripted-main"], prompt="plain", system_message="LOPEN-MESSAGE", working_directory=str(project)
    )
    assert gateway.invoke(plain).error is None
    builder = msgspec.structs.replace(
        plain, prompt="builder", cli_tools=CLI_TOOLS[Kind.PLANNING], builder=True, guidance=GUIDANCE
    )
    assert gateway.invoke(builder, [echo_tool()]).error is None

    default, built = (r.body for r in server.chat_requests)  # one request each, in order
    system = built["messages"][0]["content"]
    assert marker in default["messages"][0]["content"]  # the CLI's default: the file is injected
    assert marker not in system and "Ask for guidance" not in system
    assert GUIDANCE in system and LAST_INSTRUCTIONS in system and "LOPEN-MESSAGE" in system
    assert sorted(t["function"]["name"] for t in built["tools"]) == sorted([*CLI_TOOLS[Kind.PLANNING], "echo"])
    assert len(json.dumps(built)) < 0.6 * len(json.dumps(default))


def _looping_playbook(turns: int) -> str:
    loop = "".join(
        f'  [[rule.turn]]\n  text = "Trying again ({n})."\n'
        '  tool_calls = [ { name = "echo", arguments = { text = "again" } } ]\n'
        "  usage = { prompt_tokens = 1000, completion_tokens = 10 }\n"
        for n in range(turns)
    )
    return (
        '[playbook]\nname = "loop"\nmodels = ["scripted-main"]\n\n'
        '[[rule]]\nname = "loop"\nmatch = { user_contains = "loop" }\n' + loop + '  [[rule.turn]]\n  text = "Done."\n'
    )


@pytest.mark.parametrize(
    ("cap", "why"),
    [
        ({"max_turns": 5}, "made 5 tool calls, the most one may make (copilot.max_turns_per_invocation)"),
        ({"max_tokens": 4000}, "used 4,040 tokens, the most one may use (copilot.max_tokens_per_invocation)"),
    ],
    ids=["turns", "tokens"],
)
def test_a_looping_invocation_is_stopped_at_its_cap_and_not_retried(scripted, gateway_for, cap, why):
    """Issue 21: 120 tool turns of one invocation spent 455 % of a module's budget before Lopen stopped it."""
    server = scripted(_looping_playbook(40))
    gateway = gateway_for(server)
    req = msgspec.structs.replace(request("please loop"), **cap)
    result = gateway.invoke(req, [echo_tool()])

    assert result.error is not None and result.error.kind is ErrorKind.CAPPED
    assert why in result.error.message
    assert len(result.attempts) == 1  # not retried
    assert len(server.chat_requests) <= 6  # stopped where the cap was reached, not after 40 turns
    assert len(result.tool_calls) <= 5
