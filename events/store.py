"""The event store: the only state Lopen has. See docs/store.md.

Public API (what the workflow calls)::

    store = EventStore.open(root, url="")          # SQLite at <root>/.lopen/store.sqlite by default
    stream = module_stream(project, module)        # a module's whole history (events.recorded)
    version = store.append(stream, [ev.StepEntered(phase="planning", step=2, session_id=sid)],
                           expected_version=version)  # None: at the end; int: optimistic concurrency
    store.version(stream_id) -> int
    for rec in store.read_stream(stream, after_version=0, until_version=None): ...  # Recorded(seq, …)
    for rec in store.read_all(after=0): ...                  # every event, in seq order, paged
    key = store.keep_blob(project, text)                     # a large text, kept once (events.blobs), stored
                                                             # with the first event appended that names it
    key = store.put_blob(project, text)                      # the same, stored now (a transaction of its own)
    store.blob(project, key) -> str | None
    sub = store.subscribe(callback, after=None, batch=False) # the in-process bus, after commit
    cancel = store.observe_appends(observer)                 # how long each append took (telemetry)
    store.migrate_legacy(project)                            # a pre-project-id store, once
    store.seal_unchained()                                   # a store older than the hash chain, once
    store.verify(stream_id=None, full=False)                 # the hash chain since the last check
    store.projections.follow() / .catch_up() / .rebuild()
    store.close()

Writing a module's history with the one fold's validation is ``events.journal.Journal``'s job.

Before storing, ``append`` fills an event's ``project``/``module`` from its stream and
redacts secrets. ``expected_version`` is the stream's version the caller
last saw (0 for a new stream); if the stream moved on, ``ConcurrencyConflict`` is raised
and nothing of the batch is stored. With ``None`` the batch goes at the end of the stream.
A batch is one transaction: all of it is stored, or none — with the blobs kept for it
(``keep_blob``) that it names and that are not stored yet.

``observe_appends`` is how an append is measured without this package knowing who measures: each
observer gets an ``Appended`` (the batch's ``Recorded``, when the append started, how long it took,
how many attempts it needed) on the appending thread, right after the commit and before the bus
delivers the batch. ``lopen.telemetry`` registers one when it exports; with none registered an
append does not even read the clock.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec
from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from events.backends import (
    Backend,
    ChainRow,
    Head,
    RawEvent,
    open_backend,
    open_snapshot,
    os_diagnosis,
    quarantine,
    read_only_folder,
    rescue,
)
from events.bus import Bus, Subscription
from events.catalogue import BlobStored, Event
from events.chain import chain, digest, genesis
from events.codec import Codec
from events.errors import (
    ConcurrencyConflict,
    StoreCorrupted,
    StoreError,
    StoreTampered,
    StoreUnavailable,
    StoreWriteError,
    UndecodableEvent,
)
from events.recorded import (
    META_PREFIX,
    Recorded,
    blob_stream,
    is_history,
    is_legacy,
    legacy_owner,
    module_stream,
    stream_owner,
)
from events.redaction import might_hold_secret, redact, redact_text
from events.verify import Report, rewritten, verify

if TYPE_CHECKING:
    from events.projections import Projections

PAGE = 1000
log = logging.getLogger("events.store")


class Appended(msgspec.Struct, frozen=True, gc=False):
    """One committed append, for an observer (``EventStore.observe_appends``): its events as stored (not
    the blobs stored with them), when it started (UTC seconds), how long it took (seconds, lock wait and
    retries included) and how many attempts it needed (more than 1: it lost races for the stream's next
    version)."""

    records: list[Recorded]
    started: float
    duration: float
    attempts: int
    backend: str  # "sqlite" or "postgresql"


AppendObserver = Callable[[Appended], None]

PENDING_BLOBS = 64  # blobs kept but not named yet by any append: past this, they are stored on their own
_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")


class EventStore:
    def __init__(self, backend: Backend, root: Path, codec: Codec | None = None) -> None:
        self.backend = backend
        self.root = root
        self.location = backend.location
        self.codec = codec or Codec()
        self._versions: dict[str, int] = {}
        self._heads: dict[str, tuple[int, bytes]] = {}  # stream → (version, digest): the links this store made
        self._append_lock = threading.Lock()
        self._bus = Bus(self.read_all)
        self._projections: Projections | None = None
        self._identity = _file_identity(backend.path)
        self._observers: tuple[AppendObserver, ...] = ()
        self._blobs: set[str] = set()  # blob streams known to be stored (by this store or found there)
        self._pending: dict[str, _Blob] = {}  # blob stream → a blob kept, stored with the first event naming it

    @classmethod
    def open(cls, root: Path, url: str = "", *, read_only: bool = False) -> EventStore:
        """Open (creating if needed) the store of the project at ``root``; ``url`` selects the backend.

        ``read_only`` (commands that only read): a SQLite store whose folder cannot be written — a
        read-only ``.lopen``, a read-only mount — is read from a private copy (:func:`open_snapshot`)
        instead of failing; what such a caller writes (projections, a migration) stays in the copy."""
        root = Path(root).resolve()
        path = root / Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
        path = path or (None if url else root / ".lopen" / "store.sqlite")
        try:
            try:
                backend = open_backend(root, url)
            except StoreWriteError as exc:
                if not (read_only and path is not None and path.is_file() and read_only_folder(exc)):
                    raise
                backend = open_snapshot(path)
        except (PersistenceError, sqlite3.Error) as exc:
            raise _translate(exc, "open", str(path or url), path) from exc
        return cls(backend, root)

    # -- writing ------------------------------------------------------------------------------

    def append(
        self, stream_id: str, events: Sequence[Event], expected_version: int | None = None, *, durable: bool = True
    ) -> int:
        """Store ``events`` at the end of ``stream_id`` atomically; return the stream's new version. The
        blobs kept (``keep_blob``) that the batch names and that are not stored yet go in the same
        transaction, before it: an event never names a blob that is not stored.

        ``durable=False`` (SQLite): the commit does not wait for the disk — the batch survives a killed
        process at once, and an OS crash or a power loss once the next durable append has committed (see
        docs/store.md, *Crashes*). For what the model says and does mid-invocation, recorded while the
        Copilot CLI waits."""
        project, module = stream_owner(stream_id)
        prepared, topics, payloads = self._encoded(events, project, module)
        if not prepared:
            return self.version(stream_id) if expected_version is None else expected_version
        observers = self._observers
        started = clock = 0.0
        if observers:
            started, clock = time.time(), time.perf_counter()
        with self._append_lock:
            blobs = self._named(project, payloads) if self._pending else []
            for attempt in range(20):
                base = expected_version if expected_version is not None else self._known_version(stream_id)
                linked = self._linked(stream_id, base, expected_version, topics, payloads)
                if linked is None:  # the stream is shorter than we knew (expected_version None): read it again
                    self._versions[stream_id] = self.version(stream_id)
                    continue
                states, heads = linked
                top = base + len(prepared)
                stored = [
                    StoredEvent(stream_id, base + i + 1, topic, state)
                    for i, (topic, state) in enumerate(zip(topics, states, strict=True))
                ]
                try:
                    blobs, ids = self._insert(blobs, stored, heads, durable)
                except IntegrityError:
                    actual = self._versions[stream_id] = self.version(stream_id)
                    if expected_version is not None:
                        raise ConcurrencyConflict(stream_id, expected_version, actual) from None
                    # Lost the race for the next version to a writer that knows its own (it needs no
                    # re-read): wait a random, growing while, or a busy writer wins every time.
                    time.sleep(random.uniform(0, 0.0005 * 2 ** min(attempt, 10)))
                    continue
                break
            else:
                raise StoreUnavailable(
                    f"could not append to {stream_id}: other writers kept getting there first",
                    "twenty attempts in a row lost the race for the stream's next version",
                    "make sure only one lopen run works on a session at a time",
                )
            self._versions[stream_id] = top
            if heads:
                self._heads[stream_id] = heads[-1][1:]
        assert ids is not None
        recorded = [Recorded(seq, blob.stream, 1, blob.event) for seq, blob in zip(ids, blobs, strict=False)]
        recorded += [
            Recorded(seq, stream_id, base + i + 1, e)
            for i, (seq, e) in enumerate(zip(ids[len(blobs) :], prepared, strict=True))
        ]
        if observers:
            backend = "sqlite" if self.backend.path else "postgresql"
            # the batch's own events: the blobs stored with them are not what the observer times them by
            appended = Appended(recorded[len(blobs) :], started, time.perf_counter() - clock, attempt + 1, backend)
            for observer in observers:
                try:
                    observer(appended)
                except Exception:  # a measurement must never fail an append that committed
                    log.exception("append observer %r failed", observer)
        self._bus.publish(recorded)
        return top

    def observe_appends(self, observer: AppendObserver) -> Callable[[], None]:
        """Call ``observer(Appended)`` after each append this store commits (on the appending thread:
        keep it short); returns the function that stops it."""
        with self._append_lock:
            self._observers = (*self._observers, observer)

        def cancel() -> None:
            with self._append_lock:
                self._observers = tuple(o for o in self._observers if o is not observer)

        return cancel

    def keep_blob(self, project: str, text: str) -> str:
        """Keep ``text`` once in ``project``'s blobs (``events.blobs``); return its key. The blob is stored
        in the transaction of the first ``append`` whose events name its key (one commit for both, and
        never an event naming a blob that is not stored); a text stored before costs nothing more (one
        failed insert at most, none when this store stored or read it). Secrets are redacted first, so
        the key names the text as stored; a long text is stored packed (``events.blobs.blob_of``)."""
        from events.blobs import blob_of, key_of

        text = redact_text(text)
        key = key_of(text)
        stream = blob_stream(project, key)
        with self._append_lock:
            if stream in self._blobs or stream in self._pending:
                return key
        # Encoded once, not through ``_encoded``: its text was just redacted (and is exempt), the rest is
        # Lopen's own — a second scan for secrets could only find the text's words again.
        event = msgspec.structs.replace(blob_of(text), project=project)
        topic = self.codec.topic(event)
        linked = self._linked(stream, 0, 0, [topic], [self.codec.encode(event)])
        assert linked is not None  # a stream's genesis is known without reading
        (state,), _ = linked  # no head: a blob's stream never grows (events.blobs, *No head*)
        blob = _Blob(stream, project, f'"{key}"'.encode(), event, StoredEvent(stream, 1, topic, state))
        with self._append_lock:
            self._pending[stream] = blob
            flushed = self._flush(list(self._pending.values())) if len(self._pending) > PENDING_BLOBS else []
        self._bus.publish(flushed)  # kept for events that never came (a journal closed meanwhile): stored now
        return key

    def put_blob(self, project: str, text: str) -> str:
        """``keep_blob``, and the blob stored now, in a transaction of its own; its key."""
        key = self.keep_blob(project, text)
        stream = blob_stream(project, key)
        with self._append_lock:
            blob = self._pending.get(stream)
            flushed = self._flush([blob]) if blob is not None else []
        self._bus.publish(flushed)
        return key

    def blob(self, project: str, key: str) -> str | None:
        """The text of ``project``'s blob ``key`` as stored, unpacked (None: no such blob)."""
        try:
            stream = blob_stream(project, key)
        except ValueError:
            return None
        pending = self._pending.get(stream)
        if pending is not None:  # kept by this store, to be stored with the event naming it
            assert isinstance(pending.event, BlobStored)
            return pending.event.content()
        for rec in self.read_stream(stream, 0, 1):
            if isinstance(rec.event, BlobStored):
                return _content(rec.event, rec.seq)
        return None

    def _encoded(
        self, events: Sequence[Event], project: str, module: str
    ) -> tuple[list[Event], list[str], list[bytes]]:
        """The events as they will be stored (owner filled in, secrets redacted), their topics and payloads."""
        prepared = [self._prepare(e, project, module) for e in events]
        topics = [self.codec.topic(e) for e in prepared]
        payloads = [self.codec.encode(e) for e in prepared]
        for i, payload in enumerate(payloads):
            if might_hold_secret(payload, len(type(prepared[i]).__name__) + 10):  # past '{"type":"<Type>"
                prepared[i] = redact(prepared[i])
                payloads[i] = self.codec.encode(prepared[i])
        return prepared, topics, payloads

    def _named(self, project: str, payloads: Sequence[bytes]) -> list[_Blob]:
        """The blobs kept and not stored yet that ``payloads`` (of ``project``) name, by key."""
        return [
            blob
            for blob in self._pending.values()
            if blob.project == project and any(blob.needle in payload for payload in payloads)
        ]

    def _insert(
        self, blobs: list[_Blob], stored: list[StoredEvent], heads: list[Head], durable: bool = True
    ) -> tuple[list[_Blob], Sequence[int]]:
        """Insert ``blobs``' events and then ``stored`` in one transaction; the blobs inserted and every
        event's ``seq``. A blob another process stored first is dropped (it is there: the same text) and
        the rest inserted again; ``IntegrityError`` when the conflict is elsewhere."""
        while True:
            try:
                with self._errors("append to"):
                    ids = self.backend.events.insert_events(
                        [*(b.stored for b in blobs), *stored],
                        heads=heads,
                        durable=durable,
                    )
            except IntegrityError:
                there = {b.stream for b in blobs if self.version(b.stream)}
                if not there:
                    raise
                for stream in there:
                    self._pending.pop(stream, None)
                    self._blobs.add(stream)
                blobs = [b for b in blobs if b.stream not in there]
                if not blobs and not stored:
                    return [], []
                continue
            for blob in blobs:
                self._pending.pop(blob.stream, None)
                self._blobs.add(blob.stream)
            assert ids is not None
            return blobs, ids

    def _flush(self, blobs: list[_Blob]) -> list[Recorded]:
        """Store kept blobs now, in one transaction of their own; what to publish (once the lock is let go)."""
        blobs, ids = self._insert(blobs, [], [])
        return [Recorded(seq, b.stream, 1, b.event) for seq, b in zip(ids, blobs, strict=True)]

    def _linked(
        self, stream_id: str, base: int, expected: int | None, topics: Sequence[str], payloads: Sequence[bytes]
    ) -> tuple[list[bytes], list[Head]] | None:
        """The batch's states, linked onto version ``base`` of the stream, and the stream's new head (None:
        the stream is shorter than ``base``). The one place appends are chained (bin/bench-store measures
        the cost by overriding it)."""
        link = self._link_after(stream_id, base, expected)
        if link is None:
            return None
        states, head = chain(link, topics, payloads)
        return states, [(stream_id, base + len(states), head)]

    def _link_after(self, stream_id: str, base: int, expected: int | None) -> bytes | None:
        """The link of the event after version ``base``: the digest of the stored event ``base``.

        Known when this store appended it (the digest it computed then, so a rewrite of that event since
        still shows); otherwise read and hashed — and checked against the stream's recorded head, so an
        append never adopts a newest event that was rewritten. A stream shorter than ``base`` is a
        ``ConcurrencyConflict`` for ``expected`` (never a gap in the versions); None without."""
        if base == 0:
            return genesis(stream_id)
        known = self._heads.get(stream_id)
        if known is not None and known[0] == base:
            return known[1]
        with self._errors("read"):
            row, head = self.backend.events.chain_event(stream_id, base)
        if row is None:
            if expected is None:
                return None
            raise ConcurrencyConflict(stream_id, expected, self.version(stream_id))
        link = digest(row[3], row[4], row[5])
        if head is not None and head[1] == base and head[2] != link:
            raise rewritten(row, head[2], link, "the head recorded for its stream when it was appended")
        return link

    # -- reading ------------------------------------------------------------------------------

    def version(self, stream_id: str) -> int:
        """The stream's current version: the number of events in it."""
        with self._errors("read"):
            last = self.backend.events.select_events(stream_id, desc=True, limit=1)
        return last[0].originator_version if last else 0

    def read_stream(
        self, stream_id: str, after_version: int = 0, until_version: int | None = None
    ) -> Iterator[Recorded]:
        """One stream's events in order (versions ``after_version + 1`` … ``until_version``), paged."""
        while True:
            with self._errors("read"):
                page = self.backend.events.select_stream(stream_id, after_version, PAGE)
            if until_version is not None and page and page[-1][2] > until_version:
                yield from self._recorded([row for row in page if row[2] <= until_version])
                return
            yield from self._recorded(page)
            if len(page) < PAGE:
                return
            after_version = page[-1][2]

    def read_all(self, after: int = 0) -> Iterator[Recorded]:
        """Every event with ``seq > after``, in ``seq`` order, paged (constant memory)."""
        for page in self.pages(after):
            yield from page

    def pages(self, after: int = 0, size: int = PAGE) -> Iterator[list[Recorded]]:
        """``read_all`` in lists of up to ``size`` events."""
        while True:
            with self._errors("read"):
                page = self.backend.events.scan(after, size)
            if page:
                yield self._recorded(page)
            if len(page) < size:
                return
            after = page[-1][0]

    def history_pages(self, after: int = 0, size: int = PAGE) -> Iterator[tuple[int, int, list[Recorded]]]:
        """``pages`` of the module history streams only (what the projections read), each as ``(the last
        seq read, how many events were read, the history events among them)``: an event of another stream
        (a blob, a meta or a legacy stream) is passed over before it is decoded."""
        while True:
            with self._errors("read"):
                page = self.backend.events.scan(after, size)
            if page:
                streams = {row[1] for row in page}
                history = {stream for stream in streams if is_history(stream)}
                kept = page if len(history) == len(streams) else [row for row in page if row[1] in history]
                yield page[-1][0], len(page), self._recorded(kept)
            if len(page) < size:
                return
            after = page[-1][0]

    def check_intact(self, stream_id: str | None = None, version: int | None = None, since: int = 0) -> None:
        """Raise ``StoreTampered`` when the store's file was deleted or replaced since it was opened, or
        when ``stream_id`` does not hold versions 1…``version`` without a gap (events deleted; more is
        fine: another writer may have appended). With ``since`` only the versions above it are counted
        (a check per step costs what was appended since the last one), plus the first and that one."""
        path = self.backend.path
        if path is not None and _file_identity(path) != self._identity:
            how = "replaced" if path.exists() else "deleted"
            saved = rescue(path, how) if not self.backend.snapshot else None
            if saved is not None:
                why = f"Lopen still had it open and saved every event recorded until now to {saved}"
                fix = f"stop here: find what touched .lopen/ (Lopen keeps the model out of it); move {saved} to {path}"
            else:
                why = "every event recorded so far lived in that file, and Lopen could not save a copy of it"
                fix = "stop here: find what touched .lopen/ (Lopen keeps the model out of it); restore the file "
                fix += "from a backup if you have one — without one, the next command starts with "
                fix += "the file now there" if how == "replaced" else "a fresh, empty store"
            if how == "replaced" and saved is not None:
                fix += " (after moving the file now there out of the way)"
            raise StoreTampered(
                f"the event store {path} was {how} while Lopen was running; whatever did it was not Lopen", why, fix
            )
        if stream_id is None or version is None:
            return
        since = min(since, version)
        floor = max(since - 1, 0)  # the last version checked is counted again: its deletion shows
        with self._errors("read"):
            count, highest, lowest = self.backend.events.stream_extent(stream_id, floor)
        if count != highest - floor or highest < version or (version and lowest != 1):
            held = f"{count} events above version {floor}" if floor else f"{count} events"
            raise StoreTampered(
                f"events of {stream_id} are missing from the event store {self.location}",
                f"the stream holds {held} up to version {highest}, from version {lowest}, but {version} were "
                "recorded (rows were deleted or rewritten outside Lopen)",
                "stop here: the audit trail was changed; compare the store with a backup before going on",
            )

    def last_seq(self) -> int:
        with self._errors("read"):
            return self.backend.events.max_notification_id() or 0

    def subscribe(
        self, callback: Callable[[Any], None], *, after: int | None = None, batch: bool = False
    ) -> Subscription:
        """Call ``callback(recorded)`` for each event appended from now on (or after ``after``).

        With ``batch=True`` the callback gets lists of ``Recorded``. A callback that raises is
        logged and isolated, and catches up from the store on the next append.
        """
        return self._bus.subscribe(callback, self.last_seq() if after is None else after, batch)

    @property
    def projections(self) -> Projections:
        """The read models (session state, tokens, plan, resume points, module progress)."""
        if self._projections is None:
            from events.projections import Projections

            self._projections = Projections(self)
        return self._projections

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the hash chain ---------------------------------------------------------------------------

    def verify(self, stream_id: str | None = None, *, full: bool = False) -> Report:
        """Check the hash chain since the last verification (``full``: all of it), of every stream or of
        ``stream_id``; ``ChainBroken`` names the first event that does not fit (``events.verify``)."""
        with self._errors("verify"):
            return verify(self, stream_id, full=full)

    def head(self, stream_id: str) -> tuple[int, str]:
        """The stream's chain head as the store records it now: its newest event's version and digest —
        the link the next event will carry; ``(0, genesis)`` for an empty stream. What a commit's
        ``Lopen-Chain`` trailer says (``lopen.git.witness``)."""
        with self._errors("read"):
            heads = self.backend.events.chain_heads(stream_id)
        if stream_id in heads:
            version, link = heads[stream_id]
            return version, link.decode()
        return 0, genesis(stream_id).decode()

    def chain_rows(
        self, stream_id: str, after_version: int = 0, until_version: int | None = None
    ) -> Iterator[ChainRow]:
        """One stream's events as stored — ``(seq, stream, version, topic, state, sealed link)`` — in order:
        the bytes the chain hashes (what ``lopen export`` copies)."""
        while True:
            with self._errors("read"):
                page = self.backend.events.chain_stream(stream_id, after_version, PAGE)
            for row in page:
                if until_version is not None and row[2] > until_version:
                    return
                yield row
            if len(page) < PAGE:
                return
            after_version = page[-1][2]

    def chain_event(self, stream_id: str, version: int) -> ChainRow | None:
        """One stored event (with its sealed link), None when the stream has no such version."""
        with self._errors("read"):
            return self.backend.events.chain_event(stream_id, version)[0]

    def of_types(self, names: Sequence[str], stream_id: str | None = None) -> list[tuple[ChainRow, Event]]:
        """Every stored event of these types (of ``stream_id``'s, when given), decoded, in ``seq`` order."""
        with self._errors("read"):
            rows = self.backend.events.chain_of_types(names, stream_id)
        return [(row, self.codec.decode(row[3], row[4], row[0])) for row in rows]

    def seal_unchained(self) -> int:
        """Seal the events a Lopen older than the hash chain stored, once (``events.seal``); how many."""
        from events.seal import seal

        with self._append_lock, self._errors("seal"):
            sealed = seal(self)
            self._heads.clear()
        return sealed

    # -- internals ------------------------------------------------------------------------------

    def migrate_legacy(self, project: str) -> int:
        """Copy a store of the layout before project ids (``session:<id>``/``module:<name>`` streams) into
        this project's module histories, once; return how many events were copied.

        The copies keep each event's time and session; the originals stay where they are (the audit
        trail is never rewritten) and the projections ignore them. A marker event in the same
        transaction makes the migration happen exactly once, even with two processes racing.
        """
        marker = f"{META_PREFIX}legacy-migrated"
        if self.version(marker) or not self._has_legacy():
            return 0
        by_stream: dict[str, list[Event]] = {}
        for page in self.pages(0):
            for rec in page:
                if is_legacy(rec.stream_id):
                    module = rec.event.module or legacy_owner(rec.stream_id)
                    event = msgspec.structs.replace(rec.event, project=project, module=module)
                    by_stream.setdefault(module_stream(project, module), []).append(event)
        from events.catalogue import ControlRequested

        note = ControlRequested(action="migrate-legacy-store", caller="lopen", detail=f"project {project}")
        by_stream[marker] = [note]
        stored: list[StoredEvent] = []
        heads = []
        for stream_id, events in by_stream.items():
            # The marker goes in at version 1 whatever is there now: a process that lost the race and
            # reads the winner's marker here must collide with it, not append after it.
            base = 0 if stream_id == marker else self.version(stream_id)
            topics = [self.codec.topic(e) for e in events]
            link = self._link_after(stream_id, base, base)
            assert link is not None
            states, head = chain(link, topics, [self.codec.encode(e) for e in events])
            stored += [
                StoredEvent(stream_id, base + i + 1, topic, state)
                for i, (topic, state) in enumerate(zip(topics, states, strict=True))
            ]
            heads.append((stream_id, base + len(events), head))
        with self._append_lock:
            try:
                with self._errors("migrate"):
                    self.backend.events.insert_events(stored, heads=heads)
            except IntegrityError:
                return 0  # another process migrated it first
            self._versions.clear()
            self._heads.clear()
        return len(stored) - 1

    def _has_legacy(self) -> bool:
        """Every event stored before the upgrade is in a legacy stream, so the first one tells."""
        with self._errors("read"):
            first = self.backend.events.scan(0, 1)
        return bool(first) and is_legacy(first[0][1])

    def _prepare(self, event: Event, project: str, module: str) -> Event:
        if not isinstance(event, Event):
            raise TypeError(f"not an event: {event!r}")
        changes = {}
        if event.project != project:
            if event.project:
                raise ValueError(f"{type(event).__name__} of project {event.project} appended to {project}")
            changes["project"] = project
        if event.module != module:
            if event.module:
                raise ValueError(f"{type(event).__name__} of module {event.module} appended to module {module}")
            changes["module"] = module
        return msgspec.structs.replace(event, **changes) if changes else event

    def _known_version(self, stream_id: str) -> int:
        version = self._versions.get(stream_id)
        if version is None:
            version = self._versions[stream_id] = self.version(stream_id)
        return version

    def _recorded(self, rows: list[RawEvent]) -> list[Recorded]:
        fast = self.codec.decoders  # current-version topics; anything else takes the careful path
        try:
            return [Recorded(seq, sid, ver, fast[topic](state)) for seq, sid, ver, topic, state in rows]
        except (KeyError, msgspec.DecodeError):
            decode = self.codec.decode
            return [Recorded(seq, sid, ver, decode(topic, state, seq)) for seq, sid, ver, topic, state in rows]

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except IntegrityError:
            raise
        except (PersistenceError, sqlite3.Error) as exc:
            error = _translate(exc, action, self.location, self.backend.path, self.backend)
            raise error from exc


