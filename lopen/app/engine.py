"""A module run, composed: what `lopen run` calls.

``run_module`` finds the Copilot CLI, opens the project's store and the module's journal (the one
fold of its history), holds the module's run lock, and checks — before any session or model call —
that the spec is approved and unchanged since. A module that is complete stays complete: the run
says so and exits 0 (``replan=True`` asks for a new plan into the same history). Otherwise it
resumes the unfinished session or opens a new one, starts the gateway (one Copilot CLI), makes the
module's worktree, starts the actors, begins the Foreman's loop (``actors.foreman``) and waits for
its end, and always stops them and the CLI.
Ctrl+C and SIGTERM stop it cleanly (``lopen.app.interrupt``).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pykka

from actors.foreman import Interrupt, begin
from actors.messages import RunResult
from events import catalogue as ev
from events.fold import ModuleState
from events.journal import Journal
from events.locks import WorkerMark, module_lock
from events.store import EventStore
from lopen import __version__
from lopen.app.commands import face_actor
from lopen.app.crew import Crew, Parts, lanes_dir, start_spares
from lopen.app.interrupt import stopping_on_signals
from lopen.config import Settings
from lopen.copilot.gateway import Gateway, GatewayConfig, ProviderConfig
from lopen.copilot.home import forget_stale_homes, private_home
from lopen.copilot.locate import find_cli
from lopen.copilot.mcp_servers import session_servers
from lopen.copilot.results import StreamEvent
from lopen.errors import InterventionRequired, LopenError
from lopen.git import Worktree, who
from lopen.git.spares import Spares
from lopen.project import ensure_lopen_dir, open_store
from lopen.sandbox.config import sandbox_config
from lopen.workflow.renderer import renderer
from lopen.workflow.schedule import lanes_pending
from lopen.workflow.spec_watch import SpecWatcher

if TYPE_CHECKING:
    from lopen.telemetry.live import Telemetry


def attach_telemetry(store: EventStore, project: str, settings: Settings) -> Telemetry:
    """OpenTelemetry export of the run (``lopen.telemetry``): imports nothing when no OTEL_* switch is set;
    a collector that cannot be reached is one warning on stderr."""
    from lopen.telemetry import attach

    return attach(store, project, settings)


STOP_TIMEOUT = 3.0  # seconds the actors and the CLI get to stop


def start_gateway(
    store: EventStore, project: str, settings: Settings, root: Path, worktree: Worktree, *, lanes: bool
) -> tuple[Gateway, Telemetry]:
    """The run's telemetry (inert unless OTEL_* asks; warns on stderr) and the Copilot CLI started with it,
    confined to ``worktree`` (and the component worktrees with ``lanes``). Make the worktree first: the
    sandbox binds it. The caller closes both; a CLI that cannot start closes the telemetry here."""
    telemetry = attach_telemetry(store, project, settings)
    config = msgspec.structs.replace(
        gateway_config(settings, root, worktree, lanes=lanes), telemetry=telemetry.copilot_telemetry()
    )
    try:
        return Gateway(config).start(), telemetry
    except BaseException:
        telemetry.close()
        raise


def gateway_config(
    settings: Settings, root: Path, worktree: Worktree | None = None, *, lanes: bool = False
) -> GatewayConfig:
    """With a BYOK provider the CLI keeps its state under `.lopen/copilot/run-<pid>` (no GitHub login is
    needed), removed when the gateway closes, with what killed runs left (``lopen.copilot.home``).
    The model is confined to ``worktree`` (and a temp folder of Lopen's) by ``lopen.sandbox``; with
    ``lanes`` also to the module's component worktrees (parallel work), whose folder is made here."""
    provider = settings.provider
    if provider.base_url:
        forget_stale_homes(root)
    sandbox = None
    if worktree is not None:
        temp = root / ".lopen" / "tmp" / worktree.path.name
        components = lanes_dir(worktree.path) if lanes else None
        if components is not None:
            components.mkdir(parents=True, exist_ok=True)
        sandbox = sandbox_config(settings, root, worktree.path, temp_dir=temp, lanes=components)
    return GatewayConfig(
        cli_path=find_cli(settings.copilot.cli_path).path,
        default_model=settings.models.building,
        provider=ProviderConfig(
            type=provider.type or "openai",
            base_url=provider.base_url,
            api_key=provider.api_key,
            wire_api=provider.wire_api,
        )
        if provider.base_url
        else None,
        retry_attempts=settings.copilot.retry_attempts,
        retry_base_delay=settings.copilot.retry_base_delay,
        retry_max_delay=settings.copilot.retry_max_delay,
        copilot_home=str(private_home(root)) if provider.base_url else "",
        forget_home=bool(provider.base_url),
        sandbox=sandbox,
        mcp_servers=session_servers(settings.mcp.servers),
    )


PLAN_EVENTS = (
    ev.DependenciesRecorded,
    ev.ComponentsRecorded,
    ev.ComponentSelected,
    ev.TasksRecorded,
    ev.TaskStatusChanged,
    ev.TaskReopened,
    ev.OracleVerdictRecorded,
    ev.CommitRecorded,
)


def keep_plan_file(root: Path, journal: Journal) -> None:
    """`.lopen/modules/<module>/plan.md` follows the run: rendered from the fold after each plan change."""
    from events.projections.plan import write_plans

    def render(state: ModuleState, events: list[ev.Event]) -> None:
        if any(isinstance(e, PLAN_EVENTS) for e in events):
            write_plans(root, {state.module: state}, state.project)

    journal.listen(render)


def worktree_for(root: Path, module: str, settings: Settings) -> Worktree:
    return Worktree(
        root,
        (root / settings.git.worktree_dir / module).resolve(),
        f"lopen/{module}",
        ignore=settings.git.ignore,
        max_file_bytes=settings.git.max_file_mb * 1024 * 1024,
    )


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def check_spec(journal: Journal, watcher: SpecWatcher) -> None:
    """The human gate before any session: approved, and unchanged since (exit 2 otherwise)."""
    state = journal.snapshot()
    module = journal.module
    if state.approval is None:
        raise InterventionRequired(
            f"the specification of {module} is not approved",
            "Lopen plans and builds only from a specification a person has approved (the human gate)",
            f"review docs/requirements/{module}/SPECIFICATION.md, then run `lopen spec approve {module}`",
        )
    status = watcher.check(state)
    if status.unapproved:
        raise InterventionRequired(
            f"the specification of {module} changed since it was approved ({', '.join(status.unapproved)})",
            "a run builds only from the approved specification; an edit is adopted when a person approves it",
            f"review the change, then `lopen spec approve {module}` and run again (Lopen re-plans what it needs)",
        )


def completed(journal: Journal, worktree: Worktree, remote: str = "") -> str:
    """What to say about a module that is already complete — and, when its commits are not in this
    clone (the store is shared, the work was done in another clone), where they are."""
    from lopen.git.repository import Repository

    state = journal.snapshot()
    commits = [t.commit for t in state.ordered_tasks() if t.commit]
    last = state.last_session() or "-"
    noun = "commit" if len(commits) == 1 else "commits"
    said = (
        f"module {journal.module} is complete (session {last}; {len(commits)} task {noun} on {worktree.branch}, "
        f"last {state.tip[:8]}); nothing to do. "
    )
    repo = Repository(worktree.repo_root)
    if state.tip and not repo.has_commit(state.tip):
        fetch = (
            f"`git fetch {remote} {worktree.branch}:{worktree.branch}`"
            if remote
            else f"`git fetch <the other clone> {worktree.branch}:{worktree.branch}`"
        )
        branch = (
            f"{worktree.branch} has no commits here"
            if not repo.branch_exists(worktree.branch)
            else (f"{worktree.branch} here does not hold them")
        )
        return (
            said + f"Its commits were made in another clone that shares this store: {branch}. Get them with "
            f"{fetch}, then see them with `git log {worktree.branch}`; `lopen run {journal.module} --replan` "
            "plans it again here"
        )
    return said + f"See it with `git log {worktree.branch}`; `lopen run {journal.module} --replan` plans it again"


def where_it_stands(root: Path, module: str, settings: Settings) -> tuple[bool, tuple[str, str] | None]:
    """Before a run asks for credentials: whether the module's spec was ever approved (the gate comes
    first), and ``(last session, what to say)`` when the module is complete with its spec the approved
    one — `lopen run` then says so without asking for credentials or starting the CLI."""
    store, project = open_store(root, settings.store.url, settings.project.id)
    with store:
        journal = Journal(store, project, module)
        state = journal.snapshot()
        if not state.complete:
            return state.approval is not None, None
        status = SpecWatcher(root, module).check(state)
        if not status.approved or status.unapproved or status.drift is not None:
            return state.approval is not None, None
        worktree = worktree_for(root, module, settings)
        return True, (state.last_session() or "", completed(journal, worktree, settings.git.remote))


def open_session(
    journal: Journal,
    settings: Settings,
    *,
    resume: str | None,
    no_resume: bool,
    protection: str,
    worktree: Path,
    command: str = "run",
    actor: str = "",
) -> str:
    """Resume the module's unfinished session (or ``resume``), else open a new one; ``actor`` — who
    asked (``cli:<user>``, ``tui:<user>``, ``worker:<host:pid>``) — is recorded with either."""
    state = journal.snapshot()
    previous = resume or (None if no_resume or not settings.session.auto_resume else state.unfinished_session())
    if previous:
        node = state.sessions.get(previous)
        if node is None or node.status == "deleted":
            raise LopenError(
                f"no session {previous} of module {journal.module}",
                "it is not in this project's history" if node is None else "it was deleted",
                "see `lopen session list`",
            )
        why = "asked for by name" if resume else "the module's unfinished session"
        reason = f"lopen {command}" + (f" by {actor}" if actor else "") + f": {why}"
        journal.resume_session(previous, reason, traceparent=caller_trace())
        return previous
    models = {
        "building": settings.models.building,
        "planning": settings.models.planning,
        "research": settings.models.research,
        "oracle": settings.models.oracle,
    }
    return journal.open_session(
        ev.SessionStarted(
            lopen_version=__version__,
            models=models,
            config_digest=settings.digest(),
            protection=protection,
            worktree=str(worktree),
            worker=worker_name(),
            command=command,
            started_by=actor,
            resumed_from=state.last_session() or "",  # the session this one continues the module's history from
            traceparent=caller_trace(),
        )
    )


def caller_trace() -> str:
    """The W3C trace context this process was started in (``TRACEPARENT``, as a CI job or a traced script
    sets it), when it is a valid one: recorded with the run, whose span then links to it."""
    from lopen.telemetry.ids import parse_traceparent

    text = os.environ.get("TRACEPARENT", "").strip().lower()
    return text if parse_traceparent(text) else ""


def run_module(
    root: Path,
    module: str,
    settings: Settings,
    say: Callable[[str], None],
    *,
    resume: str | None = None,
    no_resume: bool = False,
    replan: bool = False,
    stop_before: str = "",
    message: str | None = None,
    ask: Callable[[str], bool] | None = None,
    interrupt: Interrupt | None = None,
    watch: Callable[[str, StreamEvent], None] | None = None,
    opened: tuple[EventStore, str] | None = None,
    on_session: Callable[[str], None] | None = None,
    actor: str = "",
) -> tuple[int, str, str]:
    """Run the workflow for ``module``; returns (exit code, session id, detail).

    ``opened`` is a store (and its project id) the caller holds and keeps open; ``on_session`` hears the
    session id as soon as it is known; ``interrupt`` set from any thread stops the run as Ctrl+C does;
    ``actor`` is who started the run (``cli:<user>``, ``tui:<user>``; default the command line's user),
    recorded with the session it opens or resumes."""
    if not settings.git.enabled:
        raise LopenError(
            "git.enabled is false, but Lopen builds every module in a git worktree",
            "each verified task is committed on lopen/<module>; there is no way to work without git",
            "set it back: `lopen config set git.enabled true`",
        )
    find_cli(settings.copilot.cli_path)  # the CLI is found before anything is recorded
    ensure_lopen_dir(root)
    store, project = opened or open_store(root, settings.store.url, settings.project.id)
    try:
        with module_lock(root, module):
            journal = Journal(store, project, module)
            journal.check_intact()  # a rewritten, inserted or deleted event: the run does not start (StoreTampered)
            watcher = SpecWatcher(root, module)
            check_spec(journal, watcher)
            keep_plan_file(root, journal)
            worktree = worktree_for(root, module, settings)
            if not replan and journal.read(lambda s: s.complete) and watcher.check(journal.snapshot()).drift is None:
                return (
                    0,
                    journal.read(lambda s: s.last_session()) or "",
                    completed(journal, worktree, settings.git.remote),
                )
            interrupt = interrupt if interrupt is not None else Interrupt()
            created, _ = worktree.ensure(journal.read(lambda s: s.tip))  # before the CLI: its sandbox binds it
            lanes = stop_before != "building" and (
                settings.workflow.parallelism > 1 or journal.read(lanes_pending)  # lane work under way is finished
            )
            spares = start_spares(root, worktree, journal, settings.workflow.parallelism) if lanes else None
            try:
                gateway, telemetry = start_gateway(store, project, settings, root, worktree, lanes=lanes)
            except BaseException:
                if spares is not None:
                    spares.close()
                raise
            try:
                protection = gateway.protection
                session_id = open_session(
                    journal,
                    settings,
                    resume=resume,
                    no_resume=no_resume,
                    protection=protection.kind if protection else "policy",
                    worktree=worktree.path,
                    command="plan" if stop_before == "building" else "run",
                    actor=actor or face_actor("cli"),
                )
                say(f"session {session_id}")
                if on_session is not None:
                    on_session(session_id)
                if protection is not None and protection.warning:
                    say(f"! sandbox: {protection.warning}")
                if protection is not None and protection.network_warning:
                    say(f"! network: {protection.network_warning}")
                subscription = store.subscribe(renderer(say, journal.stream))
                try:
                    if replan:
                        journal.record(ev.ReplanRequested(step=2, reason="lopen run --replan", requested_by=who(root)))
                    if message:
                        from lopen.app.commands import new_message_id

                        queued = ev.UserMessageQueued(message_id=new_message_id(), text=message)
                        journal.record(queued)
                    with (
                        stopping_on_signals(interrupt, gateway.abort, say, gateway.kill),
                        WorkerMark(root, worker_name()) if lanes else contextlib.nullcontext(),
                    ):
                        parts = Parts(
                            root, module, settings, store, project, journal, watcher, worktree, gateway, telemetry
                        )
                        result = _run(parts, say, stop_before, ask, interrupt, watch, created, lanes, spares)
                finally:
                    subscription.cancel()
            finally:
                gateway.close(STOP_TIMEOUT if interrupt else 15)
                telemetry.close()
                if spares is not None:  # not taken by a lane: removed (the crew did, unless it never started)
                    spares.close()
            return result.exit_code, session_id, result.detail
    finally:
        if opened is None:
            store.close()


def wait(done: pykka.Future[Any]) -> Any:
    """Wait for the run's end in short waits: a signal handler runs between them."""
    while True:
        try:
            return done.get(timeout=0.2)
        except pykka.Timeout:
            continue


def _run(
    parts: Parts,
    say: Callable[[str], None],
    stop_before: str,
    ask: Callable[[str], bool] | None,
    interrupt: Interrupt,
    watch: Callable[[str, StreamEvent], None] | None,
    created: bool = False,
    lanes: bool = False,
    spares: Spares | None = None,
) -> RunResult:
    crew = Crew(parts, say, ask, watch, worker_name(), spares)
    try:
        crew.git.ensure(created).get()
        return wait(begin(crew.foreman(interrupt, lanes=lanes, stop_before=stop_before)))
    finally:
        crew.close()


__all__ = ["Interrupt", "run_module"]
