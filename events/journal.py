"""The journal: how a run writes its module's history and keeps the one fold current.

``Journal(store, project, module)`` reads the module's stream into a ``ModuleState`` (the one fold,
``events.fold``). ``record(*events)`` then

1. stamps each event with the journal's session id (when it has none),
2. checks each against the fold (an event that would contradict the history — judged after folding
   in what other writers appended meanwhile — is refused with ``Contradiction`` and nothing is stored),
3. appends the batch with optimistic concurrency on the module stream (another writer — a second
   worker, an MCP client asking for a pause — makes it read the new events, check again and retry),
4. folds the batch in, so the next read sees it (read-your-writes inside a tool call).

After ``close()`` (the session paused, completed or failed) nothing more is recorded: a late
answer of an oracle cut off by Ctrl+C cannot land after the session ended (``JournalClosed``).

**Fences.** ``record(*events, fence=f)`` stores the batch only while the claim ``f`` names is still the
holder's, with that token and a lease that has not run out (``events.folds.claims.Fence``). The test is
made in step 2, on the fold with what other writers appended, and the append in step 3 is conditional on
the stream's version: a takeover appended in between makes the append conflict, the fold read it, and
the fence refuse the batch (``Fenced``) — a compare-and-swap on the claim. ``FencedJournal`` is the
journal as one lane sees it: everything it records goes through its fence, and ``hold()`` checks the
fence before the lane touches the disk or git.

Thread-safe: tool handlers, actors and the gateway's loop record through one journal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import date
from typing import TypeVar

import msgspec

from events import catalogue as ev
from events.errors import ConcurrencyConflict, StoreError, StoreTampered
from events.fold import _CHECKS, Fence, ModuleState
from events.recorded import Recorded, module_stream, parse_session_id
from events.store import EventStore

T = TypeVar("T")
RETRIES = 50
FULL_CHECK = 25  # integrity checks between two that count the whole stream


class Contradiction(StoreError):
    """An event the module's history cannot take (e.g. an invalid task transition): nothing was stored."""

    def __init__(self, event: ev.Event, problem: str) -> None:
        super().__init__(
            f"{type(event).__name__} refused: {problem}",
            "it contradicts the module's recorded history, so it was not stored",
            "this is a bug in Lopen when it happens outside a tool call; report it",
        )
        self.event = event
        self.problem = problem


class JournalClosed(StoreError):
    """The session ended: nothing more is recorded for it."""

    def __init__(self, session_id: str, event: ev.Event) -> None:
        super().__init__(
            f"{type(event).__name__} not recorded: session {session_id} has ended",
            "events arriving after a session paused, completed or failed are dropped",
            "run the module again to continue",
        )


class Fenced(StoreError):
    """The claim a lane works under is no longer its own (taken over, released, or its lease ran out):
    nothing was stored, and the lane must stop touching that work."""

    def __init__(self, fence: Fence, problem: str) -> None:
        super().__init__(
            f"{fence.worker} no longer holds {fence.item}: {problem}",
            "a worker whose claim lapsed (a paused process, a lost lease) must not record or change that work",
            "nothing to do: another worker builds it now; this one goes on with other work",
        )
        self.fence = fence
        self.problem = problem


