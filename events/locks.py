"""One lopen run per module at a time: an ``fcntl`` lock on ``.lopen/locks/<module>.lock``.

The lock file holds the holder's pid (for the message a second run gets). The
kernel releases the lock when the holder exits, however it exits, so a stale
file never blocks anyone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType

from events.errors import ModuleLocked, StoreWriteError


class ModuleLock:
    """``with ModuleLock(root, module):`` — raises ``ModuleLocked`` naming the holder's pid."""

    def __init__(self, root: Path, module: str) -> None:
        self.module = module
        self.path = Path(root) / ".lopen" / "locks" / f"{module}.lock"
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
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise ModuleLocked(self.module, pid, str(self.path)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
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


def module_lock(root: Path, module: str) -> ModuleLock:
    """``with module_lock(root, module):`` — hold the module's run lock for the block."""
    return ModuleLock(root, module)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
