"""Crashes and races with real processes: SIGKILL in the middle of a burst of appends (with the
projections being written too), two processes appending to one module history, the module lock of
a process that dies, and a kill with events still in SQLite's WAL.

``ProcessContract`` runs on SQLite and on the real PostgreSQL server (backends from
tests/test_events_store.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import date
from itertools import groupby
from pathlib import Path

from test_events_store import AUTH, PROJECT, BackendFixtures, PostgresBackend, SQLiteBackend, start_together

from events import catalogue as ev
from events.errors import ModuleLocked
from events.journal import Journal
from events.locks import module_lock
from events.store import EventStore

SID = "auth-20261126-1"

BURST = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from events import catalogue as ev
    from events.journal import Journal
    from events.store import EventStore

    store = EventStore.open(Path(sys.argv[1]), sys.argv[2])
    store.projections.for_project("proj").follow()  # rows and plan.md are being written too when the kill lands
    journal = Journal(store, "proj", "auth", "auth-20261126-1")
    journal.record(ev.ComponentsRecorded(components=(ev.ComponentSpec(name="c"),)),
                   ev.TasksRecorded(component="c", tasks=tuple(ev.TaskSpec(id=f"c/{i}", name="t")
                                                               for i in range(1, 3001))))
    batch = 0
    while True:
        batch += 1
        events = [ev.InvocationStarted(invocation_id=f"b{batch}")]
        events += [ev.TokensUsed(invocation_id=f"b{batch}", input=i, output=1, premium=1.0, call_id=f"{batch}.{i}")
                   for i in range(8)]
        events += [ev.TaskStatusChanged(task_id=f"c/{batch}", from_state="pending", to_state="in-progress")]
        journal.record(*events)
        if batch == 20:
            print("going", flush=True)
    """
)

RACER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from events import catalogue as ev
    from events.errors import ConcurrencyConflict
    from events.recorded import module_stream
    from events.store import EventStore

    root, url, name, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    store = EventStore.open(root, url)
    stream = module_stream("proj", "auth")
    version = store.version(stream)
    print("ready", flush=True)
    sys.stdin.readline()
    if mode == "expected":
        try:
            batch = [ev.ProgressReported(progress=f"{name} {i}") for i in range(50)]
            store.append(stream, batch, expected_version=version)
            print("ok")
        except ConcurrencyConflict as exc:
            print("conflict", exc.expected, exc.actual)
    else:
        for n in range(40):
            store.append(stream, [ev.ProgressReported(progress=f"{name} {n}") for i in range(5)])
        print("ok")
    """
)


class ProcessContract(BackendFixtures):
    def test_sigkill_mid_burst_leaves_whole_batches_and_projections_catch_up(
        self, store: EventStore, root: Path, url: str
    ) -> None:
        assert Journal(store, PROJECT, "auth").open_session(ev.SessionStarted(), date(2026, 11, 26)) == SID
        store.close()
        proc = subprocess.Popen([sys.executable, "-c", BURST, str(root), url], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "going\n"
        finally:
            os.kill(proc.pid, signal.SIGKILL)  # at once: the child is somewhere in its next appends
            proc.wait(timeout=30)

        with EventStore.open(root, url) as store:
            records = list(store.read_stream(AUTH))
            assert [r.version for r in records] == list(range(1, len(records) + 1))
            seqs = [r.seq for r in store.read_all()]
            assert seqs == sorted(set(seqs))
            burst = records[3:]  # after SessionStarted, ComponentsRecorded, TasksRecorded
            assert len(burst) >= 20 * 10 and len(burst) % 10 == 0  # only whole batches: each append is atomic
            for start in range(0, len(burst), 10):
                kinds = [type(r.event).__name__ for r in burst[start : start + 10]]
                assert kinds == ["InvocationStarted", *["TokensUsed"] * 8, "TaskStatusChanged"]
            batches = len(burst) // 10

            views = store.projections.for_project(PROJECT)
            views.catch_up()
            totals = views.tokens.session(SID)
            assert totals is not None
            assert (totals.premium, totals.invocations, totals.calls) == (8.0 * batches, batches, 8 * batches)
            plan = views.plan.get("auth")
            assert plan is not None and plan.problems == []
            assert sum(t.state == "in-progress" for t in plan.ordered_tasks()) == batches
            digest = views.digest()
            views.rebuild()
            assert views.digest() == digest
            resumed = Journal(store, PROJECT, "auth")  # the next run continues where the history ends
            assert resumed.read(lambda s: s.tasks[f"c/{batches + 1}"].state) == "pending"
            assert resumed.snapshot() == plan

    def test_two_processes_with_the_same_expected_version_one_conflict_no_interleaving(
        self, store: EventStore, root: Path, url: str
    ) -> None:
        store.append(AUTH, [ev.SessionStarted(session_id=SID)])
        outputs = start_together(RACER, [str(root), url, "left", "expected"], [str(root), url, "right", "expected"])
        assert sorted(o.split()[0] for o in outputs) == ["conflict", "ok"], outputs
        assert "conflict 1 51" in outputs
        progress = [r.event.progress for r in list(store.read_stream(AUTH))[1:]]
        winner = progress[0].split()[0]
        assert progress == [f"{winner} {i}" for i in range(50)]

    def test_two_processes_appending_at_the_end_never_interleave_a_batch(
        self, store: EventStore, root: Path, url: str
    ) -> None:
        store.append(AUTH, [ev.SessionStarted(session_id=SID)])
        outputs = start_together(RACER, [str(root), url, "left", "end"], [str(root), url, "right", "end"])
        assert outputs == ["ok", "ok"]
        progress = [r.event.progress for r in list(store.read_stream(AUTH))[1:]]
        assert len(progress) == 2 * 40 * 5
        runs = [(key, len(list(group))) for key, group in groupby(progress)]
        assert all(length % 5 == 0 for _, length in runs)  # each batch of five is contiguous
        assert sorted({p.split()[0] for p in progress}) == ["left", "right"]


class TestSQLiteProcesses(SQLiteBackend, ProcessContract):
    pass


class TestPostgresProcesses(PostgresBackend, ProcessContract):
    pass


def test_module_lock_in_another_process_names_its_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from events.locks import module_lock\n"
            "with module_lock(Path(sys.argv[1]), 'auth'):\n    print('held', flush=True); sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        try:
            with module_lock(tmp_path, "auth"):
                raise AssertionError("the lock should be held by the other process")
        except ModuleLocked as exc:
            assert exc.pid == holder.pid and f"pid {holder.pid}" in exc.render()
    finally:
        holder.kill()  # however its holder dies, the kernel releases the lock
        holder.wait()
    with module_lock(tmp_path, "auth"):
        pass


def test_store_keeps_working_after_a_kill_with_events_in_the_wal(tmp_path: Path) -> None:
    """A killed writer leaves a WAL; the next open recovers it (no checkpoint needed first)."""
    script = (
        "import sys, os; from pathlib import Path; from events import catalogue as ev;"
        "from events.recorded import module_stream; from events.store import EventStore;"
        "s = EventStore.open(Path(sys.argv[1]));"
        "s.append(module_stream('proj', 'auth'), [ev.SpecApproved(spec_hash='h')]); os.kill(os.getpid(), 9)"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], timeout=60)
    assert (tmp_path / ".lopen" / "store.sqlite-wal").exists()
    with EventStore.open(tmp_path) as store:
        (rec,) = store.read_all()
        assert isinstance(rec.event, ev.SpecApproved) and rec.event.spec_hash == "h"
        assert (rec.stream_id, rec.event.project) == (AUTH, PROJECT)
