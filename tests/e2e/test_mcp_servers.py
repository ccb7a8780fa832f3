"""The user's MCP servers (mcp.servers) through the real Copilot CLI and a real MCP server: Lopen's own
`lopen mcp`, read-only over stdio. A task's session calls its tools: a listed tool is allowed and recorded,
an unlisted one is not offered and its call fails, recorded too; the server runs inside the run's sandbox;
only task and verification sessions are given it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import lopen
from events import catalogue as ev
from lopen.app.demo import prepare_project
from lopen.scripted_model import LoggedRequest

from .scenario import DEMO_RULES, about, approved_project, playbook, run_here, story, turn

pytestmark = pytest.mark.e2e

CHECKOUT = Path(lopen.__file__).resolve().parents[1]
SECRET = "mcp-env-secret-5d2c0f9a1b7e"


def offered(entry: LoggedRequest) -> list[str]:
    """The MCP tools the model was offered in one request (the CLI names them <server>-<tool>)."""
    return sorted(t["function"]["name"] for t in (entry.body or {}).get("tools", []) if "-" in t["function"]["name"])


@contextlib.contextmanager
def http_server(project: Path) -> Iterator[tuple[str, str]]:
    """`lopen mcp --http` on a free loopback port, serving ``project``: (its URL, its bearer token)."""
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    env.pop("LOPEN_MCP_TOKEN", None)
    argv = [sys.executable, "-m", "lopen", "mcp", "--http", "--port", "0", "--project", str(project)]
    child = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr is not None
        url = child.stderr.readline().split(" on ")[1].split()[0]
        token = child.stderr.readline().split(": ", 1)[1].strip()
        yield url, token
    finally:
        child.terminate()
        child.wait(30)


def test_a_task_calls_the_users_mcp_server_allowed_by_name_recorded_and_confined(
    tmp_path, cli_path, scripted, monkeypatch
):
    root = approved_project(tmp_path)
    other = prepare_project(tmp_path / "other")  # what the servers serve: a project of its own
    web = contextlib.ExitStack()
    url, token = web.enter_context(http_server(other))
    monkeypatch.setenv("LOPEN_MCP_TEST_TOKEN", token)  # the header names it: ${LOPEN_MCP_TEST_TOKEN}
    servers = {
        "lopen": {
            "command": sys.executable,
            "args": ["-m", "lopen", "mcp", "--project", str(other)],
            "env": {"PYTHONPATH": str(CHECKOUT), "LOPEN_MCP_TEST_TOKEN": SECRET},
            "tools": ["list_modules"],
        },
        "own": {
            "command": sys.executable,
            "args": ["-m", "lopen", "mcp", "--project", str(root)],
            "env": {"PYTHONPATH": str(CHECKOUT)},
            "tools": ["*"],
        },
        "web": {"url": url, "headers": {"Authorization": "Bearer ${LOPEN_MCP_TEST_TOKEN}"}, "tools": ["list_modules"]},
    }
    core_1 = DEMO_RULES["task-core-1"]
    asks = turn(
        "Checking both projects.",
        ("lopen-list_modules", {}),
        ("lopen-tokens", {}),
        ("own-list_modules", {}),
        ("web-list_modules", {}),
    )
    server = scripted(playbook(replace={"task-core-1": msgspec.structs.replace(core_1, turns=[asks, *core_1.turns])}))

    with web:
        ran = run_here(root, server, cli_path, {"mcp.servers": servers})

    assert ran.code == 0, ran.detail
    told = story(root)
    calls = {call.tool: call for call in told.of(ev.ToolCalled) if "-" in call.tool}
    listed, unlisted = calls["lopen-list_modules"], calls["lopen-tokens"]
    # the listed tool ran in the server, which read the other project: its module is in the answer
    assert listed.success and '"slugify"' in listed.result_summary, listed.result_summary
    # the unlisted one was never offered: the CLI refused the call, and the refusal is recorded
    assert not unlisted.success and "does not exist" in unlisted.result_summary
    decisions = sorted((d.target, d.allowed, d.reason) for d in told.of(ev.PermissionDecided) if d.kind == "mcp")
    assert decisions == [  # the model's calls in one response run at once: in any order
        ("lopen/list_modules", True, "listed in mcp.servers.lopen.tools"),
        ("own/list_modules", True, "listed in mcp.servers.own.tools"),
        ("web/list_modules", True, "listed in mcp.servers.web.tools"),
    ]
    # an HTTP server on this machine's loopback is reached from the sandbox (its URL joins the network's
    # allowlist), with the header's ${NAME} expanded from Lopen's environment
    assert calls["web-list_modules"].success and '"slugify"' in calls["web-list_modules"].result_summary
    # a stdio server runs inside the sandbox, like the model's shell: serving the project being built, it
    # sees neither its approved spec nor Lopen's store (outside the sandbox it would list the module)
    (started,) = told.of(ev.SessionStarted)
    own = calls["own-list_modules"]
    assert own.success
    if started.protection != "policy":
        assert own.result_summary == '{"result":[]}', own.result_summary
    task = told.invocations(kind="task", task="core/1")[0]
    assert listed.invocation_id == task.invocation_id
    # only task and verification sessions are offered the server: never planning nor the oracle
    requests = server.chat_requests
    every_own = ["own-check_spec", "own-list_modules", "own-list_sessions", "own-module_state", "own-read_plan"]
    every_own += ["own-replay_session", "own-show_session", "own-task_log", "own-tokens"]
    expected = ["lopen-list_modules", *every_own, "web-list_modules"]
    assert all(offered(r) == expected for r in requests if about(r, kind="task"))
    assert all(offered(r) == [] for r in requests if about(r, kind="planning") or about(r, kind="oracle"))
    assert any(about(r, kind="planning") for r in requests) and any(about(r, kind="oracle") for r in requests)
    # the servers' env and headers are secrets: in no event
    assert all(
        SECRET not in (text := msgspec.json.encode(event).decode()) and token not in text for event in told.events
    )
