"""The worktree Lopen builds a module in (G5, G6).

Each module is built in its own git worktree (``.lopen/worktrees/<module>`` by default) on the
branch ``lopen/<module>``; the user's checkout, index and HEAD are never touched, and Lopen's
folder is kept out of git through ``.git/info/exclude``.

Commits are bound to verification: ``tree()`` writes the worktree's current content as a git tree
(through a private index file: the worktree's own index is not touched) and returns its id; the
oracle judges that tree, and ``commit(tree, parent, message)`` makes a commit of exactly that tree
(``git commit-tree``) and moves the branch to it only if the branch is still at ``parent``
(``git update-ref <new> <old>``) — whatever the model did to HEAD, the index or the files since.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from lopen.git.repository import GitError, Repository, git, run_git

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
REMOTE_TIMEOUT = 300.0  # seconds a fetch from or push to the team's remote may take; then a failure, never a hang
SETTLE_MARGIN = 0.02  # seconds past a whole second before a spare's index is written again (``Worktree.settle``)
ADD_NAMED_MAX = 200  # past this many changed paths, `git add -A` walks the worktree rather than match each
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
WORKTREE_CONFIG_KEPT = frozenset({"core.sparsecheckout", "core.sparsecheckoutcone", "index.sparse"})
"""The keys a worktree's private ``config.worktree`` may keep: what ``git sparse-checkout`` puts there.
Any other key (``core.fsmonitor``, ``core.hooksPath``, ``filter.<x>.clean``, ``include.path`` …) could
make the person's own git run a program, so Lopen removes it."""


def _read_ref(common: Path, ref: str) -> str | None:
    """A branch's commit from git's files: its loose ref, else ``packed-refs``; "" when it does not exist,
    None when the files do not say (then git is asked)."""
    try:
        text = (common / ref).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = ""
    except OSError:
        return None
    if text:
        return text if _SHA.fullmatch(text) else None
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except OSError:
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _SHA.fullmatch(sha):
            return sha
    return ""


def _read_text(path: Path) -> str:
    """A regular file's text (a symlink to one followed); for anything else an OSError, without reading it: a
    named pipe a model put in a git file's place would block the read, and Lopen with it."""
    if not stat.S_ISREG(path.stat().st_mode):
        raise OSError  # the callers read an OSError as "not there, or not what git made"
    return path.read_text(encoding="utf-8")


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:10]


def _unquote(path: str) -> str:
    """A path as git prints it: C-quoted when it holds special characters."""
    if len(path) >= 2 and path[0] == path[-1] == '"':
        return codecs.escape_decode(path[1:-1])[0].decode("utf-8", "replace")  # type: ignore[attr-defined]
    return path


class Spare(NamedTuple):
    """A worktree made ahead of the lane that takes it (``lopen.git.spares``): detached at ``at``, its files
    checked out, ``index`` its private index (with the files' times); ``settled``: both indexes written again
    once the second of the check-out was over (``Worktree.settle``)."""

    path: Path
    index: Path
    at: str
    settled: bool = False


