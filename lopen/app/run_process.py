"""A module run in a process of its own, driven by the TUI: the TUI draws, the run's process draws nothing.

The TUI (``lopen run`` / ``lopen demo`` in a terminal) holds a :class:`ProcessRun` — a
``lopen.app.run_contract.RunHandle`` — and follows the module's history by polling the store, exactly as
``lopen watch`` does (so it sees what a run on another machine records too). The run itself is
:mod:`lopen.app.run_child`, started with this interpreter; the two share only the store and one pipe each
way, carrying JSON lines:

- to the child: the run's order first (root, module, settings — secrets included, so never on the
  command line — and the run's options), then the person's answers (``{"answer": true}``). When the
  pipe closes (the TUI was killed), the child stops cleanly, as on Ctrl+C.
- from the child: what no event records — status lines (``say``), the model's streaming deltas
  (``stream``), the session it opened (``session``), a question or the approval gate (``ask`` /
  ``approve``: answered in the TUI's dialogs), and how the run ended (``outcome``, or ``problem``:
  what, why, fix).

``stop()`` sends the child SIGINT: it stops exactly as a headless run does on Ctrl+C (the invocation in
flight aborted, the session recorded paused); a second ``stop()`` ends it at once. The run's stderr is
kept (its tail explains a child that died without saying how).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import IO, Any

import msgspec

from events.errors import Problem
from events.store import EventStore
from lopen.app.commands import face_actor
from lopen.app.run_contract import ApprovalRequest, RunCallbacks, RunOutcome, StartRun
from lopen.config import Settings
from lopen.copilot.results import StreamEvent
from lopen.errors import LopenError
from lopen.project import ensure_lopen_dir, open_store

STDERR_KEPT = 4000  # characters of the child's stderr kept for a failure's "why"


class Order(msgspec.Struct, frozen=True, kw_only=True):
    """What the child runs: the first line on its stdin."""

    root: str
    module: str
    settings: Settings
    resume: str | None = None
    no_resume: bool = False
    replan: bool = False
    stop_before: str = ""
    message: str | None = None
    actor: str = "tui"  # who steers: recorded with what the person decides at the gate


class Line(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line the child writes (exactly one field set) or the answer the TUI writes back."""

    say: str | None = None
    stream: StreamEvent | None = None
    session: str | None = None
    ask: str | None = None
    approve: ApprovalRequest | None = None
    answer: bool | None = None
    outcome: tuple[int, str, str] | None = None
    problem: tuple[str, str, str] | None = None


ENCODER = msgspec.json.Encoder()
DECODER = msgspec.json.Decoder(Line)


def send(pipe: IO[bytes], message: msgspec.Struct, lock: threading.Lock) -> bool:
    """Write one JSON line (any thread); False when the other side is gone."""
    try:
        with lock:
            pipe.write(ENCODER.encode(message) + b"\n")
            pipe.flush()
    except (BrokenPipeError, OSError, ValueError):
        return False
    return True


class ProcessRun:
    """One run of ``module`` in a child process (see the module docstring); a ``RunHandle``."""

    def __init__(
        self,
        root: Path,
        module: str,
        settings: Settings,
        callbacks: RunCallbacks,
        warm: subprocess.Popen[bytes] | None = None,
        **options: Any,
    ) -> None:
        ensure_lopen_dir(root)
        self.warm = warm  # a child started ahead (``start_run_for``), loading while the TUI starts
        self.root = root
        self.module = module
        self.settings = settings
        self.callbacks = callbacks
        self.store: EventStore
        self.store, self.project = open_store(root, settings.store.url, settings.project.id)
        self.session_id = ""
        self.order = Order(
            root=str(root),
            module=module,
            settings=settings,
            resume=callbacks.resume or options.get("resume"),
            no_resume=callbacks.new_session or bool(options.get("no_resume", False)),
            replan=bool(options.get("replan", False)),
            stop_before=str(options.get("stop_before") or ""),
            message=options.get("message"),  # type: ignore[arg-type]
            actor=face_actor("tui"),
        )
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # the pipe to the child
        self._kept = threading.Lock()  # the stderr kept
        self._stderr: deque[str] = deque()
        self._stderr_size = 0

    def run(self) -> RunOutcome:
        """Start the child (or take the one started ahead), serve its lines until it ends; the run's
        outcome (or its problem, raised)."""
        self.process = self.warm or spawn(self.root)
        self.warm = None
        assert self.process.stdin is not None and self.process.stdout is not None
        errors = threading.Thread(target=self._keep_stderr, name="lopen-run-stderr", daemon=True)
        errors.start()
        send(self.process.stdin, self.order, self._lock)
        outcome: RunOutcome | None = None
        problem: Problem | None = None
        for raw in self.process.stdout:
            try:
                line = DECODER.decode(raw)
            except msgspec.DecodeError:
                self._note_stderr(raw.decode("utf-8", "replace"))
                continue
            if line.outcome is not None:
                outcome = RunOutcome(*line.outcome)
            elif line.problem is not None:
                problem = LopenError(*line.problem)
            else:
                self._serve(line)
        code = self.process.wait()
        errors.join(timeout=5)
        if problem is not None:
            raise problem
        if outcome is not None:
            return outcome
        raise LopenError(
            f"the run of {self.module} ended without saying how (exit code {code})",
            self._stderr_tail() or "its process was killed or crashed before it could report",
            f"what it recorded is kept: see `lopen session list`, then resume with `lopen run {self.module}`",
        )

    def _serve(self, line: Line) -> None:
        if line.say is not None:
            self.callbacks.say(line.say)
        elif line.stream is not None:
            self.callbacks.on_stream(line.stream)
        elif line.session is not None:
            self.session_id = line.session
        elif line.ask is not None:
            self._answer(self.callbacks.ask(line.ask))
        elif line.approve is not None:
            self._answer(self.callbacks.approve(line.approve))

    def _answer(self, yes: bool) -> None:
        assert self.process is not None and self.process.stdin is not None
        send(self.process.stdin, Line(answer=bool(yes)), self._lock)

    def _keep_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for raw in self.process.stderr:
            self._note_stderr(raw.decode("utf-8", "replace"))

    def _note_stderr(self, text: str) -> None:
        with self._kept:
            self._stderr.append(text)
            self._stderr_size += len(text)
            while self._stderr_size > STDERR_KEPT and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())

    def _stderr_tail(self) -> str:
        with self._kept:
            return "".join(self._stderr).strip()[-STDERR_KEPT:]

    def stop(self) -> None:
        """Ctrl+C for the child: the first stops it cleanly, the next ends it at once (never blocks)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)


def spawn(root: Path) -> subprocess.Popen[bytes]:
    """A run process, loading Lopen until its order arrives on stdin (it exits quietly if none comes)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "lopen.app.run_child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=root,
        env=env,
        start_new_session=True,  # the terminal's signals are the TUI's to pass on (stop())
    )


def start_run_for(root: Path, module: str, settings: Settings, **options: object) -> StartRun:
    """The ``start_run`` the TUI calls (again on `r`, to resume): a fresh :class:`ProcessRun` each time.
    The first run's process is started now, so that it loads Lopen while the TUI loads Textual."""
    warm = [spawn(root)]

    def start(callbacks: RunCallbacks) -> ProcessRun:
        return ProcessRun(root, module, settings, callbacks, warm.pop() if warm else None, **options)

    return start
