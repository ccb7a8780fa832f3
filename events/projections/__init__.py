"""The read models, kept current from the store with the library's tracking.

``Projections(store)`` (or ``store.projections``; ``.for_project(id)`` sets the project whose
``plan.md`` files are rendered and whose rows the queries read by default):

- ``catch_up()`` applies the events stored since each projection's tracked position and
  saves the changed rows with the new position in one transaction; ``follow()`` does the
  same after every append in this process (a bus subscriber);
- ``rebuild()`` recomputes everything from event #1 in memory and swaps it in atomically;
  the result is byte-identical to the incrementally kept one (``digest()`` proves it);
- queries read the saved rows: ``sessions.get(id) / .all() / .latest(module)``,
  ``tokens.invocation(id) / .session(id) / .module(name)``, ``plan.get(module) / .all() /
  .markdown(module)`` (the plan row is the one fold, ``events.fold.ModuleState``).

Only module history streams (``module:<project>/<module>``) are projected; legacy and meta
streams are skipped. A projection missing its tracking position (new store, or a projection whose
logic changed version) triggers a rebuild. An event a projection cannot apply never stops it: the
fold skips it and keeps the problem in its row, and a handler that raises is reported in
``problems`` (the projection is then *stale* for that event) — every command still runs.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import msgspec
from eventsourcing.persistence import Tracking

from events.backends import Stale
from events.bus import Subscription
from events.errors import StoreUnavailable
from events.fold import ModuleState
from events.projections import plan, sessions, tokens
from events.projections.base import Handler, Invalid, Projection, Table
from events.projections.plan import PlanView
from events.projections.sessions import SessionView
from events.projections.tokens import TokenTotals
from events.recorded import Recorded, is_history

if TYPE_CHECKING:
    from events.store import EventStore

PROJECTIONS: tuple[Projection, ...] = (
    sessions.PROJECTION,
    tokens.PROJECTION,
    plan.PROJECTION,
)

__all__ = [
    "PROJECTIONS",
    "ModuleState",
    "PlanView",
    "Projections",
    "SessionView",
    "TokenTotals",
]

# Insertion order, not sorted keys: the plan row is the one fold, whose dicts are in plan order (components
# in the order planned, tasks in the order recorded); a row decoded and folded on keeps that order.
_ENCODE = msgspec.json.Encoder().encode
CACHE_LIMIT = 20_000  # rows kept in memory between flushes
# A rebuild's page: each projection reads a page's events in turn (a run at a time), so a page is best kept small
# enough to stay in the processor's cache meanwhile (256 events, ~0.4 MB decoded: on bin/bench-store's store a
# quarter faster than 1,000).
REBUILD_PAGE = 256
_STREAM = attrgetter("stream_id")


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the block (as it was after)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Run:
    """Tables being brought forward from ``positions`` (what the database holds)."""

    def __init__(self, specs: Sequence[Projection], positions: dict[str, int], loader: Any) -> None:
        self.specs = specs
        self.positions = positions
        self.tables = {
            s.name: Table(s.row, (lambda key, name=s.name: loader(name, key)) if loader else None) for s in specs
        }
        self._history: set[str] = set()  # the module history streams seen (the others are not projected)
        self.problems: list[str] = []

    def apply(self, records: Sequence[Recorded]) -> None:
        """Apply ``records`` (in seq order) a run of one stream at a time: a projection with a ``run`` handler
        gets the run (the part of it past its position), the others each event their handlers read."""
        positions, history, tables = self.positions, self._history, self.tables
        floor = min(positions.values(), default=0)
        uniform = all(p == floor for p in positions.values())  # a rebuild's, and nearly every catch-up's
        if records and records[0].seq <= floor:
            records = [r for r in records if r.seq > floor]
        for stream, grouped in groupby(records, _STREAM):
            if stream not in history:
                if not is_history(stream):
                    continue
                history.add(stream)
            run = list(grouped)
            for spec in self.specs:
                name = spec.name
                part = run if uniform else [r for r in run if r.seq > positions[name]]
                if not part:
                    continue
                if spec.run is not None:
                    spec.run(tables[name], part, functools.partial(self._skipped, name))
                else:
                    self._each(name, tables[name], spec.handlers, part)

    def _each(self, name: str, table: Table[Any], handlers: dict[type, Handler], records: list[Recorded]) -> None:
        for rec in records:
            handler = handlers.get(type(rec.event))
            if handler is not None:
                try:
                    handler(table, rec.seq, rec.event)
                except Exception as exc:  # a bug or a contradiction: stale for this event, never stuck
                    self._skipped(name, rec.seq, rec.event, exc)

    def _skipped(self, name: str, seq: int, event: Any, exc: Exception) -> None:
        kind = "" if isinstance(exc, Invalid) else f"{type(exc).__name__}: "
        self.problems.append(f"projection {name!r} skipped event #{seq} ({type(event).__name__}): {kind}{exc}")


class Projections:
    def __init__(self, store: EventStore, specs: Sequence[Projection] = PROJECTIONS, project: str = "") -> None:
        self.store = store
        self.specs = tuple(specs)
        self._views = store.backend.views
        self._lock = threading.RLock()
        self._run: _Run | None = None
        self._subscription: Subscription | None = None
        self.problems: list[str] = []  # handler failures seen by this process (the fold keeps its own)
        self.files = not store.backend.snapshot  # a private copy of a read-only store renders no plan.md
        self.sessions = SessionQuery(self._views, sessions.PROJECTION, project)
        self.tokens = TokenQuery(self._views, tokens.PROJECTION, project)
        self.plan = PlanQuery(self._views, plan.PROJECTION, project)
        self.project = project

    def position(self, name: str) -> int:
        """The seq up to which projection ``name``'s saved rows are current."""
        spec = self._spec(name)
        return self._views.positions([spec.tracking_name]).get(spec.tracking_name) or 0

    def for_project(self, project: str) -> Projections:
        """Render this project's ``plan.md`` files and read its rows by default."""
        self.project = project
        for query in (self.sessions, self.tokens, self.plan):
            query.project = project
        return self

    # -- keeping current --------------------------------------------------------------------------

    def catch_up(self) -> int:
        """Apply every event stored since the last saved positions; return how many were read."""
        with self._lock:
            for _ in range(10):
                try:
                    return self._catch_up_once()
                except Stale:
                    self._run = None
            raise StoreUnavailable(
                "the projections kept moving while being brought up to date",
                "other processes are updating them at the same time",
                "run the command again",
            )

    def follow(self) -> Subscription:
        """Keep the projections (and plan.md files) current after every append in this process."""
        with self._lock:
            self.catch_up()
            self._flush_own()
            if self._subscription is None:
                self._subscription = self.store.subscribe(self._on_batch, batch=True)
            return self._subscription

    def rebuild(self) -> dict[str, Any]:
        """Recompute every projection from event #1 and swap the result in atomically.

        Returns ``{"events": n, "seconds": s, "rows": {projection: count}, "problems": [...]}``: it
        always completes, and ``problems`` says which events could not be applied (and were skipped).
        """
        started = time.perf_counter()
        with self._lock:
            self._run = None
            run, events = self._recompute()
            counts = {s.name: sum(r is not None for r in run.tables[s.name].rows.values()) for s in self.specs}
            problems = list(run.problems)
            for state in run.tables[plan.PROJECTION.name].rows.values():
                if state is not None:
                    problems += state.problems
        return {"events": events, "seconds": time.perf_counter() - started, "rows": counts, "problems": problems}

    def _recompute(self) -> tuple[_Run, int]:
        """Apply every event to empty tables and swap them in.

        The cycle collector is off meanwhile (it is process-wide: other threads go without it for as long):
        the tables only grow (nothing here makes a cycle), and each of its passes would walk every row built
        so far — a fifth to a third of a rebuild's time on bin/bench-store's store of 1,000,000 events."""
        run = _Run(self.specs, {s.name: 0 for s in self.specs}, None)
        position = events = 0
        with _collector_paused():
            while True:
                for last, read, page in self.store.history_pages(position, REBUILD_PAGE):
                    run.apply(page)
                    events += read
                    position = last
                rows = [
                    (s.tracking_name, key, _ENCODE(row))
                    for s in self.specs
                    for key, row in sorted(run.tables[s.name].rows.items())
                    if row is not None
                ]
                try:
                    self._views.replace([s.tracking_name for s in self.specs], rows, position)
                    break
                except Stale:  # someone saved newer positions meanwhile: read on and try again
                    pass
        for s in self.specs:
            if s.on_flush is not None and self.files:
                rows = {k: r for k, r in run.tables[s.name].rows.items() if r is not None}
                s.on_flush(self.store.root, rows, self.project)
        self.problems += run.problems
        return run, events

    def saved(self) -> dict[str, dict[str, bytes]]:
        """Every saved row, by projection name and key, as stored (to compare two states row by row)."""
        return {s.name: dict(self._views.load_all(s.tracking_name)) for s in self.specs}

    def digest(self) -> str:
        """A hash over every saved row: equal digests mean byte-identical projections."""
        h = hashlib.sha256()
        for s in self.specs:
            for key, value in self._views.load_all(s.tracking_name):
                h.update(f"{s.tracking_name}\0{key}\0".encode())
                h.update(value)
                h.update(b"\0")
        return h.hexdigest()

    def _catch_up_once(self) -> int:
        saved = self._views.positions([s.tracking_name for s in self.specs])
        if any(p is None for p in saved.values()):
            if self.store.last_seq() == 0:
                return 0
            return self.rebuild()["events"]
        positions = {s.name: saved[s.tracking_name] or 0 for s in self.specs}
        run = self._current_run(positions)
        applied = 0
        for last, read, page in self.store.history_pages(min(positions.values()), 2000):
            self._apply_and_save(run, page, last)
            applied += read
        return applied

    def _current_run(self, positions: dict[str, int]) -> _Run:
        if self._run is None or self._run.positions != positions:
            self._run = _Run(self.specs, dict(positions), self._load)
        return self._run

    def _on_batch(self, records: list[Recorded]) -> None:
        with self._lock:
            run = self._run
            if run is None or min(run.positions.values()) < records[0].seq - 1:
                self.catch_up()  # a gap: read the missing events from the store
                self._flush_own()
                return
            try:
                self._apply_and_save(run, records)
            except Stale:
                self._run = None
                self.catch_up()
                self._flush_own()

    def _apply_and_save(self, run: _Run, records: Sequence[Recorded], position: int | None = None) -> None:
        """Apply and save up to ``position`` (the last record's seq when None); on any failure forget the
        cached state (it may hold unsaved events)."""
        try:
            seen = len(run.problems)
            run.apply(records)
            self._save(run, records[-1].seq if position is None else position)
            self.problems += run.problems[seen:]
        except BaseException:
            self._run = None
            raise

    def _save(self, run: _Run, position: int) -> None:
        rows = []
        changed: dict[str, dict[str, Any]] = {}
        for s in self.specs:
            table = run.tables[s.name]
            changed[s.name] = {k: table.rows[k] for k in sorted(table.dirty)}
            rows += [(s.tracking_name, k, _ENCODE(r)) for k, r in changed[s.name].items()]
        trackings = [Tracking(s.tracking_name, position) for s in self.specs if run.positions[s.name] < position]
        if not trackings:
            return
        self._views.save(rows, trackings)
        for s in self.specs:
            run.positions[s.name] = max(run.positions[s.name], position)
            run.tables[s.name].dirty.clear()
            if s.on_flush is not None and changed[s.name] and self.files:
                s.on_flush(self.store.root, changed[s.name], self.project)
            if len(run.tables[s.name].rows) > CACHE_LIMIT:
                run.tables[s.name].clear()

    def _flush_own(self) -> None:
        """Render this project's files (``plan.md``) from the saved rows: another process — another
        project on a shared store, or another clone — may have applied this project's events and saved
        the rows without rendering them here. Files already holding the same text are left alone.

        It reads every plan row, so only the run does it (``follow()``, and when another process got to
        its events first); read commands do not pay for it, and ``rebuild()`` renders them anyway."""
        if not self.project or not self.files:
            return
        prefix = f"{self.project}/"
        for s in self.specs:
            if s.on_flush is not None:
                decode = msgspec.json.Decoder(s.row).decode
                rows = {k: decode(v) for k, v in self._views.load_all(s.tracking_name) if k.startswith(prefix)}
                if rows:
                    s.on_flush(self.store.root, rows, self.project)

    def _load(self, name: str, key: str) -> bytes | None:
        value, position = self._views.load(self._spec(name).tracking_name, key)
        run = self._run
        if run is not None and position != run.positions[name]:
            raise Stale  # another process saved newer rows: start over from its position
        return value

    def _spec(self, name: str) -> Projection:
        return next(s for s in self.specs if s.name == name)


