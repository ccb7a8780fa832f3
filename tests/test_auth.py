"""Authentication through the real Copilot CLI (isolated home, no stored login), and BYOK providers.

Nothing here mocks the SDK: the GitHub cases ask the CLI bin/setup installed. Without network the
CLI cannot verify a token, so those cases accept either the offline answer (unreachable) or the
online one (invalid) and check what matters: the source, the classification, the fix.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import pytest

from lopen.auth import (
    TOKEN_VARS,
    AuthStatus,
    _ask_status,
    auth_status,
    check_models,
    env_token,
    github_status,
    login,
    logout,
    preflight,
    provider_status,
)
from lopen.config import Models, Provider, Settings
from lopen.errors import LopenError

PROXY_VARS = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
)
GOOD_KEY = "sk-good-key-0123456789"


@pytest.fixture
def auth_env(tmp_path: Path, cli_path: str) -> dict[str, str]:
    """The process environment without credentials, in an empty home (so no stored login)."""
    drop = {*TOKEN_VARS, *PROXY_VARS, "GH_HOST", "COPILOT_GH_HOST", "GH_CONFIG_DIR", "COPILOT_HOME"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.upper().startswith("LOPEN_")}
    home = tmp_path / "home"
    home.mkdir()
    # The CLI unpacks itself into its cache; share the real one so each test does not unpack 200 MB.
    cache = os.environ.get("COPILOT_CACHE_HOME") or str(Path.home() / ".cache" / "copilot")
    env.update(
        HOME=str(home),
        COPILOT_HOME=str(home / ".copilot"),
        XDG_CONFIG_HOME=str(home / ".config"),
        COPILOT_CACHE_HOME=cache,
        COPILOT_CLI_PATH=cli_path,
    )
    return env


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- GitHub credentials ----------------------------------------------------------------------


def test_token_order_is_the_sdks() -> None:
    assert env_token({"GITHUB_TOKEN": "c", "GH_TOKEN": "b", "COPILOT_GITHUB_TOKEN": "a"}) == (
        "COPILOT_GITHUB_TOKEN",
        "a",
    )
    assert env_token({"GITHUB_TOKEN": "c", "GH_TOKEN": "b"}) == ("GH_TOKEN", "b")
    assert env_token({"GITHUB_TOKEN": "c", "GH_TOKEN": ""}) == ("GITHUB_TOKEN", "c")
    assert env_token({}) is None


def test_no_credentials_stop_the_preflight(auth_env: dict[str, str]) -> None:
    with pytest.raises(LopenError) as caught:
        preflight(Settings(), auth_env)
    error = caught.value
    assert (error.what, error.exit_code) == ("not authenticated", 1)
    assert "no stored login" in error.why
    for needed in ("lopen auth login", "GH_TOKEN", '"Copilot Requests"'):
        assert needed in error.how
    # all three ways to get a model, each with the exact commands
    ways = error.how.splitlines()
    assert ways[0] == "three ways to get a model:"
    assert ways[1].startswith("    1. GitHub Copilot: `lopen auth login`")
    assert ways[2].startswith("    2. your own provider") and "LOPEN_PROVIDER__BASE_URL=" in ways[2]
    assert "LOPEN_MODELS__BUILDING=<model>" in ways[2]
    assert ways[3].startswith("    3. the scripted model") and "python -m lopen.scripted_model --playbook" in ways[3]
    assert "docs/your-own-playbook.md" in ways[3]


def test_gh_token_wins_over_github_token(auth_env: dict[str, str]) -> None:
    tokens = {"GH_TOKEN": "github_pat_11FAKEFAKE_gh", "GITHUB_TOKEN": "github_pat_11FAKEFAKE_github"}
    status = auth_status(Settings(), {**auth_env, **tokens})
    assert status.source == "GH_TOKEN"
    assert not status.ok  # a made-up token: unverifiable offline, rejected online
    assert status.kind in ("unreachable", "invalid")
    assert "GH_TOKEN" in status.headline
    assert all(token not in json.dumps([status.detail, status.fix]) for token in tokens.values())


def test_classic_token_is_invalid(auth_env: dict[str, str]) -> None:
    """The CLI itself refuses classic PATs without asking GitHub: the real answer, offline or not."""
    status = auth_status(Settings(), {**auth_env, "GITHUB_TOKEN": "ghp_0123456789abcdefFAKE"})
    assert (status.ok, status.kind, status.source) == (False, "invalid", "GITHUB_TOKEN")
    assert status.headline == "invalid or expired token in GITHUB_TOKEN"
    assert "ghp_" in status.detail and '"Copilot Requests"' in status.fix


def test_stored_login_that_cannot_be_verified(auth_env: dict[str, str]) -> None:
    stored = {
        "loggedInUsers": [{"host": "https://github.com", "login": "octo-fake"}],
        "lastLoggedInUser": {"host": "https://github.com", "login": "octo-fake"},
        "copilotTokens": {"https://github.com:octo-fake": "gho_FAKEFAKEFAKE"},
    }
    home = Path(auth_env["COPILOT_HOME"])
    home.mkdir(parents=True)
    (home / "config.json").write_text(json.dumps(stored))
    status = auth_status(Settings(), auth_env)
    assert not status.ok and status.kind in ("unreachable", "not-authenticated")
    if status.kind == "unreachable":
        assert status.source == "stored login"
        assert status.headline == "could not reach GitHub to check the stored login"


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A proxy that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def test_a_silent_network_times_out_with_a_classified_answer(auth_env: dict[str, str], black_hole: str) -> None:
    env = {**auth_env, "GH_TOKEN": "github_pat_11FAKE", "HTTPS_PROXY": black_hole, "HTTP_PROXY": black_hole}
    started = time.monotonic()
    status = github_status(Settings(), env, timeout=2)
    assert time.monotonic() - started < 10
    assert not status.ok and status.source == "GH_TOKEN"
    assert status.kind == "unreachable"
    assert "HTTPS_PROXY" in status.fix


def test_missing_cli_is_classified(auth_env: dict[str, str], tmp_path: Path) -> None:
    status = auth_status(Settings(), {**auth_env, "COPILOT_CLI_PATH": str(tmp_path / "no-copilot")})
    assert (status.ok, status.kind) == (False, "cli-error")
    assert "lopen setup" in status.fix


# -- login and logout ------------------------------------------------------------------------


def test_login_is_refused_headless() -> None:
    with pytest.raises(LopenError) as caught:
        login(Settings(), {}, headless=True)
    assert "headless" in caught.value.what
    assert "GH_TOKEN" in caught.value.how and '"Copilot Requests"' in caught.value.how


def test_login_that_fails_is_reported(auth_env: dict[str, str]) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(LopenError, match=r"the login did not complete \(copilot login exited with \d+\)"):
        login(Settings(), {**auth_env, "HTTPS_PROXY": dead, "HTTP_PROXY": dead})


def test_logout_reports_the_env_token_that_remains(auth_env: dict[str, str]) -> None:
    result = logout(Settings(), {**auth_env, "GH_TOKEN": "ghp_0123456789abcdefFAKE"})
    assert result.cleared == ()
    assert result.env_token == "GH_TOKEN"


# -- a bring-your-own-model provider ---------------------------------------------------------


class _Provider(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/slow/"):
            time.sleep(2)
        if self.path.startswith("/broken/"):
            return self._answer(500, {"error": "boom"})
        if self.path.startswith("/anthropic/"):
            accepted = self.headers.get("x-api-key") == GOOD_KEY and self.headers.get("anthropic-version")
        else:
            accepted = self.headers.get("Authorization") == f"Bearer {GOOD_KEY}"
        if not self.path.endswith("/v1/models"):
            return self._answer(404, {"error": "not found"})
        if not accepted:
            return self._answer(401, {"error": "bad key"})
        self._answer(200, {"object": "list", "data": [{"id": "scripted-opus"}, {"id": "scripted-mini"}]})

    def _answer(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the slow case's client has gone away: a broken pipe is expected


@pytest.fixture(scope="module")
def provider_url() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        for var in PROXY_VARS:  # the provider is on 127.0.0.1: no proxy in between
            patch.delenv(var, raising=False)
        server = _QuietServer(("127.0.0.1", 0), _Provider)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()
        server.server_close()


SCRIPTED = Models(
    requirement_gathering="scripted-opus",
    planning="scripted-opus",
    building="scripted-opus",
    research="scripted-opus",
    oracle="scripted-mini",
    fallback=(),
)


def byok(base_url: str, api_key: str = GOOD_KEY, type: str = "openai", models: Models = SCRIPTED) -> Settings:
    return Settings(provider=Provider(type=type, base_url=base_url, api_key=api_key), models=models)  # type: ignore[arg-type]


def test_byok_provider_that_answers(provider_url: str) -> None:
    settings = byok(f"{provider_url}/v1")
    status = auth_status(settings, {})  # no GitHub credentials needed
    assert (status.ok, status.kind) == (True, "authenticated")
    assert status.source == f"openai provider at {provider_url}/v1"
    assert status.detail == "models: scripted-opus, scripted-mini"
    assert status.models == ("scripted-opus", "scripted-mini")
    assert preflight(settings, {}) == []


def test_preflight_refuses_a_model_the_provider_does_not_offer(provider_url: str) -> None:
    settings = byok(f"{provider_url}/v1", models=msgspec.structs.replace(SCRIPTED, building="gpt-9"))
    with pytest.raises(LopenError) as caught:
        preflight(settings, {})
    error = caught.value
    assert error.what == f"model gpt-9 (models.building) is not offered by openai provider at {provider_url}/v1"
    assert error.why == "the models offered are: scripted-mini, scripted-opus"
    assert "LOPEN_MODELS__BUILDING=<model>" in error.how


def test_preflight_warns_when_a_fallback_will_be_used(provider_url: str) -> None:
    models = msgspec.structs.replace(SCRIPTED, planning="gpt-9", fallback=("claude-x", "scripted-opus"))
    warnings = preflight(byok(f"{provider_url}/v1", models=models), {})
    assert warnings == [
        f"model gpt-9 (models.planning) is not offered by openai provider at {provider_url}/v1; "
        "the run will use scripted-opus",
        f"fallback model claude-x (models.fallback) is not offered by openai provider at {provider_url}/v1; "
        "it is skipped",
    ]


def test_the_drafting_model_is_checked_only_when_drafting(provider_url: str) -> None:
    settings = byok(f"{provider_url}/v1", models=msgspec.structs.replace(SCRIPTED, requirement_gathering="gpt-9"))
    assert preflight(settings, {}) == []
    with pytest.raises(LopenError, match=r"models\.requirement_gathering"):
        preflight(settings, {}, drafting=True)


def test_copilot_routing_checks_the_sdks_model_list() -> None:
    """Signed in to GitHub: the models come from the SDK's `list_models`, asked in the same CLI round trip."""

    class Info:
        def __init__(self, id: str) -> None:
            self.id = id

    class Status:
        isAuthenticated = True

    class Client:
        class rpc:
            class account:
                @staticmethod
                async def get_current_auth() -> None:
                    return None

        async def get_auth_status(self) -> Status:
            return Status()

        async def list_models(self) -> list[Info]:
            return [Info("claude-opus-4.6"), Info("gpt-5-mini")]

    _, _, models = asyncio.run(_ask_status(Client()))
    assert models == ["claude-opus-4.6", "gpt-5-mini"]
    status = AuthStatus(ok=True, kind="authenticated", headline="", source="GH_TOKEN", models=tuple(models))
    errors, warnings = check_models(Settings(), status)  # the defaults
    assert errors == []
    assert warnings == [
        f"fallback model {m} (models.fallback) is not offered by GitHub Copilot for this account; it is skipped"
        for m in ("claude-sonnet-4.5", "gpt-5")
    ]
    wrong = Settings(models=Models(oracle="gpt-9-mini"))
    errors, _ = check_models(wrong, status)
    assert [e.what for e in errors] == [
        "model gpt-9-mini (models.oracle) is not offered by GitHub Copilot for this account"
    ]
    assert errors[0].why == "the models offered are: claude-opus-4.6, gpt-5-mini"


