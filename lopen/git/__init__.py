"""Git: the user's repository (read, never changed) and the worktree Lopen builds a module in."""

from lopen.git.repository import GitError, Repository, git, require_ready, who
from lopen.git.worktree import Worktree

__all__ = ["GitError", "Repository", "Worktree", "git", "require_ready", "who"]
