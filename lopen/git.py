"""Git operations Lopen performs on the project: the module branch, commits, diffs, revert."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lopen.errors import LopenError


class GitError(LopenError):
    pass


class Repository:
    """A git work tree; every method runs one or two plain `git` commands."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _git(self, *args: str, check: bool = True) -> str:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError as exc:
            raise GitError("git is not installed", str(exc), "install git (apt-get install git)") from exc
        if check and done.returncode != 0:
            raise GitError(
                f"git {' '.join(args)} failed in {self.root}",
                (done.stderr or done.stdout).strip().splitlines()[-1] if (done.stderr or done.stdout).strip() else "",
                "check the repository state with `git status`",
            )
        return done.stdout.strip()

    def is_repository(self) -> bool:
        return (self.root / ".git").exists()

    def init(self) -> None:
        self._git("init", "-q", "-b", "main")

    def current_branch(self) -> str:
        return self._git("rev-parse", "--abbrev-ref", "HEAD", check=False)

    def head(self) -> str | None:
        sha = self._git("rev-parse", "--verify", "-q", "HEAD", check=False)
        return sha or None

    def has_commit(self, sha: str) -> bool:
        return bool(self._git("cat-file", "-t", sha, check=False) == "commit")

    def ensure_branch(self, branch: str) -> bool:
        """Check out ``branch``, creating it from HEAD when missing. Returns True when it was created."""
        if self.head() is None:
            self._git("commit", "-q", "--allow-empty", "-m", "chore: start repository")
        if self.current_branch() == branch:
            return False
        exists = bool(self._git("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False))
        self._git("checkout", "-q", branch) if exists else self._git("checkout", "-q", "-b", branch)
        return not exists

    def dirty_files(self) -> list[str]:
        """Changed, staged and untracked paths (`.lopen/` aside). Porcelain v2 with -z: no leading
        status column for the output's strip() to eat, and paths are never quoted."""
        fields = self._git("status", "--porcelain=v2", "-z", "--untracked-files=all").split("\0")
        paths: list[str] = []
        skip_next = False
        for field in fields:
            if skip_next or not field:  # the original path of a rename/copy follows its entry
                skip_next = False
                continue
            kind = field[0]
            if kind in "?!":
                path = field[2:]
            else:
                skip_next = kind == "2"
                path = field.split(" ", {"1": 8, "2": 9, "u": 10}.get(kind, 8))[-1]
            if kind != "!" and not path.startswith(".lopen/"):
                paths.append(path)
        return paths

    def commit_all(self, message: str) -> str | None:
        """Stage everything (the `.gitignore` keeps `.lopen/` out) and commit; None when nothing changed."""
        self._git("add", "-A")
        if not self._git("diff", "--cached", "--name-only"):
            return None
        self._git("commit", "-q", "-m", message)
        return self.head()

    def diff_since(self, sha: str | None, max_chars: int = 60_000) -> str:
        """Diff of the work tree (committed or not, new files included) against ``sha``."""
        self._git("add", "-A", "--intent-to-add")
        diff = self._git("diff", sha or "HEAD") if sha else self._git("diff", "HEAD")
        if len(diff) > max_chars:
            return diff[:max_chars] + f"\n… diff cut at {max_chars} characters"
        return diff

    def changed_files(self, sha: str | None) -> list[str]:
        self._git("add", "-A", "--intent-to-add")
        out = self._git("diff", "--name-only", sha or "HEAD")
        return [line for line in out.splitlines() if line and not line.startswith(".lopen/")]

    def files_in_commit(self, sha: str) -> list[str]:
        return self._git("show", "--name-only", "--format=", sha).splitlines()

    def reset_hard(self, sha: str) -> None:
        self._git("reset", "-q", "--hard", sha)

    def is_ancestor(self, sha: str, of: str = "HEAD") -> bool:
        return (
            subprocess.run(
                ["git", "merge-base", "--is-ancestor", sha, of], cwd=self.root, capture_output=True, check=False
            ).returncode
            == 0
        )

    # used by `lopen revert` (lopen/workflow/revert.py) ---------------------------------------------

    def branch_exists(self, branch: str) -> bool:
        return bool(self._git("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False))

    def commits_between(self, base: str, tip: str = "HEAD") -> list[tuple[str, str]]:
        """(sha, subject) of the commits on ``tip`` that ``base`` lacks, newest first."""
        out = self._git("log", "--format=%H%x09%s", f"{base}..{tip}")
        return [(sha, subject) for sha, _, subject in (line.partition("\t") for line in out.splitlines() if line)]
