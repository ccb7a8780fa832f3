"""Lopen as an MCP server (P3): Copilot Chat, the Copilot CLI or any MCP client can list, watch and —
when allowed — steer Lopen's runs. See docs/mcp.md.

``Operations`` is what the server can do, as plain functions over the project's event store (each
call opens the store and brings the projections up to date, so it always answers from the latest
events, even while a run is appending them). ``build_server`` wraps them as MCP tools and resources
on the official ``mcp`` SDK (imported only here, only when ``lopen mcp`` runs):

- reading: the modules and their state (the plan projection's rows: the one fold), a module's plan,
  the sessions, a session's replay (paged by seq), one task's log, tokens and budgets, the spec check;
- steering, only with ``--allow-control``: start a run in the background, pause it, resume it,
  queue a message for it, approve a spec. Each is recorded in the module's history as
  ``ControlRequested(action, caller, detail)`` with the MCP client's name as the caller.

Transports: stdio (``serve_stdio``), and streamable HTTP on a loopback address with a bearer token
(``serve_http``).

The ``mcp`` SDK is imported here, at the top: nothing but ``lopen mcp`` (and its tests) imports this
module. (No ``from __future__ import annotations``: the SDK reads the tools' annotations at run time.)
"""

import hmac
import ipaddress
import os
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

import lopen
from events.errors import Problem
from lopen.app.queries import DEFAULT_PAGE, PAGE_LIMIT
from lopen.errors import LopenError

CONTROL_TOOLS = ("start_run", "pause_run", "resume_run", "queue_message", "approve_spec")


class Operations:
    """Lopen's operations on the project at ``root``, as the MCP tools return them: each is one use
    case of the one door (``lopen.app.queries``, ``lopen.app.commands``), its result as plain
    JSON-able data."""

    sleep = staticmethod(time.sleep)  # how a wait for a closing run passes (a test makes it do the closing)

    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        from lopen.app.commands import Background
        from lopen.app.context import Project

        self.root = root
        self.env = dict(os.environ if env is None else env)
        self.project = Project(root, self.env)
        self.background = Background(self.project, sleep=lambda seconds: self.sleep(seconds))

    # -- reading ----------------------------------------------------------------------------------

    def modules(self) -> list[dict[str, Any]]:
        """Every module with a specification or a history: its state, spec check and progress."""
        from lopen.app import queries

        return msgspec.to_builtins(queries.modules(self.project))

    def module(self, module: str) -> dict[str, Any]:
        from lopen.app import queries

        return queries.module_view(self.project, module)

    def plan(self, module: str) -> str:
        from lopen.app import queries

        return queries.plan_text(self.project, module)

    def sessions(self, module: str = "") -> list[dict[str, Any]]:
        from lopen.app import queries

        return queries.sessions(self.project, module)

    def session(self, session_id: str) -> dict[str, Any]:
        from lopen.app import queries

        return queries.session(self.project, session_id)

    def replay(
        self,
        session_id: str,
        after_seq: int = 0,
        limit: int = DEFAULT_PAGE,
        task: str = "",
        invocation: str = "",
        types: list[str] | None = None,
    ) -> dict[str, Any]:
        from lopen.app import queries

        return queries.replay(self.project, session_id, after_seq, limit, task, invocation, types)

    def task_log(self, task: str, module: str = "") -> dict[str, Any]:
        from lopen.app import queries

        return queries.task_log(self.project, task, module)

    def tokens(self, module: str = "", session_id: str = "") -> dict[str, Any]:
        from lopen.app import queries

        return queries.tokens(self.project, module, session_id)

    def spec_check(self, module: str) -> dict[str, Any]:
        from lopen.app import queries

        return queries.spec_check(self.project, module).as_json()

    # -- steering ---------------------------------------------------------------------------------

    def start_run(self, module: str, caller: str, prompt: str = "") -> dict[str, Any]:
        return self.background.start(module, caller, prompt)

    def pause_run(self, module: str, caller: str, reason: str = "") -> dict[str, Any]:
        from lopen.app import commands

        return msgspec.to_builtins(commands.pause(self.project, module, caller, reason))

    def resume_run(self, module: str, caller: str) -> dict[str, Any]:
        return self.background.resume(module, caller)

    def queue_message(self, module: str, text: str, caller: str) -> dict[str, Any]:
        from lopen.app import commands

        return msgspec.to_builtins(commands.queue_message(self.project, module, text, caller))

    def approve_spec(self, module: str, caller: str) -> dict[str, Any]:
        from lopen.app import commands

        return msgspec.to_builtins(commands.approve(self.project, module, caller))

    def _not_running(self, module: str) -> None:
        self.background.not_running(module)


