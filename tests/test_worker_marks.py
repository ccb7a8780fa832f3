"""Worker marks (events.locks): whether another process of this checkout still lives, asked as often as
it holds claims — a real process killed for real, its mark read with the real ``fcntl`` lock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from events.locks import WorkerMark, prune_dead_marks, worker_alive

HOLD = """
import sys, time
from pathlib import Path
from events.locks import WorkerMark
with WorkerMark(Path(sys.argv[1]), sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)  # held until killed
"""


def hold(root: Path, worker: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root), worker],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_a_killed_process_is_dead_for_every_claim_it_held(tmp_path: Path) -> None:
    process = hold(tmp_path, "host:77")
    assert worker_alive(tmp_path, "host:77/1") is True
    process.kill()
    process.wait()
    # four lanes' claims ask in turn: each hears "gone" (the first answer used to delete the mark, so the
    # others waited out their lease)
    assert [worker_alive(tmp_path, f"host:77/{n}") for n in (1, 2, 3, 4)] == [False] * 4
    assert worker_alive(tmp_path, "host:78") is None  # no mark: another clone's, or an older Lopen's


def test_old_marks_of_dead_processes_are_pruned_and_live_or_recent_ones_kept(tmp_path: Path) -> None:
    live = hold(tmp_path, "host:1")
    dead_old, dead_new = hold(tmp_path, "host:2"), hold(tmp_path, "host:3")
    for process in (dead_old, dead_new):
        process.kill()
        process.wait()
    marks = tmp_path / ".lopen" / "locks" / "workers"
    hour_ago = time.time() - 7200
    for name in ("host_1.lock", "host_2.lock"):
        os.utime(marks / name, (hour_ago, hour_ago))
    assert prune_dead_marks(tmp_path) == 1
    assert sorted(p.name for p in marks.iterdir()) == ["host_1.lock", "host_3.lock"]
    assert worker_alive(tmp_path, "host:1") is True and worker_alive(tmp_path, "host:3") is False
    with WorkerMark(tmp_path, "host:4"):  # a new worker prunes as it starts
        assert worker_alive(tmp_path, "host:4") is True
    live.kill()
    live.wait()
