"""`lopen mcp` driven by a real MCP client (the official `mcp` SDK's client), over stdio and over
streamable HTTP, on a store holding a realistic story (tests/story.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import story
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from events import catalogue as ev
from events.recorded import module_stream
from events.store import EventStore

READ_TOOLS = {
    "list_modules",
    "module_state",
    "read_plan",
    "list_sessions",
    "show_session",
    "replay_session",
    "task_log",
    "tokens",
    "check_spec",
}
CONTROL_TOOLS = {"start_run", "pause_run", "resume_run", "queue_message", "approve_spec"}
CALLER = "mcp:lopen-tests 1.0"
CLIENT = Implementation(name="lopen-tests", version="1.0")


def server_env(root: Path, **extra: str) -> dict[str, str]:
    """A clean environment for `lopen mcp`; PYTHONPATH passed on, so a checkout other than the installed
    one (a git worktree) serves its own code."""
    passed = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return {"PATH": os.environ["PATH"], "HOME": str(root), "NO_COLOR": "1", **passed, **extra}


@contextlib.asynccontextmanager
async def connect(
    root: Path, *flags: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lopen", "mcp", *flags],
        cwd=str(cwd or root),
        env=env or server_env(root),
    )
    async with Client(params, client_info=CLIENT, read_timeout_seconds=60) as client:
        yield client


def run(test: Callable[[], Awaitable[None]], seconds: float = 120) -> None:
    async def bounded() -> None:
        with anyio.fail_after(seconds):
            await test()

    anyio.run(bounded)


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if set(content) == {"result"} else content
    return json.loads(result.content[0].text)


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return result.content[0].text


def replay_json(root: Path, session: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "lopen", "replay", session, "--json"],
        cwd=root,
        env=server_env(root),
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The story, read only."""
    root = story.make_project(tmp_path_factory.mktemp("mcp") / "project")
    story.write_story(root)
    return root


@pytest.fixture
def steered(tmp_path: Path) -> Path:
    """The story plus a module `greet` whose session is running: the control tests change it."""
    root = story.make_project(tmp_path / "project")
    story.write_story(root)
    spec = root / "docs" / "requirements" / "greet" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text(story.SPEC.replace("name: slugify", "name: greet"), encoding="utf-8")
    with EventStore.open(root) as store:
        store.append(module_stream(story.PROJECT, "greet"), [ev.SessionStarted(session_id="greet-20261126-1")])
    return root


# -- reading -----------------------------------------------------------------------------------------


def test_a_client_lists_the_read_tools_and_no_control_tool_without_the_flag(audited: Path) -> None:
    async def test() -> None:
        async with connect(audited) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == READ_TOOLS
            assert not tools & CONTROL_TOOLS
            assert "without --allow-control" in (client.instructions or "")
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert "lopen://sessions/{session_id}/replay" in templates
            assert "lopen://modules/{module}/plan" in templates

    run(test)


def test_a_client_reads_a_sessions_replay_page_by_page(audited: Path) -> None:
    expected = replay_json(audited, story.SESSION_1)

    async def test() -> None:
        async with connect(audited) as client:
            events: list[dict[str, Any]] = []
            after: int | None = 0
            pages = 0
            while after is not None:
                page = await call(client, "replay_session", session_id=story.SESSION_1, after_seq=after, limit=20)
                events += page["events"]
                after = page["next_after_seq"]
                pages += 1
            assert events == expected and pages == 3
            rejected = await call(
                client, "replay_session", session_id=story.SESSION_1, types=["OracleVerdictRecorded"], task="core/1"
            )
            assert [e["passed"] for e in rejected["events"]] == [False, True]
            assert rejected["events"][0]["findings"][0]["description"] == story.REJECTION
            text = (await client.read_resource(f"lopen://sessions/{story.SESSION_1}/replay")).contents[0].text
            assert [json.loads(line) for line in text.splitlines()] == expected

    run(test)


