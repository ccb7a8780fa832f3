"""Spare worktrees: checked out while the model plans, for the lanes that will need one.

In a large repository, writing a worktree's files is the part of a lane's start that grows with the
repository (about 0.6 s for 20,000 files), and a parallel run's lanes all start when planning ends: their
check-outs take turns (``Worktree.ensure``), so the fourth lane waited for three others'. A run that
builds in lanes therefore makes its spares first, in the background, one after another: detached
worktrees of the module branch's tip under ``<worktree>.spares/`` — beside the lanes' folder, out of the
model's reach, never seen by a model before a lane takes one. A lane that needs a new worktree takes a
spare (``Worktree(take_spare=…)``): moved into place, put on its branch, and brought to its start by what
differs; its first ``tree()`` finds the files' times already in its index. Once all are made, those not
taken yet are settled (``Worktree.settle``): their indexes written again after the second of their
check-out, so that git does not read and hash their files again at every command.

The spares no lane took are removed when the run ends (``close``), and those a killed run left behind
when the next run starts filling (``fill``). Only a `lopen run` has spares: it holds the module alone on
its checkout, so every spare under the folder is its own or a dead run's.

    spares = Spares(repo_root, spares_dir(worktree.path))
    spares.fill(4, worktree.tip())          # returns at once; made in the background
    Worktree(..., take_spare=spares.take)   # a lane's: takes one (waits for the one being made)
    spares.close()                          # the run ends: the rest removed
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from lopen.git.repository import GitError, git
from lopen.git.worktree import Spare, Worktree, _locked

log = logging.getLogger(__name__)


def spares_dir(worktree: Path) -> Path:
    """Where a module's spare worktrees go: beside its own, ``<worktree>.spares/``."""
    return worktree.with_name(f"{worktree.name}.spares")


class Spares:
    """The spare worktrees of one run. ``take`` and ``close`` may be called from any thread."""

    def __init__(self, repo_root: Path, folder: Path) -> None:
        self.repo_root = repo_root
        self.folder = folder
        self._ready: list[Spare] = []
        self._filling = False  # the filler is at work: a lane finding no spare ready waits for its next one
        self._closed = False
        self._changed = threading.Condition()
        self._filler: threading.Thread | None = None

    def fill(self, count: int, at: str) -> None:
        """Start making ``count`` spares at commit ``at``, one after another, in the background (what a
        killed run left under the folder is removed first)."""
        if count <= 0 or not at:
            return
        with self._changed:
            self._filling = True
        self._filler = threading.Thread(target=self._fill, args=(count, at), name="lopen-spares", daemon=True)
        self._filler.start()

    def take(self) -> Spare | None:
        """A ready spare, waiting for the one being made if there is none yet; None when none is left."""
        with self._changed:
            while not self._ready and self._filling and not self._closed:
                self._changed.wait()
            if not self._ready or self._closed:
                return None
            self._changed.notify_all()  # a filler waiting for the clock to settle it stops waiting
            return self._ready.pop(0)

    def close(self) -> None:
        """Stop making spares (the one being made is finished first) and remove every spare not taken."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._filler is not None:
            self._filler.join()
        with self._changed:
            left, self._ready = self._ready, []
        for spare in left:
            self._remove(spare.path, spare.index)

    def _fill(self, count: int, at: str) -> None:
        made: dict[Path, Worktree] = {}
        try:
            self._clear()
            for n in range(count):
                with self._changed:
                    if self._closed:
                        return
                worktree = Worktree(self.repo_root, self.folder / f"spare-{n + 1}", "")
                spare = worktree.make_spare(at)
                made[spare.path] = worktree
                with self._changed:
                    self._ready.append(spare)
                    self._changed.notify_all()
            self._settle(made)
        except (GitError, OSError):  # a lane without a spare makes its worktree itself: nothing is lost
            log.warning("spare worktrees: making one failed", exc_info=True)
        finally:
            with self._changed:
                self._filling = False  # done, or given up: a lane without a spare makes its own
                self._changed.notify_all()

    def _settle(self, made: dict[Path, Worktree]) -> None:
        """Settle the spares no lane took yet (``Worktree.settle``), each once the second it was checked out
        in is over — waiting for that, not sleeping through a ``close`` — and out of the pool while git
        writes its indexes (a lane finding no other waits for it: ``_filling`` holds)."""
        while True:
            with self._changed:
                waiting = [spare for spare in self._ready if not spare.settled]
                if self._closed or not waiting:
                    return
                spare = waiting[0]
                self._ready.remove(spare)
            left = 1.0
            try:
                left = made[spare.path].settle()
            finally:
                with self._changed:
                    self._ready.insert(0, spare._replace(settled=not left))
                    self._changed.notify_all()
            if left:
                with self._changed:
                    if not self._closed:
                        self._changed.wait(left)

    def _clear(self) -> None:
        """Remove what a killed run left under the folder (worktrees git knows, and plain folders)."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.iterdir()):
            if not path.name.startswith("."):  # ``.spare-N.removed-…``: being deleted already
                self._remove(path, Worktree(self.repo_root, path, "")._index_file())

    def _remove(self, path: Path, index: Path) -> None:
        """Remove one spare: git forgets it at once, its files go in the background (``Worktree.remove``);
        under the lock worktrees are made in, so git's prune never meets a lane's half-made worktree."""
        with _locked(self.repo_root / ".lopen" / "worktrees.lock"):
            try:
                Worktree(self.repo_root, path, "").remove()
            except GitError:
                log.warning("spare worktrees: could not remove %s", path, exc_info=True)
            if path.exists():  # not a whole worktree (a run killed inside `git worktree add`): Lopen's own folder
                shutil.rmtree(path, ignore_errors=True)
                git(self.repo_root, "worktree", "prune", check=False)
        index.unlink(missing_ok=True)
        index.with_name(index.name + ".lock").unlink(missing_ok=True)  # a git killed writing it (``settle``)
