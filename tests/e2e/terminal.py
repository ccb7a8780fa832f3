"""A real terminal for end-to-end tests: tmux, one private server per terminal.

Every terminal gets its own tmux server (``-L``, a socket of its own where tmux keeps them). With one
shared server, the last session's end shuts the server down, and a test opening its session at that
moment is told "server exited unexpectedly"; a private server has no neighbour to race.
``-f /dev/null`` keeps the user's tmux configuration out of the test.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

_numbers = itertools.count()


class Tmux:
    """A tmux server of its own: ``tmux(...)`` runs a tmux command against it, ``kill()`` ends it."""

    def __init__(self, label: str) -> None:
        self.name = f"lopen-{label}-{os.getpid()}-{next(_numbers)}"
        # where tmux puts it: a short path whatever $TMPDIR is (a socket's path is limited to 107 bytes)
        self.socket = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / self.name

    def __call__(
        self, *args: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        command = ["tmux", "-L", self.name, "-f", os.devnull, *args]
        return subprocess.run(command, capture_output=True, text=True, check=check, env=env)

    def kill(self) -> None:
        """End the server and every session in it; nothing else's sessions are touched."""
        self("kill-server", check=False)
        self.socket.unlink(missing_ok=True)
