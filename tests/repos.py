"""A real git repository for tests: the helpers every git and worktree test file shares."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lopen.project import ensure_lopen_dir


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` (failing the test when git fails); its output, stripped."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_repo(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    """``<tmp_path>/repo``: a repository on ``main`` with one commit of ``files`` (path → text; default: an
    ``app.py``), an identity and ``.lopen/``."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    for name, text in (files or {"app.py": "print('v1')\n"}).items():
        write(root / name, text)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    ensure_lopen_dir(root)
    return root


def nested_repo(path: Path, files: dict[str, str]) -> str:
    """``path`` (inside a worktree) made a git repository of its own with one commit of ``files``: its sha."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    for name, text in files.items():
        write(path / name, text)
    git(path, "add", ".")
    git(path, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-qm", "one")
    return git(path, "rev-parse", "HEAD")
