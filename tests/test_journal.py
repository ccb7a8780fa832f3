"""The journal (``events.journal.Journal``): how a run writes its module's history with the one fold's
validation — session ids per module, stamping, refusing contradictions before they are stored,
optimistic concurrency with other writers (threads and processes), read-your-writes, and closing.

A contract run on SQLite and on the real PostgreSQL server (backends from tests/test_events_store.py).
"""

from __future__ import annotations

import contextlib
import textwrap
import threading
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from test_events_store import (
    AUTH,
    LEGACY_CONTRADICTION,
    PROJECT,
    BackendFixtures,
    Connect,
    PostgresBackend,
    SQLiteBackend,
    start_together,
    write_legacy,
)

from events import catalogue as ev
from events.fold import ModuleState
from events.journal import Contradiction, Journal, JournalClosed
from events.recorded import module_stream
from events.store import EventStore

DAY = date(2026, 11, 26)


def plan(*numbers: int, component: str = "core") -> list[ev.Event]:
    return [
        ev.ComponentsRecorded(components=(ev.ComponentSpec(name=component),)),
        ev.TasksRecorded(
            component=component, tasks=tuple(ev.TaskSpec(id=f"{component}/{n}", name=f"Task {n}") for n in numbers)
        ),
    ]


def start(task: str) -> ev.TaskStatusChanged:
    return ev.TaskStatusChanged(task_id=task, from_state="pending", to_state="in-progress")


def stored_fold(store: EventStore, stream: str = AUTH) -> ModuleState:
    """The module's history as stored, folded afresh (problems = events the fold would have refused)."""
    state = ModuleState(project=PROJECT, module="auth")
    for rec in store.read_stream(stream):
        state.apply(rec.event, rec.seq)
        state.version = rec.version
    return state


