"""Lopen's live terminal UI (U1–U3), built with Textual.

Entry points (each returns the exit code the command should end with)::

    run_tui(root, module, start_run, settings=…, info=…)      # a run: watch, steer, pause, answer
    watch_tui(root, session_id, settings=…)                   # `lopen watch`: read-only, from anywhere
    pick_tui(root, settings=…, start_run_for=…)               # plain `lopen`: the module picker
    run_conversation(root, module, draft, settings=…)         # step 1 as a conversation
    gallery_tui(settings=…)                                   # `lopen tui gallery`

The contract with a run is in ``lopen.tui.contract`` (``RunCallbacks``, ``RunHandle``,
``StartRun``); when the TUI opens is ``lopen.tui.options.use_tui``. Importing this package costs
nothing: Textual is imported when an entry point is called, never by ``lopen --help``.

Layout: ``state`` (the screen's data, folded from events — no Textual), ``feed`` (events and deltas
from any thread into the app's), ``controller`` (recorded commands), ``conversation`` (step 1's
controller), ``app`` (the Textual app), ``screens/``, ``dialogs/``, ``widgets/`` (one module each),
``stub`` (data for the gallery and the snapshots).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lopen.tui.contract import ApprovalRequest, HeaderInfo, RunCallbacks, RunHandle, RunOutcome, StartRun
from lopen.tui.options import TuiOptions, use_tui

if TYPE_CHECKING:
    from lopen.config import Settings
    from lopen.tui.app import LopenApp
    from lopen.tui.conversation import Conversation
    from lopen.tui.screens.picker import Pick

__all__ = [
    "ApprovalRequest",
    "HeaderInfo",
    "RunCallbacks",
    "RunHandle",
    "RunOutcome",
    "StartRun",
    "TuiOptions",
    "gallery_tui",
    "header_info",
    "pick_tui",
    "run_conversation",
    "run_tui",
    "use_tui",
    "watch_tui",
]

STOP_GRACE_SECONDS = 30.0


def header_info(settings: Settings | None) -> HeaderInfo:
    """What the top bar says about the model's provider and the budgets, from settings."""
    if settings is None:
        return HeaderInfo()
    provider = settings.provider
    if provider.type:
        host = provider.base_url.split("//", 1)[-1].split("/", 1)[0] if provider.base_url else ""
        where, auth = f"{provider.type}" + (f" @ {host}" if host else ""), "BYOK"
    else:
        where, auth = (
            "GitHub Copilot",
            next(
                (name for name in ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN") if os.environ.get(name)),
                "CLI login",
            ),
        )
    models = {
        "planning": settings.models.planning,
        "building": settings.models.building,
        "oracle": settings.models.oracle,
    }
    return HeaderInfo(
        provider=where,
        auth=auth,
        token_budget=settings.budget.token_budget_per_module,
        premium_budget=settings.budget.premium_budget_per_module,
        money_budget=settings.budget.money_budget_per_module,
        models=models,
    )


def _options(settings: Settings | None, options: TuiOptions | None, **overrides: object) -> TuiOptions:
    base = options or TuiOptions.resolve(settings)
    return TuiOptions(**{**base.__dict__, **overrides}) if overrides else base


def _run(app: LopenApp) -> int:
    result = app.run()
    for thread in app.threads:  # a run asked to stop finishes its step (its state is saved)
        if thread.is_alive() and thread is not threading.current_thread():
            print("waiting for the run to stop cleanly…", flush=True)
            thread.join(STOP_GRACE_SECONDS)
    return int(result or 0) if isinstance(result, int) else 0


def run_tui(
    root: Path,
    module: str,
    start_run: StartRun,
    *,
    settings: Settings | None = None,
    info: HeaderInfo | None = None,
    options: TuiOptions | None = None,
    resume: str | None = None,
    new_session: bool = False,
) -> int:
    """Run ``module`` under the TUI: ``start_run(callbacks)`` gives the run (see ``lopen.tui.contract``);
    returns the run's exit code (0, 1, 2), or 130 when the person left during a stop."""
    from lopen.tui.app import LopenApp

    app = LopenApp(_options(settings, options), info or header_info(settings), root)
    return _run(app.for_run(start_run, resume=resume, new_session=new_session))


def watch_tui(
    root: Path | None,
    session_id: str,
    *,
    settings: Settings | None = None,
    options: TuiOptions | None = None,
) -> int:
    """``lopen watch <session>``: follow a session from this or another machine, read-only, by polling
    the store (``store.url`` may be a PostgreSQL server)."""
    from lopen.app.context import Project
    from lopen.app.queries import module_of_session
    from lopen.errors import LopenError
    from lopen.tui.app import LopenApp

    module = module_of_session(session_id)
    store, project = Project(root or Path.cwd(), configured=settings).open()
    with store:
        store.projections.catch_up()
        if store.projections.sessions.get(session_id, project) is None:
            raise LopenError(f"no session {session_id} in this project's store", "", "see `lopen session list`")
        app = LopenApp(_options(settings, options, read_only=True), header_info(settings), root)
        return _run(app.for_watch(store, project, module, session_id))


def pick_tui(
    root: Path,
    *,
    settings: Settings | None = None,
    options: TuiOptions | None = None,
    start_run_for: Callable[[Pick], StartRun | None] | None = None,
) -> int:
    """Plain ``lopen``: the module picker. ``start_run_for(pick)`` gives the run of the picked module
    (None, or no function: the module is opened read-only, its history shown)."""
    from lopen.app import queries
    from lopen.app.context import Project
    from lopen.tui.app import LopenApp
    from lopen.tui.screens.picker import PickerScreen, rows_of

    here = Project(root, configured=settings)
    store, project = here.open() if here.has_store() else (None, "")
    try:
        rows = rows_of(queries.modules(Project.on(store, project, root) if store is not None else here))
        app = LopenApp(_options(settings, options), header_info(settings), root)

        def picked(pick: Pick | None) -> None:
            if pick is None:
                app.exit(0)
                return
            start = start_run_for(pick) if start_run_for else None
            if start is not None:
                app.for_run(start, resume=pick.resume, new_session=pick.new_session)
                app._first()
            elif store is not None:
                app.watch_module(store, project, pick.module, pick.resume or "", poll=True)
            else:
                app.notify(f"{pick.module} has no history yet: run it with `lopen run {pick.module}`.")
                app.push_screen(PickerScreen(rows, root), picked)

        app._first = lambda: app.push_screen(PickerScreen(rows, root), picked)
        return _run(app)
    finally:
        if store is not None:
            store.close()


def run_conversation(
    root: Path,
    module: str,
    draft: Callable[[Conversation], RunOutcome],
    *,
    settings: Settings | None = None,
    options: TuiOptions | None = None,
    record: Callable[..., None] | None = None,
) -> int:
    """Step 1 as a conversation: ``draft(conversation)`` runs in a worker thread and talks to the
    person through the :class:`~lopen.tui.conversation.Conversation` (ask, say, draft, approve)."""
    from lopen.tui.app import LopenApp
    from lopen.tui.conversation import Conversation

    conversation = Conversation(module, record=record)
    app = LopenApp(_options(settings, options), header_info(settings), root)
    return _run(app.for_conversation(conversation, draft))


def gallery_tui(*, settings: Settings | None = None, options: TuiOptions | None = None) -> int:
    """``lopen tui gallery``: every widget with stub data."""
    from lopen.tui.app import LopenApp
    from lopen.tui.screens.gallery import GalleryScreen

    app = LopenApp(_options(settings, options, landing=False), None, None)
    return _run(app.for_screen(GalleryScreen))
