"""`lopen worker <module>`: one of several processes building one module together (P1, issue 14).

A worker is a `lopen run` whose loop is the Foreman's in worker mode: it claims what it works on through
the module's history — components (each built in a lane of its own and merged onto the module branch),
planning (one at a time) and the module's verification — renews its leases while it works, and takes
over work whose lease ran out (a worker that died). Workers on one machine share the project's SQLite
store and repository; on several machines they share a PostgreSQL store (``store.url``) and a git remote
(``git.remote``): every branch a worker moves is pushed there, and what another built is fetched.

Each worker opens a session of its own (``command="worker"``); it ends when the module is complete (by
whichever worker), or when nothing is left that it may do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from actors.foreman import Interrupt, begin
from events.journal import Journal
from events.locks import WorkerMark, module_lock
from lopen.app.crew import Crew, Parts
from lopen.app.engine import (
    STOP_TIMEOUT,
    check_spec,
    completed,
    keep_plan_file,
    open_session,
    start_gateway,
    wait,
    worker_name,
    worktree_for,
)
from lopen.app.interrupt import stopping_on_signals
from lopen.config import Settings
from lopen.copilot.locate import find_cli
from lopen.copilot.results import StreamEvent
from lopen.errors import LopenError
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.renderer import renderer
from lopen.workflow.spec_watch import SpecWatcher


def run_worker(
    root: Path,
    module: str,
    settings: Settings,
    say: Callable[[str], None],
    *,
    interrupt: Interrupt | None = None,
    watch: Callable[[str, StreamEvent], None] | None = None,
) -> tuple[int, str, str]:
    """Work on ``module`` with the other workers until it is complete; (exit code, session id, detail)."""
    if not settings.git.enabled:
        raise LopenError(
            "git.enabled is false, but Lopen builds every module in a git worktree",
            "workers build components on branches of their own and merge them",
            "set it back: `lopen config set git.enabled true`",
        )
    find_cli(settings.copilot.cli_path)
    ensure_lopen_dir(root)
    store, project = open_store(root, settings.store.url, settings.project.id)
    try:
        with module_lock(root, module, shared=True):  # with other workers, never with a `lopen run`
            journal = Journal(store, project, module)
            journal.check_intact()  # a rewritten, inserted or deleted event: the worker does not start
            watcher = SpecWatcher(root, module)
            check_spec(journal, watcher)
            keep_plan_file(root, journal)
            worktree = worktree_for(root, module, settings)
            if journal.read(lambda s: s.complete) and watcher.check(journal.snapshot()).drift is None:
                said = completed(journal, worktree, settings.git.remote)
                return 0, journal.read(lambda s: s.last_session()) or "", said
            interrupt = interrupt if interrupt is not None else Interrupt()
            created, _ = worktree.ensure(journal.read(lambda s: s.tip))  # one at a time: Worktree.ensure locks
            gateway, telemetry = start_gateway(store, project, settings, root, worktree, lanes=True)
            try:
                protection = gateway.protection
                session_id = open_session(
                    journal,
                    settings,
                    resume=None,
                    no_resume=True,
                    protection=protection.kind if protection else "policy",
                    worktree=worktree.path,
                    command="worker",
                    actor=f"worker:{worker_name()}",
                )
                say(f"session {session_id} (worker {worker_name()})")
                if protection is not None and protection.warning:
                    say(f"! sandbox: {protection.warning}")
                if protection is not None and protection.network_warning:
                    say(f"! network: {protection.network_warning}")
                subscription = store.subscribe(renderer(say, journal.stream))
                try:
                    with (
                        stopping_on_signals(interrupt, gateway.abort, say, gateway.kill),
                        WorkerMark(root, worker_name()),
                    ):
                        parts = Parts(
                            root, module, settings, store, project, journal, watcher, worktree, gateway, telemetry
                        )
                        crew = Crew(parts, say, None, watch, worker_name())
                        try:
                            with module_lock(root, f"{module}.setup"):
                                crew.git.ensure(created).get()
                            result = wait(begin(crew.foreman(interrupt, worker_mode=True)))
                        finally:
                            crew.close()
                finally:
                    subscription.cancel()
            finally:
                gateway.close(STOP_TIMEOUT if interrupt else 15)
                telemetry.close()
            if result is None:
                return 0, session_id, "nothing left to do"
            return result.exit_code, session_id, result.detail
    finally:
        store.close()
