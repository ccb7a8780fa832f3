"""The run's side of :mod:`lopen.app.run_process`: ``python -m lopen.app.run_child``, started by the TUI.

It loads Lopen, then reads its order (one JSON line) from stdin and runs the module with
``lopen.app.engine.run_module`` on its main thread — so Ctrl+C (SIGINT from the TUI) and SIGTERM stop it
exactly as they stop a headless run — and reports on its stdout in JSON lines: status lines, the model's
deltas, the session, the person's questions (the answer comes back on stdin) and how it ended. Nothing
else may reach that pipe: the real stdout is moved to stderr before anything runs. When stdin closes
(the TUI is gone), the run stops cleanly, as on Ctrl+C.

An unapproved spec is the run's first question: the spec and its gaps go to the TUI's approval dialog;
approved there, the approval is recorded through ``lopen.app.commands.approve`` (as ``tui:<user>``) and
the run goes on.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO

import msgspec

from events.errors import Problem
from lopen.app.run_contract import ApprovalRequest, RunOutcome
from lopen.app.run_process import DECODER, Line, Order, send
from lopen.copilot.results import StreamEvent


class Pipe:
    """The child's end: lines out (any thread), answers in (read by one thread of its own)."""

    def __init__(self, out: IO[bytes], answers_from: IO[bytes]) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.answers: queue.Queue[bool] = queue.Queue()
        self.closed = threading.Event()
        self._in = answers_from

    def listen(self, on_close: Callable[[], None]) -> None:
        def read() -> None:
            for raw in self._in:
                try:
                    line = DECODER.decode(raw)
                except msgspec.DecodeError:
                    continue
                if line.answer is not None:
                    self.answers.put(line.answer)
            self.closed.set()
            self.answers.put(False)  # a question still open is answered "no": nobody is there
            on_close()

        threading.Thread(target=read, name="lopen-run-answers", daemon=True).start()

    def tell(self, line: Line) -> None:
        send(self.out, line, self.lock)  # to a TUI gone, nothing: the store keeps the record

    def question(self, line: Line) -> bool:
        if self.closed.is_set():
            return False
        self.tell(line)
        return self.answers.get()


class ChildRun:
    """One run of the order's module, reporting over ``pipe``."""

    def __init__(self, order: Order, pipe: Pipe) -> None:
        from actors.foreman import Interrupt

        self.order = order
        self.pipe = pipe
        self.root = Path(order.root)
        self.interrupt = Interrupt()
        self.message = order.message

    def run(self) -> RunOutcome:
        from lopen.errors import InterventionRequired

        try:
            return self._run()
        except InterventionRequired as exc:
            if "is not approved" not in exc.what or not self._approved_at_the_gate():
                raise
            return self._run()

    def _run(self) -> RunOutcome:
        from lopen.app.engine import run_module

        order, pipe = self.order, self.pipe

        def watch(_invocation_id: str, event: StreamEvent) -> None:
            pipe.tell(Line(stream=event))

        code, session_id, detail = run_module(
            self.root,
            order.module,
            order.settings,
            lambda text: pipe.tell(Line(say=text)),
            resume=order.resume,
            no_resume=order.no_resume,
            replan=order.replan,
            stop_before=order.stop_before,
            message=self.message,
            ask=lambda question: pipe.question(Line(ask=question)),
            interrupt=self.interrupt,
            watch=watch,
            on_session=lambda session: pipe.tell(Line(session=session)),
            actor=order.actor,
        )
        self.message = None  # delivered once, even when the run goes on after the gate
        return RunOutcome(code, session_id, detail)

    def _approved_at_the_gate(self) -> bool:
        """The spec-approval gate (W4) as the TUI's dialog: the spec and its gaps; approved there, it is
        recorded through the app's command, as the person in the TUI."""
        from lopen.app import commands
        from lopen.app.context import Project
        from lopen.documents.paths import spec_path
        from lopen.documents.spec_check import check_module

        module = self.order.module
        gaps = tuple(gap.render() for gap in check_module(self.root, module).gaps)
        request = ApprovalRequest(module, spec_path(self.root, module).read_text(encoding="utf-8"), gaps)
        if not self.pipe.question(Line(approve=request)):
            return False
        commands.approve(Project(self.root, configured=self.order.settings), module, self.order.actor)
        return True


def main() -> int:
    early: list[str] = []  # a stop asked before the run could hear it (it is passed on below)
    for signum, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        signal.signal(signum, lambda *_, name=name: early.append(name))
    out = os.fdopen(os.dup(1), "wb")  # the pipe to the TUI …
    os.dup2(2, 1)  # … and whatever else prints goes to stderr, never into it
    sys.stdout = sys.stderr
    answers = os.fdopen(os.dup(0), "rb")  # the pipe from the TUI: never sys.stdin, which the
    null = os.open(os.devnull, os.O_RDONLY)  # interpreter locks at exit while a thread reads it
    os.dup2(null, 0)
    os.close(null)
    import lopen.app.engine  # noqa: F401  # loaded before the order comes: the TUI starts meanwhile

    first = answers.readline()
    if not first.strip():
        return 0  # started ahead, and the TUI left without a run: nothing to do
    pipe = Pipe(out, answers)
    run = ChildRun(msgspec.json.decode(first, type=Order), pipe)
    pipe.listen(lambda: run.interrupt.set("SIGTERM"))
    for signum, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        signal.signal(signum, lambda *_, name=name: run.interrupt.set(name))
    if early:
        run.interrupt.set(early[0])
    try:
        outcome = run.run()
    except Problem as exc:
        pipe.tell(Line(problem=(exc.what, exc.why, exc.how)))
        return 1
    except Exception as exc:  # a bug: its traceback goes to stderr, and the TUI shows what and where
        traceback.print_exc()
        what = f"the run of {run.order.module} failed: {type(exc).__name__}: {exc}"
        where = traceback.format_exc().strip()[-1500:]
        pipe.tell(Line(problem=(what, f"a bug in Lopen:\n{where}", "report it with this traceback")))
        return 1
    pipe.tell(Line(outcome=(outcome.code, outcome.session_id, outcome.detail)))
    return outcome.code


if __name__ == "__main__":
    sys.exit(main())
