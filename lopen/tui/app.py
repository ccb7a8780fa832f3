"""``LopenApp``: the Textual app behind every TUI face of Lopen.

One app, several ways in (see ``lopen.tui`` for the entry points):

- a run (``run_tui``): the run screen, fed by the store's bus and the run's deltas, the run itself
  in a worker thread;
- a watcher (``watch_tui``): the same screen, read-only, polling the store (any backend);
- the module picker (plain ``lopen``), which then opens one of the above;
- step 1 as a conversation (``run_conversation``);
- the gallery (``lopen tui gallery``): every widget and dialog with stub data.

What the app owns, and the screens do not: the feed and the screen state, the steering (every key
that changes a run appends a recorded command or calls the run's ``stop``), the run's worker, and
the dialogs a run asks for from its own thread (``ask``/``approve`` block that thread on a
``Future`` the dialog resolves — never the app's thread).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.filter import Monochrome
from textual.message import Message
from textual.screen import Screen

from events.errors import Problem
from events.store import EventStore
from lopen.app.context import Project
from lopen.errors import LopenError
from lopen.term import number
from lopen.tui.contract import ApprovalRequest, HeaderInfo, RunCallbacks, RunHandle, RunOutcome, StartRun
from lopen.tui.controller import ReadOnly, Steering, parse_command
from lopen.tui.conversation import Conversation
from lopen.tui.dialogs import ApprovalDialog, ConfirmDialog, ErrorDialog, KeysDialog, ViewerDialog
from lopen.tui.feed import Feed
from lopen.tui.options import TuiOptions
from lopen.tui.resources import load_resource
from lopen.tui.screens.landing import LandingScreen
from lopen.tui.screens.main import MainScreen
from lopen.tui.state import ScreenState
from lopen.tui.symbols import Symbols
from lopen.tui.widgets.prompt import PromptArea

POLL_SECONDS = 0.5  # a watcher reads the store this often (a store on another machine, too)
RUN_POLL_SECONDS = 0.03  # the screen of a run reads its store this often (the run is in its own process)
DRAW_SECONDS = 0.03  # the feed is drawn at most this often: a busy run costs this process ~30 frames a second
COLLECT_SECONDS, IDLE_SECONDS, FULL_SECONDS = 1.0, 2.0, 30.0  # the cycle collector's schedule (Collector)


class Collector:
    """The whole-heap pass of Python's cycle collector, on the app's own schedule: a full collection over
    the screen's whole history, started by the allocator in the middle of a frame, is what made a busy
    screen late (bin/bench-tui: p99 ~200 ms with it, ~85 ms without). While the app runs, the young
    generations are collected as usual (cheap, often) but the oldest one only when the feed has been
    idle for ``IDLE_SECONDS`` — or at the latest every ``FULL_SECONDS``, checked every ``COLLECT_SECONDS``."""

    def __init__(self, drawn_at: Callable[[], float]) -> None:
        self.drawn_at = drawn_at
        self.full_at = time.monotonic()
        self.thresholds = gc.get_threshold()
        gc.set_threshold(self.thresholds[0], self.thresholds[1], 2**31 - 1)

    def collect(self) -> None:
        now = time.monotonic()
        idle = now - self.drawn_at() >= IDLE_SECONDS
        if (idle and now - self.full_at >= IDLE_SECONDS) or now - self.full_at >= FULL_SECONDS:
            gc.collect()
            self.full_at = now

    def close(self) -> None:
        gc.set_threshold(*self.thresholds)


class FeedPending(Message):
    """Something arrived in the feed (posted from any thread, at most one at a time)."""


class ConversationChanged(Message):
    """The step-1 conversation changed (posted from any thread)."""


class RunEnded(Message):
    """The run's thread ended: with ``result`` (a ``RunOutcome``) or ``error``."""

    def __init__(self, name: str, result: Any = None, error: BaseException | None = None) -> None:
        super().__init__()
        self.name = name
        self.result = result
        self.error = error


class DialogRequest(Message):
    """A run's thread waits for a person's answer: show ``make()`` and resolve ``future`` with it."""

    def __init__(self, make: Callable[[], Screen[Any]], future: Future[Any]) -> None:
        super().__init__()
        self.make = make
        self.future = future