class Journal:
    def __init__(self, store: EventStore, project: str, module: str, session_id: str = "") -> None:
        self.store = store
        self.project = project
        self.module = module
        self.stream = module_stream(project, module)
        self.session_id = session_id
        self._state = ModuleState(project=project, module=module)
        self._lock = threading.RLock()
        self._closed = False
        self._listeners: list[Callable[[ModuleState, list[ev.Event]], None]] = []
        self._checked = 0  # the version the last integrity check covered
        self._checks = 0
        self.refresh()

    def listen(self, listener: Callable[[ModuleState, list[ev.Event]], None]) -> None:
        """Call ``listener(fold, events)`` after each recorded batch is folded in (under the journal's
        lock: keep it short). For what must see the fold as it now is, e.g. the plan file."""
        self._listeners.append(listener)

    # -- reading -------------------------------------------------------------------------------

    def refresh(self) -> list[Recorded]:
        """Fold in what other writers appended since; return those events. A gap in the stream's
        versions (events deleted outside Lopen) is ``StoreTampered``, never silently skipped."""
        with self._lock:
            fresh = list(self.store.read_stream(self.stream, self._state.version))
            for rec in fresh:
                if rec.version != self._state.version + 1:
                    raise StoreTampered(
                        f"events of {self.stream} are missing from the event store {self.store.location}",
                        f"version {rec.version} follows version {self._state.version}: events were deleted "
                        "outside Lopen",
                        "stop here: the audit trail was changed; compare the store with a backup before going on",
                    )
                self._state.apply(rec.event, rec.seq)
                self._state.version = rec.version
            return fresh

    def check_intact(self) -> None:
        """The store file is the one opened, this stream holds exactly the events folded so far (plus any
        another writer appended since), and its hash chain holds (``events.verify``: what was appended
        since the last verification, and the event it stopped at): ``StoreTampered`` otherwise
        (``ChainBroken`` naming the event for a rewrite). A run calls it before it records anything.

        Every ``FULL_CHECK``-th call counts the whole stream; the others count what was appended since the
        last check (and see that its first and last checked versions are still there), so a check per step
        costs the same in a module of ten tasks as in one of a thousand."""
        with self._lock:
            self.refresh()
            since = 0 if self._checks % FULL_CHECK == 0 else self._checked
            self.store.check_intact(self.stream, self._state.version, since)
            self.store.verify(self.stream)
            self._checked, self._checks = self._state.version, self._checks + 1

    def read(self, query: Callable[[ModuleState], T]) -> T:
        """Run ``query`` on the fold under the journal's lock (keep it short; copy what you keep)."""
        with self._lock:
            return query(self._state)

    def read_fresh(self, query: Callable[[ModuleState], T]) -> T:
        """``read`` after folding in what other writers appended (one read of the store)."""
        with self._lock:
            self.refresh()
            return query(self._state)

    def snapshot(self) -> ModuleState:
        """An independent copy of the fold."""
        with self._lock:
            return self._state.copy()

    @property
    def version(self) -> int:
        return self._state.version

    @property
    def closed(self) -> bool:
        return self._closed

    # -- writing -------------------------------------------------------------------------------

    def record(self, *events: ev.Event, fence: Fence | None = None, durable: bool = True) -> None:
        """Check, append and fold ``events`` as one batch (see the module docstring); with ``fence``, only
        while that claim holds (else ``Fenced``, nothing stored); ``durable=False``: committed without
        waiting for the disk (``EventStore.append``)."""
        if not events:
            return
        with self._lock:
            if self._closed:
                raise JournalClosed(self.session_id, events[0])
            stamped = [self._stamp(e) for e in events]
            for _ in range(RETRIES):
                try:
                    self._check_fence(fence)  # first: a fenced-out batch is refused whatever it holds
                    self._check(stamped)
                except (Contradiction, Fenced):
                    if not self.refresh():  # judged on the whole history, not on a stale copy of it
                        raise
                    continue
                try:
                    version = self.store.append(
                        self.stream, stamped, expected_version=self._state.version, durable=durable
                    )
                except ConcurrencyConflict:
                    self.refresh()
                    continue
                if any(type(e) is ev.SpecApproved for e in stamped):
                    self.refresh()  # fold it as stored: an approval's fold keeps its seq, as the projection's does
                    return
                for event in stamped:
                    self._state.apply(event)
                self._state.version = version
                for listener in self._listeners:
                    listener(self._state, stamped)
                return
            raise ConcurrencyConflict(self.stream, self._state.version, self.store.version(self.stream))

    def hold(self) -> None:
        """Before touching the disk or git for a piece of work: this journal has no fence, so nothing to
        check (``FencedJournal.hold`` checks its claim)."""

    def _check_fence(self, fence: Fence | None) -> None:
        if fence is not None:
            problem = fence.problem(self._state, time.time())
            if problem is not None:
                raise Fenced(fence, problem)

    def close(self) -> None:
        """No more events for this session (it paused, completed or failed)."""
        with self._lock:
            self._closed = True

    def open_session(self, started: ev.SessionStarted, today: date | None = None) -> str:
        """Start a new session of the module: ``<module>-YYYYMMDD-<n>`` with the next free ``n``."""
        day = (today or date.today()).strftime("%Y%m%d")
        with self._lock:
            for _ in range(RETRIES):
                taken = [parse_session_id(s) for s in self._state.sessions]
                n = 1 + max((number for _, d, number in taken if d == day), default=0)
                session_id = f"{self.module}-{day}-{n}"
                event = msgspec.structs.replace(started, session_id=session_id)
                try:
                    version = self.store.append(self.stream, [event], expected_version=self._state.version)
                except ConcurrencyConflict:
                    self.refresh()
                    continue
                self._state.apply(event)
                self._state.version = version
                self.session_id = session_id
                self._closed = False
                return session_id
            raise ConcurrencyConflict(self.stream, self._state.version, self.store.version(self.stream))

    def resume_session(self, session_id: str, reason: str, *, traceparent: str = "") -> None:
        with self._lock:
            self.session_id = session_id
            self._closed = False
            self.record(ev.SessionResumed(reason=reason, traceparent=traceparent))

    # -- internals -------------------------------------------------------------------------------

    def _stamp(self, event: ev.Event) -> ev.Event:
        if event.session_id or not self.session_id:
            return event
        return msgspec.structs.replace(event, session_id=self.session_id)

    def _check(self, events: list[ev.Event]) -> None:
        """Check the batch in order: each event against the state the ones before it leave."""
        if not any(type(e) in _CHECKS for e in events):
            return
        state = self._state if len(events) == 1 else self._state.copy()
        for event in events:
            problem = state.check(event)
            if problem is not None:
                raise Contradiction(event, problem)
            if state is not self._state:
                state.apply(event)


