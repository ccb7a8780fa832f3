"""The in-process bus: after an append commits, its events go to every subscriber, in order.

Each subscriber has a position (the last ``seq`` it took). When a publish finds a
gap before the new events — the subscriber raised earlier, or other threads or
processes appended in between — the subscriber first catches up from the store.
A subscriber that raises is isolated: the error is logged, the others still get
the events, and it is offered the same events again on the next publish.
Callbacks run on the appending thread; keep them short (e.g. hand off to an actor).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from events.recorded import Recorded

log = logging.getLogger("events.bus")

CATCH_UP_BATCH = 500


class Subscription:
    """A subscriber and its position; ``cancel()`` to stop receiving."""

    def __init__(self, bus: Bus, callback: Callable[[Any], None], position: int, batch: bool) -> None:
        self.bus = bus
        self.callback = callback
        self.position = position
        self.batch = batch
        self.busy = False

    def cancel(self) -> None:
        self.bus.unsubscribe(self)


class Bus:
    def __init__(self, read_after: Callable[[int], Iterator[Recorded]]) -> None:
        self._read_after = read_after
        self._subs: list[Subscription] = []
        self._lock = threading.RLock()

    def subscribe(self, callback: Callable[[Any], None], position: int, batch: bool = False) -> Subscription:
        sub = Subscription(self, callback, position, batch)
        with self._lock:
            self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def publish(self, recorded: Sequence[Recorded]) -> None:
        if not recorded:
            return
        with self._lock:
            for sub in list(self._subs):
                if not sub.busy:  # a callback that appends does not receive its own echo re-entrantly
                    self._deliver(sub, recorded)

    def _deliver(self, sub: Subscription, recorded: Sequence[Recorded]) -> None:
        items: Iterable[Recorded]
        if sub.position < recorded[0].seq - 1:
            items = self._read_after(sub.position)
        else:
            items = [r for r in recorded if r.seq > sub.position]
        sub.busy = True
        try:
            if sub.batch:
                iterator = iter(items)
                while chunk := list(islice(iterator, CATCH_UP_BATCH)):
                    sub.callback(chunk)
                    sub.position = chunk[-1].seq
            else:
                for r in items:
                    sub.callback(r)
                    sub.position = r.seq
        except Exception:
            log.exception(
                "event subscriber %r failed after #%d; it will catch up from the store", sub.callback, sub.position
            )
        finally:
            sub.busy = False