def test_a_client_reads_modules_plans_tokens_logs_and_spec_checks(audited: Path) -> None:
    async def test() -> None:
        async with connect(audited) as client:
            modules = await call(client, "list_modules")
            assert modules == [
                {
                    "module": "slugify",
                    "state": "in progress",
                    "spec_check": "ok",
                    "approved": True,
                    "tasks": 2,
                    "tasks_complete": 2,
                    "unfinished_session": story.SESSION_2,
                }
            ]
            state = await call(client, "module_state", module="slugify")
            assert state["approval"]["approver"] == story.APPROVER
            core = next(c for c in state["components"] if c["slug"] == "core")
            assert [(t["id"], t["state"], t["commit"]) for t in core["tasks"]] == [
                ("core/1", "complete", story.COMMIT_1),
                ("core/2", "complete", story.COMMIT_2),
            ]
            plan = await call(client, "read_plan", module="slugify")
            assert "`core/1` Normalize text" in plan
            tokens = await call(client, "tokens", module="slugify")
            assert tokens["modules"][0]["input"] == 9800 + 31000 + 3 * 4100
            assert tokens["budget"]["token_budget_per_module"] == 0
            log = await call(client, "task_log", task="core/1")
            assert log["module"] == "slugify" and log["events"][-1]["type"] == "CommitRecorded"
            check = await call(client, "check_spec", module="slugify")
            assert check["ok"] and check["acceptance_criteria"] == 2
            sessions = await call(client, "list_sessions")
            assert [s["id"] for s in sessions] == [story.SESSION_1, story.SESSION_2]
            assert "no session nope-20261126-1" in await error_of(client, "show_session", session_id="nope-20261126-1")
            assert "not a module name" in await error_of(client, "module_state", module="../etc")

    run(test)


def test_project_option_serves_a_project_from_anywhere(audited: Path, tmp_path: Path) -> None:
    async def test() -> None:
        async with connect(audited, "--project", str(audited), cwd=tmp_path) as client:
            assert [m["module"] for m in await call(client, "list_modules")] == ["slugify"]

    run(test)


# -- steering -----------------------------------------------------------------------------------------


def control_events(root: Path, session: str) -> list[dict[str, Any]]:
    return [e for e in replay_json(root, session) if e["type"] in ("ControlRequested", "PauseRequested")]


def test_control_actions_are_recorded_with_the_caller(steered: Path) -> None:
    async def test() -> None:
        async with connect(steered, "--allow-control") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == READ_TOOLS | CONTROL_TOOLS

            paused = await call(client, "pause_run", module="greet", reason="lunch")
            assert paused == {
                "module": "greet",
                "session": "greet-20261126-1",
                "requested_by": CALLER,
                "reason": "lunch",
            }
            assert "no running session" in await error_of(client, "pause_run", module="slugify")

            queued = await call(client, "queue_message", module="greet", text="use the separator as given")
            assert "there is no module greeet" in await error_of(client, "queue_message", module="greeet", text="x")
            approved = await call(client, "approve_spec", module="slugify")
            assert approved["spec_hash"] and approved["approver"]
            state = await call(client, "module_state", module="greet")
            assert state["pause_requested_by"] == CALLER and state["queued_messages"] == 1

        events = control_events(steered, "greet-20261126-1")
        assert [(e["type"], e.get("action", ""), e.get("requested_by") or e.get("caller")) for e in events] == [
            ("PauseRequested", "", CALLER),
            ("ControlRequested", "pause", CALLER),
            ("ControlRequested", "queue-message", CALLER),
        ]
        assert events[2]["detail"] == queued["message_id"]
        message = next(e for e in replay_json(steered, "greet-20261126-1") if e["type"] == "UserMessageQueued")
        assert message["text"] == "use the separator as given" and message["message_id"] == queued["message_id"]
        with EventStore.open(steered) as store:
            history = [r.event for r in store.read_stream(module_stream(story.PROJECT, "slugify"))]
        approval, control = history[-2:]
        assert isinstance(approval, ev.SpecApproved) and approval.spec_hash == approved["spec_hash"]
        assert isinstance(control, ev.ControlRequested) and (control.action, control.caller) == ("approve-spec", CALLER)

    run(test)


def test_start_run_spawns_a_detached_headless_run_with_a_log(steered: Path) -> None:
    # the run stops at its pre-flight (the provider it is pointed at does not answer): only the start is tested here
    env = server_env(
        steered, LOPEN_PROVIDER__TYPE="openai", LOPEN_PROVIDER__BASE_URL="http://127.0.0.1:9/v1", COPILOT_CLI_PATH=""
    )

    async def test() -> dict[str, Any]:
        async with connect(steered, "--allow-control", env=env) as client:
            return await call(client, "start_run", module="slugify", prompt="keep it small")

    started: dict[str, Any] = {}

    async def capture() -> None:
        started.update(await test())

    run(capture)
    try:
        assert started["command"] == ["lopen", "run", "slugify", "--headless", "--prompt", "keep it small"]
        log = Path(started["log"])
        assert log.parent == steered / ".lopen" / "runs" and log.name.startswith("slugify-") and log.exists()
        with EventStore.open(steered) as store:
            last = list(store.read_stream(module_stream(story.PROJECT, "slugify")))[-1].event
        assert isinstance(last, ev.ControlRequested) and (last.action, last.caller) == ("start-run", CALLER)
        assert f"pid {started['pid']}" in last.detail and str(log) in last.detail
    finally:
        with contextlib.suppress(ProcessLookupError, KeyError):
            os.kill(started["pid"], 15)