def test_byok_anthropic_headers(provider_url: str) -> None:
    assert auth_status(byok(f"{provider_url}/anthropic/v1", type="anthropic"), {}).ok


def test_byok_rejected_key(provider_url: str) -> None:
    status = auth_status(byok(f"{provider_url}/v1", api_key="sk-wrong-key-000000000"), {})
    assert (status.ok, status.kind) == (False, "invalid")
    assert "HTTP 401" in status.headline and "LOPEN_PROVIDER__API_KEY" in status.fix
    assert "sk-wrong" not in json.dumps([status.headline, status.detail, status.fix])
    with pytest.raises(LopenError) as caught:
        preflight(byok(f"{provider_url}/v1", api_key=""), {})
    assert caught.value.exit_code == 1 and caught.value.why == "no API key is set"


def test_byok_without_a_model_list_still_answers(provider_url: str) -> None:
    status = auth_status(byok(f"{provider_url}/custom"), {})
    assert status.ok and "does not list models" in status.detail


@pytest.mark.parametrize(("path", "fragment"), [("/broken/v1", "HTTP 500"), ("/slow/v1", "could not reach")])
def test_byok_failing_or_slow_provider(provider_url: str, path: str, fragment: str) -> None:
    started = time.monotonic()
    status = provider_status(byok(provider_url + path).provider, timeout=0.5)
    assert time.monotonic() - started < 2
    assert (status.ok, status.kind) == (False, "unreachable")
    assert fragment in status.headline


