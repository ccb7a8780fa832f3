"""The contract between the TUI and a run: what each gives the other.

The TUI never drives the workflow itself. Whoever starts a run (``lopen run``, ``lopen demo``, the
module picker) hands :func:`lopen.tui.run_tui` a ``start_run`` function. The TUI calls it with
:class:`RunCallbacks` — the TUI's side of the conversation — and gets back a :class:`RunHandle`::

    def start_run(callbacks: RunCallbacks) -> RunHandle:
        store, project = open_store(root, url, configured_id)        # quick: no model work here
        return MyRun(store, project, module, callbacks)              # a RunHandle

    code = run_tui(root, module, start_run, settings=settings)

The TUI then calls ``handle.run()`` in a worker thread (it blocks until the run pauses, stops,
completes or fails) and renders the module from the store's events (reading ``handle.store``, as
``lopen watch`` does) plus the streaming deltas the run hands to ``callbacks.on_stream``. The product's
handle is ``lopen.app.run_process.ProcessRun``: the run in a process of its own, its callbacks carried
over a pipe. ``start_run`` may be called again (``r`` resumes a paused module); each call is one run of
the module.

Threading rules, all enforced on the TUI's side:

- every callback is safe to call from any thread;
- ``on_stream`` and ``say`` never block (a slow terminal drops frames, never events);
- ``ask`` and ``approve`` block the calling thread until the person answers a dialog (or the TUI
  closes: then they return ``False``) — exactly like the headless ``ask`` on a terminal.

This module imports nothing of Textual: the run side may import it freely.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from events.store import EventStore
    from lopen.copilot.results import StreamEvent

__all__ = ["ApprovalRequest", "HeaderInfo", "RunCallbacks", "RunHandle", "RunOutcome", "StartRun"]


class RunOutcome(NamedTuple):
    """How a run ended: the same triple the headless commands print (exit code 0, 1 or 2)."""

    code: int
    session_id: str
    detail: str


@dataclass(frozen=True)
class ApprovalRequest:
    """The spec-approval gate (W4): the spec as it will be approved, and its pattern-check gaps."""

    module: str
    spec_text: str
    gaps: tuple[str, ...] = ()


@dataclass(frozen=True)
class HeaderInfo:
    """What the top bar shows that no event records: how the run reaches its model.

    ``provider`` e.g. ``"GitHub Copilot"`` or ``"openai @ 127.0.0.1:8765 (scripted)"``; ``auth`` e.g.
    ``"GH_TOKEN"`` or ``"BYOK"``. Budgets come from settings (0 = unlimited).
    """

    provider: str = ""
    auth: str = ""
    token_budget: int = 0
    premium_budget: int = 0
    money_budget: float = 0.0  # US dollars
    models: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunCallbacks:
    """The TUI's side: given to ``start_run``. Every callable is thread-safe.

    - ``ask(question) -> bool``: a budget or churn confirmation (the headless ``ask``), answered in
      a dialog; blocks the caller until answered.
    - ``approve(request) -> bool``: the spec-approval gate, answered in a dialog; blocks likewise.
      True means the person approved: the run records ``SpecApproved`` itself.
    - ``on_stream(event)``: a gateway streaming delta (``lopen.copilot.results.StreamEvent``:
      ``AssistantText``, ``ToolStarted``, ``ToolFinished`` …) of the invocation now running.
    - ``say(line)``: a headless-style status line (shown in the activity pane; never blocks).
    - ``resume`` / ``new_session``: what the person chose in the resume dialog (``None`` = the
      run's own default, ``session.auto_resume``).
    """

    ask: Callable[[str], bool]
    approve: Callable[[ApprovalRequest], bool]
    on_stream: Callable[[StreamEvent], None]
    say: Callable[[str], None]
    resume: str | None = None
    new_session: bool = False


@runtime_checkable
class RunHandle(Protocol):
    """The run's side: returned by ``start_run``.

    ``store``/``project``/``module`` say where the module's history is (the TUI subscribes to the
    store's bus and appends only recorded commands: ``PauseRequested``, ``UserMessageQueued``,
    ``ControlRequested``). ``session_id`` may be ``""`` until the run opens its session (the TUI
    follows the session of the first ``SessionStarted``/``SessionResumed`` it sees).
    """

    store: EventStore
    project: str
    module: str
    session_id: str

    def run(self) -> RunOutcome:
        """Run the module to its next stop; called once, in a worker thread. May raise a ``Problem``
        (shown as a critical-error dialog with what, why and fix)."""
        ...

    def stop(self) -> None:
        """Stop cleanly as soon as possible (the headless Ctrl+C path); ``run()`` then returns.
        Called from the TUI's thread; must not block."""
        ...


StartRun = Callable[[RunCallbacks], RunHandle]
