"""`lopen mcp`: Lopen as an MCP server (stdio, or streamable HTTP on loopback with a bearer token).

The token never goes on the command line: every process of the machine can read a command line
(``/proc/<pid>/cmdline``) — a model's shell too, which then holds the key to ``--allow-control``.
It comes from ``LOPEN_MCP_TOKEN`` or from a file only its owner can read (``--token-file``), else
a new one is made and printed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import typer

from lopen.errors import LopenError

TOKEN_ENV = "LOPEN_MCP_TOKEN"
TOKEN_FILE = typer.Option(
    None,
    "--token-file",
    help=f"A file (mode 0600) holding the bearer token clients must send (with --http); default: "
    f"${TOKEN_ENV}, else a new random one, printed at start.",
)
PROJECT = typer.Option(None, "--project", help="The project to serve (default: the one around the working directory).")


def mcp(
    http: bool = typer.Option(False, "--http", help="Serve streamable HTTP on a loopback address instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to listen on (with --http)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (with --http; 0 picks a free one)."),
    token_file: Path | None = TOKEN_FILE,
    token: str | None = typer.Option(None, "--token", hidden=True),
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

    if token is not None:
        raise LopenError(
            "--token is refused: a command line is readable by every process on this machine",
            "a model's shell could read the token in /proc and steer your runs over MCP",
            f"put the token in {TOKEN_ENV}, or in a file only you can read and pass --token-file PATH",
        )
    secret = read_token_file(token_file) if token_file else os.environ.get(TOKEN_ENV, "")
    root = find_root(project)
    try:
        import lopen.mcp.server as server
    except ImportError as exc:  # the SDK is a dependency; a broken install says so
        from lopen.app.setup import reinstall_hint

        raise LopenError(
            "the MCP server needs the `mcp` package",
            str(exc),
            reinstall_hint(),
        ) from None
    if not http:
        if secret:
            typer.echo(f"warning: --token-file / {TOKEN_ENV} is ignored over stdio", err=True)
        server.serve_stdio(root, allow_control)
        return
    server.serve_http(
        root,
        allow_control,
        host,
        port,
        secret or server.new_token(),
        lambda line: print(line, file=sys.stderr, flush=True),
    )


def read_token_file(path: Path) -> str:
    """The token in ``path`` (its first line), refused unless the file is a regular file of the
    current user that no one else may read or write."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LopenError(f"cannot read the token file {path}", str(exc), "pass a readable file") from None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise LopenError(
            f"the token file {path} is readable or writable by others",
            f"its mode is {stat.filemode(info.st_mode)}, owner uid {info.st_uid}",
            f"chmod 600 {path} (a regular file you own)",
        )
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not token:
        raise LopenError(f"the token file {path} is empty", "", "write the token on its first line")
    return token