class FencedJournal(Journal):
    """The module's journal as one lane sees it: reads are the journal's; everything recorded goes
    through the lane's ``fence`` (its claim and token), and ``hold()`` checks the fence on the store's
    latest history before the lane changes a worktree, a branch or the remote.

    The first refusal is final (``lost``): the lane's claim never comes back under the same token, so
    every later record or ``hold()`` is refused at once, and ``on_lost`` (abort the lane's invocation in
    flight, ask the lane to stop) is called once. The Foreman calls ``lose`` when it learns first (a
    renewal refused, a lease it finds run out)."""

    def __init__(self, journal: Journal, fence: Fence, on_lost: Callable[[str], None] = lambda why: None) -> None:
        # No Journal.__init__: this view keeps no fold of its own; every read goes to ``journal``.
        self.inner = journal
        self.fence = fence
        self.store = journal.store
        self.project = journal.project
        self.module = journal.module
        self.stream = journal.stream
        self._on_lost = on_lost
        self._lost = ""
        self._lost_lock = threading.Lock()

    @property  # type: ignore[override]
    def session_id(self) -> str:
        return self.inner.session_id

    @session_id.setter
    def session_id(self, value: str) -> None:
        self.inner.session_id = value

    @property
    def lost(self) -> str:
        """Why the fence refused (the lane's claim is gone), or "" while it holds."""
        return self._lost

    def lose(self, why: str) -> None:
        """The claim is gone: refuse everything from now on, and tell ``on_lost`` (once)."""
        with self._lost_lock:
            first = not self._lost
            self._lost = self._lost or why
        if first:
            self._on_lost(why)

    def hold(self) -> None:
        """Raise ``Fenced`` unless the claim is still this lane's, on the store's latest history."""
        if self._lost:
            raise Fenced(self.fence, self._lost)
        problem = self.inner.read_fresh(lambda s: self.fence.problem(s, time.time()))
        if problem is not None:
            self.lose(problem)
            raise Fenced(self.fence, problem)

    def record(self, *events: ev.Event, fence: Fence | None = None, durable: bool = True) -> None:
        if self._lost and events:
            raise Fenced(self.fence, self._lost)
        try:
            self.inner.record(*events, fence=fence or self.fence, durable=durable)
        except Fenced as refused:
            self.lose(refused.problem)
            raise

    def listen(self, listener: Callable[[ModuleState, list[ev.Event]], None]) -> None:
        self.inner.listen(listener)

    def refresh(self) -> list[Recorded]:
        return self.inner.refresh()

    def check_intact(self) -> None:
        self.inner.check_intact()

    def read(self, query: Callable[[ModuleState], T]) -> T:
        return self.inner.read(query)

    def read_fresh(self, query: Callable[[ModuleState], T]) -> T:
        return self.inner.read_fresh(query)

    def snapshot(self) -> ModuleState:
        return self.inner.snapshot()

    @property
    def version(self) -> int:
        return self.inner.version

    @property
    def closed(self) -> bool:
        return self.inner.closed

    def close(self) -> None:
        self.inner.close()

    def open_session(self, started: ev.SessionStarted, today: date | None = None) -> str:
        raise TypeError("a lane's journal opens no session: the module's journal does")

    def resume_session(self, session_id: str, reason: str, *, traceparent: str = "") -> None:
        raise TypeError("a lane's journal resumes no session: the module's journal does")
