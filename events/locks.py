"""One lopen run per module at a time: an ``fcntl`` lock on ``.lopen/locks/<module>.lock``.

The lock file holds the holder's pid (for the message a second run gets). The
kernel releases the lock when the holder exits, however it exits, so a stale
file never blocks anyone.

``WorkerMark``: every process that claims work holds a lock on
``.lopen/locks/workers/<worker>.lock`` while it lives, so another process of the same checkout can
tell a claim of a process that is gone (killed) from a live one (``worker_alive``) without waiting for
its lease — whatever pid namespace either runs in. A worker of another clone (another machine) leaves
no mark here: only its lease tells.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from events.errors import ModuleLocked, StoreWriteError

STALE_MARK_SECONDS = 3600.0  # a dead process's mark is kept this long: longer than any lease, so every claim hears it


class ModuleLock:
    """``with ModuleLock(root, module):`` — raises ``ModuleLocked`` naming the holder's pid.

    ``shared``: held together with other shared holders (`lopen worker` processes), never with an
    exclusive one (`lopen run`); a shared holder writes no pid. ``wait``: block until it is free."""

    def __init__(self, root: Path, module: str, *, shared: bool = False, wait: bool = False) -> None:
        self.module = module
        self.path = Path(root) / ".lopen" / "locks" / f"{module}.lock"
        self.shared = shared
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreWriteError(
                f"cannot create the module lock {self.path}",
                f"{exc.strerror or exc} (errno {exc.errno})",
                f"make {self.path.parent} writable (and check free disk space)",
            ) from exc
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise ModuleLocked(self.module, pid, str(self.path)) from None
        if not self.shared:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            if not self.shared:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> int | None:
        """The pid holding the lock now, or None when it is free."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or -1
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> ModuleLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def module_lock(root: Path, module: str, *, shared: bool = False) -> ModuleLock:
    """``with module_lock(root, module):`` — hold the module's run lock for the block (``shared``: with
    other workers). A name ending in ``.setup`` is a short lock its holders wait for."""
    return ModuleLock(root, module, shared=shared, wait=module.endswith(".setup"))


def _worker_file(root: Path, worker: str) -> Path:
    name = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in worker)
    return Path(root) / ".lopen" / "locks" / "workers" / f"{name}.lock"


class WorkerMark:
    """``with WorkerMark(root, worker):`` — this process is ``worker`` while the block runs."""

    def __init__(self, root: Path, worker: str) -> None:
        self.path = _worker_file(root, worker)
        self._fd: int | None = None

    def __enter__(self) -> WorkerMark:
        prune_dead_marks(self.path.parents[3])
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._fd = fd
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = None


def worker_alive(root: Path, worker: str) -> bool | None:
    """Whether the process ``worker`` (``host:pid``, a lane's ``/n`` ignored) of this checkout is alive;
    None when it left no mark here (another clone's, or an older Lopen's)."""
    path = _worker_file(root, worker.split("/", 1)[0])
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        return False  # the mark stays: every claim of the dead process reads the same answer
    finally:
        os.close(fd)


def prune_dead_marks(root: Path, older_than: float = STALE_MARK_SECONDS) -> int:
    """Remove the marks of processes gone for longer than any lease (``older_than`` seconds since the
    mark was last written); return how many. A mark whose process lives is locked, and is kept."""
    folder = _worker_file(root, "x").parent
    removed = 0
    try:
        marks = list(folder.glob("*.lock"))
    except OSError:
        return 0
    for path in marks:
        try:
            if time.time() - path.stat().st_mtime < older_than:
                continue
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink()
            removed += 1
        except OSError:
            pass  # alive (locked), or gone already
        finally:
            os.close(fd)
    return removed


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
