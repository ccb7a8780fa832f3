"""The feed: how events and streaming deltas reach the screen without ever slowing the run.

Producers run on other threads — the store's bus calls ``on_recorded`` on the thread that appended,
the gateway calls ``on_stream`` on its event loop, the run calls ``say`` — and each call only
appends to an in-memory intake under a lock and, when the intake was empty, calls ``notify`` once
(the app posts itself a message: thread-safe, non-blocking). The app's thread then ``drain``s
everything that arrived into a :class:`~lopen.tui.state.ScreenState` and draws once.

That is the whole back-pressure story: while the app is busy drawing, new items pile up in the
intake and the next drain takes all of them in one go — a slow terminal draws fewer frames, but
every event is folded (the fold is complete, the drawing is coalesced). Only the model's narrative
deltas may be merged when more than ``STREAM_LIMIT`` of them wait, never events.

How the module's history is followed: ``follow(interval)`` starts one thread that reads the stream
after the last version seen (read-only) every ``interval`` seconds — a run in its own process
(``lopen.app.run_process``), ``lopen watch`` on this or another machine, any backend, PostgreSQL
included. ``attach()`` (the store's bus) is for a store this process writes itself (tests, benches).
Deltas come over the run's pipe, a poll sooner than the events that record them: each is folded as it
arrives, and an event matches the entry its deltas opened by its call id (a late delta is dropped).

Either way, a gap in versions (an event missed or arriving early) is filled from the store by
``drain`` before the event is folded, so the fold sees the stream exactly in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from events.recorded import Recorded, module_stream
from lopen.copilot import results as stream

if TYPE_CHECKING:
    from events.bus import Subscription
    from events.store import EventStore
    from lopen.tui.state import ScreenState

STREAM_LIMIT = 2000


@dataclass(frozen=True)
class Said:
    """A status line from the run (``RunCallbacks.say``)."""

    text: str


Item = Recorded | stream.StreamEvent | Said


class Feed:
    """Thread-safe intake of one module's events and the run's deltas (see the module docstring)."""

    def __init__(self, store: EventStore, project: str, module: str, notify: Callable[[], None] | None = None) -> None:
        self.store = store
        self.project = project
        self.module = module
        self.stream_id = module_stream(project, module)
        self.notify: Callable[[], None] = notify or (lambda: None)
        self._lock = threading.Lock()
        self._items: list[Item] = []
        self._deltas = 0
        self._signalled = False
        self._subscription: Subscription | None = None
        self._polled_version = 0
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        self.arrivals: dict[int, float] = {}  # seq → perf_counter at intake (bench-tui reads it)
        self.timing = False

    # -- producers (any thread) ---------------------------------------------------------------------

    def on_recorded(self, rec: Recorded) -> None:
        """A bus subscriber: keeps the events of this module's stream."""
        if rec.stream_id == self.stream_id:
            if self.timing:
                self.arrivals[rec.seq] = time.perf_counter()
            self._push(rec)

    def on_stream(self, event: stream.StreamEvent) -> None:
        """A streaming delta of the running invocation (``RunCallbacks.on_stream``)."""
        if isinstance(event, stream.UsageReported):
            return  # usage is recorded per call (TokensUsed): the event is the truth
        self._push(event, delta=True)

    def say(self, line: str) -> None:
        self._push(Said(line))

    def _push(self, item: Item, delta: bool = False) -> None:
        with self._lock:
            if delta:
                self._deltas += 1
                if self._deltas > STREAM_LIMIT and isinstance(item, stream.AssistantText):
                    last = self._items[-1] if self._items else None
                    if isinstance(last, stream.AssistantText):
                        self._items[-1] = stream.AssistantText(text=last.text + "\n" + item.text)
                        return
            self._items.append(item)
            wake = not self._signalled
            self._signalled = True
        if wake:
            self.notify()

    # -- the app's side -------------------------------------------------------------------------------

    def take(self) -> list[Item]:
        """Everything that arrived since the last call; the next arrival notifies again."""
        with self._lock:
            items, self._items = self._items, []
            self._deltas = 0
            self._signalled = False
        return items

    def drain(self, state: ScreenState) -> list[Recorded]:
        """Fold everything that arrived into ``state`` (filling version gaps from the store);
        return the events folded."""
        folded: list[Recorded] = []
        for item in self.take():
            if isinstance(item, Recorded):
                if item.version > state.version + 1:
                    for missed in self.store.read_stream(self.stream_id, state.version, item.version - 1):
                        if state.apply(missed):
                            folded.append(missed)
                if state.apply(item):
                    folded.append(item)
            elif isinstance(item, Said):
                state.say(item.text)
            else:
                state.apply_stream(item)
        return folded

    def load(self, state: ScreenState) -> int:
        """Fold the module's history so far into ``state`` (on the caller's thread); return its version."""
        for rec in self.store.read_stream(self.stream_id, state.version):
            state.apply(rec)
        self._polled_version = max(self._polled_version, state.version)
        return state.version

    def attach(self, after_seq: int) -> None:
        """Follow this process's appends through the store's bus, from ``after_seq`` on."""
        if self._subscription is None:
            self._subscription = self.store.subscribe(self.on_recorded, after=after_seq)

    def poll(self) -> int:
        """Read what was appended since the last poll (any thread; read-only); return how many."""
        fresh = self._read_fresh()
        for rec in fresh:
            self._push(rec)
        return len(fresh)

    def _read_fresh(self) -> list[Recorded]:
        with self._poll_lock:
            fresh = list(self.store.read_stream(self.stream_id, self._polled_version))
            if fresh:
                self._polled_version = fresh[-1].version
        return fresh

    def follow(self, interval: float) -> None:
        """Poll the store every ``interval`` seconds on a thread of its own, until ``close()``."""
        if self._follower is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval):  # pacing the reads; ``close`` ends the wait at once
                try:
                    self.poll()
                except Exception:  # a store busy or briefly unreachable: the next poll tries again
                    continue

        self._follower = threading.Thread(target=loop, name="lopen-feed", daemon=True)
        self._follower.start()

    def close(self) -> None:
        """Stop following (the thread and the bus); returns when no read is under way, so the caller may
        close the store next."""
        self._stop.set()
        follower = self._follower
        if follower is not None and follower is not threading.current_thread():
            follower.join(timeout=10)
        self.detach()

    def detach(self) -> None:
        if self._subscription is not None:
            self._subscription.cancel()
            self._subscription = None
