"""Work handed out by tell, and its result told back: how the Foreman drives its workers without
waiting on them.

The Foreman never blocks on the Planner, a TaskRunner or a lane for a whole step. It tells the worker
a ``Job`` (``hand``); the worker — any actor that mixes in ``Reports`` — runs the named method in its
own thread and tells the Foreman a ``JobEnded`` with the method's result (or the exception it raised).
The same methods stay callable through a proxy (``planner.plan(...).get()``) for anyone who does want
to wait.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pykka

from actors.messages import Job, JobEnded


class Reports:
    """Mixin for a ``pykka.ThreadingActor``: a ``Job`` told to it runs, and its end is told back."""

    def on_receive(self, message: Any) -> Any:
        if not isinstance(message, Job):
            return super().on_receive(message)  # type: ignore[misc]
        try:
            ended = JobEnded(message.key, getattr(self, message.method)(*message.args, **message.kwargs))
        except BaseException as exc:  # the Foreman decides what an error means for the run
            ended = JobEnded(message.key, error=exc)
        with contextlib.suppress(pykka.ActorDeadError):  # the loop is gone: nobody waits for it
            message.reply_to.tell(ended)
        return None


def hand(
    worker: pykka.ActorProxy[Any], key: str, method: str, *args: Any, reply_to: pykka.ActorRef[Any], **kwargs: Any
) -> None:
    """Tell ``worker`` to run ``method``; ``reply_to`` hears ``JobEnded(key, …)``. A worker already
    stopped ends the job at once, with its error."""
    try:
        worker.actor_ref.tell(Job(key, method, args, kwargs, reply_to))
    except pykka.ActorDeadError as exc:
        reply_to.tell(JobEnded(key, error=exc))
