"""Crashes and races with real processes: SIGKILL in the middle of a burst of appends, and two
processes appending to one session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import date
from itertools import groupby
from pathlib import Path

from events import catalogue as ev
from events.recorded import session_stream
from events.store import EventStore

DAY = date(2026, 11, 26)

BURST = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from events import catalogue as ev
    from events.recorded import session_stream
    from events.store import EventStore

    store = EventStore.open(Path(sys.argv[1]))
    store.projections.follow()  # projection rows and plan.md are being written too when the kill lands
    stream = session_stream("auth-20261126-1")
    version = store.version(stream)
    store.append(stream, [ev.ComponentsRecorded(components=(ev.ComponentSpec(name="c"),)),
                          ev.TasksRecorded(component="c", tasks=tuple(ev.TaskSpec(id=f"c/{i}", name="t")
                                                                      for i in range(1, 3001)))])
    batch = 0
    while True:
        batch += 1
        events = [ev.InvocationStarted(invocation_id=f"b{batch}")]
        events += [ev.TokensUsed(invocation_id=f"b{batch}", input=i, output=1, premium=1.0) for i in range(8)]
        events += [ev.TaskStatusChanged(task_id=f"c/{batch}", from_state="pending", to_state="in-progress")]
        store.append(stream, events)
        if batch == 20:
            print("going", flush=True)
    """
)


def test_sigkill_mid_burst_leaves_whole_events_and_projections_catch_up(tmp_path: Path) -> None:
    with EventStore.open(tmp_path) as store:
        assert store.new_session_id("auth", DAY) == "auth-20261126-1"
    proc = subprocess.Popen([sys.executable, "-c", BURST, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "going\n"
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    store = EventStore.open(tmp_path)
    records = list(store.read_all())
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert [r.version for r in records] == list(range(1, len(records) + 1))
    burst = records[3:]  # after SessionStarted, ComponentsRecorded, TasksRecorded
    assert len(burst) >= 20 * 10 and len(burst) % 10 == 0  # only whole batches: each append is atomic
    for start in range(0, len(burst), 10):
        kinds = [type(r.event).__name__ for r in burst[start : start + 10]]
        assert kinds == ["InvocationStarted", *["TokensUsed"] * 8, "TaskStatusChanged"]
    batches = len(burst) // 10

    views = store.projections
    views.catch_up()
    assert views.tokens.session("auth-20261126-1").premium == 8.0 * batches
    assert views.tokens.session("auth-20261126-1").invocations == batches
    digest = views.digest()
    views.rebuild()
    assert views.digest() == digest
    store.close()


RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from events import catalogue as ev
    from events.errors import ConcurrencyConflict
    from events.recorded import session_stream
    from events.store import EventStore

    root, name, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    store = EventStore.open(root)
    stream = session_stream("auth-20261126-1")
    version = store.version(stream)
    while not (root / "go").exists():
        time.sleep(0.001)
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


def _race(tmp_path: Path, mode: str) -> tuple[list[str], list[str]]:
    with EventStore.open(tmp_path) as store:
        store.new_session_id("auth", DAY)
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, str(tmp_path), name, mode], stdout=subprocess.PIPE, text=True)
        for name in ("left", "right")
    ]
    time.sleep(0.8)  # both have opened the store and read the version
    (tmp_path / "go").touch()
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    with EventStore.open(tmp_path) as store:
        progress = [r.event.progress for r in list(store.read_stream(session_stream("auth-20261126-1")))[1:]]
    return outputs, progress


def test_two_processes_with_the_same_expected_version_one_conflict_no_interleaving(tmp_path: Path) -> None:
    outputs, progress = _race(tmp_path, "expected")
    assert sorted(o.split()[0] for o in outputs) == ["conflict", "ok"], outputs
    assert "conflict 1 51" in outputs
    winner = progress[0].split()[0]
    assert progress == [f"{winner} {i}" for i in range(50)]


def test_two_processes_appending_at_the_end_never_interleave_a_batch(tmp_path: Path) -> None:
    outputs, progress = _race(tmp_path, "end")
    assert outputs == ["ok", "ok"]
    assert len(progress) == 2 * 40 * 5
    runs = [(key, len(list(group))) for key, group in groupby(progress)]
    assert all(length % 5 == 0 for _, length in runs)  # each batch of five is contiguous
    assert sorted({p.split()[0] for p in progress}) == ["left", "right"]


def test_module_lock_in_another_process_names_its_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from events.locks import module_lock\n"
            "with module_lock(Path(sys.argv[1]), 'auth'):\n    print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        from events.errors import ModuleLocked
        from events.locks import module_lock

        try:
            with module_lock(tmp_path, "auth"):
                raise AssertionError("the lock should be held by the other process")
        except ModuleLocked as exc:
            assert exc.pid == holder.pid and f"pid {holder.pid}" in exc.render()
    finally:
        holder.kill()
        holder.wait()
    with module_lock(tmp_path, "auth"):  # released by the kernel when its holder died
        pass


def test_store_keeps_working_after_a_kill_with_events_in_the_wal(tmp_path: Path) -> None:
    """A killed writer leaves a WAL; the next open recovers it (no checkpoint needed first)."""
    script = (
        "import sys, os; from pathlib import Path; from events import catalogue as ev;"
        "from events.store import EventStore; s = EventStore.open(Path(sys.argv[1]));"
        "s.append('module:auth', [ev.SpecApproved(spec_hash='h')]); os.kill(os.getpid(), 9)"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], timeout=60)
    assert (tmp_path / ".lopen" / "store.sqlite-wal").exists()
    with EventStore.open(tmp_path) as store:
        (rec,) = store.read_all()
        assert isinstance(rec.event, ev.SpecApproved) and rec.event.spec_hash == "h"
