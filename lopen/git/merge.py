"""Merging a component's branch onto the module branch without a checkout (parallel work, P1).

``merge_trees(repo, ours, theirs)`` is git's own three-way merge (``git merge-tree --write-tree``,
git 2.38+): the merged tree, and the files that conflict (the tree then holds them with conflict
markers — what a resolution invocation starts from). ``commit_merge`` makes the merge commit of
exactly that tree. Nothing here touches a worktree, an index or a branch.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from lopen.git.repository import GitError, git, run_git


class Merged(NamedTuple):
    tree: str
    conflicts: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.conflicts


def merge_trees(repo: Path, ours: str, theirs: str) -> Merged:
    """The three-way merge of the commits ``ours`` and ``theirs`` (from their merge base)."""
    done = run_git(repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs)
    lines = done.stdout.splitlines()
    if done.returncode not in (0, 1) or not lines:
        said = (done.stderr or done.stdout).strip()
        raise GitError(
            f"git could not merge {theirs[:10]} into {ours[:10]} in {repo}",
            said.splitlines()[-1] if said else f"exit code {done.returncode}",
            "Lopen needs git 2.38 or newer (`git merge-tree --write-tree`); check `git --version`",
        )
    conflicts = tuple(dict.fromkeys(line for line in lines[1:] if line.strip()))
    return Merged(lines[0].strip(), conflicts if done.returncode == 1 else ())


def commit_merge(repo: Path, tree: str, parents: tuple[str, ...], message: str) -> str:
    """A commit of exactly ``tree`` with ``parents``; no branch moves."""
    args = ["commit-tree", tree, "-m", message]
    for parent in parents:
        args += ["-p", parent]
    return git(repo, *args)


def is_ancestor(repo: Path, sha: str, of: str) -> bool:
    return run_git(repo, "merge-base", "--is-ancestor", sha, of).returncode == 0
