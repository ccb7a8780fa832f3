"""Storage under the store: the ``eventsourcing`` library's recorders, selected by URL.

``""`` (or ``sqlite:///path``) → SQLite, by default ``<root>/.lopen/store.sqlite`` in WAL
mode; ``postgresql://user:password@host:port/dbname?schema=lopen`` → PostgreSQL
(``events.postgres``). Either way a ``Backend`` holds two recorders:

- ``events``: the library's application recorder (stored events + notification log),
  extended with two plain-tuple reads for speed: ``scan`` (the notification log after a
  position) and ``select_stream`` (one stream's events with their notification ids);
- ``views``: the library's tracking recorder, extended with a ``projection_rows``
  table written atomically with the tracking position (see ``ViewRecorder``).

Stream ids are stored as text originator ids (``session:<id>``, ``module:<name>``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from eventsourcing.persistence import IntegrityError, StoredEvent, Tracking
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteDatastore,
    SQLiteTrackingRecorder,
)

from events.errors import StoreUnavailable, StoreWriteError

LOCK_TIMEOUT = 10  # seconds a writer waits for another process's write transaction

Row = tuple[str, str, bytes]  # (projection, key, encoded value)
RawEvent = tuple[int, str, int, str, bytes]  # (notification id, stream id, version, topic, state)
ChainRow = tuple[int, str, int, str, bytes, bytes | None]  # a RawEvent and its sealed link (events.chain)
Head = tuple[str, int, bytes]  # (stream id, version, digest of that event): a stream's newest link
Link = tuple[str, int, bytes]  # (stream id, version, sealed link) of an event stored before the chain
Verified = tuple[str, int, bytes, int, float]  # (stream id, version, digest, seq, when) verification reached


class Stale(Exception):
    """Projection state moved on in the database while we computed ours."""


class EventRecorder(Protocol):
    """The library's application recorder, plus two plain-tuple reads."""

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None: ...

    def select_events(self, originator_id: Any, *, desc: bool = False, limit: int | None = None) -> Any: ...

    def max_notification_id(self) -> int | None: ...

    def scan(self, after: int, limit: int) -> list[RawEvent]: ...

    def select_stream(self, stream_id: str, after_version: int, limit: int) -> list[RawEvent]: ...

    def stored_streams(self, stream_ids: Sequence[str]) -> set[str]:
        """Those of ``stream_ids`` that hold at least one event (one query per few hundred)."""
        ...

    def stream_extent(self, stream_id: str, after: int = 0) -> tuple[int, int, int]:
        """(number of events above version ``after``, highest version, lowest version) of one stream:
        the count reads only the versions above ``after``."""
        ...

    # The hash chain (events.chain): ``insert_events(…, heads=[Head], links=[Link])`` writes the streams'
    # new heads (and an old store's sealed links) in the batch's own transaction; ``durable=False`` (SQLite
    # only; PostgreSQL ignores it) commits it without waiting for the disk.

    def chain_scan(self, after: int, limit: int) -> list[ChainRow]:
        """``scan`` with each event's sealed link (None when it has none)."""
        ...

    def chain_stream(self, stream_id: str, after_version: int, limit: int) -> list[ChainRow]:
        """``select_stream`` with each event's sealed link."""
        ...

    def chain_event(self, stream_id: str, version: int) -> tuple[ChainRow | None, Head | None]:
        """One event with its sealed link, and its stream's recorded head."""
        ...

    def chain_heads(self, stream_id: str | None = None) -> dict[str, tuple[int, bytes]]:
        """Every stream's recorded head (or the one of ``stream_id``): ``{stream: (version, digest)}``."""
        ...

    def chain_verified(self, stream_id: str | None = None) -> tuple[dict[str, Verified], list[ChainRow]]:
        """What verification reached per stream (the row ``""`` holds the global ``seq``), and the event
        at each of those positions as stored now — of every stream but the blobs' (``blob_anchors``); only
        ``stream_id``'s when given (a blob's too)."""
        ...

    def blob_anchors(self, after: int, limit: int) -> list[tuple[str, ChainRow | None]]:
        """The blob streams verification reached, in the order of their ``seq``, from after ``after``, at
        most ``limit``: each with its event as stored now (None: gone)."""
        ...

    def save_verified(self, rows: Sequence[Verified]) -> None: ...

    def add_links(self, links: Sequence[Link]) -> None:
        """Store sealed links; one already stored is kept (sealing is deterministic, so it is the same)."""

    def chain_of_types(self, names: Sequence[str], stream_id: str | None = None) -> list[ChainRow]:
        """The events of these types (every schema version: topics ``<name>@…``), of every stream or of
        ``stream_id``, in ``seq`` order: what ``lopen verify`` checks against git."""
        ...


