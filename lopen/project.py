"""The project root (nearest parent holding `.lopen/` or `.git`) and Lopen's `.lopen/` folder."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, overload

from lopen.errors import LopenError

LOPEN_DIR = ".lopen"
_IGNORE_ENTRIES = frozenset({".lopen", ".lopen/", "/.lopen", "/.lopen/", ".lopen/*", "/.lopen/*"})


def nearest_root(start: Path | None = None) -> Path | None:
    """The nearest folder from `start` (default: the working directory) upwards that holds
    `.lopen/` or `.git` (a folder, or a file in git worktrees), or None."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / LOPEN_DIR).is_dir() or (folder / ".git").exists():
            return folder
    return None


@overload
def find_root(start: Path | None = None, *, required: Literal[True] = True) -> Path: ...
@overload
def find_root(start: Path | None = None, *, required: bool) -> Path | None: ...
def find_root(start: Path | None = None, *, required: bool = True) -> Path | None:
    """Like :func:`nearest_root`, but (when `required`) a missing project is a user error with guidance."""
    root = nearest_root(start)
    if root is None and required:
        where = (start or Path.cwd()).resolve()
        raise LopenError(
            f"no project found at {where}",
            "Lopen works inside a project: the nearest parent folder holding .lopen/ or .git/",
            "cd into your project, or make this folder one with `git init` (or `mkdir .lopen`)",
        )
    return root


def ensure_lopen_dir(root: Path) -> Path:
    """Create `<root>/.lopen/` and add `.lopen/` to an existing `.gitignore` once; return the folder."""
    lopen_dir = root / LOPEN_DIR
    lopen_dir.mkdir(parents=True, exist_ok=True)
    gitignore = root / ".gitignore"
    if gitignore.is_file():
        text = gitignore.read_text(encoding="utf-8")
        if not any(line.strip() in _IGNORE_ENTRIES for line in text.splitlines()):
            separator = "" if not text or text.endswith("\n") else "\n"
            with gitignore.open("a", encoding="utf-8") as handle:
                handle.write(f"{separator}{LOPEN_DIR}/\n")
    return lopen_dir