class JournalContract(BackendFixtures):
    def test_session_ids_count_up_per_module_and_day_and_are_never_reused(
        self, store: EventStore, connect: Connect
    ) -> None:
        journal = Journal(store, PROJECT, "auth")
        ids = [journal.open_session(ev.SessionStarted(lopen_version="1"), DAY) for _ in range(3)]
        assert ids == ["auth-20261126-1", "auth-20261126-2", "auth-20261126-3"]
        assert journal.session_id == "auth-20261126-3"
        assert Journal(store, PROJECT, "billing").open_session(ev.SessionStarted(), DAY) == "billing-20261126-1"
        assert journal.open_session(ev.SessionStarted(), date(2026, 11, 27)) == "auth-20261127-1"
        journal.record(ev.SessionDeleted(session_id="auth-20261126-3"))
        again = Journal(connect(), PROJECT, "auth")  # another run, later: reads the history first
        assert again.open_session(ev.SessionStarted(), DAY) == "auth-20261126-4"
        assert again.read(lambda s: sorted(s.sessions)) == [
            "auth-20261126-1",
            "auth-20261126-2",
            "auth-20261126-3",
            "auth-20261126-4",
            "auth-20261127-1",
        ]

    def test_record_stamps_the_session_and_reads_its_own_writes(self, store: EventStore) -> None:
        journal = Journal(store, PROJECT, "auth")
        journal.record(ev.SpecApproved(spec_hash="h"))  # outside a session: no session id
        sid = journal.open_session(ev.SessionStarted(), DAY)
        journal.record(*plan(1, 2), start("core/1"), ev.StepEntered(phase="x", step=1, session_id="other-20261126-9"))
        assert journal.read(lambda s: s.tasks["core/1"].state) == "in-progress"  # no re-read needed
        assert journal.version == store.version(AUTH) == 6
        events = [r.event for r in store.read_stream(AUTH)]
        assert [e.session_id for e in events] == ["", sid, sid, sid, sid, "other-20261126-9"]
        assert all((e.project, e.module) == (PROJECT, "auth") for e in events)
        snapshot = journal.snapshot()
        snapshot.tasks["core/1"].state = "failed"  # an independent copy
        assert journal.read(lambda s: s.tasks["core/1"].state) == "in-progress"
        assert journal.snapshot() == stored_fold(store)

    def test_a_contradiction_is_refused_and_nothing_of_its_batch_is_stored(self, store: EventStore) -> None:
        journal = Journal(store, PROJECT, "auth")
        journal.open_session(ev.SessionStarted(), DAY)
        journal.record(*plan(1))
        before, folded = store.version(AUTH), journal.snapshot()
        bad = ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete")
        with pytest.raises(Contradiction) as caught:
            journal.record(ev.StepEntered(phase="building", step=6), *plan(1, 2), bad)
        assert caught.value.event.task_id == "core/1"  # type: ignore[attr-defined]
        assert caught.value.problem == "task core/1 is 'pending', but the event moves it from 'in-progress'"
        assert "TaskStatusChanged refused" in caught.value.what and "not stored" in caught.value.why
        assert store.version(AUTH) == before and journal.snapshot() == folded
        for refused in (
            ev.ComponentSelected(component="nope"),
            ev.ComponentsRecorded(
                components=(
                    ev.ComponentSpec(name="a", depends_on=("b",)),
                    ev.ComponentSpec(name="b", depends_on=("a",)),
                )
            ),
            ev.CommitRecorded(sha="abc", task_id="core/1"),
            ev.SessionStarted(session_id=journal.session_id),
        ):
            with pytest.raises(Contradiction):
                journal.record(refused)
        assert store.version(AUTH) == before
        # a batch is checked in order: a task recorded earlier in it can be started later in it
        journal.record(*plan(1, 2), start("core/2"))
        assert journal.read(lambda s: s.tasks["core/2"].state) == "in-progress"
        assert stored_fold(store).problems == []

    def test_other_writers_events_are_folded_in_before_deciding(self, connect: Connect) -> None:
        mine, theirs = Journal(connect(), PROJECT, "auth"), Journal(connect(), PROJECT, "auth")
        mine.record(*plan(1, 2))
        theirs.refresh()
        theirs.record(start("core/1"))
        mine.record(ev.ProgressReported(progress="still here"))  # retried after folding theirs in
        assert mine.read(lambda s: s.tasks["core/1"].state) == "in-progress"
        with pytest.raises(Contradiction, match="is 'in-progress', but the event moves it from 'pending'"):
            mine.record(start("core/1"))
        theirs.record(ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="failed"))
        fresh = mine.refresh()
        assert [type(r.event).__name__ for r in fresh] == ["TaskStatusChanged"] and fresh[0].version == 5
        assert mine.snapshot() == theirs.snapshot() == stored_fold(mine.store)

    def test_a_stale_journal_reads_the_history_before_refusing(self, connect: Connect) -> None:
        """Two workers on one module: what the other recorded counts before an event is called a contradiction."""
        mine, theirs = Journal(connect(), PROJECT, "auth"), Journal(connect(), PROJECT, "auth")
        theirs.record(
            ev.ComponentsRecorded(
                components=(
                    ev.ComponentSpec(name="Store", status="done"),
                    ev.ComponentSpec(name="Core", depends_on=("Store",)),
                )
            ),
            *plan(1)[1:],
        )
        mine.record(ev.ComponentSelected(component="Core"), start("core/1"))  # mine had not seen the plan yet
        assert mine.read(lambda s: (s.selected, s.tasks["core/1"].state)) == ("core", "in-progress")
        with pytest.raises(Contradiction, match="no component 'nope'"):  # a real one is still refused
            mine.record(ev.ComponentSelected(component="nope"))
        assert stored_fold(mine.store).problems == []

    def test_a_closed_journal_records_nothing(self, store: EventStore) -> None:
        journal = Journal(store, PROJECT, "auth")
        sid = journal.open_session(ev.SessionStarted(), DAY)
        journal.record(ev.SessionPaused(reason="ctrl-c"))
        journal.close()
        assert journal.closed
        with pytest.raises(JournalClosed) as caught:
            journal.record(ev.OracleVerdictRecorded(scope="task", target="core/1", passed=True))
        assert f"session {sid} has ended" in caught.value.what
        assert store.version(AUTH) == 2
        journal.resume_session(sid, "lopen run")
        assert not journal.closed and journal.read(lambda s: s.sessions[sid].status) == "running"
        journal.close()
        assert journal.open_session(ev.SessionStarted(), DAY) == "auth-20261126-2" and not journal.closed
        assert [type(r.event).__name__ for r in store.read_stream(AUTH)][2:] == ["SessionResumed", "SessionStarted"]

    def test_racing_threads_never_both_win_a_transition(self, connect: Connect) -> None:
        """Two workers (each with its own connections) start the same tasks at the same moment: each task
        is started exactly once; the loser is told why, and nothing contradicting is stored."""
        tasks = 12
        Journal(connect(), PROJECT, "auth").record(*plan(*range(1, tasks + 1)))
        journals = [Journal(connect(), PROJECT, "auth") for _ in range(2)]
        barrier = threading.Barrier(2)
        results: list[list[str]] = [[], []]
        errors: list[BaseException] = []

        def work(me: int) -> None:
            try:
                for n in range(1, tasks + 1):
                    barrier.wait(timeout=60)
                    try:
                        journals[me].record(start(f"core/{n}"), ev.ProgressReported(progress=f"{me} took {n}"))
                        results[me].append("won")
                    except Contradiction as exc:
                        assert "is 'in-progress', but the event moves it from 'pending'" in exc.problem
                        results[me].append("lost")
            except BaseException as exc:
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors
        assert all(sorted(pair) == ["lost", "won"] for pair in zip(*results, strict=True)), results
        store = connect()
        starts = [r.event.task_id for r in store.read_stream(AUTH) if isinstance(r.event, ev.TaskStatusChanged)]
        assert sorted(starts) == sorted(f"core/{n}" for n in range(1, tasks + 1))
        assert stored_fold(store).problems == []

    def test_racing_processes_never_both_win_a_transition(self, store: EventStore, root: Path, url: str) -> None:
        tasks = 20
        Journal(store, PROJECT, "auth").record(*plan(*range(1, tasks + 1)))
        script = textwrap.dedent(
            """
            import sys
            from pathlib import Path
            from events import catalogue as ev
            from events.journal import Contradiction, Journal
            from events.store import EventStore
            journal = Journal(EventStore.open(Path(sys.argv[1]), sys.argv[2]), "proj", "auth")
            print("ready", flush=True)
            sys.stdin.readline()
            for n in range(1, int(sys.argv[3]) + 1):
                try:
                    journal.record(ev.TaskStatusChanged(task_id=f"core/{n}", from_state="pending",
                                                        to_state="in-progress"))
                    print("won", n)
                except Contradiction:
                    print("lost", n)
            """
        )
        outputs = start_together(script, [str(root), url, str(tasks)], [str(root), url, str(tasks)])
        lines = [line.split() for out in outputs for line in out.splitlines()]
        assert len(lines) == 2 * tasks
        assert sorted(int(n) for word, n in lines if word == "won") == list(range(1, tasks + 1))
        assert stored_fold(store).problems == []
        assert [t.state for t in stored_fold(store).ordered_tasks()] == ["in-progress"] * tasks

    def test_session_ids_are_unique_under_racing_threads(self, connect: Connect) -> None:
        journals = [Journal(connect(), PROJECT, "auth") for _ in range(2)]
        barrier = threading.Barrier(2)
        got: list[list[str]] = [[], []]
        errors: list[BaseException] = []

        def reserve(i: int) -> None:
            try:
                barrier.wait(timeout=60)
                for _ in range(15):
                    got[i].append(journals[i].open_session(ev.SessionStarted(lopen_version=str(i)), DAY))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=reserve, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors
        ids = [sid for mine in got for sid in mine]
        assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(1, 31))
        by_id = {r.event.session_id: r.event.lopen_version for r in connect().read_stream(AUTH)}
        assert by_id == {sid: str(i) for i, mine in enumerate(got) for sid in mine}  # each started by its allocator
        assert journals[1].open_session(ev.SessionStarted(), DAY) == "auth-20261126-31"

    def test_session_ids_are_unique_across_processes(self, store: EventStore, root: Path, url: str) -> None:
        script = textwrap.dedent(
            """
            import sys, datetime
            from pathlib import Path
            from events import catalogue as ev
            from events.journal import Journal
            from events.store import EventStore
            journal = Journal(EventStore.open(Path(sys.argv[1]), sys.argv[2]), "proj", "auth")
            print("ready", flush=True)
            sys.stdin.readline()
            day = datetime.date(2026, 11, 26)
            print(" ".join(journal.open_session(ev.SessionStarted(), day) for _ in range(15)))
            """
        )
        outputs = start_together(script, *([str(root), url] for _ in range(3)))
        ids = [sid for out in outputs for sid in out.split()]
        assert len(ids) == 45 and len(set(ids)) == 45
        assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(1, 46))
        assert stored_fold(store).problems == []

    def test_a_journal_continues_a_history_that_holds_a_contradiction(self, store: EventStore) -> None:
        """A store written by an older Lopen (issue 15's) neither stops the run nor loses the done work."""
        write_legacy(store)
        store.migrate_legacy(PROJECT)
        journal = Journal(store, PROJECT, "auth")
        state = journal.snapshot()
        assert [t.state for t in state.ordered_tasks()] == ["complete", "complete"]
        assert len(state.problems) == 1 and LEGACY_CONTRADICTION in state.problems[0]
        assert state.unfinished_session() == "auth-20261121-1"
        sid = journal.open_session(ev.SessionStarted(), DAY)
        journal.record(ev.OracleVerdictRecorded(scope="component", target="core", passed=True))
        journal.record(ev.OracleVerdictRecorded(scope="module", target="auth", passed=True))
        assert sid == "auth-20261126-1" and journal.read(lambda s: s.complete)
        assert module_stream(PROJECT, "auth") == journal.stream