def test_control_on_an_unknown_module_says_what_why_and_how(steered: Path) -> None:
    async def test() -> None:
        async with connect(steered, "--allow-control") as client:
            text = await error_of(client, "start_run", module="nothing")
            assert "error: module nothing has no specification" in text and "fix:" in text

    run(test)


def test_resume_waits_for_a_paused_run_that_is_still_closing_and_refuses_a_running_one(steered: Path) -> None:
    """A client that sees "paused" and resumes at once meets the pausing process still holding the
    module (CI saw "already being run"): resume waits for it to let go. A running session's process
    is refused at once."""
    from events.locks import ModuleLock
    from lopen.errors import LopenError
    from lopen.mcp.server import Operations

    ops = Operations(steered, server_env(steered))
    closing = ModuleLock(steered, "greet")
    closing.acquire()  # the run's process, busy with its last writes
    waits: list[float] = []

    def refuse(seconds: float) -> None:
        waits.append(seconds)

    ops.sleep = refuse  # type: ignore[method-assign]
    with pytest.raises(LopenError, match="already being run"):
        ops._not_running("greet")
    assert waits == []  # the session is running: no waiting for it

    with EventStore.open(steered) as store:
        store.append(module_stream(story.PROJECT, "greet"), [ev.SessionPaused(session_id="greet-20261126-1")])

    def close(seconds: float) -> None:
        waits.append(seconds)
        closing.release()  # the process exits while resume waits

    ops.sleep = close  # type: ignore[method-assign]
    ops._not_running("greet")
    assert len(waits) == 1


# -- streamable HTTP ------------------------------------------------------------------------------------