class LopenApp(App[int]):
    CSS_PATH = "lopen.tcss"
    TITLE = "Lopen"
    ENABLE_COMMAND_PALETTE = False  # Ctrl+P pauses the run

    BINDINGS = [
        Binding("ctrl+p", "pause", "Pause", priority=True),
        Binding("ctrl+c", "stop", "Stop", priority=True),
        Binding("ctrl+q", "leave", "Quit", show=False, priority=True),
    ]

    def __init__(
        self,
        options: TuiOptions | None = None,
        info: HeaderInfo | None = None,
        root: Path | None = None,
    ) -> None:
        super().__init__()
        self.options = options or TuiOptions()
        self.info = info or HeaderInfo()
        self.root = root
        self.symbols = Symbols(self.options.ascii)
        self.animate = self.options.animate
        if not self.options.color and not self.no_color:
            self.no_color = True
            self._filters.append(Monochrome())
        self.state: ScreenState | None = None
        self.feed: Feed | None = None
        self._drawn_at = 0.0  # monotonic time of the last feed frame
        self._collector: Collector | None = None
        self._draw_scheduled = False
        self.steering: Steering | None = None
        self.main: MainScreen | None = None
        self.start_run: StartRun | None = None
        self.handle: RunHandle | None = None
        self.outcome: RunOutcome | None = None
        self.conversation: Conversation | None = None
        self._first: Callable[[], None] = lambda: None
        self._stopping = False
        self._pending: set[Future[Any]] = set()
        self._pending_lock = threading.Lock()
        self._resume: str | None = None
        self._new_session = False
        self.rendered: dict[int, float] = {}  # seq → perf_counter when drawn (bin/bench-tui)
        self.threads: list[threading.Thread] = []

    # -- ways in ---------------------------------------------------------------------------------------

    def for_run(self, start_run: StartRun, resume: str | None = None, new_session: bool = False) -> LopenApp:
        """Open the run screen and start the run (in a worker thread) once the app runs."""
        self.start_run, self._resume, self._new_session = start_run, resume, new_session
        self._first = self._launch
        return self

    def for_watch(
        self, store: EventStore, project: str, module: str, session_id: str = "", poll: bool = True
    ) -> LopenApp:
        """Watch a module (pinned to ``session_id`` when given): read-only, polling the store."""
        self._first = lambda: self.watch_module(store, project, module, session_id, poll)
        return self

    def for_screen(self, make: Callable[[], Screen[Any]]) -> LopenApp:
        """Open with any screen (the picker, the gallery)."""
        self._first = lambda: self.push_screen(make())
        return self

    def for_conversation(self, conversation: Conversation, draft: Callable[[Conversation], RunOutcome]) -> LopenApp:
        """Step 1 as a conversation: ``draft(conversation)`` runs in a worker thread."""
        from lopen.tui.screens.conversation import ConversationScreen

        self.conversation = conversation
        conversation.notify = lambda: self.post_message(ConversationChanged())
        conversation.approver = self.approve_from_thread

        def first() -> None:
            self.push_screen(ConversationScreen(conversation))
            self.start_thread("draft", lambda: draft(conversation))

        self._first = first
        return self

    def on_unmount(self) -> None:
        """However the app ends (``exit``, a test's pilot), nothing reads the store after it."""
        if self.feed is not None:
            self.feed.close()
        if self._collector is not None:
            self._collector.close()

    def on_mount(self) -> None:
        self._collector = Collector(lambda: self._drawn_at)
        self.set_interval(COLLECT_SECONDS, self._collector.collect)
        self._first()
        if self.options.landing:
            self.push_screen(LandingScreen(self.state.module if self.state else ""))

    # -- binding a module's history to the screen --------------------------------------------------------

    def bind_module(
        self, store: EventStore, project: str, module: str, session_id: str = "", poll: float | bool = False
    ) -> None:
        """Fold the module's history into a fresh screen state and follow what comes next: by reading
        the store every ``poll`` seconds (True: ``POLL_SECONDS``), or through its bus (False: a store
        this process writes)."""
        if self.feed is not None and self.feed.stream_id.endswith(f"{project}/{module}"):
            return
        self.state = ScreenState(project, module, session_id, info=self.info)
        if self.feed is not None:
            self.feed.close()
        self.feed = Feed(store, project, module, notify=self._wake)
        self.steering = Steering(
            Project.on(store, project, self.root),
            module,
            self.options.who,
            lambda: self.state.session_id if self.state else "",
            read_only=self.options.read_only,
        )
        before = store.last_seq()
        self.feed.load(self.state)
        if poll:
            self.feed.follow(POLL_SECONDS if poll is True else float(poll))
        else:
            self.feed.attach(before)
        if self.main is None:
            self.main = MainScreen(self.root, watching=self.options.read_only)
            self.push_screen(self.main)
        self.call_after_refresh(self._draw_all)

    def watch_module(
        self, store: EventStore, project: str, module: str, session_id: str = "", poll: bool = True
    ) -> None:
        self.options = TuiOptions(**{**self.options.__dict__, "read_only": True})
        self.bind_module(store, project, module, session_id, poll=poll)
        if self.state is not None and session_id:
            self.state.pinned = True

    def _draw_all(self) -> None:
        if self.main is not None and self.state is not None:
            self.state.take_changes()
            self.main.show(self.state, {"top", "activity", "context"})

    def _wake(self) -> None:
        """The feed's notify: any thread; never blocks."""
        self.post_message(FeedPending())

    def on_feed_pending(self, _message: FeedPending) -> None:
        """Draw what arrived — at most every ``DRAW_SECONDS``: what arrives sooner waits in the feed
        for the next frame (a busy run costs a few frames, never an event)."""
        wait = self._drawn_at + DRAW_SECONDS - time.monotonic()
        if wait > 0:
            if not self._draw_scheduled:
                self._draw_scheduled = True
                self.set_timer(wait, self._draw_feed)
            return
        self._draw_feed()

    def _draw_feed(self) -> None:
        self._draw_scheduled = False
        self._drawn_at = time.monotonic()
        if self.feed is None or self.state is None:
            return
        folded = self.feed.drain(self.state)
        changed = self.state.take_changes()
        if self.main is not None and changed:
            self.main.show(self.state, changed)
        if self.feed.timing and folded:
            seqs = [r.seq for r in folded]
            self.call_after_refresh(self._mark_rendered, seqs)

    def _mark_rendered(self, seqs: list[int]) -> None:

        now = time.perf_counter()
        for seq in seqs:
            self.rendered.setdefault(seq, now)

    def on_conversation_changed(self, _message: ConversationChanged) -> None:
        from lopen.tui.screens.conversation import ConversationScreen

        for screen in self.screen_stack:
            if isinstance(screen, ConversationScreen):
                screen.show()

    # -- the run --------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.handle is not None

    def _launch(self) -> None:
        if self.start_run is None or self.handle is not None:
            return
        callbacks = RunCallbacks(
            ask=self.ask_from_thread,
            approve=self.approve_from_thread,
            on_stream=lambda event: self.feed.on_stream(event) if self.feed else None,
            say=lambda line: self.feed.say(line) if self.feed else None,
            resume=self._resume,
            new_session=self._new_session,
        )
        try:
            handle = self.start_run(callbacks)
        except Problem as exc:
            self.show_problem(exc)
            return
        self.handle = handle
        self._stopping = False
        self.bind_module(handle.store, handle.project, handle.module, handle.session_id, poll=RUN_POLL_SECONDS)
        if self.state is not None:
            self.state.run_state = "running"
            self.state.changed.add("top")
        self.start_thread("run", handle.run)

    def start_thread(self, name: str, target: Callable[[], Any]) -> threading.Thread:
        """Run ``target`` in a daemon thread of its own (not a Textual worker: leaving the app must
        never wait for a run); its end arrives as a ``RunEnded`` message."""

        def body() -> None:
            try:
                result = target()
            except BaseException as exc:
                self.post_message(RunEnded(name, error=exc))
            else:
                self.post_message(RunEnded(name, result=result))

        thread = threading.Thread(target=body, name=f"lopen-{name}", daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def on_run_ended(self, message: RunEnded) -> None:
        if message.name == "draft":
            self._drafted(message)
            return
        if message.name == "revert":
            if message.error is None:
                self.notify(str(message.result), title="Revert")
            else:
                self._show_error(message.error)
            return
        self.handle = None
        if message.error is None:
            self._finished(message.result)
        elif self._stopping:
            self.exit(1)
        else:
            self._show_error(message.error)

    def _drafted(self, message: RunEnded) -> None:
        from lopen.tui.conversation import ConversationClosed

        if isinstance(message.error, ConversationClosed) or self.conversation is None:
            return
        if message.error is not None:
            self._show_error(message.error)
        elif isinstance(message.result, RunOutcome):
            self.outcome = message.result
            self.conversation.say(f"{self.symbols.mid} {message.result.detail}")

    def _show_error(self, error: BaseException) -> None:
        if isinstance(error, Problem):
            self.show_problem(error)
        else:
            self.push_screen(
                ErrorDialog(
                    str(error) or type(error).__name__, type(error).__name__, "run again with --debug to see where"
                )
            )

    def _finished(self, outcome: Any) -> None:
        self.handle = None
        if not isinstance(outcome, RunOutcome):
            return
        self.outcome = outcome
        if self.state is not None:
            mark = self.symbols.ok if outcome.code == 0 else self.symbols.fail if outcome.code == 1 else "!"
            self.state.say(f"{mark} {outcome.detail}")
            if self.state.run_state == "running":
                self.state.run_state = {0: "complete", 2: "paused"}.get(outcome.code, "stopped")
            self.state.changed.add("top")
            self.post_message(FeedPending())
        if self._stopping:
            self.exit(outcome.code)
        else:
            self.notify(
                outcome.detail or "the run ended",
                title=f"Run ended ({outcome.code})",
                severity="information" if outcome.code == 0 else "warning",
            )

    def show_problem(self, problem: Problem) -> None:
        self.push_screen(ErrorDialog(problem.what, problem.why, problem.how))

    # -- dialogs a run asks for, from its own thread ---------------------------------------------------------

    def ask_from_thread(self, question: str) -> bool:
        """``RunCallbacks.ask``: a confirmation dialog; blocks the calling (run) thread."""
        return bool(self._dialog_from_thread(lambda: ConfirmDialog(question, "The run needs your answer")))

    def approve_from_thread(self, request: ApprovalRequest) -> bool:
        """``RunCallbacks.approve``: the spec-approval dialog; blocks the calling thread."""
        return bool(self._dialog_from_thread(lambda: ApprovalDialog(request)))

    def _dialog_from_thread(self, make: Callable[[], Screen[Any]]) -> Any:
        if threading.get_ident() == self._thread_id:
            raise RuntimeError("a run's ask/approve must be called from the run's thread, not the app's")
        future: Future[Any] = Future()
        with self._pending_lock:
            if self._exit or not self.is_running:
                return False
            self._pending.add(future)
        self.post_message(DialogRequest(make, future))
        try:
            return future.result()
        finally:
            with self._pending_lock:
                self._pending.discard(future)

    def on_dialog_request(self, message: DialogRequest) -> None:
        future = message.future

        def answered(answer: Any) -> None:
            if not future.done():
                future.set_result(answer)

        self.push_screen(message.make(), answered)

    def _answer_pending(self) -> None:
        with self._pending_lock:
            for future in self._pending:
                if not future.done():
                    future.set_result(False)

    async def action_quit(self) -> None:
        self._answer_pending()
        await super().action_quit()

    def exit(self, result: int | None = None, return_code: int = 0, message: Any = None) -> None:
        self._answer_pending()
        if self.conversation is not None:
            self.conversation.close()
        if self.feed is not None:
            self.feed.close()
        if self._collector is not None:
            self._collector.close()
        super().exit(result, return_code, message)

    # -- keys -----------------------------------------------------------------------------------------

    def _steer(self, do: Callable[[Steering], Any], done: str) -> None:
        if self.steering is None:
            self.notify("no module is open", severity="warning")
            return
        try:
            do(self.steering)
        except ReadOnly as exc:
            self.notify(str(exc), severity="warning")
        except LopenError as exc:  # a refusal by the command's rule (e.g. no running session to pause)
            self.notify(f"{exc.what}: {exc.why}" if exc.why else exc.what, severity="warning")
        except Problem as exc:
            self.show_problem(exc)
        else:
            self.notify(done)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A read-only screen (``lopen watch``) offers no steering: no pause or resume key, none in the footer."""
        return not (self.options.read_only and action in ("pause", "resume"))

    def action_pause(self) -> None:
        """Ctrl+P: record ``PauseRequested``; the run pauses before its next invocation."""
        self._steer(lambda s: s.pause(), "Pause requested: the run pauses after the current invocation.")

    def action_stop(self) -> None:
        """Ctrl+C: stop the run cleanly (its ``stop()``); a second Ctrl+C leaves at once."""
        if self.handle is None:
            self.exit(self.outcome.code if self.outcome else 0)
            return
        if self._stopping:
            self.exit(130)
            return
        self._stopping = True
        if self.state is not None:
            self.state.run_state = "stopping"
            self.state.changed.add("top")
            self.post_message(FeedPending())
        self.handle.stop()
        self.notify("Stopping cleanly after the current step… (Ctrl+C again leaves at once)")

    def action_resume(self) -> None:
        """``r``: run the module again (it resumes where it stands) when no run is going."""
        if self.handle is not None:
            self.notify("The run is going.")
        elif self.start_run is None:
            self.notify("Nothing to resume from here: this screen only watches.", severity="warning")
        else:
            self._resume = self.state.session_id if self.state and self.state.session_id else None
            self._new_session = False
            self._launch()

    def action_leave(self) -> None:
        """``q``: leave when no run is going (Ctrl+C stops one first)."""
        if self.handle is not None:
            self.notify("A run is going: Ctrl+C stops it cleanly first.", severity="warning")
            return
        self.exit(self.outcome.code if self.outcome else 0)

    def action_keys(self) -> None:
        self.push_screen(KeysDialog())

    def action_open_resource(self, number: int) -> None:
        if self.main is None or self.state is None:
            return
        items = self.main.resources
        if not 1 <= number <= len(items):
            self.notify(f"no resource {number}", severity="warning")
            return
        resource = items[number - 1]
        self.push_screen(ViewerDialog(f"{number} {resource.label}", load_resource(resource, self.state, self.root)))

    # -- the prompt ---------------------------------------------------------------------------------------

    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        command = parse_command(message.text)
        if command.error:
            self.notify(command.error, severity="warning")
            return
        handler = {
            "": self._queue_message,
            "/pause": lambda _arg: self.action_pause(),
            "/resume": lambda _arg: self.action_resume(),
            "/quit": lambda _arg: self.action_stop(),
            "/help": lambda _arg: self.action_keys(),
            "/model": self._model,
            "/budget": lambda _arg: self._budget(),
            "/replay": lambda _arg: self._replay(),
            "/revert": lambda _arg: self._revert(),
        }[command.name]
        handler(command.argument)

    def _queue_message(self, text: str) -> None:
        self._steer(lambda s: s.queue_message(text), "Queued: the model gets it in its next invocation.")

    def _model(self, name: str) -> None:
        if name:
            self._steer(lambda s: s.control("model", name), f"Model {name} requested from the next invocation on.")
            return
        state = self.state
        models = state.models if state else {}
        lines = [f"- **{phase}**: {model}" for phase, model in sorted(models.items())] or ["_no models recorded yet_"]
        current = f"\n\nNow running: **{state.model}**" if state and state.model else ""
        self.push_screen(ViewerDialog("Models", "\n".join(lines) + current + "\n\n`/model NAME` changes it."))

    def _budget(self) -> None:
        if self.state is None:
            return
        totals, info = self.state.tokens("module"), self.state.info

        def of(used: float, budget: int) -> str:
            return (
                f"{number(used)} of {number(budget)}" + (f" ({used / budget:.0%})" if budget else "")
                if budget
                else f"{number(used)} (no budget)"
            )

        text = (
            f"- **tokens**: {of(totals.total, info.token_budget)}\n"
            f"- **premium requests**: {of(round(totals.premium, 2), info.premium_budget)}\n"
            f"- **invocations**: {totals.invocations} (+{totals.oracle_invocations} oracle)\n"
            f"- **model calls**: {totals.calls}\n"
        )
        self.push_screen(ViewerDialog(f"Budget of {self.state.module}", text))

    def _replay(self) -> None:
        if self.feed is None or self.state is None:
            return
        from lopen.app.views.replay import TextView

        session = self.state.session_id
        view = TextView(120, tree=True)
        lines = [
            line
            for rec in self.feed.store.read_stream(self.feed.stream_id)
            if rec.event.session_id in (session, "")
            for line in view.render(rec)
        ]
        self.push_screen(
            ViewerDialog(f"Replay of {session or self.state.module}", "\n".join(lines[-2000:]), markdown=False)
        )

    def _revert(self) -> None:
        if self.handle is not None:
            self.notify("Pause or stop the run first (Ctrl+P, Ctrl+C), then /revert.", severity="warning")
            return
        if self.options.read_only or self.feed is None or self.root is None or self.state is None:
            self.notify("Revert works from the TUI that runs the module, in its project.", severity="warning")
            return
        feed, root, module = self.feed, self.root, self.state.module

        def revert() -> str:
            from lopen.app.commands import revert, short
            from lopen.app.context import Project

            result = revert(Project.on(feed.store, feed.project, root), module, self.options.who)
            if not result.changed:
                return f"nothing to revert: {result.branch} is at {short(result.to_sha)}"
            return f"reverted {result.branch} to {short(result.to_sha)}; re-opened {', '.join(result.reopened)}"

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start_thread("revert", revert)

        self.push_screen(
            ConfirmDialog(
                f"Go back to the last task-completion commit of {module}? The tasks after it re-open.",
                "Revert",
                yes="Revert",
                no="Cancel",
            ),
            confirmed,
        )