class Query:
    """Reads one projection's saved rows (call ``catch_up()`` first for the latest)."""

    def __init__(self, views: Any, spec: Projection, project: str = "") -> None:
        self._views = views
        self._spec = spec
        self._decode: Callable[[bytes], Any] = msgspec.json.Decoder(spec.row).decode
        self.project = project

    def row(self, key: str) -> Any:
        value, _ = self._views.load(self._spec.tracking_name, key)
        return self._decode(value) if value is not None else None

    def rows(self) -> list[Any]:
        return [self._decode(v) for _, v in self._views.load_all(self._spec.tracking_name)]

    def rows_by_key(self, prefix: str) -> dict[str, Any]:
        """The rows whose key starts with ``prefix``, by key: one query however many there are."""
        return {k: self._decode(v) for k, v in self._views.load_prefix(self._spec.tracking_name, prefix)}

    def _project(self, project: str | None) -> str:
        return self.project if project is None else project


class SessionQuery(Query):
    def get(self, session_id: str, project: str | None = None) -> SessionView | None:
        return self.row(f"{self._project(project)}/{session_id}")

    def all(self, include_deleted: bool = False, *, every_project: bool = False) -> list[SessionView]:
        """This project's sessions in the order they started (deleted ones only when asked)."""
        rows: list[SessionView] = self.rows()
        return sorted(
            (r for r in rows if (include_deleted or not r.deleted) and (every_project or r.project == self.project)),
            key=lambda r: r.first_seq,
        )

    def latest(self, module: str = "") -> SessionView | None:
        found = [s for s in self.all() if not module or s.module == module]
        return found[-1] if found else None


