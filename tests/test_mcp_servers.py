"""The user's MCP servers in config (mcp.servers): set as the Copilot CLI takes them, refused with what,
why and how when malformed, their env and headers never shown, and turned into the SDK's mcp_servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lopen
from lopen.config import load_settings
from lopen.config.loader import project_config_path, set_value
from lopen.copilot.mcp_servers import network_services, secrets_of, session_servers
from lopen.errors import LopenError

CHECKOUT = Path(lopen.__file__).resolve().parents[1]
DOCS = {"command": "uvx", "args": ["mcp-docs"], "env": {"DOCS_KEY": "dk-7f3a9c1e5b2d4f60"}, "tools": ["search"]}
TRACKER = {
    "url": "http://127.0.0.1:8931/mcp",
    "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}", "X-Team": "plain-secret-value-42"},
    "tools": ["*"],
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home")}


def test_config_set_stores_servers_in_the_project_file_and_show_masks_their_secrets(project: Path, env) -> None:
    servers = json.dumps({"docs": DOCS, "tracker": TRACKER})
    lopen = [sys.executable, "-m", "lopen", "config"]
    env = {**env, "PYTHONPATH": str(CHECKOUT)}  # this checkout's Lopen
    done = subprocess.run([*lopen, "set", "mcp.servers", servers], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "written to" in done.stdout and "7f3a9c1e5b2d" not in done.stdout and "plain-secret" not in done.stdout
    stored = json.loads(project_config_path(project).read_text())["mcp"]["servers"]
    assert stored["docs"]["command"] == "uvx" and stored["tracker"]["tools"] == ["*"]
    settings = load_settings(project, None, {"HOME": env["HOME"]})
    assert settings.mcp.servers["docs"].env == {"DOCS_KEY": "dk-7f3a9c1e5b2d4f60"}  # the real value, for the CLI

    shown = subprocess.run([*lopen, "show", "--json"], cwd=project, env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    servers_shown = json.loads(shown.stdout)["mcp.servers"]["value"]
    assert servers_shown["docs"]["env"] == {"DOCS_KEY": "dk-...4f60"}
    assert servers_shown["tracker"]["headers"] == {"Authorization": "Bearer ${TRACKER_TOKEN}", "X-Team": "pla...e-42"}
    public = json.dumps(settings.public())
    assert "7f3a9c1e5b2d" not in public and "plain-secret" not in public and "mcp-docs" in public


@pytest.mark.parametrize(
    ("servers", "why"),
    [
        ({"docs": {"command": "uvx"}}, "docs: Object missing required field `tools`"),
        ({"docs": {"tools": ["*"]}}, "docs: a stdio server needs a command (or an http server a url)"),
        ({"web": {"url": "http://h/mcp", "env": {"K": "secret-value"}, "tools": []}}, "web: an http server takes"),
        ({"web": {"url": "ftp://h/mcp", "tools": []}}, "web: Expected `str` matching regex"),
        ({"my docs": {"command": "uvx", "tools": []}}, "my docs: Expected `str` matching regex"),
    ],
)
def test_a_malformed_server_is_refused_with_what_why_and_how(servers, why: str, project: Path, env) -> None:
    with pytest.raises(LopenError) as refused:
        set_value("mcp.servers", json.dumps(servers), start=project, env=env)
    assert refused.value.what.startswith("invalid value for mcp.servers in the command line")
    assert refused.value.why.startswith(why)
    assert "give mcp.servers a JSON object" in refused.value.how
    assert "secret-value" not in str(refused.value)
    assert not project_config_path(project).exists()


def test_servers_become_the_sdks_mcp_servers_with_references_expanded(env) -> None:
    settings = load_settings(
        None, {"mcp.servers": json.dumps({"docs": {**DOCS, "cwd": "/srv"}, "tracker": TRACKER})}, env
    )
    wire = session_servers(settings.mcp.servers, {"TRACKER_TOKEN": "tt-0123456789abcdef"})
    assert wire["docs"] == {
        "tools": ["search"],
        "type": "stdio",
        "command": "uvx",
        "args": ["mcp-docs"],
        "env": {"DOCS_KEY": "dk-7f3a9c1e5b2d4f60"},
        "working_directory": "/srv",
    }
    assert wire["tracker"]["headers"]["Authorization"] == "Bearer tt-0123456789abcdef"
    assert wire["tracker"]["type"] == "http"
    assert set(secrets_of(wire)) == {"dk-7f3a9c1e5b2d4f60", "Bearer tt-0123456789abcdef", "plain-secret-value-42"}
    assert network_services(wire) == ["http://127.0.0.1:8931/mcp"]  # the sandbox's proxy lets the CLI reach it

    with pytest.raises(LopenError) as unset:
        session_servers(settings.mcp.servers, {})
    assert unset.value.what == "mcp.servers.tracker.headers.Authorization names ${TRACKER_TOKEN}, which is not set"
    assert unset.value.how.startswith("export TRACKER_TOKEN=")