def test_byok_provider_down_blocks_preflight() -> None:
    settings = byok(f"http://127.0.0.1:{closed_port()}/v1")
    with pytest.raises(LopenError) as caught:
        preflight(settings, {})
    assert caught.value.exit_code == 1
    assert caught.value.what.startswith("could not reach the openai provider at http://127.0.0.1:")
    assert "provider.base_url" in caught.value.how


# -- model names checked when set (issue 24 item 7) ------------------------------------------------------


def test_a_models_name_is_checked_when_set_against_what_the_provider_offered_last(
    provider_url: str, tmp_path: Path
) -> None:
    from lopen.auth import model_name_warning

    (tmp_path / ".lopen").mkdir()
    # before any check: the price table is what Lopen knows, and a typo of one of its models is named
    assert model_name_warning(tmp_path, "models.planning", "gpt-5") == ""
    typo = model_name_warning(tmp_path, "models.planning", "claude-sonet-4.5")
    assert typo.startswith("models.planning: claude-sonet-4.5 is not one of the models Lopen knows")
    assert "Did you mean claude-sonnet-4.5?" in typo
    # a run's pre-flight reads the provider's list and remembers it for the project
    settings = byok(f"{provider_url}/v1", models=SCRIPTED)
    assert preflight(settings, {}, root=tmp_path) == []
    assert model_name_warning(tmp_path, "models.building", "scripted-mini") == ""
    assert model_name_warning(tmp_path, "models.building", "scripted-opsu") == (
        f"models.building: scripted-opsu is not one of the models openai provider at {provider_url}/v1 offered "
        "at the last check. Did you mean scripted-opus? Every run checks its models against the provider before "
        "it starts."
    )
    assert model_name_warning(tmp_path, "models.building", "gpt-5") != ""  # the provider's list wins now


def test_lopen_config_set_warns_of_a_model_name_it_does_not_know_and_still_writes_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    lopen = Path(sys.executable).with_name("lopen")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(
        [lopen, "config", "set", "models.fallback", "gpt-5,gpt5-mini"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    assert (
        done.stderr.count("warning:") == 1 and "gpt5-mini" in done.stderr and "Did you mean gpt-5-mini?" in done.stderr
    )
    assert json.loads((tmp_path / ".lopen" / "config.json").read_text())["models"]["fallback"] == ["gpt-5", "gpt5-mini"]