class TokenQuery(Query):
    def invocation(self, invocation_id: str, project: str | None = None) -> TokenTotals | None:
        return self.row(f"invocation:{self._project(project)}/{invocation_id}")

    def session(self, session_id: str, project: str | None = None) -> TokenTotals | None:
        return self.row(f"session:{self._project(project)}/{session_id}")

    def module(self, module: str, project: str | None = None) -> TokenTotals | None:
        return self.row(f"module:{self._project(project)}/{module}")

    def tasks(self, module: str, project: str | None = None) -> dict[str, TokenTotals]:
        """The module's task rows, by task id (what ``budget.*_per_task`` count)."""
        prefix = f"task:{self._project(project)}/{module}/"
        return {key.removeprefix(prefix): row for key, row in self.rows_by_key(prefix).items()}

    def sessions(self, *, every_project: bool = False) -> dict[tuple[str, str], TokenTotals]:
        """Every session's totals (this project's unless ``every_project``), by ``(project, session id)``."""
        prefix = "session:" if every_project else f"session:{self.project}/"
        found = {}
        for key, row in self.rows_by_key(prefix).items():
            project, _, session_id = key.removeprefix("session:").partition("/")
            found[(project, session_id)] = row
        return found


class PlanQuery(Query):
    def get(self, module: str, project: str | None = None) -> ModuleState | None:
        return self.row(plan.key(self._project(project), module))

    def all(self, *, every_project: bool = False) -> list[ModuleState]:
        """The modules with a history (this project's unless ``every_project``), by name."""
        rows: list[ModuleState] = self.rows()
        return sorted(
            (r for r in rows if every_project or r.project == self.project), key=lambda r: (r.project, r.module)
        )

    def markdown(self, module: str, project: str | None = None) -> str:
        """What ``.lopen/modules/<module>/plan.md`` holds."""
        return plan.render(self.get(module, project) or ModuleState(project=self._project(project), module=module))
