"""The project: its root (nearest parent holding `.lopen/` or `.git`), Lopen's `.lopen/` folder, its
id in the event store, and the store opened for it.

The project id keys every module history in the store (``module:<project>/<module>``), so any number
of projects can share one store. It is the ``project.id`` setting when set; otherwise the id Lopen
recorded in ``.lopen/project-id`` the first time it ran here: the first 12 hex digits of the
repository's first (root) commit — the same in every clone — or a random id in a folder with no
commit yet.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from lopen.errors import LopenError

if TYPE_CHECKING:
    from events.store import EventStore

LOPEN_DIR = ".lopen"
PROJECT_ID_FILE = "project-id"


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
    """Create `<root>/.lopen/` and keep it out of git through `.git/info/exclude` (never the user's
    `.gitignore`); return the folder."""
    lopen_dir = root / LOPEN_DIR
    lopen_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # the record, the model's worktrees, the CLI's state: its owner's only
        lopen_dir.chmod(0o700)
    exclude_from_git(root, f"/{LOPEN_DIR}/")
    return lopen_dir


def exclude_from_git(root: Path, pattern: str) -> None:
    """Add ``pattern`` to the repository's `info/exclude` once (nothing happens outside a repository)."""
    done = subprocess.run(
        ["git", "rev-parse", "--git-common-dir"], cwd=root, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return
    common = Path(done.stdout.strip())
    exclude = (common if common.is_absolute() else root / common) / "info" / "exclude"
    with contextlib.suppress(OSError):
        text = exclude.read_text(encoding="utf-8") if exclude.is_file() else ""
        if pattern in (line.strip() for line in text.splitlines()):
            return
        exclude.parent.mkdir(parents=True, exist_ok=True)
        separator = "" if not text or text.endswith("\n") else "\n"
        with exclude.open("a", encoding="utf-8") as handle:
            handle.write(f"{separator}{pattern}\n")


def project_id(root: Path, configured: str = "", *, record: bool = True) -> str:
    """This project's id in the event store (see the module docstring); recorded on first use."""
    if configured:
        return configured
    path = root / LOPEN_DIR / PROJECT_ID_FILE
    with contextlib.suppress(OSError):
        recorded = path.read_text(encoding="utf-8").strip()
        if recorded:
            return recorded
    found = _root_commit(root) or f"p{secrets.token_hex(6)}"
    if record:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{PROJECT_ID_FILE}.{os.getpid()}")
            tmp.write_text(found + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            raise LopenError(
                f"cannot record this project's id in {path}",
                f"{exc.strerror or exc} (errno {exc.errno})",
                f"make {path.parent} writable, or set project.id (LOPEN_PROJECT__ID)",
            ) from exc
    return found


def _root_commit(root: Path) -> str:
    done = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"], cwd=root, capture_output=True, text=True, check=False
    )
    roots = done.stdout.split() if done.returncode == 0 else []
    return roots[-1][:12] if roots else ""


def open_store(
    root: Path, url: str = "", configured_id: str = "", *, read_only: bool = False
) -> tuple[EventStore, str]:
    """The project's event store and its id: a store written before the hash chain is sealed and one
    written before project ids is migrated into this project, once each (nothing is lost), and the
    projections render this project's plans. ``read_only``: for a command that only reads — a store
    in a read-only ``.lopen`` is read from a private copy (``EventStore.open``), and no project id
    is recorded."""
    from events.store import EventStore

    project = project_id(root, configured_id, record=not read_only)
    store = EventStore.open(root, url, read_only=read_only)
    try:
        store.seal_unchained()  # a store older than the hash chain: its events sealed once, never rejected
        store.migrate_legacy(project)
        store.projections.for_project(project)
    except BaseException:
        store.close()
        raise
    return store, project