class Worktree:
    """``ignore``: patterns (gitignore syntax) kept out of every tree Lopen writes, on top of the
    project's own ignore files — the caches a test run leaves (``__pycache__/``, ``.pytest_cache/``),
    so that running the tests never changes the tree that was verified.

    ``shared_branch``: a component's worktree of one worker among others (``<slug>@<worker>``). Its branch
    may be checked out in a sibling folder too — the worktree of a worker that held the component before
    (paused past its lease, or gone) — and git is told to allow that (``worktree add --force``): each
    worker works in a folder of its own, the branch is the component's, and only the claim's holder
    moves it (the fence).

    ``take_spare``: where a new worktree can come from ready-made (``lopen.git.spares``: a parallel run's
    spares, checked out while the model planned); None, or a spare it returns None, and it is made here."""

    # Lopen's own git commands in the worktree never run a program the repository's files name: a
    # model could otherwise plant one (core.fsmonitor, hooks) for Lopen to run outside the sandbox.
    HARDENED = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.sshCommand=false")
    # Lopen's private index keeps every file's times, so that a tree costs what changed, not the repository.
    # Whether a file changed is decided on all of git's stat fields — its inode, and its change time, which
    # no program can set back — whatever configuration a model may have written. No untracked cache: it
    # trusts a folder's times to the second, and a model could hide a new file in a folder behind it.
    CACHED = ("-c", "core.untrackedCache=false", "-c", "core.trustCtime=true", "-c", "core.checkStat=default")

    def __init__(
        self,
        repo_root: Path,
        path: Path,
        branch: str,
        ignore: tuple[str, ...] = (),
        max_file_bytes: int = 0,
        shared_branch: bool = False,
        take_spare: Callable[[], Spare | None] | None = None,
    ) -> None:
        self.repo_root = repo_root
        self.take_spare = take_spare
        self.shared_branch = shared_branch
        self.path = path
        self.max_file_bytes = max_file_bytes  # files larger than this stay out of every tree; 0: no limit
        self.left_out: list[tuple[str, int]] = []  # (path, bytes) the last tree() left out for their size
        self.nested: list[str] = []  # the nested git repositories the last tree() left out (their folders)
        self.branch = branch
        self.ref = f"refs/heads/{branch}"
        self.ignore = ignore
        self._excludes: str | None = None
        self._pins: dict[str, str] | None = None
        self._git_dirs: tuple[Path, Path] | None = None  # (its private git folder, the common one)
        self._trusted: tuple[Path, Path] | None = None  # the same, as checked when Lopen made or adopted it
        self._indexed: str | None = None  # the tip the persistent index was read from
        self._written: str | None = None  # the tree last written from it, while the index still holds it
        self._unfilled = False  # made (or found) without its files: ``ensure`` checks them out
        self._own_index: str | None = None  # the tip the own index was just checked out at (``sync_index``)
        self._spare: Spare | None = None  # the spare ``ensure`` took, until ``_ensure`` adopts it
        self._tree_lock = threading.Lock()

    def _git(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
        """git in the worktree, with its git folders pinned (``GIT_DIR``, ``GIT_COMMON_DIR``,
        ``GIT_WORK_TREE``): what the worktree's own ``.git`` pointer and ``commondir`` file say — files
        a model can write — never decide which repository, configuration or program Lopen uses."""
        pinned = {**os.environ, **self._pinned(), **(env or {})}
        return git(self.path, *self.HARDENED, *args, check=check, env=pinned)

    def _pinned(self) -> dict[str, str]:
        if self._pins is None:
            if self._trusted is not None:
                private, common = self._trusted
            else:
                common = self._common()
                private = self._private(common) or common / "worktrees" / self.path.name
            self._pins = {"GIT_DIR": str(private), "GIT_COMMON_DIR": str(common), "GIT_WORK_TREE": str(self.path)}
        return self._pins

    def _common(self) -> Path:
        """The repository's git folder, as the user's checkout (not the worktree) says."""
        return Path(git(self.repo_root, "rev-parse", "--path-format=absolute", "--git-common-dir")).resolve()

    def _private(self, common: Path) -> Path | None:
        """The worktree's own git folder when every file agrees: its ``.git`` pointer names a folder under
        ``<common>/worktrees/``, whose ``gitdir`` points back here and whose ``commondir`` leads to
        ``common``. None otherwise (a model rewrote one of them, or the worktree is gone)."""
        try:
            pointer = _read_text(self.path / ".git").strip()
            if not pointer.startswith("gitdir: "):
                return None
            private = Path(pointer.removeprefix("gitdir: ")).resolve()
            if private.parent != common / "worktrees":
                return None
            back = Path(_read_text(private / "gitdir").strip()).resolve()
            leads = (private / _read_text(private / "commondir").strip()).resolve()
        except (OSError, ValueError):  # ValueError: a file that is not UTF-8 text (UnicodeDecodeError)
            return None
        if back != (self.path / ".git").resolve() or leads != common:
            return None
        return private

    # -- making it ------------------------------------------------------------------------------

    def ensure(self, start_at: str = "") -> tuple[bool, str]:
        """Create the branch and the worktree when missing. A new branch starts at ``start_at`` — where
        the module's history says the branch is (another clone's work, fetched) — or else at the user's HEAD.

        Returns ``(branch created, the commit it started at)``. Worktrees of one repository are made one
        at a time (a lock file under ``.lopen/``): lanes and workers start together, and git's
        ``worktree prune`` and ``worktree add`` of one must not meet another's half-made worktree. Their
        files are written after that lock is released (``_check_out``: the part that grows with the
        repository), one worktree at a time too, each by git's parallel check-out on every core: the first
        lane starts as soon as its own files are written, not when every lane's are.
        """
        self._unfilled = False
        # taken before the lock (it may wait for the spare being checked out), used under it, or removed
        spare = self.take_spare() if self.take_spare is not None and not os.path.lexists(self.path) else None
        with _locked(self.repo_root / ".lopen" / "worktrees.lock"):
            self._spare = spare
            try:
                made = self._ensure(start_at)
            finally:
                if self._spare is not None:  # not needed after all (made meanwhile), or it could not be used
                    self._discard(self._spare)
                    self._spare = None
        if self._unfilled:
            with _locked(self.repo_root / ".lopen" / "checkouts.lock"):
                self._check_out()
        return made

    def _ensure(self, start_at: str) -> tuple[bool, str]:
        repo = Repository(self.repo_root)
        created = not repo.branch_exists(self.branch)
        if created and start_at and not repo.has_commit(start_at):
            raise GitError(
                f"the module's history says {self.branch} is at {start_at[:8]}, which this clone does not have",
                "another clone (or another machine) built it, sharing this project's event store",
                f"fetch it first: `git fetch <remote> {self.branch}:{self.branch}`, then run again",
            )
        # A new branch starts where the history says, else at the person's HEAD; an existing one (made by
        # a person before Lopen's first run, or by an earlier run) is built on where it is.
        base = (start_at or repo.head() if created else repo.tip(self.branch)) or ""
        here = self.path.resolve()
        others = [] if created else [p for p in repo.checked_out(self.branch) if p.resolve() != here]
        siblings = [p for p in others if self.shared_branch and p.resolve().parent == here.parent]
        for elsewhere in others:
            if elsewhere not in siblings:
                raise GitError(
                    f"{self.branch} is checked out in {elsewhere}",
                    "Lopen builds the module in its own worktree and git allows a branch in one worktree only",
                    f"switch that checkout to another branch (`git -C {elsewhere} checkout -`), then run again",
                )
        self._git_dirs = self._trusted = None
        if self._is_worktree():
            self._trust()
            # git writes a worktree's own index last (``_check_out``): none means its files were cut off
            self._unfilled = self._trusted is not None and not os.path.lexists(self._trusted[0] / "index")
            return False, base
        if self.path.exists():
            if not (self.path / ".git").exists():
                raise GitError(
                    f"{self.path} exists and is not a worktree Lopen made",
                    "Lopen builds each module in its own worktree, <git.worktree_dir>/<module>, and never "
                    "touches a folder of yours",
                    "set git.worktree_dir to another folder (`lopen config set git.worktree_dir .lopen/worktrees`)",
                )
            self._move_aside()
        git(self.repo_root, "worktree", "prune")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._exclude_from_checkout()
        if self._spare is not None and base and not siblings and self._adopt(self._spare, created, base):
            return created, base
        add = ("worktree", "add", "-q", "--no-checkout")  # filled through Lopen's private index (_check_out)
        if created:
            git(self.repo_root, *add, "-b", self.branch, str(self.path), base or "HEAD")
        elif siblings:  # another worker's folder of this component has it too: each works in its own
            git(self.repo_root, *add, "--force", str(self.path), self.branch)
        else:
            git(self.repo_root, *add, str(self.path), self.branch)
        self._trust()
        self._unfilled = True  # registered with git (no prune takes it): its files come after the lock
        return created, base

    def _check_out(self, at: str = "") -> None:
        """Write a new worktree's files through Lopen's private index (``tree()``'s), so that it starts
        with the file times of the files git just wrote: the first ``tree()`` only looks at the files
        (``lstat``) instead of reading and hashing every one of them again — seconds in a repository of
        20,000 files. The worktree's own index is a copy (what ``git worktree add`` would have left);
        Lopen's is never read from a file the model could have written. The own index is written last, so
        a worktree without one had its check-out cut off (a killed run): it is checked out again, over
        whatever files it has (``--reset``)."""
        index = self._index_file()
        index.with_name(index.name + ".lock").unlink(missing_ok=True)
        index.unlink(missing_ok=True)
        parallel = ("-c", "checkout.workers=0")  # as many as there are cores
        commit = at or self.ref
        self._git(*self.CACHED, *parallel, "read-tree", "--reset", "-u", commit, env={"GIT_INDEX_FILE": str(index)})
        self._indexed, self._written = at or self.tip(), None
        self._copy_index(index)

    def _copy_index(self, index: Path) -> None:
        """The worktree's own index becomes a copy of Lopen's private one, file times included (git's
        racy-file check stays exact): what ``git worktree add`` would have left."""
        if self._trusted is not None:
            partial = self._trusted[0] / f"index.lopen-{os.getpid()}"
            partial.unlink(missing_ok=True)
            shutil.copy2(index, partial)
            os.replace(partial, self._trusted[0] / "index")  # replaces whatever is there, never writes through it
            self._own_index = self._indexed

    def make_spare(self, at: str) -> Spare:
        """Make this worktree detached at ``at``, its files checked out: a spare for a lane to take
        (``lopen.git.spares``). Made as ``ensure`` makes one: registered under the lock worktrees are made
        in, checked out under the one check-outs take turns on."""
        with _locked(self.repo_root / ".lopen" / "worktrees.lock"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            git(self.repo_root, "worktree", "add", "-q", "--no-checkout", "--detach", str(self.path), at)
            self._trust()
        with _locked(self.repo_root / ".lopen" / "checkouts.lock"):
            self._check_out(at)
        return Spare(self.path, self._index_file(), at)

    def settle(self) -> float:
        """A spare's indexes written again once the second its check-out ended in is over; else the seconds
        left until it is (nothing done). git compares a file's times to the whole second: a file written in
        the second its index was written in is "racily clean", read and hashed again by every git command
        until an index is written in a later second — after a fresh check-out, up to every file (at 20,000
        files a lane's first tree took 160 ms instead of 65, its first reset after a task 214 ms instead
        of 60). git hashes those files once more as it writes the index again (they must still be what it
        holds), and the own index is copied from it. ``lopen.git.spares`` does this in the background;
        a lane taking a spare not settled yet does it (``_adopt``)."""
        index = self._index_file()
        left = self._write_again(index)
        if not left:
            self._copy_index(index)
        return left

    def _write_again(self, index: Path) -> float:
        """``index`` written again if a second has begun since it was (``settle``); else the seconds left."""
        # the files' clock is the kernel's coarse one, up to a tick behind time.time()
        left = int(index.stat().st_mtime) + 1 + SETTLE_MARGIN - time.time()
        if left > 0:
            return left
        self._git(*self.CACHED, "update-index", "--force-write-index", env={"GIT_INDEX_FILE": str(index)})
        return 0.0

    def _adopt(self, spare: Spare, created: bool, base: str) -> bool:
        """Take ``spare`` as this worktree: moved into place (``git worktree move``), its HEAD this branch
        (made at ``base`` when ``created``), its files and both indexes brought from the spare's commit to
        the branch's by what differs (``read-tree -m -u``: the rest keep their times). False when git
        cannot move it (the spare is then removed, and the worktree made as usual)."""
        try:
            git(self.repo_root, "worktree", "move", str(spare.path), str(self.path))
        except GitError:
            return False
        self._spare = None
        index = self._index_file()
        try:
            if created:  # a new branch (never over one that exists: the empty old value)
                git(self.repo_root, "update-ref", "-m", "lopen: branch created", self.ref, base, "")
            self._trust()
            self.restore_head()
            index.with_name(index.name + ".lock").unlink(missing_ok=True)  # a killed run's: this lane is not made
            os.replace(spare.index, index)
            tip = self.tip()
            if tip != spare.at:  # the index written again too: the spare settles (``settle``)
                self._git(*self.CACHED, "read-tree", "-m", "-u", spare.at, tip, env={"GIT_INDEX_FILE": str(index)})
            elif not spare.settled:
                with contextlib.suppress(GitError):  # only saves git work later: the spare is whole either way
                    self._write_again(index)
            self._indexed, self._written = tip, None
            self._copy_index(index)
        except BaseException:  # half taken: removed, so that the next ``ensure`` makes it afresh
            self.remove()
            for leftover in (index, spare.index):
                leftover.unlink(missing_ok=True)
            raise
        return True

    def _discard(self, spare: Spare) -> None:
        """Remove a spare that was not adopted (its folder deleted in the background, as ``remove`` does)."""
        Worktree(self.repo_root, spare.path, "").remove()
        spare.index.unlink(missing_ok=True)

    def _trust(self) -> None:
        """Pin the git folders now, while every git file agrees (just checked, or just made by git):
        Lopen's git uses them from here on, and ``restore_git_files`` puts the files back to them."""
        self._pins = self._git_dirs = None
        common = self._common()
        private = self._private(common)
        self._trusted = (private, common) if private is not None else None

    def _exclude_from_checkout(self) -> None:
        """A worktree folder inside the user's checkout never shows in their `git status`."""
        from lopen.project import exclude_from_git

        try:
            relative = self.path.resolve().relative_to(self.repo_root.resolve())
        except ValueError:
            return  # outside the checkout: nothing to hide
        exclude_from_git(self.repo_root, f"/{relative.as_posix()}/")  # this folder only, never its parent

    def _move_aside(self) -> None:
        """A worktree folder git no longer knows as this branch's worktree (damaged, or its git pointer
        changed): kept for inspection under ``<folder>.broken-<time>``, never deleted; a fresh one follows."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.broken-{stamp}")
        self.path.rename(aside)
        _disarm(aside / ".git")

    def _is_worktree(self) -> bool:
        """A worktree of this repository whose git files all agree (read, never run: see ``_private``)."""
        private = self._private(self._common())
        if private is None:
            return False
        self._pins = self._git_dirs = None  # pinned afresh on the next command
        return True

    # -- git's own files -------------------------------------------------------------------------

    def restore_git_files(self) -> list[str]:
        """Put back git's files for this worktree where a model changed them; say what was wrong.

        These files decide which repository, configuration and programs *plain* git uses in this folder
        — the person's own ``git status`` later, outside any sandbox — while Lopen's git ignores them
        (its folders are pinned). A model that points ``.git`` at a git folder of its own, with
        ``core.fsmonitor`` or a ``filter.<x>.clean`` set, would otherwise have that program run by the
        person. Checked against the folders Lopen pinned when it made or adopted the worktree
        (``ensure``), never against what the files say now:

        - the worktree's ``.git`` pointer names the private git folder (``gitdir: <folder>``);
        - the private folder's ``gitdir`` points back at that ``.git``, its ``commondir`` leads to the
          repository's git folder;
        - its ``config.worktree`` keeps only sparse-checkout keys (:data:`WORKTREE_CONFIG_KEPT`).

        A file that is a symlink, a folder or a hard link is replaced, never written through. A worktree
        Lopen has not pinned (never ensured) or that is gone is left alone: there is nothing to restore.
        """
        if self._trusted is None or not self.path.is_dir() or not self._trusted[0].is_dir():
            return []
        private, common = self._trusted
        found = [
            self._restore_pointer(self.path / ".git", self.path, private, f"gitdir: {private}\n"),
            self._restore_pointer(private / "gitdir", private, self.path.resolve() / ".git"),
            self._restore_pointer(private / "commondir", private, common, os.path.relpath(common, private) + "\n"),
            self._restore_worktree_config(private / "config.worktree"),
        ]
        return [what for what in found if what]

    def checked(self) -> bool:
        """Whether Lopen pinned this worktree's git folders (``ensure``) and the worktree is still there:
        then ``restore_git_files`` can check it."""
        return self._trusted is not None and self.path.is_dir()

    def _restore_pointer(self, path: Path, base: Path, target: Path, content: str = "") -> str:
        """``path`` must be a plain file naming ``target`` (relative to ``base``); otherwise it is written
        again (``content``, else ``target`` and a newline) and the change is described."""
        prefix = "gitdir: " if path.name == ".git" else ""
        if _names(path, prefix, base, target):
            return ""
        was = _described(path)
        _rewrite(path, content or f"{target}\n")
        return f"{_label(self.path, path)} was {was}"

    def _restore_worktree_config(self, path: Path) -> str:
        """``config.worktree`` keeps only the keys of :data:`WORKTREE_CONFIG_KEPT`; a file git cannot read,
        or that is not a plain file, is emptied. Absent is fine: git made none."""
        if not os.path.lexists(path):
            return ""
        entries = _config_entries(path, self.repo_root)
        kept = [(key, value) for key, value in entries or () if key in WORKTREE_CONFIG_KEPT]
        if entries is not None and len(kept) == len(entries):
            return ""
        removed = sorted({key for key, _ in entries or ()} - WORKTREE_CONFIG_KEPT)
        what = ", ".join(removed) if removed else _described(path)  # what the model left, before it goes
        _rewrite(path, _config_text(kept))
        return f"{_label(self.path, path)} set {what}: removed"

    # -- reading it -----------------------------------------------------------------------------

    def tip(self) -> str:
        """The branch's commit ("" when it does not exist): read from git's ref files, without a git process."""
        dirs = self._dirs()
        if dirs is not None:
            found = _read_ref(dirs[1], self.ref)
            if found is not None:
                return found
        return self._git("rev-parse", "--verify", "-q", self.ref, check=False)

    def head_ref(self) -> str:
        """What HEAD points at: ``refs/heads/<branch>``, or "" when detached or when HEAD is no file git can
        read (missing, a folder, a named pipe: git itself would block on a pipe)."""
        dirs = self._dirs()
        if dirs is not None:
            try:
                head = _read_text(dirs[0] / "HEAD").strip()
            except OSError:
                return ""
            if head.startswith("ref: "):
                return head.removeprefix("ref: ").strip()
            if _SHA.fullmatch(head):
                return ""
        return self._git("symbolic-ref", "-q", "HEAD", check=False)

    def _dirs(self) -> tuple[Path, Path] | None:
        """(the worktree's private git folder, the repository's common one) — the pinned ones, never what
        the worktree's own ``.git`` pointer says — or None when refs are not plain files (reftable)."""
        if self._git_dirs is None:
            pins = self._pinned()
            private, common = Path(pins["GIT_DIR"]), Path(pins["GIT_COMMON_DIR"])
            if (common / "reftable").exists():
                return None
            self._git_dirs = (private, common)
        return self._git_dirs

    def _index_file(self) -> Path:
        """Lopen's private index for this worktree (under ``.lopen/indexes/``, out of the model's reach)."""
        short = self.path.name.encode()[:100].decode(errors="ignore")  # its name, with .lock, fits 255 bytes
        index = self.repo_root / ".lopen" / "indexes" / (short + "-" + _digest(str(self.path)))
        index.parent.mkdir(parents=True, exist_ok=True)
        return index

    def tree(self) -> str:
        """The id of a git tree holding the worktree's files as they are now (ignored files left out).

        Built in a private index of Lopen's (under ``.lopen/indexes/``) that starts from the branch tip, so
        files the branch tracks stay even when a `.gitignore` matches them; the worktree's own index and
        HEAD are not touched. The index is kept between calls — read from the tip again only when the tip
        moved, keeping the file times of what did not change, and not even then when the tip is Lopen's
        commit of the tree it last wrote (``commit``): it holds that tree already — so one ``git status``
        finds what changed by looking at the files (``lstat``), reading and hashing only those, and
        ``git add`` then takes just them: the cost grows with what changed, and with the number of files
        only as one ``lstat`` each. New nested git repositories are left out (``nested``), as files over
        ``max_file_bytes`` are (``left_out``).
        """
        with self._tree_lock:
            index = self._index_file()
            env = {"GIT_INDEX_FILE": str(index)}  # on top of the pinned environment
            excludes = ("-c", f"core.excludesFile={self._excludes_file()}", *self.CACHED)
            tip = self.tip()
            for attempt in range(2):
                try:
                    if attempt or tip != self._indexed or not index.exists():
                        self._read_tip(index, tip, env, fresh=bool(attempt))
                    names = self._unindexed(excludes, env)
                    self.left_out = self._oversized(names) if self.max_file_bytes else []
                    self.nested = self._nested_repositories(names)
                    everything = False
                    if self.left_out and self._indexed != "fresh":
                        self._read_tip(index, tip, env)  # an oversized file keeps the tip's version (if any)
                        everything = True  # what changed is now counted from the tip, not from the last tree
                    self._add(excludes, env, names, everything)
                    self._indexed = tip
                    self._written = self._git(*self.CACHED, "write-tree", env=env)
                    return self._written
                except GitError:
                    self._indexed = self._written = None  # a broken or locked index (a killed process's): afresh
                    if attempt:
                        raise
            raise AssertionError("unreachable")

    def _add(self, excludes: tuple[str, ...], env: dict[str, str], names: list[str], everything: bool) -> None:
        """Put the changed ``names`` into the private index (``git add -A``), leaving out the oversized
        files and nested repositories; ``everything``: the whole worktree (also when so many paths changed
        that naming them costs more than git's own walk)."""
        skip = [f":(exclude,literal){relative}" for relative, _size in self.left_out]
        skip += [f":(exclude,literal){folder}" for folder in self.nested]
        left = {relative for relative, _size in self.left_out} | {f"{folder}/" for folder in self.nested}
        named = [f":(literal){name}" for name in names if name not in left]
        if everything or len(named) > ADD_NAMED_MAX:
            # git's walk runs `git status` inside every checked-out submodule (and so its clean filters, a
            # model's program): the tracked ones stay out of it, and those status named are added by name
            links = self._gitlinks(env)
            walk = [*skip, *(f":(exclude,literal){link}" for link in links)]
            self._git(*excludes, "add", "-A", "--", ".", *walk, env=env)
            named = [f":(literal){name}" for name in names if name in links]
        if named:
            listed = "\0".join([*named, *skip]).encode("utf-8", "surrogateescape")
            self._git_bytes(
                *excludes, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", input=listed, env=env
            )

    def _gitlinks(self, env: dict[str, str]) -> set[str]:
        """The submodules (gitlinks) Lopen's private index tracks, by path."""
        listed = self._git_bytes("ls-files", "-s", "-z", env=env).decode("utf-8", "surrogateescape")
        return {entry.split("\t", 1)[1] for entry in listed.split("\0") if entry.startswith("160000 ")}

    def _read_tip(self, index: Path, tip: str, env: dict[str, str], fresh: bool = False) -> None:
        """Make the private index the branch tip (empty when there is none). An index already there is
        read over (``read-tree -m``): the entries whose content the tip has keep their file times, so the
        next ``git status`` re-reads only the files that changed, not the whole repository (a tip that
        moved by one commit in a checkout of 20,000 files). ``fresh``: start from nothing (a broken one)."""
        index.with_name(index.name + ".lock").unlink(missing_ok=True)
        if fresh or not tip:
            index.unlink(missing_ok=True)
        if tip:
            self._git(*self.CACHED, "read-tree", *(["-m"] if index.exists() else []), tip, env=env)
        self._indexed, self._written = "fresh", None

    def _unindexed(self, excludes: tuple[str, ...], env: dict[str, str]) -> list[str]:
        """The new, changed and deleted paths against the private index (the tip, or the last tree),
        ignored ones left out; a nested git repository is one entry, its folder with a trailing ``/``.
        One ``git status``: it looks at each file's times (``lstat``) and reads only those that changed."""
        said = self._git_bytes(
            *excludes,
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=dirty",  # a submodule's commit counts, as for `git add`; nothing runs in it
            "--no-renames",  # a rename the private index holds (since the last tree) comes as two "1 " entries
            env=env,
        ).decode("utf-8", "surrogateescape")
        names: list[str] = []
        for entry in said.split("\0"):
            kind = entry[:2]
            if kind == "? ":
                names.append(entry[2:])
            elif kind == "1 ":  # 1 XY sub mH mI mW hH hI path: changed in the worktree when Y is not "."
                parts = entry.split(" ", 8)
                if parts[1][1:] != ".":
                    names.append(parts[8])
        return [name for name in dict.fromkeys(names) if name]

    def _nested_repositories(self, names: list[str]) -> list[str]:
        """The folders that are git repositories of their own (a model's ``git init sub``, a cloned
        dependency): left out of the tree, so that ``git add`` neither fails on one without a commit nor
        records a gitlink to a commit nobody can fetch. A gitlink the branch already tracks (the user's
        submodule) is not new, so it stays."""
        return [name.rstrip("/") for name in names if name.endswith("/") and (self.path / name / ".git").exists()]

    def _oversized(self, names: list[str]) -> list[tuple[str, int]]:
        """The new or changed files (against the private index: the tip) larger than ``max_file_bytes``:
        a model's 600 MB download is never hashed into the repository, committed, or diffed."""
        found = []
        for name in names:
            if name.endswith("/"):
                continue  # a nested repository
            try:
                size = (self.path / name).lstat().st_size
            except OSError:
                continue  # deleted: git records that
            if size > self.max_file_bytes:
                found.append((name, size))
        return found

    def _excludes_file(self) -> str:
        """The user's global excludes file (git's ``core.excludesFile``) plus ``ignore``, as one file."""
        if self._excludes is None:
            configured = git(self.repo_root, "config", "--path", "core.excludesFile", check=False)
            home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
            user = Path(configured) if configured else home / "git" / "ignore"
            try:
                text = user.read_text(encoding="utf-8") if user.is_file() else ""
            except OSError:
                text = ""
            path = self.repo_root / ".lopen" / "git-excludes"  # Lopen's folder: out of the model's reach
            path.parent.mkdir(parents=True, exist_ok=True)
            separator = "\n" if text and not text.endswith("\n") else ""
            content = text + separator + "\n".join(self.ignore) + "\n"
            if not path.is_file() or path.read_text(encoding="utf-8") != content:
                partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")  # lanes: at once
                partial.write_text(content, encoding="utf-8")
                os.replace(partial, path)
            self._excludes = str(path)
        return self._excludes

    def tree_of(self, commit: str) -> str:
        return self._git("rev-parse", f"{commit}^{{tree}}")

    def diff(self, base: str | None, tree: str, max_chars: int = 60_000) -> str:
        return self.diff_and_files(base, tree, max_chars)[0]

    def diff_and_files(self, base: str | None, tree: str, max_chars: int = 60_000) -> tuple[str, list[str]]:
        """The diff from ``base`` to ``tree`` (cut at ``max_chars``) and the paths it changes: one git process."""
        out = self._git("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--raw", "-p", base or EMPTY_TREE, tree)
        files: list[str] = []
        lines = out.split("\n")
        n = 0
        while n < len(lines) and lines[n].startswith(":"):
            for path in lines[n].split("\t")[1:]:
                files.append(_unquote(path))
            n += 1
        text = "\n".join(lines[n + 1 if n and n < len(lines) and not lines[n] else n :])
        if len(text) > max_chars:
            text = text[:max_chars] + f"\n… diff cut at {max_chars} characters"
        return text, list(dict.fromkeys(files))

    def changed_files(self, base: str | None, tree: str) -> list[str]:
        out = self._git("diff", "--name-only", "--no-ext-diff", "--no-textconv", base or EMPTY_TREE, tree)
        return [line for line in out.splitlines() if line]

    def numstat(self, base: str | None, tree: str) -> tuple[int, int, int]:
        """(lines added, lines removed, files changed) from ``base`` to ``tree``, as ``git diff --numstat``
        counts them; a binary file (``-`` for its lines) counts as a file changed and adds no lines."""
        out = self._git("diff", "--numstat", "-z", "--no-ext-diff", "--no-textconv", base or EMPTY_TREE, tree)
        added = removed = files = 0
        fields = iter(out.split("\0"))
        for entry in fields:
            if not entry:
                continue
            plus, minus, path = entry.split("\t", 2)
            if not path:  # a rename or copy: the old and new paths follow, one field each
                next(fields, None)
                next(fields, None)
            files += 1
            added += int(plus) if plus.isdigit() else 0
            removed += int(minus) if minus.isdigit() else 0
        return added, removed, files

    def dirty_files(self) -> list[str]:
        """The paths whose content differs from the branch tip, as the model left them — measured the
        way verification measures (the worktree written as a tree, Lopen's ignore patterns applied),
        so the worktree's own index and test-run caches never make it look dirty."""
        tip = self.tip()
        return self.changed_files(tip or None, self.tree())

    # -- changing it ----------------------------------------------------------------------------

    def commit(self, tree: str, parent: str, message: str, merge_parent: str = "") -> str:
        """A commit of exactly ``tree`` on top of ``parent`` (and ``merge_parent``, for a merge); the
        branch moves to it only if it is still at ``parent`` (else GitError). Returns the new commit's sha."""
        args = ["commit-tree", tree, "-m", message]
        if parent:
            args[2:2] = ["-p", parent]
        if merge_parent:
            args += ["-p", merge_parent]
        sha = self._git(*args)
        self._git("update-ref", "-m", f"lopen: {message.splitlines()[0]}", self.ref, sha, parent or "")
        with self._tree_lock:
            if tree == self._written:  # the private index holds exactly the new tip: the next tree() reads
                self._indexed = sha  # no commit again (20,000 entries) to learn what it already holds
        return sha

    def commit_file(self, relative: str, content: bytes, parent: str, message: str) -> str:
        """Commit ``content`` at ``relative`` on top of ``parent`` (nothing else changes), move the branch
        to it and put the file in the worktree; return the new commit's sha."""
        return self.commit_files({relative: content}, parent, message)

    def commit_files(self, files: dict[str, bytes], parent: str, message: str) -> str:
        """Commit each file's content at its relative path on top of ``parent`` (nothing else changes),
        move the branch to it and put the files in the worktree; return the new commit's sha."""
        fd, index = tempfile.mkstemp(prefix="lopen-index-")
        os.close(fd)
        os.unlink(index)
        env = {"GIT_INDEX_FILE": index}  # on top of the pinned environment
        try:
            if parent:
                self._git("read-tree", parent, env=env)
            for relative, content in files.items():
                blob = self._git_bytes("hash-object", "-w", "--stdin", input=content).decode().strip()
                self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{relative}", env=env)
            tree = self._git("write-tree", env=env)
        finally:
            for leftover in (index, f"{index}.lock"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
        sha = self.commit(tree, parent, message)
        for relative, content in files.items():
            target = self.path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        self._git("reset", "-q", "--", *files)
        return sha

    def show(self, commit: str, relative: str) -> bytes | None:
        """The bytes of ``relative`` in ``commit``, or None when it has no such file."""
        try:
            return self._git_bytes("cat-file", "blob", f"{commit}:{relative}")
        except GitError:
            return None

    def _git_bytes(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
        """Like ``_git`` (pinned, hardened) for bytes in and out."""
        import subprocess

        env = {**os.environ, **self._pinned(), **(env or {})}
        done = subprocess.run(
            ["git", *self.HARDENED, *args], cwd=self.path, input=input, capture_output=True, env=env, timeout=120
        )
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip()
            raise GitError(
                f"git {' '.join(args)} failed in {self.path}", said or f"exit {done.returncode}", "check the repository"
            )
        return done.stdout

    def find_commit(self, tree: str, since: str, trailer: str) -> str | None:
        """A commit on the branch after ``since`` with ``tree`` and a message containing ``trailer``: the
        commit a run killed before it could record it made."""
        out = self._git("log", "--format=%H %T%x00%B%x01", f"{since}..{self.ref}" if since else self.ref, check=False)
        for entry in out.split("\x01"):
            head, _, body = entry.strip().partition("\x00")
            sha, _, commit_tree = head.partition(" ")
            if commit_tree == tree and trailer in (line.strip() for line in body.splitlines()):
                return sha
        return None

    def move_branch(self, to: str) -> None:
        """Put the branch back at ``to`` (a model that committed or reset it itself)."""
        self._git("update-ref", "-m", "lopen: branch restored", self.ref, to)

    def restore_head(self) -> None:
        """Point the worktree's HEAD back at the branch (a model that checked out something else, or wrote
        something git cannot read there: then git would refuse to fix it, so the file is written)."""
        dirs = self._dirs()
        if dirs is None:  # reftable: HEAD is not a file of its own
            self._git("symbolic-ref", "HEAD", self.ref)
            return
        _rewrite(dirs[0] / "HEAD", f"ref: {self.ref}\n")

    def advance(self, old: str, new: str) -> None:
        """The branch moved from ``old`` to ``new`` outside this worktree (a merge): bring its index and
        files along, keeping what is not git's (untracked files, such as research notes)."""
        try:
            self._git("read-tree", "-m", "-u", old, new)
        except GitError:
            self.reset_to(new)

    def load(self, tree: str) -> None:
        """Put ``tree``'s files into the worktree (e.g. a merge with conflict markers to resolve); HEAD
        and the index stay at the branch tip, so they show as changes."""
        self._git("read-tree", "--reset", "-u", tree)
        self._git("reset", "-q")

    def restart_at(self, sha: str) -> None:
        """Move the branch to ``sha`` whatever it holds (a component built again) and the files with it."""
        self._git("update-ref", "-m", "lopen: component started afresh", self.ref, sha)
        self.reset_to(sha)

    def remove(self) -> None:
        """Remove the worktree folder (the branch stays). The folder is moved aside and git forgets it at
        once; its files are deleted in the background — in a large repository that takes seconds a run
        should not wait for (a folder a killed run left aside is deleted by the next removal)."""
        if self._is_worktree():
            aside = self.path.with_name(f".{self.path.name}.removed-{os.getpid()}-{time.monotonic_ns()}")
            try:
                os.rename(self.path, aside)
            except OSError:  # another filesystem, a busy folder: git removes it the slow way
                git(self.repo_root, "worktree", "remove", "--force", str(self.path))
            else:
                git(self.repo_root, "worktree", "prune")
                for folder in sorted(self.path.parent.glob(f".{self.path.name}.removed-*")):
                    deleting = threading.Thread(target=shutil.rmtree, args=(folder, True), daemon=True)
                    deleting.start()
                    DELETING.append(deleting)
        self._git_dirs = None

    def fetch(self, remote: str, branch: str = "") -> bool:
        """Fetch ``branch`` (default: this worktree's) from ``remote`` into the local branch of that name
        when that is a fast-forward or the branch is not checked out here; True when git could."""
        branch = branch or self.branch
        try:
            git(self.repo_root, "fetch", "-q", remote, f"refs/heads/{branch}", timeout=REMOTE_TIMEOUT)
        except GitError:
            return False
        return True

    def push(self, remote: str, force: bool = False) -> None:
        """Publish this branch to ``remote`` (a component's branch is forced: it can be started afresh)."""
        spec = f"{'+' if force else ''}{self.ref}:{self.ref}"
        # from the user's checkout: its ssh setup
        git(self.repo_root, "push", "-q", remote, spec, timeout=REMOTE_TIMEOUT)

    def sync_index(self) -> None:
        """The worktree's own index becomes its HEAD (files untouched): after a run killed between a
        commit and the reset that follows it, `git status` there shows the work as committed, not as
        deleted and untracked. Lopen never stages there (its trees come from a private index)."""
        if self._own_index is not None and self._own_index == self.tip():
            self._own_index = None  # just checked out (``_check_out``): the own index is already the tip
            return
        self._own_index = None
        self._git("reset", "-q")

    def reset_to_tip(self) -> None:
        """The files, the own index and HEAD become the branch tip: after a completed task, what it left
        over goes. Usually nothing is left over — the tip is Lopen's commit of the tree it verified — and
        one ``tree()`` proves it: the files are the tip's tree, nothing left out, HEAD on the branch. Then
        only the own index is put at the tip, as a copy of Lopen's private one (which holds the tip with
        every file's times): one ``git status`` instead of ``git reset --hard`` and ``git clean``, which
        look at every file and then walk every folder again (at 20,000 files, 41 ms instead of 57). The
        files Lopen's ignore patterns leave out (a test run's caches) stay, as they stay between the
        verifications of one task."""
        tip = self.tip()
        if not tip:
            return
        if self._trusted is not None and self.head_ref() == self.ref:
            tree = self.tree()
            if not self.left_out and not self.nested and tree == self.tree_of(tip):
                with self._tree_lock:
                    self._copy_index(self._index_file())
                return
        self.reset_to(tip)

    def reset_to(self, sha: str) -> None:
        """Make the files, the index and HEAD exactly ``sha`` (untracked files go; ignored ones stay)."""
        self._git("reset", "-q", "--hard", sha)
        self._git("clean", "-fdq")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a file under ``.lopen/``), between threads and processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        yield


DELETING: list[threading.Thread] = []
"""The folders of removed worktrees being deleted in the background (``Worktree.remove``)."""


def deleted(timeout: float | None = None) -> bool:
    """Wait for the worktree folders being deleted in the background; True when none is left."""
    while DELETING:
        DELETING[0].join(timeout)
        if DELETING[0].is_alive():
            return False
        DELETING.pop(0)
    return True


def _names(path: Path, prefix: str, base: Path, target: Path) -> bool:
    """Whether ``path`` is a plain file (no symlink, one link) whose text is ``prefix`` and a path that
    leads — relative to ``base`` — to ``target``, as git reads these files (trailing whitespace ignored)."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return False
        text = path.read_text(encoding="utf-8").rstrip()
    except (OSError, ValueError):  # ValueError: not UTF-8 text
        return False
    if not text.startswith(prefix) or "\n" in text:
        return False
    return (base / text.removeprefix(prefix)).resolve() == target.resolve()


def _described(path: Path) -> str:
    """What a model left at ``path``, in a few words: ``"removed"``, ``"made a symlink to …"``,
    ``"rewritten to 'gitdir: /tmp/x'"``."""
    try:
        info = path.lstat()
    except OSError:
        return "removed"
    if stat.S_ISLNK(info.st_mode):
        return f"made a symlink to {os.readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        return "made a folder"
    if stat.S_ISFIFO(info.st_mode):
        return "made a named pipe"  # never opened: reading one would block
    if info.st_nlink != 1:
        return "made a hard link to another file"
    try:
        text = path.read_bytes()[:200].decode("utf-8", "replace").strip()
    except OSError:
        return "made unreadable"
    return f"rewritten to {' '.join(text.split())[:120]!r}"


def _label(worktree: Path, path: Path) -> str:
    """``.git`` for the worktree's pointer, ``<git folder>/<name>`` for a file of its private git folder."""
    return ".git" if path.parent == worktree else f"the worktree's git folder's {path.name}"


def _rewrite(path: Path, content: str) -> None:
    """Make ``path`` a plain file holding ``content``. What a model put there instead — a symlink, a
    folder, a hard link — goes first (a symlink is never written through); a plain file is rewritten in
    place, so a read-only bind of it in a running sandbox stays in force."""
    info = path.lstat() if os.path.lexists(path) else None
    if info is not None and stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    elif info is not None and (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1):
        path.unlink()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(content)


def _config_entries(path: Path, cwd: Path) -> list[tuple[str, str]] | None:
    """The (key, value) pairs of a git config file, keys lower-cased as git prints them; None when it is
    not a plain file or git cannot read it. ``git config --file`` follows no ``include`` and runs nothing;
    it runs in the user's checkout, whose git files the model cannot write."""
    if path.is_symlink() or not path.is_file():
        return None
    done = run_git(cwd, *Worktree.HARDENED, "config", "--file", str(path), "--null", "--list")
    if done.returncode != 0:
        return None
    pairs = [entry.partition("\n") for entry in done.stdout.split("\0") if entry]
    return [(key, value) for key, _, value in pairs]


def _config_text(entries: list[tuple[str, str]]) -> str:
    """A git config file holding ``entries`` (``section.key`` names, no subsections: the kept keys)."""
    lines: list[str] = []
    section = ""
    for key, value in entries:
        head, _, name = key.rpartition(".")
        if head != section:
            section = head
            lines.append(f"[{head}]")
        quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")  # a raw newline: a bad line
        lines.append(f'\t{name} = "{quoted}"')
    return "".join(f"{line}\n" for line in lines)


def _disarm(pointer: Path) -> None:
    """A ``.git`` in a folder Lopen no longer trusts (moved aside) is renamed, so that the person's git
    there never uses a git folder — and the fsmonitor or filters — a model may have put in."""
    if os.path.lexists(pointer):
        pointer.rename(pointer.with_name(".git.untrusted"))
