"""`lopen --help` and `lopen <command> --help` print without importing Typer (issue 12: at most 3x a
bare interpreter start, measured by `bin/bench-gateway --help-only`; no wall time is asserted here:
what is tested is that the fast path is taken, and that what it prints is exactly Typer's help)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lopen.cli._help import HELP
from lopen.cli.helptext import HELP_FILE, source

LOPEN = str(Path(sys.executable).parent / "lopen")  # the console script, as a user runs it


def run(*args: str, columns: str | None = "100", profile: bool = False) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    if columns is not None:
        env["COLUMNS"] = columns
    if profile:
        env["PYTHONPROFILEIMPORTTIME"] = "1"
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, cwd="/")


def imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_the_pre_rendered_help_is_what_typer_renders_now() -> None:
    assert HELP_FILE.read_text(encoding="utf-8") == source(), "lopen/cli/_help.py is out of date: run bin/gen-help"


@pytest.mark.parametrize("command", ["", "replay", "session list", "mcp"])
def test_help_prints_without_importing_typer(command: str) -> None:
    done = run(LOPEN, *command.split(), "--help", profile=True)
    assert done.returncode == 0
    assert done.stdout == HELP[command]
    modules = imported(done.stderr)
    assert "lopen.cli._help" in modules
    assert not {m for m in modules if m.split(".")[0] in ("typer", "click", "pydantic", "events")}


@pytest.mark.parametrize("group", ["", "session", "spec", "config", "auth", "projections"])
def test_every_command_is_listed_with_its_whole_first_sentence(group: str) -> None:
    """Issue 23: `lopen --help` cut every command's description at a few words ("Start a module: scaffold...")."""
    from lopen.cli.commands import app
    from lopen.cli.helptext import command_paths

    text = HELP[group]
    listed = " ".join(text[text.index("Commands:") :].split())  # the rows, their wrapping undone
    assert "..." not in listed
    paths = [
        path for path in command_paths(app) if len(path) == len(group.split()) + 1 and " ".join(path[:-1]) == group
    ]
    assert paths
    for path in paths:
        usage = HELP[" ".join(path)]
        body = usage.split("\n\n", 2)[1] if usage.count("\n\n") >= 2 else ""
        first = " ".join(body.split()).split(". ")[0].rstrip(".")
        assert first and first in listed, f"{' '.join(path)}: {first!r} is not listed whole"


def test_every_command_has_its_help_pre_rendered() -> None:
    from lopen.cli.commands import app
    from lopen.cli.helptext import command_paths

    assert {" ".join(path) for path in command_paths(app)} == set(HELP)


def test_a_narrow_terminal_or_python_m_gets_typers_own_help() -> None:
    narrow = run(LOPEN, "replay", "--help", columns="60", profile=True)
    assert narrow.returncode == 0 and "typer" in imported(narrow.stderr)
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60
    as_module = run(sys.executable, "-m", "lopen", "replay", "--help")
    assert as_module.returncode == 0 and as_module.stdout.startswith("Usage: python -m lopen replay [OPTIONS]")
    assert as_module.stdout.split("\n", 1)[1] == HELP["replay"].split("\n", 1)[1]


def test_version_and_unknown_commands() -> None:
    from importlib.metadata import version

    from lopen import __version__
    from lopen.copilot.locate import pinned_cli_version

    shown = run(LOPEN, "--version", profile=True)
    sdk, cli = version("github-copilot-sdk"), pinned_cli_version()
    assert shown.stdout == f"lopen {__version__} · github-copilot-sdk {sdk} · Copilot CLI {cli} (installed)\n"
    assert "copilot" not in imported(shown.stderr)  # the versions are read from files: the SDK is not loaded
    unknown = run(LOPEN, "nope", "--help")
    assert unknown.returncode == 2 and "No such command 'nope'" in unknown.stderr


def test_the_mcp_sdk_is_imported_only_by_lopen_mcp(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run([LOPEN, "config", "show"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    modules = imported(done.stderr)
    assert "typer" in modules  # a real command ran
    assert not {m for m in modules if m.split(".")[0] in ("mcp", "uvicorn", "starlette", "copilot")}