def prefix_end(prefix: str) -> str:
    """The least string after every string that starts with ``prefix`` (binary order): a range scan's end."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else "\U0010ffff"


class ViewRecorder(Protocol):
    """Projection rows and their tracking positions."""

    def positions(self, names: Iterable[str]) -> dict[str, int | None]: ...

    def load(self, projection: str, key: str) -> tuple[bytes | None, int]: ...

    def load_all(self, projection: str) -> list[tuple[str, bytes]]: ...

    def load_prefix(self, projection: str, prefix: str) -> list[tuple[str, bytes]]:
        """The rows whose key starts with ``prefix``, in key order (one query, on the primary key)."""
        ...

    def save(self, rows: Sequence[Row], trackings: Sequence[Tracking]) -> None:
        """Upsert rows and advance tracking in one transaction; ``Stale`` if someone is ahead."""

    def replace(self, names: Sequence[str], rows: Sequence[Row], position: int) -> None:
        """Swap every row of ``names`` for ``rows`` at ``position``; ``Stale`` if someone is ahead."""


class Backend:
    def __init__(self, location: str, path: Path | None, events: Any, views: Any, datastore: Any) -> None:
        self.location = location
        self.path = path  # the SQLite file, None for PostgreSQL
        self.events: EventRecorder = events
        self.views: ViewRecorder = views
        self._datastore = datastore
        self.snapshot = ""  # a private copy's folder when the store's own folder is read-only (open_snapshot)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._datastore.close()
        if self.snapshot:
            shutil.rmtree(self.snapshot, ignore_errors=True)


def open_backend(root: Path, url: str = "") -> Backend:
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from events.postgres import open_postgres
        except ImportError as exc:
            raise StoreUnavailable(
                "store.url selects PostgreSQL, but the PostgreSQL driver (psycopg) is not installed",
                str(exc),
                "install it into Lopen's environment (pip install 'eventsourcing[postgres]'), "
                "or clear store.url to use the embedded SQLite store",
            ) from exc
        return open_postgres(url)
    if url and not url.startswith("sqlite:///"):
        raise StoreUnavailable(
            f"store.url {url.split('@')[-1]!r} is not a store URL Lopen knows",
            "supported: empty (SQLite under .lopen/), sqlite:///<path>, postgresql://…",
            "fix store.url in .lopen/config.json",
        )
    path = Path(root) / Path(url.removeprefix("sqlite:///")) if url else Path(root) / ".lopen" / "store.sqlite"
    return open_sqlite(path)  # a relative sqlite:/// path is from the project root, not the working directory


def check_writable(path: Path) -> None:
    """Create the store's directory and prove it accepts new files; StoreWriteError naming the OS error.

    An existing store file is never opened here: closing any descriptor of a SQLite file drops every
    POSIX lock this process holds on it, so another connection of this process (the TUI's, the MCP
    server's) would lose its locks while other processes write — SQLite's classic way to corrupt a
    database. Its writability is asked of the OS instead."""
    step = f"creating {path.parent}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            step = f"writing {path}"
            if not os.access(path, os.R_OK | os.W_OK):
                raise PermissionError(13, "Permission denied")
        else:
            step = f"creating {path}"
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
        step = f"creating a file in {path.parent}"  # WAL mode creates -wal/-shm files beside the store
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise StoreWriteError(
            f"cannot write the event store at {path}",
            f"{exc.strerror or exc} (errno {exc.errno}) {step}",
            f"make {path.parent} writable (and check free disk space), then run the command again",
        ) from exc


def os_diagnosis(folder: Path) -> str:
    """What the operating system says about writing in ``folder``: the error, free space, limits."""
    notes = []
    try:
        with tempfile.TemporaryFile(dir=folder) as probe:
            probe.write(b"x")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        notes.append(f"OS: {exc.strerror or exc} (errno {exc.errno})")
    with contextlib.suppress(OSError):
        stat = os.statvfs(folder)
        notes.append(f"{stat.f_bavail * stat.f_frsize // 2**20:,} MiB free on that disk")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        notes.append(f"file size limit (ulimit -f) {limit:,} bytes")
    return "; ".join(notes)


READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


def read_only_folder(exc: StoreWriteError) -> bool:
    """``exc`` says the store's folder or file cannot be written (permissions, a read-only mount) —
    not a full disk or an I/O error."""
    cause = exc.__cause__
    return isinstance(cause, OSError) and cause.errno in READ_ONLY_ERRNOS


def open_snapshot(path: Path) -> Backend:
    """A private copy of the SQLite store at ``path`` — the file and its write-ahead log — opened in
    a temporary folder that goes with the backend: for reading a store whose folder cannot be
    written (SQLite in WAL mode cannot open a database read-only without writing its ``-shm`` file
    beside it). What the copy shows is the store as it was when copied; nothing is written back."""
    folder = tempfile.mkdtemp(prefix="lopen-snapshot-")
    try:
        copy = Path(folder) / path.name
        shutil.copyfile(path, copy)
        if os.path.exists(f"{path}-wal"):
            shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        backend = open_sqlite(copy)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    backend.location, backend.path, backend.snapshot = str(path), path, folder
    return backend


def open_sqlite(path: Path) -> Backend:
    check_writable(path)
    datastore = SQLiteDatastore(str(path), lock_timeout=LOCK_TIMEOUT, originator_id_type="text")
    try:
        events = SQLiteEventRecorder(datastore)
        events.create_table()
        views = SQLiteViewRecorder(datastore)
        views.create_table()
        events.max_notification_id()  # touches the last page: a damaged file fails here
    except BaseException:
        datastore.close()
        raise
    return Backend(str(path), path, events, views, datastore)


_SQLITE_CHAIN_TABLES = [
    "CREATE TABLE IF NOT EXISTS chain_heads (stream_id TEXT PRIMARY KEY, version INTEGER, digest BLOB) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS chain_links ("
    "stream_id TEXT, version INTEGER, link BLOB, PRIMARY KEY (stream_id, version)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS chain_verified ("
    "stream_id TEXT PRIMARY KEY, version INTEGER, digest BLOB, seq INTEGER, at REAL) WITHOUT ROWID",
]
_ANCHORS = (  # driven by chain_verified (CROSS JOIN: SQLite keeps it the outer loop), not a scan of every event
    "SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state, l.link FROM chain_verified v "
    "CROSS JOIN stored_events e ON e.originator_id = v.stream_id AND e.originator_version = v.version "
    "LEFT JOIN chain_links l ON l.stream_id = e.originator_id AND l.version = e.originator_version "
)
_BLOB_ANCHORS = (  # the positions chosen first (a few), then their events read (not sorted: the texts are large)
    "SELECT v.stream_id, v.seq, e.rowid, e.originator_id, e.originator_version, e.topic, e.state, l.link FROM ("
    "SELECT stream_id, version, seq FROM chain_verified "
    "WHERE stream_id >= 'blob:' AND stream_id < 'blob;' AND seq > ? ORDER BY seq LIMIT ?) v "
    "LEFT JOIN stored_events e ON e.originator_id = v.stream_id AND e.originator_version = v.version "
    "LEFT JOIN chain_links l ON l.stream_id = e.originator_id AND l.version = e.originator_version"
)
_HEAD_UPSERT = (
    "INSERT INTO chain_heads VALUES (?,?,?) ON CONFLICT (stream_id) DO UPDATE "
    "SET version=excluded.version, digest=excluded.digest WHERE excluded.version > chain_heads.version"
)
_CHAIN_SELECT = (
    "SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state, l.link FROM stored_events e "
    "LEFT JOIN chain_links l ON l.stream_id = e.originator_id AND l.version = e.originator_version "
)


class SQLiteEventRecorder(SQLiteApplicationRecorder):
    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *_SQLITE_CHAIN_TABLES]

    def insert_events(
        self, stored_events: Sequence[StoredEvent], *, durable: bool = True, **kwargs: Any
    ) -> Sequence[int] | None:
        """The library's insert in one transaction; ``durable=False`` commits it without waiting for the
        disk (``synchronous=NORMAL`` for this transaction only — SQLite refuses the change inside one):
        in WAL mode it survives a killed process at once, and an OS crash or power loss from the next
        durable commit on (that commit's sync covers every frame of the log before it)."""
        if durable:
            return super().insert_events(stored_events, **kwargs)
        with self.datastore.get_connection(commit=True) as conn:
            conn.cursor().execute("PRAGMA synchronous=NORMAL")
            try:
                with conn.transaction(commit=True) as c:
                    return self._insert_events(c, stored_events, **kwargs)
            finally:
                conn.cursor().execute("PRAGMA synchronous=FULL")

    def _insert_events(
        self,
        c: Any,
        stored_events: Sequence[StoredEvent],
        heads: Sequence[Head] = (),
        links: Sequence[Link] = (),
        **_: Any,
    ) -> Sequence[int]:
        """One ``executemany`` per batch (the library inserts row by row to collect rowids), and the
        chain's heads and sealed links in the same transaction.

        Inside the write transaction SQLite gives each new row max(rowid) + 1, so the batch's
        notification ids are the ``len(batch)`` ids ending at ``last_insert_rowid()``.
        """
        c.executemany(
            "INSERT INTO stored_events VALUES (?,?,?,?)",
            [(s.originator_id, s.originator_version, s.topic, s.state) for s in stored_events],
        )
        c.execute("SELECT last_insert_rowid()")
        last = c.fetchone()[0]
        if links:
            c.executemany("INSERT INTO chain_links VALUES (?,?,?) ON CONFLICT DO NOTHING", links)
        if heads:
            c.executemany(_HEAD_UPSERT, heads)
        return list(range(last - len(stored_events) + 1, last + 1))

    def _select(self, statement: str, params: Sequence[object]) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.sqlite_cursor.row_factory = None
            c.execute(statement, params)
            return c.fetchall()

    def chain_scan(self, after: int, limit: int) -> list[ChainRow]:
        return self._select(_CHAIN_SELECT + "WHERE e.rowid > ? ORDER BY e.rowid LIMIT ?", (after, limit))

    def chain_stream(self, stream_id: str, after_version: int, limit: int) -> list[ChainRow]:
        return self._select(
            _CHAIN_SELECT + "WHERE e.originator_id = ? AND e.originator_version > ? "
            "ORDER BY e.originator_version LIMIT ?",
            (stream_id, after_version, limit),
        )

    def chain_event(self, stream_id: str, version: int) -> tuple[ChainRow | None, Head | None]:
        rows = self._select(
            _CHAIN_SELECT + "WHERE e.originator_id = ? AND e.originator_version = ?", (stream_id, version)
        )
        heads = self.chain_heads(stream_id)
        head = (stream_id, *heads[stream_id]) if heads else None
        return (rows[0] if rows else None), head

    def chain_heads(self, stream_id: str | None = None) -> dict[str, tuple[int, bytes]]:
        where, params = ("WHERE stream_id = ?", (stream_id,)) if stream_id is not None else ("", ())
        return {
            s: (v, d) for s, v, d in self._select(f"SELECT stream_id, version, digest FROM chain_heads {where}", params)
        }

    def chain_verified(self, stream_id: str | None = None) -> tuple[dict[str, Verified], list[ChainRow]]:
        where, params = ("WHERE v.stream_id = ?", (stream_id,)) if stream_id is not None else ("", ())
        verified = {
            r[0]: r
            for r in self._select(f"SELECT stream_id, version, digest, seq, at FROM chain_verified v {where}", params)
        }
        if stream_id is None:
            where = "WHERE v.stream_id > '' AND (v.stream_id < 'blob:' OR v.stream_id >= 'blob;')"
        return verified, self._select(_ANCHORS + where, params)

    def blob_anchors(self, after: int, limit: int) -> list[tuple[str, ChainRow | None]]:
        rows = sorted(self._select(_BLOB_ANCHORS, (after, limit)), key=lambda r: r[1])
        return [(r[0], r[2:] if r[2] is not None else None) for r in rows]

    def save_verified(self, rows: Sequence[Verified]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.executemany(
                "INSERT INTO chain_verified VALUES (?,?,?,?,?) ON CONFLICT (stream_id) DO UPDATE SET "
                "version=excluded.version, digest=excluded.digest, seq=excluded.seq, at=excluded.at "
                "WHERE excluded.seq >= chain_verified.seq",
                rows,
            )

    def add_links(self, links: Sequence[Link]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.executemany("INSERT INTO chain_links VALUES (?,?,?) ON CONFLICT DO NOTHING", links)

    def chain_of_types(self, names: Sequence[str], stream_id: str | None = None) -> list[ChainRow]:
        ranges = " OR ".join("(e.topic >= ? AND e.topic < ?)" for _ in names)
        params: list[object] = [bound for name in names for bound in (f"{name}@", prefix_end(f"{name}@"))]
        where = f"WHERE ({ranges})" if names else "WHERE 0"
        if stream_id is not None:
            where += " AND e.originator_id = ?"
            params.append(stream_id)
        return self._select(_CHAIN_SELECT + where + " ORDER BY e.rowid", params)

    def _rows(self, where: str, params: tuple[object, ...]) -> list[RawEvent]:
        with self.datastore.transaction(commit=False) as c:
            c.sqlite_cursor.row_factory = None  # plain tuples: much faster than sqlite3.Row
            c.execute(
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name} " + where,
                params,
            )
            return c.fetchall()

    def scan(self, after: int, limit: int) -> list[RawEvent]:
        return self._rows("WHERE rowid>? ORDER BY rowid LIMIT ?", (after, limit))

    def select_stream(self, stream_id: str, after_version: int, limit: int) -> list[RawEvent]:
        return self._rows(
            "WHERE originator_id=? AND originator_version>? ORDER BY originator_version LIMIT ?",
            (stream_id, after_version, limit),
        )

    def stored_streams(self, stream_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        ids = list(stream_ids)
        for i in range(0, len(ids), 500):  # under SQLite's limit of variables per statement
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            statement = f"SELECT DISTINCT originator_id FROM {self.events_table_name} WHERE originator_id IN ({marks})"
            found |= {r[0] for r in self._select(statement, chunk)}
        return found

    def stream_extent(self, stream_id: str, after: int = 0) -> tuple[int, int, int]:
        table = self.events_table_name
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT COUNT(*), COALESCE(MAX(originator_version), 0), "
                f"(SELECT COALESCE(MIN(originator_version), 0) FROM {table} WHERE originator_id=?) "
                f"FROM {table} WHERE originator_id=? AND originator_version > ?",
                (stream_id, stream_id, after),
            )
            count, highest, lowest = c.fetchone()
            return int(count), int(highest), int(lowest)


class SQLiteViewRecorder(SQLiteTrackingRecorder):
    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            "CREATE TABLE IF NOT EXISTS projection_rows ("
            "projection TEXT, key TEXT, value BLOB, PRIMARY KEY (projection, key)) WITHOUT ROWID",
        ]

    @contextlib.contextmanager
    def _write(self) -> Iterator[Any]:
        """A write transaction that takes the write lock first (BEGIN IMMEDIATE)."""
        with self.datastore.get_connection(commit=True) as conn:
            cursor = conn.cursor()
            with cursor as c:
                c.execute("BEGIN IMMEDIATE")
                try:
                    yield c
                except BaseException:
                    conn.rollback()
                    raise
                conn.commit()

    def positions(self, names: Iterable[str]) -> dict[str, int | None]:
        return {name: self.max_tracking_id(name) for name in names}

    def load(self, projection: str, key: str) -> tuple[bytes | None, int]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT (SELECT value FROM projection_rows WHERE projection=? AND key=?), "
                "(SELECT notification_id FROM tracking WHERE application_name=?)",
                (projection, key, projection),
            )
            value, position = c.fetchone()
            return value, position or 0

    def load_all(self, projection: str) -> list[tuple[str, bytes]]:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT key, value FROM projection_rows WHERE projection=? ORDER BY key", (projection,))
            return [(k, v) for k, v in c.fetchall()]

    def load_prefix(self, projection: str, prefix: str) -> list[tuple[str, bytes]]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT key, value FROM projection_rows WHERE projection=? AND key>=? AND key<? ORDER BY key",
                (projection, prefix, prefix_end(prefix)),
            )
            return [(k, v) for k, v in c.fetchall()]

    def save(self, rows: Sequence[Row], trackings: Sequence[Tracking]) -> None:
        with self._write() as c:
            c.executemany(
                "INSERT INTO projection_rows VALUES (?,?,?) "
                "ON CONFLICT (projection, key) DO UPDATE SET value=excluded.value",
                rows,
            )
            try:
                for tracking in trackings:
                    self._insert_tracking(c, tracking)
            except (IntegrityError, sqlite3.IntegrityError) as exc:
                raise Stale from exc

    def replace(self, names: Sequence[str], rows: Sequence[Row], position: int) -> None:
        marks = ",".join("?" * len(names))
        with self._write() as c:
            c.execute(
                f"SELECT application_name, notification_id FROM tracking WHERE application_name IN ({marks})", names
            )
            tracked = dict(c.fetchall())
            if any(p is not None and p > position for p in tracked.values()):
                raise Stale
            # only the rows that differ are written, and the positions only when they move: a rebuild of rows
            # already right (a check) writes nothing, so its commit has nothing to sync to disk
            c.execute(f"SELECT projection, key, value FROM projection_rows WHERE projection IN ({marks})", names)
            stored = {(projection, key): value for projection, key, value in c.fetchall()}
            changed = [row for row in rows if stored.pop((row[0], row[1]), None) != row[2]]
            c.executemany("DELETE FROM projection_rows WHERE projection=? AND key=?", list(stored))
            c.executemany(
                "INSERT INTO projection_rows VALUES (?,?,?) "
                "ON CONFLICT (projection, key) DO UPDATE SET value=excluded.value",
                changed,
            )
            if tracked != dict.fromkeys(names, position):
                c.execute(f"DELETE FROM tracking WHERE application_name IN ({marks})", names)
                for name in names:
                    self._insert_tracking(c, Tracking(name, position))


