"""The command line: every registered command's --help, exit codes, errors on stderr, and the
`config` and `auth` commands end to end (subprocesses run the real entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lopen.auth import TOKEN_VARS
from lopen.cli import app

ENTRY = "from lopen.cli import main; main()"


def command_paths() -> list[tuple[str, ...]]:
    """Every command and group registered on the app, discovered from typer (not a fixed list)."""
    paths: list[tuple[str, ...]] = [()]

    def walk(group: object, prefix: tuple[str, ...]) -> None:
        for name, command in getattr(group, "commands", {}).items():
            paths.append((*prefix, name))
            walk(command, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return paths


@pytest.mark.parametrize("path", command_paths(), ids=lambda path: " ".join(path) or "lopen")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_the_registered_commands_include_config_and_auth() -> None:
    paths = command_paths()
    for needed in [("config", "show"), ("config", "set"), ("auth", "status"), ("auth", "login"), ("auth", "logout")]:
        assert needed in paths


def test_help_does_not_import_the_copilot_sdk() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from lopen.cli import app\n"
        f"for path in {command_paths()!r}:\n"
        "    assert CliRunner().invoke(app, [*path, '--help']).exit_code == 0, path\n"
        "loaded = sorted(m for m in sys.modules if m == 'copilot' or m.startswith('copilot.'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# -- through the real entry point ------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    return root


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    drop = {*TOKEN_VARS, "NO_COLOR", "XDG_CONFIG_HOME", "PYTHONIOENCODING"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.upper().startswith("LOPEN_")}
    env["HOME"] = str(tmp_path / "home")
    return env


def lopen(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_user_error_exit_1_on_stderr_without_traceback(project: Path, clean_env: dict[str, str]) -> None:
    done = lopen("config", "set", "models.buildng", "gpt-5", env=clean_env, cwd=project / "src")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines()[0] == "error: unknown setting models.buildng"
    assert "  why: did you mean models.building?" in done.stderr
    assert "  fix: " in done.stderr and "Traceback" not in done.stderr


def test_debug_shows_the_traceback(project: Path, clean_env: dict[str, str]) -> None:
    done = lopen("--debug", "config", "set", "models.buildng", "gpt-5", env=clean_env, cwd=project)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "LopenError" in done.stderr


def test_usage_error_and_version(project: Path, clean_env: dict[str, str]) -> None:
    assert lopen("no-such-command", env=clean_env, cwd=project).returncode == 2
    version = lopen("--version", env=clean_env, cwd=project)
    assert (version.returncode, version.stdout.split()[0]) == (0, "lopen")


def test_broken_configuration_is_reported_by_any_command(project: Path, clean_env: dict[str, str]) -> None:
    (project / ".lopen").mkdir()
    (project / ".lopen" / "config.json").write_text('{"budget": {"warning_threshold": 7}}')
    done = lopen("config", "show", env=clean_env, cwd=project / "src")
    assert done.returncode == 1
    assert "invalid value for budget.warning_threshold" in done.stderr and "7" in done.stderr


def test_config_set_then_show_with_sources(project: Path, clean_env: dict[str, str]) -> None:
    (project / ".gitignore").write_text("*.pyc\n")
    done = lopen("config", "set", "models.building", "gpt-5", env=clean_env, cwd=project / "src")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("✓ models.building = gpt-5 written to ")
    assert lopen("config", "set", "display.color", "never", "--global", env=clean_env, cwd=project).returncode == 0
    assert (project / ".gitignore").read_text() == "*.pyc\n"  # the user's file is never touched

    env = {**clean_env, "LOPEN_MODELS__ORACLE": "env-mini", "LOPEN_PROVIDER__API_KEY": "sk-secret-value-987654321"}
    shown = lopen("config", "show", "--json", env=env, cwd=project / "src")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["models.building"] == {"value": "gpt-5", "source": "project (.lopen/config.json)"}
    assert data["display.color"] == {"value": "never", "source": "user (~/.config/lopen/config.json)"}
    assert data["models.oracle"] == {"value": "env-mini", "source": "env LOPEN_MODELS__ORACLE"}
    assert data["models.fallback"] == {"value": ["claude-sonnet-4.5", "gpt-5"], "source": "default"}
    assert data["provider.api_key"] == {"value": "sk-...4321", "source": "env LOPEN_PROVIDER__API_KEY"}
    table = lopen("config", "show", env=env, cwd=project)
    assert "sk-secret" not in shown.stdout + table.stdout
    assert any(line.split()[:2] == ["models.oracle", "env-mini"] for line in table.stdout.splitlines())


def test_config_set_warns_when_a_higher_layer_wins(project: Path, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "LOPEN_MODELS__BUILDING": "env-model"}
    done = lopen("config", "set", "models.building", "gpt-5", env=env, cwd=project)
    assert done.returncode == 0
    assert "warning: models.building is still env-model: env LOPEN_MODELS__BUILDING takes precedence" in done.stderr


def test_config_set_refuses_a_secret(project: Path, clean_env: dict[str, str]) -> None:
    done = lopen("config", "set", "provider.api_key", "sk-0123456789abcdef", env=clean_env, cwd=project)
    assert done.returncode == 1
    assert "LOPEN_PROVIDER__API_KEY" in done.stderr and "sk-0123456789abcdef" not in done.stderr
    assert not (project / ".lopen" / "config.json").exists()


def test_ascii_symbols_when_stdout_is_not_utf8(project: Path, clean_env: dict[str, str]) -> None:
    done = lopen(
        "config", "set", "models.building", "gpt-5", env={**clean_env, "PYTHONIOENCODING": "ascii"}, cwd=project
    )
    assert done.returncode == 0
    assert done.stdout.startswith("+ models.building = gpt-5")


@pytest.mark.parametrize(("extra", "coloured"), [({}, True), ({"NO_COLOR": "1"}, False)])
def test_no_color_wins_over_always(
    extra: dict[str, str], coloured: bool, project: Path, clean_env: dict[str, str]
) -> None:
    env = {**clean_env, "LOPEN_DISPLAY__COLOR": "always", **extra}
    done = lopen("config", "set", "models.building", "gpt-5", env=env, cwd=project)
    assert ("\x1b[" in done.stdout) is coloured


def test_auth_login_headless_is_refused(project: Path, clean_env: dict[str, str]) -> None:
    done = lopen("auth", "login", "--headless", env=clean_env, cwd=project)
    assert done.returncode == 1
    assert "cannot run headless" in done.stderr and "GH_TOKEN" in done.stderr
    assert lopen("auth", "login", "-q", env=clean_env, cwd=project).returncode == 1


def test_auth_status_for_an_unreachable_provider(project: Path, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "LOPEN_PROVIDER__BASE_URL": "http://127.0.0.1:9/v1", "NO_PROXY": "127.0.0.1"}
    done = lopen("auth", "status", "--json", env=env, cwd=project)
    assert done.returncode == 1
    status = json.loads(done.stdout)
    assert (status["ok"], status["kind"]) == (False, "unreachable")
    assert status["source"] == "openai provider at http://127.0.0.1:9/v1"

    text = lopen("auth", "status", env=env, cwd=project)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0] == "✗ could not reach the openai provider at http://127.0.0.1:9/v1"
    assert [line.split(":")[0] for line in lines[1:]] == ["  why", "  fix", "  note"]
