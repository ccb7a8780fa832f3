"""The CLI's home for a BYOK run (lopen.copilot.home): the run's alone; what killed runs left is removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lopen.copilot.home import forget_stale_homes, private_home


def test_the_homes_of_gone_runs_and_the_old_shared_transcripts_are_removed_a_live_runs_kept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    base = tmp_path / ".lopen" / "copilot"
    for home in (private_home(tmp_path), private_home(tmp_path, dead_pid)):
        (home / "session-state" / "s1").mkdir(parents=True)
        (home / "session-store.db").write_text("the conversation")
    (base / "session-store.db").write_text("an older Lopen's shared store")
    (base / "session-state" / "s0").mkdir(parents=True)
    (base / "config.json").write_text("{}")
    removed = forget_stale_homes(tmp_path)
    assert sorted(removed) == sorted([f"run-{dead_pid}", "session-store.db", "session-state"])
    assert sorted(p.name for p in base.iterdir()) == ["config.json", f"run-{os.getpid()}"]