@dataclass(frozen=True, slots=True)
class _Blob:
    """A blob kept (``EventStore.keep_blob``), ready to insert: its one event, linked onto its genesis (and
    no head: ``events.blobs``)."""

    stream: str
    project: str
    needle: bytes  # its key as a JSON string: what an event naming it holds
    event: Event
    stored: StoredEvent


def _content(blob: BlobStored, seq: int) -> str:
    """A stored blob's text; a packed one that cannot be unpacked is an ``UndecodableEvent`` naming it."""
    try:
        return blob.content()
    except ValueError as exc:
        raise UndecodableEvent(
            f"stored event #{seq} (BlobStored {blob.key[:16]}…) cannot be read: {exc}",
            "its stored bytes are not a blob this Lopen can unpack",
            "run `lopen verify --full`: it names the event; a newer Lopen reads what it packed",
        ) from exc


def _damaged(path: Path) -> bool:
    """Confirm a corruption report with SQLite's own check on a fresh connection before anything is moved
    aside: a file that passes it is never quarantined (the report was about this connection's view)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=10)) as db:
            return db.execute("PRAGMA quick_check").fetchone() != ("ok",)
    except sqlite3.DatabaseError:
        return True


def _file_identity(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return stat.st_dev, stat.st_ino


def _translate(
    exc: BaseException, action: str, location: str, path: Path | None, backend: Backend | None = None
) -> StoreError:
    """Turn a database error into a StoreError naming the path; quarantine a damaged file."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, sqlite3.Error):
        cause = cause.__cause__ or cause.__context__
    name = getattr(cause, "sqlite_errorname", "") or ""
    message = str(cause or exc)
    if path is not None and name.startswith(_CORRUPT) and _damaged(path):
        if backend is not None:
            backend.close()
        dest = quarantine(path)
        return StoreCorrupted(
            f"the event store {path} cannot be read: {message}",
            f"it was moved to {dest} for inspection (nothing was deleted)",
            f"run the command again to start with a fresh, empty store; to go back, "
            f"stop lopen and move {dest} back to {path}",
        )
    if name.startswith(_BUSY):
        return StoreUnavailable(
            f"the event store {location} stayed locked by another process",
            message,
            "another lopen command holds a long write transaction; try again in a moment",
        )
    if path is not None:
        return StoreWriteError(
            f"cannot {action} the event store {location}",
            "; ".join(filter(None, [f"{message} ({name or type(exc).__name__})", os_diagnosis(path.parent)])),
            f"check free disk space and that {path.parent} is writable; events stored before this are safe",
        )
    return StoreUnavailable(f"cannot {action} the event store {location}", str(exc), "check store.url and the server")