# -- the MCP server -------------------------------------------------------------------------------------


def caller_of(ctx: Context) -> str:
    """``mcp:<client name>`` from the client's own description of itself (its ``clientInfo``)."""
    try:
        info = ctx.session.client_params.client_info
        name = f"{info.name} {info.version}".strip() if info.version else info.name
    except AttributeError:
        name = ""
    return f"mcp:{name or 'unnamed client'}"


def build_server(ops: Operations, allow_control: bool = False) -> MCPServer:
    """The MCP server with Lopen's tools and resources (the control tools only when allowed)."""
    server = MCPServer(
        name="lopen",
        version=lopen.__version__,
        instructions=(
            "Lopen builds a software module from its specification by driving GitHub Copilot. Read where "
            "modules stand (list_modules, module_state, read_plan), what happened (list_sessions, "
            "replay_session, task_log), what it cost (tokens), and whether a spec is ready (check_spec)."
            + (
                " You may also steer runs: start_run, pause_run, resume_run, queue_message, approve_spec."
                if allow_control
                else " This server was started without --allow-control: it cannot change anything."
            )
        ),
        log_level="WARNING",
    )

    def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
        """A Lopen error becomes a tool error an agent can read: what, why, how to fix it."""

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Problem as exc:
                raise ToolError(exc.render()) from None

        call.__name__, call.__doc__ = fn.__name__, fn.__doc__
        return call

    # -- reading tools ----------------------------------------------------------------------------

    @server.tool(description="The project's modules: state, spec check, progress, unfinished session.")
    def list_modules() -> list[dict[str, Any]]:
        return guarded(ops.modules)()

    @server.tool(description="One module's state: components and tasks with their states, approval, sessions.")
    def module_state(module: str) -> dict[str, Any]:
        return guarded(ops.module)(module)

    @server.tool(description="A module's plan as a markdown checkbox tree (what .lopen/modules/<m>/plan.md holds).")
    def read_plan(module: str) -> str:
        return guarded(ops.plan)(module)

    @server.tool(description="The project's sessions (optionally of one module), oldest first.")
    def list_sessions(module: str = "") -> list[dict[str, Any]]:
        return guarded(ops.sessions)(module)

    @server.tool(description="One session: phase, step, status, plan tree, tokens, where it would resume.")
    def show_session(session_id: str) -> dict[str, Any]:
        return guarded(ops.session)(session_id)

    @server.tool(
        description=(
            "A session's history for audit, one page at a time: events with seq > after_seq (at most limit, "
            f"up to {PAGE_LIMIT}), each with seq, type, at (ISO-8601 UTC) and its fields. Continue with "
            "after_seq = next_after_seq until it is null. Optional filters: task (e.g. core/1), invocation, "
            "types (event type names, e.g. OracleVerdictRecorded)."
        )
    )
    def replay_session(
        session_id: str,
        after_seq: int = 0,
        limit: int = DEFAULT_PAGE,
        task: str = "",
        invocation: str = "",
        types: list[str] | None = None,
    ) -> dict[str, Any]:
        return guarded(ops.replay)(session_id, after_seq, limit, task, invocation, types)

    @server.tool(description="One task's events across every session: invocations, tool calls, verdicts, commits.")
    def task_log(task: str, module: str = "") -> dict[str, Any]:
        return guarded(ops.task_log)(task, module)

    @server.tool(description="Tokens and premium requests used (per module, or one session), against the budgets.")
    def tokens(module: str = "", session_id: str = "") -> dict[str, Any]:
        return guarded(ops.tokens)(module, session_id)

    @server.tool(description="Check a module's specification against the pattern Lopen needs (`lopen spec check`).")
    def check_spec(module: str) -> dict[str, Any]:
        return guarded(ops.spec_check)(module)

    # -- resources --------------------------------------------------------------------------------

    def as_json(value: Any) -> str:
        return msgspec.json.encode(value).decode()

    @server.resource("lopen://modules", name="modules", mime_type="application/json")
    def modules_resource() -> str:
        return as_json(guarded(ops.modules)())

    @server.resource("lopen://modules/{module}", name="module", mime_type="application/json")
    def module_resource(module: str) -> str:
        return as_json(guarded(ops.module)(module))

    @server.resource("lopen://modules/{module}/plan", name="plan", mime_type="text/markdown")
    def plan_resource(module: str) -> str:
        return guarded(ops.plan)(module)

    @server.resource("lopen://modules/{module}/tokens", name="tokens", mime_type="application/json")
    def tokens_resource(module: str) -> str:
        return as_json(guarded(ops.tokens)(module))

    @server.resource("lopen://sessions", name="sessions", mime_type="application/json")
    def sessions_resource() -> str:
        return as_json(guarded(ops.sessions)())

    @server.resource("lopen://sessions/{session_id}", name="session", mime_type="application/json")
    def session_resource(session_id: str) -> str:
        return as_json(guarded(ops.session)(session_id))

    @server.resource(
        "lopen://sessions/{session_id}/replay",
        name="replay",
        description=f"The first {PAGE_LIMIT} events of a session as JSON lines; page on with replay_session.",
        mime_type="application/x-ndjson",
    )
    def replay_resource(session_id: str) -> str:
        page = guarded(ops.replay)(session_id, 0, PAGE_LIMIT)
        return "".join(as_json(e) + "\n" for e in page["events"])

    if not allow_control:
        return server

    # -- steering tools ---------------------------------------------------------------------------

    @server.tool(
        description=(
            "Start `lopen run <module> --headless` in the background (its output goes to a log file under "
            ".lopen/runs/); returns its pid and log path. An optional prompt is queued for the model."
        )
    )
    def start_run(module: str, ctx: Context, prompt: str = "") -> dict[str, Any]:
        return guarded(ops.start_run)(module, caller_of(ctx), prompt)

    @server.tool(description="Ask the module's running session to pause before its next model invocation.")
    def pause_run(module: str, ctx: Context, reason: str = "") -> dict[str, Any]:
        return guarded(ops.pause_run)(module, caller_of(ctx), reason)

    @server.tool(description="Run the module again in the background: it resumes its unfinished session.")
    def resume_run(module: str, ctx: Context) -> dict[str, Any]:
        return guarded(ops.resume_run)(module, caller_of(ctx))

    @server.tool(description="Queue a message for the model; it is delivered in the next invocation, never mid-run.")
    def queue_message(module: str, text: str, ctx: Context) -> dict[str, Any]:
        return guarded(ops.queue_message)(module, text, caller_of(ctx))

    @server.tool(description="Approve the module's specification as it is now: the human gate before planning.")
    def approve_spec(module: str, ctx: Context) -> dict[str, Any]:
        return guarded(ops.approve_spec)(module, caller_of(ctx))

    return server


