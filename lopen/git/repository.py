"""The user's repository, as Lopen sees it: is it one, does it have a commit and an identity, which
branches exist. Lopen never changes the user's working tree, index or HEAD: its work happens in a
worktree of its own (``lopen.git.worktree``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lopen.errors import LopenError
from lopen.process import run


class GitError(LopenError):
    pass


def run_git(cwd: Path, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``git args`` in ``cwd`` whatever its exit code (a short-lived child: ``lopen.process``)."""
    return run(["git", *args], cwd, input=input, timeout=timeout, die_with_parent=False)


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    """Run ``git args`` in ``cwd``; its stdout, stripped. A failure is a GitError naming the command."""
    try:
        done = run(["git", *args], cwd, env=env, timeout=timeout, die_with_parent=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed", str(exc), "install git (apt-get install git)") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(
            f"git {' '.join(args)} took longer than {timeout:.0f} s in {cwd}", str(exc), "try again"
        ) from exc
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        raise GitError(
            f"git {' '.join(args)} failed in {cwd}",
            said.splitlines()[-1] if said else f"exit code {done.returncode}",
            "check the repository state with `git status`",
        )
    return done.stdout.strip()


class Repository:
    """The repository at ``root`` (the user's checkout)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _git(self, *args: str, check: bool = True) -> str:
        return git(self.root, *args, check=check)

    def is_repository(self) -> bool:
        done = run_git(self.root, "rev-parse", "--git-dir")
        return done.returncode == 0

    def head(self) -> str | None:
        sha = self._git("rev-parse", "--verify", "-q", "HEAD", check=False)
        return sha or None

    def current_branch(self) -> str:
        return self._git("rev-parse", "--abbrev-ref", "HEAD", check=False)

    def identity(self) -> str | None:
        """``Name <email>`` of the git identity commits would carry, or None when git has none."""
        done = run_git(self.root, "var", "GIT_COMMITTER_IDENT")
        if done.returncode != 0:
            return None
        return done.stdout.strip().rsplit(">", 1)[0] + ">"

    def branch_exists(self, branch: str) -> bool:
        return bool(self._git("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False))

    def tip(self, branch: str) -> str | None:
        return self._git("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False) or None

    def has_commit(self, sha: str) -> bool:
        return self._git("cat-file", "-t", sha, check=False) == "commit"

    def is_ancestor(self, sha: str, of: str = "HEAD") -> bool:
        return run_git(self.root, "merge-base", "--is-ancestor", sha, of).returncode == 0

    def commits_between(self, base: str, tip: str = "HEAD") -> list[tuple[str, str]]:
        """(sha, subject) of the commits on ``tip`` that ``base`` lacks, newest first."""
        out = self._git("log", "--format=%H%x09%s", f"{base}..{tip}")
        return [(sha, subject) for sha, _, subject in (line.partition("\t") for line in out.splitlines() if line)]

    def checked_out_at(self, branch: str) -> Path | None:
        """The worktree (the user's checkout or another) that has ``branch`` checked out, if any."""
        found = self.checked_out(branch)
        return found[0] if found else None

    def checked_out(self, branch: str) -> list[Path]:
        """Every worktree (the user's checkout or another) that has ``branch`` checked out."""
        out = self._git("worktree", "list", "--porcelain", check=False)
        path: Path | None = None
        found: list[Path] = []
        for line in out.splitlines():
            if line.startswith("worktree "):
                path = Path(line.removeprefix("worktree "))
            elif line == f"branch refs/heads/{branch}" and path is not None:
                found.append(path)
        return found


def who(root: Path) -> str:
    """The person at the keyboard, for the record: the git identity (``Name <email>``), else ``$USER``."""
    import os

    name = git(root, "config", "user.name", check=False) if Repository(root).is_repository() else ""
    email = git(root, "config", "user.email", check=False) if name else ""
    if name:
        return f"{name} <{email}>" if email else name
    return os.environ.get("USER", "") or os.environ.get("LOGNAME", "") or "unknown"


def require_ready(root: Path) -> Repository:
    """The checks `lopen run` makes before any model call: a repository, with a commit, and a git
    identity for Lopen's commits. Raises what/why/fix otherwise."""
    repo = Repository(root)
    if not repo.is_repository():
        raise GitError(
            f"{root} is not a git repository",
            "Lopen builds each module on its own branch, in a git worktree, and commits every verified task",
            "make it one: `git init && git add -A && git commit -m 'initial commit'`",
        )
    if repo.head() is None:
        raise GitError(
            f"the repository at {root} has no commit yet",
            "Lopen's module branch starts from your current commit",
            "commit what you have: `git add -A && git commit -m 'initial commit'`",
        )
    if repo.identity() is None:
        raise GitError(
            "git has no identity to make commits with",
            "Lopen commits each verified task under your git identity (user.name and user.email)",
            'set one: `git config --global user.name "Your Name" && git config --global user.email you@example.com` '
            "(or without --global for this repository only)",
        )
    return repo
