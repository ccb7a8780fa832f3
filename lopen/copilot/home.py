"""The Copilot CLI's home for a BYOK run: ``.lopen/copilot/run-<pid>``, this run's alone.

The CLI keeps its own record of every conversation in its home (``session-store.db``, ``session-state/``)
— unredacted, whatever Lopen's store redacts. Lopen's record is the one copy: a run's gateway removes its
home when it closes (``GatewayConfig.forget_home``), and the next run removes what a killed run left —
the homes of processes that are gone, and the shared home older Lopens used.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

LEGACY = ("session-store.db", "session-store.db-wal", "session-store.db-shm", "session-state")


def private_home(root: Path, pid: int | None = None) -> Path:
    """This process's CLI home under the project's ``.lopen/copilot``."""
    return root / ".lopen" / "copilot" / f"run-{os.getpid() if pid is None else pid}"


def forget_stale_homes(root: Path) -> list[str]:
    """Remove the CLI homes of runs whose process is gone, and the older shared home's transcripts;
    return what was removed (names under ``.lopen/copilot``)."""
    base = root / ".lopen" / "copilot"
    removed: list[str] = []
    if not base.is_dir():
        return removed
    for entry in base.iterdir():
        if entry.name.startswith("run-"):
            pid = entry.name.removeprefix("run-")
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
        elif entry.name in LEGACY:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry.name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's: not ours to judge
    return True