def serve_stdio(root: Path, allow_control: bool) -> None:
    build_server(Operations(root), allow_control).run("stdio")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(32)


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <the token lopen mcp printed>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="lopen"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(root: Path, allow_control: bool, host: str, port: int, token: str, say: Callable[[str], None]) -> None:
    """Streamable HTTP at ``http://<host>:<port>/mcp``, loopback only, bearer token required."""
    import anyio
    import uvicorn

    if not is_loopback(host):
        raise LopenError(
            f"--host {host} is not a loopback address",
            "the MCP server exposes your project's history (and with --allow-control, runs): it listens on "
            "this machine only",
            "use --host 127.0.0.1 (the default), ::1 or localhost; reach it from elsewhere through an SSH tunnel",
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise LopenError(
            f"cannot listen on {host}:{port}",
            exc.strerror or str(exc),
            "choose another --port (0 picks a free one)",
        ) from None
    sock.listen(64)
    bound = sock.getsockname()[1]
    server = build_server(Operations(root), allow_control)
    app = BearerAuth(server.streamable_http_app(host=host), token)
    shown = f"[{host}]" if ":" in host else host
    say(f"Lopen MCP server on http://{shown}:{bound}/mcp (streamable HTTP)")
    say(f"bearer token: {token}")
    say("control tools: " + ("enabled (--allow-control)" if allow_control else "off (read-only)"))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])