@contextlib.contextmanager
def http_server(root: Path, *flags: str, **env: str) -> Any:
    child = subprocess.Popen(
        [sys.executable, "-m", "lopen", "mcp", "--http", "--port", "0", *flags],
        cwd=root,
        env=server_env(root, **env),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        url = child.stderr.readline().split(" on ")[1].split()[0]
        token = child.stderr.readline().split(": ", 1)[1].strip()
        yield url, token
    finally:
        child.terminate()
        child.wait(30)


def test_http_serves_on_loopback_with_a_bearer_token(audited: Path) -> None:
    with http_server(audited) as (url, token):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp") and len(token) >= 32

        async def test() -> None:
            refused = await httpx2.AsyncClient().post(url, json={})
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
            wrong = await httpx2.AsyncClient(headers={"Authorization": "Bearer nope"}).post(url, json={})
            assert wrong.status_code == 401
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            async with http, Client(streamable_http_client(url, http_client=http), client_info=CLIENT) as client:
                assert {t.name for t in (await client.list_tools()).tools} == READ_TOOLS
                page = await call(client, "replay_session", session_id=story.SESSION_2, limit=5)
                assert [e["seq"] for e in page["events"]] == [1, 46, 47, 48, 49]

        run(test)


def test_http_takes_its_token_from_a_private_file_or_the_environment_never_the_command_line(
    audited: Path, tmp_path: Path
) -> None:
    """A command line is readable by every process (a model's shell read one in /proc and approved a
    spec over MCP): the token comes from LOPEN_MCP_TOKEN or a 0600 file; --token is refused."""
    with http_server(audited, LOPEN_MCP_TOKEN="a-token-of-my-own") as (_, token):
        assert token == "a-token-of-my-own"
    secret = tmp_path / "mcp-token"
    secret.write_text("a-token-from-a-file\n")
    secret.chmod(0o600)
    with http_server(audited, "--token-file", str(secret)) as (_, token):
        assert token == "a-token-from-a-file"

    def refused(*flags: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "lopen", "mcp", "--http", "--port", "0", *flags],
            cwd=audited,
            env=server_env(audited),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1 and "Traceback" not in out.stderr and "fix:" in out.stderr, out.stderr
        return out.stderr

    assert "--token is refused: a command line is readable" in refused("--token", "on-the-command-line")
    secret.chmod(0o644)
    assert f"the token file {secret} is readable or writable by others" in refused("--token-file", str(secret))


def test_http_refuses_other_hosts(audited: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lopen", "mcp", "--http", "--host", "0.0.0.0"],
        cwd=audited,
        env=server_env(audited),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "error: --host 0.0.0.0 is not a loopback address" in out.stderr and "fix:" in out.stderr


# -- a whole run, steered ---------------------------------------------------------------------------------


@pytest.mark.e2e
def test_start_pause_and_resume_a_scripted_run_to_completion(tmp_path: Path, cli_path: str) -> None:
    """ENGINE: start the bundled example's scripted run over MCP, pause it while it runs, resume it,
    and see it complete. Needs the rewritten engine (pause before the next invocation; --resume)."""
    import lopen
    from lopen.scripted_model import ScriptedModelServer, load_playbook

    package = Path(lopen.__file__).parent
    root = tmp_path / "demo"
    shutil.copytree(package / "examples" / "slugify", root)
    git = ["git", "-c", "user.name=Demo", "-c", "user.email=demo@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "example"]):
        subprocess.run([*git, *args], cwd=root, check=True)
    with ScriptedModelServer(load_playbook(package / "playbooks" / "slugify.toml")) as model:
        env = server_env(
            tmp_path,
            COPILOT_CLI_PATH=cli_path,
            LOPEN_PROVIDER__TYPE="openai",
            LOPEN_PROVIDER__BASE_URL=model.url,
            LOPEN_MODELS__PLANNING="scripted-opus",
            LOPEN_MODELS__BUILDING="scripted-opus",
            LOPEN_MODELS__REQUIREMENT_GATHERING="scripted-opus",
            LOPEN_MODELS__RESEARCH="scripted-opus",
            LOPEN_MODELS__ORACLE="scripted-mini",
            LOPEN_MODELS__FALLBACK="",
            GIT_AUTHOR_NAME="Demo",
            GIT_AUTHOR_EMAIL="demo@example.com",
            GIT_COMMITTER_NAME="Demo",
            GIT_COMMITTER_EMAIL="demo@example.com",
        )

        async def until(
            client: Client, what: Callable[[dict[str, Any]], bool], run: dict[str, Any], seconds: float = 300
        ) -> dict[str, Any]:
            """Poll the module's state until ``what`` holds; fail at once, with its log, when the run's
            process ended without it."""
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                state = await call(client, "module_state", module="slugify")
                if what(state):
                    return state
                try:
                    os.kill(run["pid"], 0)
                except ProcessLookupError:
                    state = await call(client, "module_state", module="slugify")
                    if what(state):
                        return state
                    raise AssertionError(f"the run ended early:\n{Path(run['log']).read_text()[-3000:]}") from None
                await anyio.sleep(0.2)  # polling another process's progress, bounded by the deadline
            raise AssertionError(f"gave up waiting: {state}")

        async def test() -> None:
            async with connect(root, "--allow-control", env=env) as client:
                await call(client, "approve_spec", module="slugify")
                run = await call(client, "start_run", module="slugify")
                state = await until(client, lambda s: s["unfinished_session"] != "", run)
                session = state["unfinished_session"]
                await call(client, "pause_run", module="slugify", reason="checking in")
                state = await until(client, lambda s: s["sessions"].get(session) == "paused", run)
                assert state["state"] != "complete"
                run = await call(client, "resume_run", module="slugify")
                state = await until(
                    client, lambda s: s["state"] == "complete" and s["sessions"].get(session) == "completed", run
                )
                assert state["sessions"][session] == "completed"
            actions = [e["action"] for e in replay_json(root, session) if e["type"] == "ControlRequested"]
            assert actions == ["pause", "resume"]

        run(test, 600)


def test_an_approval_through_mcp_is_replayed_as_the_client_not_only_the_git_user(steered: Path) -> None:
    """Issue 22, item 4: the session built from an approval made by an MCP client told its story as if the
    git user had approved it in a terminal; the approval now says which client asked."""

    async def test() -> None:
        async with connect(steered, "--allow-control") as client:
            await call(client, "approve_spec", module="greet")

    run(test)
    with EventStore.open(steered) as store:
        store.append(module_stream(story.PROJECT, "greet"), [ev.SessionStarted(session_id="greet-20261126-2")])
    approval = replay_json(steered, "greet-20261126-2")[0]
    assert approval["type"] == "SpecApproved" and approval["via"] == CALLER
    text = subprocess.run(
        [sys.executable, "-m", "lopen", "replay", "greet-20261126-2", "--width", "200"],
        cwd=steered,
        env=server_env(steered),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(line for line in text.splitlines() if "SpecApproved" in line)
    assert line.endswith(f"via {CALLER}"), line