class TestSQLiteJournal(SQLiteBackend, JournalContract):
    pass


class TestPostgresJournal(PostgresBackend, JournalContract):
    pass


# -- the integrity check per step (issue 14: its cost does not grow with the module) -----------------


def _delete_versions(root: Path, stream: str, *versions: int) -> None:
    import sqlite3

    with sqlite3.connect(root / ".lopen" / "store.sqlite") as db:
        db.executemany(
            "DELETE FROM stored_events WHERE originator_id=? AND originator_version=?",
            [(stream, v) for v in versions],
        )


@contextlib.contextmanager
def _checked(root: Path, events: int) -> Iterator[Journal]:
    """A journal of ``events`` events, checked once (a whole count), then one more event recorded."""
    (root / ".lopen").mkdir()
    with EventStore.open(root) as store:
        journal = Journal(store, PROJECT, "auth")
        for n in range(events):
            journal.record(ev.ProgressReported(progress=f"step {n}"))
        journal.check_intact()  # the first check counts everything
        journal.record(ev.ProgressReported(progress="more"))
        yield journal


def test_a_step_s_integrity_check_reads_what_was_appended_since_and_the_full_one_finds_the_rest(
    tmp_path: Path,
) -> None:
    from events.errors import StoreTampered
    from events.journal import FULL_CHECK

    with _checked(tmp_path, 20) as journal:
        _delete_versions(tmp_path, journal.stream, 10)  # a row in the middle, below what was checked
        journal.check_intact()  # the step's check reads only the new versions: it cannot see it…
        with pytest.raises(StoreTampered, match="are missing"):
            for _ in range(FULL_CHECK):  # …the next whole count does
                journal.check_intact()


@pytest.mark.parametrize("versions", [(1, 2, 3), (21,)])
def test_the_first_events_or_the_last_checked_one_deleted_are_found_at_the_next_step(
    tmp_path: Path, versions: tuple[int, ...]
) -> None:
    from events.errors import StoreTampered

    with _checked(tmp_path, 21) as journal:
        _delete_versions(tmp_path, journal.stream, *versions)
        with pytest.raises(StoreTampered, match="are missing"):
            journal.check_intact()
