"""Errors of the event store. Each says what failed, why, and how to fix it.

`Problem` is the shape every user-facing error of Lopen has (``lopen.errors.LopenError`` derives
from it too: ``events`` is the bottom layer and cannot import ``lopen``).
"""

from __future__ import annotations


class Problem(Exception):
    """What failed, why, and how to fix it."""

    def __init__(self, what: str, why: str = "", how: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.how = how

    def render(self) -> str:
        lines = [f"error: {self.what}"]
        if self.why:
            lines.append(f"  why: {self.why}")
        if self.how:
            lines.append(f"  fix: {self.how}")
        return "\n".join(lines)


class StoreError(Problem):
    """An event-store failure a user can act on."""


class ConcurrencyConflict(StoreError):
    """Appending with a stale expected version: another writer got there first."""

    def __init__(self, stream_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"stream {stream_id} changed under us: expected version {expected}, it is at {actual}",
            "another writer appended to the same stream; nothing from this batch was recorded",
            "re-read the stream and decide again; if two lopen runs work on one session, stop one",
        )
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual


class StoreWriteError(StoreError):
    """A critical write failure (read-only directory, disk full, I/O error)."""


class StoreUnavailable(StoreError):
    """The store cannot be reached (busy for too long, driver missing, bad URL)."""


class StoreCorrupted(StoreError):
    """The store file cannot be read; it has been moved aside, never deleted."""


class UnknownEventType(StoreError):
    """A stored event of a type this version of Lopen does not know."""


class UndecodableEvent(StoreError):
    """A stored event whose payload does not match its type."""


class NewerSchemaVersion(StoreError):
    """A stored event written by a newer Lopen than this one."""


class ProjectionError(StoreError):
    """An event a projection cannot apply, e.g. an invalid task transition."""

    def __init__(self, projection: str, seq: int, detail: str) -> None:
        super().__init__(
            f"projection {projection!r} cannot apply event #{seq}: {detail}",
            "the event history contradicts itself; Lopen reports it instead of skipping it",
            f"inspect it with `lopen replay <session>` (look for #{seq}) and report it as a bug",
        )
        self.projection = projection
        self.seq = seq
        self.detail = detail


class ModuleLocked(StoreError):
    """Another lopen process is running the same module."""

    def __init__(self, module: str, pid: int | None, path: str) -> None:
        holder = f"pid {pid}" if pid else "other processes (`lopen worker`s)"
        super().__init__(
            f"module {module!r} is already being run by {holder}",
            f"only one lopen run per module at a time (lock {path})",
            "wait for that run to finish or stop it; the lock is released when its process exits",
        )
        self.module = module
        self.pid = pid


class StoreTampered(StoreError):
    """The store changed under a running Lopen: its file deleted or replaced, or events missing."""


class ChainBroken(StoreTampered):
    """A stored event no longer matches the hash chain of its stream (``events.chain``): it was rewritten
    (or inserted, or deleted) outside Lopen. ``stream_id``, ``version``, ``seq`` and ``event_type`` name the
    event; ``expected`` is what the chain says its hash must be, ``found`` what it is."""

    def __init__(
        self,
        what: str,
        why: str,
        *,
        stream_id: str,
        version: int,
        seq: int,
        event_type: str,
        expected: str = "",
        found: str = "",
    ) -> None:
        super().__init__(
            what,
            why,
            "stop here: the audit trail was changed outside Lopen and nothing more is recorded until it is "
            "explained (every stored event is kept as it is); compare the event with a backup of the store, "
            "restore it, then run `lopen verify --full`",
        )
        self.stream_id = stream_id
        self.version = version
        self.seq = seq
        self.event_type = event_type
        self.expected = expected
        self.found = found
