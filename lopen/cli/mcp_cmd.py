"""`lopen mcp`: Lopen as an MCP server (stdio, or streamable HTTP on loopback with a bearer token)."""

from __future__ import annotations

from pathlib import Path

import typer

TOKEN_ENV = "LOPEN_MCP_TOKEN"
PROJECT = typer.Option(None, "--project", help="The project to serve (default: the one around the working directory).")


def mcp(
    http: bool = typer.Option(False, "--http", help="Serve streamable HTTP on a loopback address instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to listen on (with --http)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (with --http; 0 picks a free one)."),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar=TOKEN_ENV,
        show_envvar=True,
        help="Bearer token clients must send (with --http); default: a new random one, printed at start.",
    ),
    allow_control: bool = typer.Option(
        False,
        "--allow-control",
        help="Also offer the tools that steer runs: start, pause, resume, queue a message, approve a spec.",
    ),
    project: Path | None = PROJECT,
) -> None:
    """Serve Lopen's operations over MCP for Copilot Chat, the Copilot CLI or another agent (docs/mcp.md).

    Read-only unless --allow-control: modules and their state, plans, sessions, replays, task logs,
    tokens and budgets, the spec check. Every control action is recorded with the client's name.
    """
    import sys

    from lopen.project import find_root

    root = find_root(project)
    try:
        import lopen.mcp.server as server
    except ImportError as exc:  # the SDK is a dependency; a broken install says so
        from lopen.errors import LopenError

        raise LopenError(
            "the MCP server needs the `mcp` package",
            str(exc),
            "reinstall Lopen into its environment (bin/setup, or pip install -e .)",
        ) from None
    if not http:
        if token:
            typer.echo(f"warning: --token / {TOKEN_ENV} is ignored over stdio", err=True)
        server.serve_stdio(root, allow_control)
        return
    server.serve_http(
        root,
        allow_control,
        host,
        port,
        token or server.new_token(),
        lambda line: print(line, file=sys.stderr, flush=True),
    )
