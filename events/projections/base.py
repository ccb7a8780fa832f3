"""What a projection is: a name, a row type, and handlers ``(table, seq, event) -> None`` — or one
handler for a run of events, ``run(table, records, skip)``.

A projection is a pure function of the event sequence. Its state is a table of
rows (``msgspec.Struct``s) by key; handlers read rows with ``table.get``, change
them, and mark them with ``table.put``. A handler that meets an event it cannot
apply raises ``Invalid``; the runner reports it with the event's ``seq``.

A projection with a ``run`` handler is given its events a run at a time: consecutive events of one
module history stream (``Recorded``s, in order; a page of a rebuild holds runs of hundreds). The
handler is the projection's logic, for the live path and the rebuild alike — it can look a row up
once per run instead of once per event, and dispatch by type itself. It calls
``skip(seq, event, exc)`` for an event it could not apply and goes on with the next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from events.catalogue import Event
from events.recorded import Recorded

R = TypeVar("R", bound=msgspec.Struct)

_MISSING: Any = object()


class Invalid(Exception):
    """The event contradicts the projection's state (e.g. an invalid W5 transition)."""


class Table(Generic[R]):
    """One projection's rows, cached in memory; ``load`` fetches rows not seen yet.

    Without ``load`` (a rebuild: every row is made here, and all of them are saved) ``get`` and ``put``
    are the row dict's own ``get`` and item assignment, and ``dirty`` is not kept: a rebuild calls them
    a few times per event, and a Python call each was a tenth of its time."""

    def __init__(self, row_type: type[R], load: Callable[[str], bytes | None] | None) -> None:
        self.rows: dict[str, R | None] = {}
        self.dirty: set[str] = set()
        self.memo: dict[Any, Any] = {}  # for handlers: derived lookups, dropped with the rows
        self._load = load
        self._decode = msgspec.json.Decoder(row_type).decode
        if load is None:
            self.get = self.rows.get  # type: ignore[method-assign]
            self.put = self.rows.__setitem__  # type: ignore[method-assign]

    def get(self, key: str) -> R | None:
        row = self.rows.get(key, _MISSING)
        if row is _MISSING:
            data = self._load(key) if self._load is not None else None
            row = self.rows[key] = self._decode(data) if data is not None else None
        return row

    def put(self, key: str, row: R) -> None:
        self.rows[key] = row
        self.dirty.add(key)

    def clear(self) -> None:
        """Forget the cached rows (they are saved); they are loaded again when needed."""
        self.rows.clear()
        self.memo.clear()


Handler = Callable[[Table[Any], int, Any], None]
Skip = Callable[[int, Any, Exception], None]
RunHandler = Callable[[Table[Any], Sequence[Recorded], Skip], None]


@dataclass(frozen=True)
class Projection:
    """``version`` names the logic: bumping it makes every store rebuild this projection. ``handlers``
    name the event types it reads (and handle them one by one, unless ``run`` handles them a run at a time:
    then the runner passes it every event of the run, of any type)."""

    name: str
    row: type[msgspec.Struct]
    handlers: dict[type[Event], Handler] = field(default_factory=dict)
    version: int = 1
    run: RunHandler | None = None
    on_flush: Callable[[Path, dict[str, Any], str], None] | None = field(default=None)  # (root, rows, project)

    @property
    def tracking_name(self) -> str:
        return f"{self.name}@{self.version}"
