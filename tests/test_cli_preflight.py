"""Pre-flight: a workflow command without credentials, or in a folder that is not a ready git
repository, stops before any event is recorded, saying what, why and how to fix it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lopen.auth import TOKEN_VARS
from lopen.copilot.locate import find_cli
from lopen.errors import LopenError


def recorded_rows(store: Path) -> int:
    """Rows in every table of the SQLite store (0 when it does not exist)."""
    if not store.exists():
        return 0
    with sqlite3.connect(store) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return sum(db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in tables)


def test_run_without_credentials_stops_before_any_event(tmp_path: Path) -> None:
    try:
        cli = find_cli().path
    except LopenError as exc:
        pytest.skip(f"needs the Copilot CLI: {exc.what}")
    root = tmp_path / "project"
    git_repository(root)
    spec = root / "docs" / "requirements" / "greeter" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text("# Greeter\n\n## Overview\n\nSays hello.\n")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in TOKEN_VARS and not k.upper().startswith("LOPEN_")}
    env.update(
        HOME=str(home),
        COPILOT_HOME=str(home / ".copilot"),
        COPILOT_CLI_PATH=cli,
        COPILOT_CACHE_HOME=os.environ.get("COPILOT_CACHE_HOME") or str(Path.home() / ".cache" / "copilot"),
    )
    done = subprocess.run(
        [sys.executable, "-c", "from lopen.cli import main; main()", "run", "greeter", "--headless", "-p", "go"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("error: not authenticated\n")
    assert '"Copilot Requests"' in done.stderr and "Traceback" not in done.stderr
    assert recorded_rows(root / ".lopen" / "store.sqlite") == 0


def git_repository(root: Path, *, commit: bool = True, identity: bool = True) -> None:
    root.mkdir(parents=True, exist_ok=True)
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    if identity:
        subprocess.run(["git", "config", "user.name", "Ada"], cwd=root, check=True)
        subprocess.run(["git", "config", "user.email", "ada@example.com"], cwd=root, check=True)
    if commit:
        (root / "README.md").write_text("hello\n")
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        who = ["-c", "user.name=Ada", "-c", "user.email=ada@example.com"]
        subprocess.run(["git", *who, "commit", "-q", "-m", "first"], cwd=root, check=True)


@pytest.mark.parametrize(
    ("setup", "said", "fix"),
    [
        ({"repository": False}, "is not a git repository", "git init"),
        ({"commit": False}, "has no commit yet", "git commit"),
        ({"identity": False}, "git has no identity to make commits with", "git config --global user.name"),
    ],
)
def test_run_outside_a_ready_repository_says_how_to_fix_it(
    tmp_path: Path, setup: dict[str, bool], said: str, fix: str
) -> None:
    root = tmp_path / "project"
    if setup.get("repository", True):
        git_repository(root, commit=setup.get("commit", True), identity=setup.get("identity", True))
    else:
        root.mkdir()
        (root / ".lopen").mkdir()  # a project without git: Lopen finds it by its .lopen/
    spec = root / "docs" / "requirements" / "greeter" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text("# Greeter\n\n## Overview\n\nSays hello.\n")
    home = tmp_path / "empty-home"  # no global git identity
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-c", "from lopen.cli import main; main()", "run", "greeter", "--headless"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert said in done.stderr and fix in done.stderr and "Traceback" not in done.stderr
    assert recorded_rows(root / ".lopen" / "store.sqlite") == 0
