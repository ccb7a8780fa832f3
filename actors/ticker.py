"""Time for the run loop, as messages: the Foreman's ticker.

The Foreman never sleeps in a handler. While lanes run it needs to look again now and then — to renew
its leases every third of a lease, to see a person's pause request or a re-plan, and to wait (``POLL``)
while other workers hold what is left — so it tells its ticker ``After(seconds, n)`` and goes back to
its mailbox; the ticker waits that long in its own thread and tells ``Tick(n)`` back. Waiting is the
ticker's only job, so nothing else queues behind it, and ``halt`` (set when the run ends) cuts a wait
short so that it stops at once.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, NamedTuple

import pykka

from actors.messages import Tick


class After(NamedTuple):
    seconds: float
    n: int


class TickerActor(pykka.ThreadingActor):
    def __init__(self, target: pykka.ActorRef[Any], halt: threading.Event) -> None:
        super().__init__()
        self.target = target
        self.halt = halt

    def on_receive(self, message: Any) -> None:
        if isinstance(message, After) and not self.halt.wait(message.seconds):
            with contextlib.suppress(pykka.ActorDeadError):  # the run ended meanwhile
                self.target.tell(Tick(message.n))
