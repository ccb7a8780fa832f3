"""Is this folder ready for Lopen's git work? (``lopen init``, ``lopen doctor``, a run's pre-flight)

Lopen branches ``lopen/<module>`` from the current commit and commits each verified task, so it needs
git, a repository, at least one commit, and an identity git can commit with. ``git_problems`` answers
with one ``LopenError`` (what, why, how to fix) per thing missing, before any model is called.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from lopen.errors import LopenError

IDENTITY_FIX = (
    'git config user.name "Your Name" && git config user.email you@example.com '
    "(add --global to set it for every repository)"
)


def _git(root: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env=None if env is None else dict(env),
    )


def git_identity(root: Path, env: Mapping[str, str] | None = None) -> str:
    """``Name <email>`` git would commit with here, or "" when it has none."""
    done = _git(root, "var", "GIT_COMMITTER_IDENT", env=env)
    if done.returncode != 0:
        return ""
    ident = done.stdout.strip()
    return ident[: ident.rfind(">") + 1] if ">" in ident else ident


def git_problems(root: Path, env: Mapping[str, str] | None = None) -> list[LopenError]:
    """What keeps Lopen from branching and committing in ``root`` (empty when nothing does)."""
    if shutil.which("git", path=None if env is None else env.get("PATH")) is None:
        return [
            LopenError(
                "git is not installed",
                "Lopen keeps each module's work on its own branch and commits every verified task",
                "install git (e.g. apt-get install git, or brew install git)",
            )
        ]
    inside = _git(root, "rev-parse", "--is-inside-work-tree", env=env)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return [
            LopenError(
                f"{root} is not a git repository",
                "Lopen keeps each module's work on its own branch (lopen/<module>) of the project's repository",
                f"cd {root} && git init && git add -A && git commit -m 'Initial commit'",
            )
        ]
    problems = []
    if _git(root, "rev-parse", "--verify", "-q", "HEAD", env=env).returncode != 0:
        problems.append(
            LopenError(
                "the repository has no commit yet",
                "Lopen branches lopen/<module> from your current commit",
                "git add -A && git commit -m 'Initial commit' (or an empty one: git commit --allow-empty -m start)",
            )
        )
    if not git_identity(root, env):
        detail = _git(root, "var", "GIT_COMMITTER_IDENT", env=env).stderr.strip().splitlines()
        problems.append(
            LopenError(
                "git has no identity to commit with",
                "Lopen commits every verified task"
                + (f"; git says: {detail[-1]}" if detail else ", and git cannot tell who you are"),
                IDENTITY_FIX,
            )
        )
    return problems
