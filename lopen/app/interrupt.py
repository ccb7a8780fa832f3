"""Ctrl+C and SIGTERM during a run (X4): stop cleanly, lose nothing, exit 130 (143) within seconds.

The first signal sets the run's ``Interrupt`` and aborts what is in flight — the gateway's model
sessions and Lopen's own child processes (verify commands, git) — so the Foreman records
``SessionPaused(reason="interrupted")`` and returns; the next run resumes. A second signal exits at
once (the children are killed first).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from actors.foreman import Interrupt
from lopen.process import kill_children

NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
CODES = {"SIGINT": 130, "SIGTERM": 143}


@contextlib.contextmanager
def stopping_on_signals(
    interrupt: Interrupt,
    abort: Callable[[], None],
    say: Callable[[str], None],
    force: Callable[[], None] = lambda: None,
) -> Iterator[None]:
    """While the block runs, SIGINT/SIGTERM interrupt the run (see the module docstring): ``abort``
    stops what is in flight, ``force`` kills what must not outlive a second signal (the CLI). Outside
    the main thread (tests, the TUI's worker) nothing is installed: the caller sets ``interrupt``."""
    interrupt.on_set(abort)
    interrupt.on_set(kill_children)
    if threading.current_thread() is not threading.main_thread():
        yield  # no signal handlers here: whoever runs this thread sets ``interrupt`` (the TUI's Ctrl+C)
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        name = NAMES.get(signum, "SIGINT")
        if interrupt:
            kill_children()
            with contextlib.suppress(Exception):
                force()
            os._exit(CODES[name])
        say(f"! {name}: stopping after recording where the run stands (again to quit at once)")
        interrupt.set(name)  # its callbacks abort what is in flight

    previous = {sig: signal.signal(sig, handle) for sig in NAMES}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
