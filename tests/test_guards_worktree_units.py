"""The model's worktree (lopen/git/worktree.py), one guard at a time, on real repositories: the git
Lopen runs there never runs a program the repository's configuration names, a worktree whose git files
were rewritten is not trusted, and the branch's tip and HEAD are read right from git's own files.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lopen.git import Worktree
from lopen.project import ensure_lopen_dir


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    write(root / "app.py", "print('v1')\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    ensure_lopen_dir(root)
    return root


@pytest.fixture
def wt(repo: Path) -> Worktree:
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")
    worktree.ensure()
    return worktree


def made_again(wt: Worktree) -> bool:
    """Whether ensure() moved the worktree aside (it did not trust it) and made a fresh one."""
    Worktree(wt.repo_root, wt.path, wt.branch).ensure()
    return any(p.name.startswith(f"{wt.path.name}.broken-") for p in wt.path.parent.iterdir())


def test_a_pointer_that_is_not_text_is_not_trusted(wt):
    (wt.path / ".git").write_bytes(b"\xff\xfe")
    assert made_again(wt)
