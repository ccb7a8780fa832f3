"""What a new user meets first (issue 23, item 8): a misspelt module gets a "did you mean", and an
unapproved spec is reported before missing credentials — through the real command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from story import make_project

ROOT = Path(__file__).resolve().parents[1]


def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    for key, value in (("user.name", "New User"), ("user.email", "new@example.com")):
        subprocess.run(["git", "config", key, value], cwd=root, check=True)
    return root


def lopen(root: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),  # an empty HOME: no Copilot login, no GitHub token anywhere
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_misspelt_module_gets_a_did_you_mean(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = lopen(root, "run", "slugfy", "--headless", home=tmp_path / "home")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did you mean slugify?" in done.stderr and "lopen run slugify" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unapproved_spec_is_reported_before_missing_credentials(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = lopen(root, "run", "slugify", "--headless", home=tmp_path / "home")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not approved" in done.stderr and "lopen spec approve slugify" in done.stderr
    assert "credential" not in done.stderr.lower() and "token" not in done.stderr.lower()


def test_a_module_name_with_a_path_is_refused_without_suggesting_to_write_there(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = lopen(root, "spec", "check", "../../../etc", home=tmp_path / "home")
    assert done.returncode == 1 and "is not a module name" in done.stderr, done.stderr
    assert "docs/requirements/../" not in done.stderr and "Traceback" not in done.stderr
