"""The user's MCP servers (``mcp.servers``) as the Copilot CLI takes them for one session.

The CLI starts a stdio server itself — inside the sandbox that confines the CLI, like the model's
shell — and speaks HTTP to a remote one through the sandbox's network proxy. It names a server's tools
``<server>-<tool>`` to the model. A session that gets the servers offers the model only the listed
tools (the CLI's ``tools`` filter, and ``available_tools`` in a builder session), and Lopen's
permission policy allows a call only when the tool is listed (``lopen.sandbox.policy``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from lopen.config.model import McpServer
from lopen.errors import LopenError

ALL = "*"
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def session_servers(
    servers: Mapping[str, McpServer], env: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """The SDK's ``mcp_servers`` for ``servers``, ``${NAME}`` in ``env`` and ``headers`` values expanded
    from ``env`` (default: Lopen's environment). An unset variable is an error naming it."""
    env = os.environ if env is None else env
    wire: dict[str, dict[str, Any]] = {}
    for name, server in servers.items():
        config: dict[str, Any] = {"tools": list(server.tools)}
        if server.timeout:
            config["timeout"] = server.timeout
        if server.remote:
            config.update(type=server.type or "http", url=server.url)
            if server.headers:
                headers = server.headers.items()
                config["headers"] = {key: _expand(value, env, name, "headers", key) for key, value in headers}
        else:
            config.update(type=server.type or "stdio", command=server.command, args=list(server.args))
            if server.env:
                config["env"] = {key: _expand(value, env, name, "env", key) for key, value in server.env.items()}
            if server.cwd:
                config["working_directory"] = server.cwd
        wire[name] = config
    return wire


def _expand(value: str, env: Mapping[str, str], server: str, table: str, key: str) -> str:
    def one(match: re.Match[str]) -> str:
        variable = match.group(1)
        if variable not in env:
            raise LopenError(
                f"mcp.servers.{server}.{table}.{key} names ${{{variable}}}, which is not set",
                f"Lopen takes ${{NAME}} in an MCP server's {table} from its own environment",
                f"export {variable}=… before running Lopen, or remove the server from mcp.servers",
            )
        return env[variable]

    return _REFERENCE.sub(one, value)


def secrets_of(servers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The values of the servers' ``env`` and ``headers`` (expanded): secrets, redacted wherever they show."""
    found: list[str] = []
    for config in servers.values():
        for table in ("env", "headers"):
            found += [value for value in (config.get(table) or {}).values() if value]
    return found


def available_tools(servers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The names a builder session's ``available_tools`` needs for the servers' listed tools: ``<server>/*``
    for a server whose every tool is allowed, ``<server>-<tool>`` for each listed one otherwise."""
    names: list[str] = []
    for name, config in servers.items():
        tools = list(config.get("tools") or ())
        names += [f"{name}/*"] if ALL in tools else [f"{name}-{tool}" for tool in tools]
    return names


def allowed_tools(servers: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Per server, the tools the permission policy allows (``("*",)`` = all of them)."""
    return {name: tuple(config.get("tools") or ()) for name, config in servers.items()}


def network_services(servers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The URLs of the remote servers: the sandbox's network must reach them."""
    return [str(config["url"]) for config in servers.values() if config.get("url")]