def rescue(path: Path, how: str) -> Path | None:
    """Save the store this process still holds open after its file at ``path`` was deleted or replaced
    (``how``): the open descriptors of the old file and its write-ahead log (``/proc/self/fd``, Linux)
    are copied to ``.lopen/corrupted/store.sqlite-<how>-<UTC time>`` and the log folded into it, so the
    copy holds every event committed until then. None when nothing could be saved."""
    held = _open_copies(path)
    if not held.get(""):
        return None
    dest = _aside(path.parent / "corrupted", f"{path.name}-{how}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        for suffix, fd in held.items():
            with open(f"/proc/self/fd/{fd}", "rb") as source, open(f"{dest}{suffix}", "xb") as target:
                shutil.copyfileobj(source, target)
        with contextlib.closing(sqlite3.connect(dest)) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if db.execute("PRAGMA quick_check").fetchone() != ("ok",):
                raise sqlite3.DatabaseError("the saved copy does not pass quick_check")
    except (OSError, sqlite3.Error):
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{dest}{suffix}")
        return None
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.unlink(f"{dest}{suffix}")
    return dest


def _open_copies(path: Path) -> dict[str, int]:
    """This process's descriptors of the deleted ``path`` (``""``) and its ``-wal``, by suffix."""
    wanted = {f"{path} (deleted)": "", f"{path}-wal (deleted)": "-wal"}
    found: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                suffix = wanted.get(os.readlink(f"/proc/self/fd/{name}"))
                if suffix is not None and suffix not in found:
                    found[suffix] = int(name)
    return found


def _aside(folder: Path, name: str) -> Path:
    """A new path ``folder/<name>-<UTC time>[-n]`` that does not exist yet."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = folder / f"{name}-{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = folder / f"{name}-{stamp}-{n}"
    return dest


def quarantine(path: Path) -> Path:
    """Move a damaged store file (and its -wal/-shm) to ``.lopen/corrupted/``; never delete it."""
    folder = path.parent / "corrupted"
    folder.mkdir(parents=True, exist_ok=True)
    dest = _aside(folder, path.name)
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            os.replace(source, f"{dest}{suffix}")
    return dest
