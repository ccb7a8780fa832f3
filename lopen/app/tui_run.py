"""A module run under the TUI: the run side of ``lopen.app.run_contract``.

``start_run_for(root, module, settings, …)`` gives the TUI its ``start_run``: each call opens the
project's store (the TUI follows that store's bus) and returns a :class:`TuiRun`, whose ``run()``
is ``lopen.app.engine.run_module`` with the TUI's callbacks — its status lines, its confirmation
dialog as ``ask``, its live view of the model's stream — and whose ``stop()`` interrupts the run
exactly as Ctrl+C does headless (the invocation in flight is aborted, the session recorded paused).
An unapproved spec is shown at the gate: approved there, it is recorded and the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from actors.foreman import Interrupt
from lopen.app.engine import run_module
from lopen.app.run_contract import ApprovalRequest, RunCallbacks, RunOutcome, StartRun
from lopen.config import Settings
from lopen.copilot.results import StreamEvent
from lopen.documents.paths import spec_path
from lopen.documents.spec_check import check_module
from lopen.errors import InterventionRequired
from lopen.project import ensure_lopen_dir, open_store


class TuiRun:
    """One run of ``module``, driven by the TUI (see ``lopen.tui.contract.RunHandle``)."""

    def __init__(
        self,
        root: Path,
        module: str,
        settings: Settings,
        callbacks: RunCallbacks,
        *,
        resume: str | None = None,
        no_resume: bool = False,
        replan: bool = False,
        stop_before: str = "",
        message: str | None = None,
        on_session: Callable[[str], None] | None = None,
    ) -> None:
        ensure_lopen_dir(root)
        self.root = root
        self.module = module
        self.settings = settings
        self.callbacks = callbacks
        self.store, self.project = open_store(root, settings.store.url, settings.project.id)
        self.session_id = ""
        self.interrupt = Interrupt()
        self.resume = callbacks.resume or resume
        self.no_resume = callbacks.new_session or no_resume
        self.replan = replan
        self.stop_before = stop_before
        self.message = message
        self.on_session = on_session

    def run(self) -> RunOutcome:
        try:
            return self._run()
        except InterventionRequired as exc:
            if "is not approved" not in exc.what or not self._approved_at_the_gate():
                raise
            return self._run()

    def _run(self) -> RunOutcome:
        def watch(invocation_id: str, event: StreamEvent) -> None:
            self.callbacks.on_stream(event)

        def session(session_id: str) -> None:
            self.session_id = session_id
            if self.on_session is not None:
                self.on_session(session_id)

        code, session_id, detail = run_module(
            self.root,
            self.module,
            self.settings,
            self.callbacks.say,
            resume=self.resume,
            no_resume=self.no_resume,
            replan=self.replan,
            stop_before=self.stop_before,
            message=self.message,
            ask=self.callbacks.ask,
            interrupt=self.interrupt,
            watch=watch,
            opened=(self.store, self.project),
            on_session=session,
        )
        self.message = None  # delivered once, even when the run is started again
        return RunOutcome(code, session_id, detail)

    def _approved_at_the_gate(self) -> bool:
        """The spec-approval gate (W4) as a dialog: the spec and its gaps; approved there, it is recorded."""
        from lopen.workflow.approval import approve_spec

        path = spec_path(self.root, self.module)
        gaps = tuple(gap.render() for gap in check_module(self.root, self.module).gaps)
        request = ApprovalRequest(self.module, path.read_text(encoding="utf-8"), gaps)
        if not self.callbacks.approve(request):
            return False
        approve_spec(self.root, self.module, self.store, self.project)
        return True

    def stop(self) -> None:
        self.interrupt.set("SIGINT")


def start_run_for(root: Path, module: str, settings: Settings, **options: object) -> StartRun:
    """The ``start_run`` the TUI calls (again on `r`, to resume): a fresh :class:`TuiRun` each time."""

    def start(callbacks: RunCallbacks) -> TuiRun:
        return TuiRun(root, module, settings, callbacks, **options)  # type: ignore[arg-type]

    return start
