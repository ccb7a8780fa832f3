"""The write side of the one door: every change a person (or an MCP client) asks of a project.

One function per feature, whichever face asks. Each

1. validates its input once, here (a bad module name, no running session to pause, an empty
   message…) and raises :class:`~lopen.errors.LopenError` with what, why and how to fix it;
2. records what it did through the module's :class:`~events.journal.Journal` — checked against the
   one fold, appended with optimistic concurrency — together with
   ``ControlRequested(action, caller=actor, detail)``, so the history says who asked;
3. returns a small typed result the face renders.

``actor`` names who asked: ``cli`` (``cli:<user>`` when known), ``tui:<user>``, ``mcp:<client>``.

The rules, stated once:

- **pause**: the module must have a running session; the run pauses before its next invocation.
- **queue a message**: the text is not empty and the module exists (a specification or a history);
  it goes to the unfinished session, if any, else to the next one. Its id is :func:`new_message_id`.
- **approve**: the spec has acceptance criteria and no ``[TODO: …]`` placeholders.
- **delete a session**: not while it runs (its module locked by a live process).
- **start a run** (:func:`start_run`): no specification → draft one (a prompt is needed, or a
  conversation in the TUI); already complete with the approved spec → say so, nothing started;
  otherwise → run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from events import catalogue as ev
from lopen.app import queries
from lopen.app.tracing import traced
from lopen.errors import InterventionRequired, LopenError

if TYPE_CHECKING:
    from events.journal import Journal
    from events.store import EventStore
    from lopen.app.context import Project
    from lopen.config import Settings


def cli_actor(env: dict[str, str] | None = None) -> str:
    """``cli:<user>`` (``cli`` when the user is unknown): who asked from the command line."""
    return face_actor("cli", env)


def face_actor(face: str, env: dict[str, str] | None = None) -> str:
    """``<face>:<user>`` (``<face>`` when the user is unknown): who asked, and through which face."""
    env = dict(os.environ) if env is None else env
    user = env.get("USER") or env.get("USERNAME") or ""
    return f"{face}:{user}" if user else face


def new_message_id() -> str:
    """The one format of a queued message's id: ``m-`` and 12 hex digits."""
    return f"m-{uuid.uuid4().hex[:12]}"


def _journal(store: EventStore, project_id: str, module: str) -> Journal:
    """The module's journal: its history folded (the one fold), ready to record more."""
    from events.journal import Journal

    return Journal(store, project_id, queries.valid_module(module))


def _record(store: EventStore, project_id: str, module: str, *events: ev.Event) -> None:
    """Append ``events`` to the module's history through its journal (checked, one batch)."""
    _journal(store, project_id, module).record(*events)


def control(project: Project, module: str, actor: str, action: str, detail: str = "", session: str = "") -> None:
    """Record that ``actor`` asked for ``action`` (e.g. ``model``: a model from the next invocation on)."""
    tracing = traced(project, f"control {action}", actor, module=module, session=session)
    with tracing, project.store() as (store, project_id):
        _record(
            store,
            project_id,
            module,
            ev.ControlRequested(action=action, caller=actor, detail=detail, session_id=session),
        )


# -- steering a run -------------------------------------------------------------------------------------


class PauseRequested(msgspec.Struct, frozen=True):
    module: str
    session: str
    requested_by: str
    reason: str


def pause(project: Project, module: str, actor: str, reason: str = "") -> PauseRequested:
    """Ask the module's running session to pause before its next invocation."""
    with traced(project, "pause_run", actor, module=module) as span:
        with project.store() as (store, project_id):
            journal = _journal(store, project_id, module)
            state = journal.snapshot()
            session = state.unfinished_session()
            if session is None or state.sessions[session].status != "running":
                raise LopenError(
                    f"module {module} has no running session to pause",
                    "its sessions are: " + (", ".join(f"{s} {n.status}" for s, n in state.sessions.items()) or "none"),
                    "start one with start_run (`lopen run`), or resume a paused one with resume_run",
                )
            why = reason or f"pause requested by {actor}"
            journal.record(
                ev.PauseRequested(requested_by=actor, reason=why, session_id=session),
                ev.ControlRequested(action="pause", caller=actor, detail=why, session_id=session),
            )
        span["lopen.session"] = session
        return PauseRequested(module, session, actor, why)


class MessageQueued(msgspec.Struct, frozen=True):
    module: str
    message_id: str
    session: str


def queue_message(project: Project, module: str, text: str, actor: str) -> MessageQueued:
    """Queue a message for the model: delivered in the next invocation, never injected mid-run."""
    with traced(project, "queue_message", actor, module=module) as span:
        if not text.strip():
            raise LopenError("the message is empty", "there would be nothing to deliver", "give the message's text")
        message_id = new_message_id()
        with project.store() as (store, project_id):
            journal = _journal(store, project_id, module)
            state = journal.snapshot()
            if not journal.version and not queries.has_spec(project, module):
                raise LopenError(
                    f"there is no module {module}",
                    f"it has neither a specification (docs/requirements/{module}/SPECIFICATION.md) nor a history",
                    "list the modules with `lopen modules` (MCP: list_modules)",
                )
            session = state.unfinished_session() or ""
            journal.record(
                ev.ControlRequested(action="queue-message", caller=actor, detail=message_id, session_id=session),
                ev.UserMessageQueued(message_id=message_id, text=text, session_id=session),
            )
        span.update({"lopen.message.id": message_id, "lopen.session": session})
        return MessageQueued(module, message_id, session)


# -- the human gate -------------------------------------------------------------------------------------


class Approved(msgspec.Struct, frozen=True):
    module: str
    approver: str
    spec_hash: str
    section_hashes: dict[str, str]
    notes: list[str]  # the spec check's remaining gaps (not blocking)


def approve(project: Project, module: str, actor: str) -> Approved:
    """Approve the module's specification as it is now: the human gate before planning."""
    with traced(project, "lopen spec approve", actor, module=module) as span:
        from lopen.project import ensure_lopen_dir
        from lopen.workflow.approval import approval_of

        queries.valid_module(module)
        ensure_lopen_dir(project.root)
        approved, gaps = approval_of(project.root, module)
        approved = msgspec.structs.replace(approved, via=actor)  # an MCP client's approval says so in replay
        with project.store() as (store, project_id):
            detail = f"spec {approved.spec_hash} approved by {approved.approver}"
            control = ev.ControlRequested(action="approve-spec", caller=actor, detail=detail)
            _record(store, project_id, module, approved, control)
        span["lopen.spec.hash"] = approved.spec_hash
        return Approved(module, approved.approver, approved.spec_hash, dict(approved.section_hashes), gaps)


# -- going back, tidying up -----------------------------------------------------------------------------


def short(sha: str) -> str:
    """A commit's short form, as every face shows it."""
    return sha[:8]


def revert(project: Project, module: str, actor: str, to_task: str | None = None) -> Any:
    """Reset ``lopen/<module>`` to a task-completion commit (the last one, or ``to_task``'s) and re-open
    the tasks after it (``lopen.workflow.revert``); returns its ``RevertResult``."""
    with traced(project, "lopen revert", actor, module=module, to_task=to_task or "") as span:
        from lopen.app.engine import worktree_for
        from lopen.workflow.revert import revert_module

        queries.valid_module(module)
        with project.store() as (store, project_id):
            worktree = worktree_for(project.root, module, project.settings())
            result = revert_module(project.root, module, store, project_id, worktree, to_task=to_task)
            if result.changed:
                detail = f"{short(result.from_sha)} -> {short(result.to_sha)} ({result.target.task_id})"
                _record(store, project_id, module, ev.ControlRequested(action="revert", caller=actor, detail=detail))
        span.update(
            {
                "lopen.session": result.session_id,
                "lopen.revert.changed": result.changed,
                "lopen.revert.from": result.from_sha,
                "lopen.revert.to": result.to_sha,
                "lopen.revert.reopened": list(result.reopened),
            }
        )
        return result


def delete_session(project: Project, session_id: str, actor: str) -> str:
    """Take a session off the lists (``SessionDeleted``); its events stay in the store for audit.
    Returns its module."""
    with traced(project, "lopen session delete", actor, session=session_id):
        from events.locks import ModuleLock

        with project.store() as (store, project_id):
            session = session_view(store, session_id)
            holder = ModuleLock(store.root, session.module).holder()
            if session.status == "running" and holder is not None:
                raise LopenError(
                    f"session {session_id} is running",
                    f"lopen (pid {holder}) is working on module {session.module}",
                    "stop that run first, then delete the session",
                )
            _record(
                store,
                session.project or project_id,
                session.module,
                ev.SessionDeleted(reason="lopen session delete", session_id=session_id),
                ev.ControlRequested(action="delete-session", caller=actor, detail=session_id, session_id=session_id),
            )
            return session.module


def prune_sessions(project: Project, actor: str, keep: int | None = None) -> tuple[list[str], int]:
    """Delete all but the newest ``keep`` completed sessions of each module (default:
    ``session.retention``). Returns (the deleted ids, the number kept per module)."""
    with traced(project, "lopen session prune", actor):
        retention = keep if keep is not None else project.settings().session.retention
        pruned = []
        with project.store() as (store, project_id):
            views = store.projections
            by_module: dict[str, list[str]] = {}
            for s in views.sessions.all():
                if s.status == "completed":
                    by_module.setdefault(s.module, []).append(s.id)
            for module, ids in by_module.items():
                doomed = ids[: max(len(ids) - retention, 0)]
                if not doomed:
                    continue
                reason = f"lopen session prune: keeping the newest {retention} completed sessions of {module}"
                _record(
                    store,
                    views.project or project_id,
                    module,
                    *(ev.SessionDeleted(reason=reason, session_id=session_id) for session_id in doomed),
                    ev.ControlRequested(action="prune-sessions", caller=actor, detail=", ".join(doomed)),
                )
                pruned += doomed
        return pruned, retention


def session_view(store: EventStore, session_id: str | None) -> Any:
    """A session's row (the latest when ``session_id`` is None); a deleted or unknown one is a
    ``LopenError``."""
    views = store.projections
    views.catch_up()
    session = views.sessions.get(session_id) if session_id else views.sessions.latest()
    if session is None or session.deleted:
        what = f"no session {session_id}" if session_id else "no sessions yet"
        why = "it was deleted" if session is not None else f"the event store at {store.location} has none by that id"
        raise LopenError(
            what, why if session_id else "nothing has been run in this project", "see `lopen session list`"
        )
    return session


# -- starting a run -------------------------------------------------------------------------------------


class Start(msgspec.Struct, frozen=True, kw_only=True):
    """What ``lopen run <module>`` means here and now (:func:`start_run`).

    ``kind``: ``converse`` — no spec, no prompt, a terminal: draft it with the person in the TUI;
    ``draft`` — no spec, a prompt: the model drafts it; ``complete`` — nothing to do (``outcome`` says
    so); ``run`` — run the workflow (in the TUI when ``tui``). ``warnings`` are the pre-flight's, for the
    face to show."""

    kind: Literal["converse", "draft", "complete", "run"]
    module: str
    root: Path
    settings: Any
    tui: bool
    warnings: list[str] = []
    outcome: tuple[int, str, str] | None = None
    model_server: Any = None  # the scripted model of ``--playbook``, serving until ``close()``

    def close(self) -> None:
        """Stop what the run was given for its life (the scripted model of ``--playbook``)."""
        if self.model_server is not None:
            self.model_server.stop()


def settings_for_run(
    root: Path,
    model: str | None = None,
    max_iterations: int | None = None,
    unattended: bool = False,
    parallel: int | None = None,
    scripted: tuple[str, list[str]] | None = None,
) -> Settings:
    """The project's settings with a run's flags over them (each flag named in errors as given);
    ``scripted`` — (url, models) of the scripted model ``--playbook`` started — points every session at it."""
    from lopen.app.scripted import scripted_overrides
    from lopen.config import load_settings

    overrides: dict[str, object] = scripted_overrides(*scripted) if scripted else {}
    names = dict.fromkeys(overrides, "--playbook")
    if parallel:
        overrides["workflow.parallelism"], names["workflow.parallelism"] = parallel, "--parallel"
    if model:
        for phase in ("requirement_gathering", "planning", "building"):
            overrides[f"models.{phase}"], names[f"models.{phase}"] = model, "--model"
    if max_iterations:
        overrides["workflow.max_iterations"], names["workflow.max_iterations"] = max_iterations, "--max-iterations"
    if unattended:
        overrides["workflow.unattended"], names["workflow.unattended"] = True, "--unattended"
    return load_settings(root, overrides, flag_names=names)


def start_run(
    project: Project,
    module: str,
    *,
    prompt: str | None = None,
    replan: bool = False,
    headless: bool = False,
    model: str | None = None,
    max_iterations: int | None = None,
    unattended: bool = False,
    parallel: int | None = None,
    playbook: Path | None = None,
) -> Start:
    """Decide what running ``module`` means (see the module docstring) and make it ready, in this
    order: the name valid, the repository ready for commits, the scripted model of ``playbook`` started
    (the caller ``close()``s the ``Start`` at the run's end), the settings with the run's flags over them,
    the pre-flight passed (credentials, models) unless the module is already complete, ``.lopen/`` in place."""
    from lopen.git import require_ready

    queries.valid_module(module)
    require_ready(project.root)
    if playbook is None:
        return _start_run(project, module, prompt, replan, headless, model, max_iterations, unattended, parallel)
    from lopen.app.scripted import start_scripted

    server = start_scripted(playbook)
    try:
        scripted = (server.url, list(server.playbook.models))
        start = _start_run(
            project, module, prompt, replan, headless, model, max_iterations, unattended, parallel, scripted
        )
    except BaseException:
        server.stop()
        raise
    return msgspec.structs.replace(start, model_server=server)


def _start_run(
    project: Project,
    module: str,
    prompt: str | None,
    replan: bool,
    headless: bool,
    model: str | None,
    max_iterations: int | None,
    unattended: bool,
    parallel: int | None,
    scripted: tuple[str, list[str]] | None = None,
) -> Start:
    from lopen.auth import preflight
    from lopen.project import ensure_lopen_dir
    from lopen.term import use_tui

    root = project.root
    settings = settings_for_run(root, model, max_iterations, unattended, parallel, scripted)
    drafting = not queries.has_spec(project, module)
    if drafting and not prompt:
        near = queries.similar_module(project, module)
        if near:
            raise LopenError(
                f"module {module} has no specification — did you mean {near}?",
                f"docs/requirements/{near}/SPECIFICATION.md exists; docs/requirements/{module}/ has none",
                f"`lopen run {near}`; to start a new module named {module}: "
                f"`lopen run {module} --prompt '<what to build>'`",
            )
    tui = use_tui(headless=headless, setting=settings.display.tui)
    base = {"module": module, "root": root, "settings": settings, "tui": tui}
    if drafting and not prompt and tui:  # step 1 as a conversation in the TUI (the model asks, you answer)
        warnings = preflight(settings, drafting=True)
        ensure_lopen_dir(root)
        return Start(kind="converse", warnings=warnings, **base)
    if drafting and not prompt:
        raise LopenError(
            f"module {module} has no specification",
            f"Lopen builds from docs/requirements/{module}/SPECIFICATION.md",
            "write it (see docs/specifications.md), or have it drafted: "
            f"`lopen run {module} --prompt '<what to build>'`",
        )
    if not drafting and not replan and not prompt:
        from lopen.app.engine import where_it_stands

        approved, done = where_it_stands(root, module, settings)  # a finished module needs no credentials
        if done is not None:
            return Start(kind="complete", outcome=(0, *done), **base)
        if not tui and not approved:  # the gate first: credentials come later
            raise InterventionRequired(
                f"the specification of {module} is not approved",
                "Lopen plans and builds only from a specification a person has approved (the human gate)",
                f"review docs/requirements/{module}/SPECIFICATION.md, then run `lopen spec approve {module}`",
            )
    warnings = preflight(settings, drafting=drafting, root=root)
    ensure_lopen_dir(root)
    return Start(kind="draft" if drafting else "run", warnings=warnings, **base)


def start_worker(project: Project, module: str, parallel: int | None = None) -> Start:
    """Make ``lopen worker <module>`` ready as :func:`start_run` does (unattended: a worker never asks)."""
    from lopen.auth import preflight
    from lopen.git import require_ready
    from lopen.project import ensure_lopen_dir

    queries.valid_module(module)
    require_ready(project.root)
    settings = settings_for_run(project.root, None, None, True, parallel)
    warnings = preflight(settings, drafting=False, root=project.root)
    ensure_lopen_dir(project.root)
    return Start(kind="run", module=module, root=project.root, settings=settings, tui=False, warnings=warnings)


def model_warnings(root: Path | None, key: str, value: object) -> list[str]:
    """``lopen config set models.<role> <name>``: the names that may not be models (checked against the
    provider's list from the last check, else Lopen's price table), each with a "did you mean"."""
    from lopen.auth import model_name_warning

    if not key.startswith("models."):
        return []
    names = value if isinstance(value, list | tuple) else [value]
    return [w for w in (model_name_warning(root, key, str(n)) for n in names) if w]


def refuse_existing_spec(project: Project, module: str) -> None:
    """``lopen spec draft`` would overwrite a specification: refuse."""
    if queries.has_spec(project, module):
        raise LopenError(
            f"module {module} already has a specification",
            "drafting would overwrite it",
            f"edit it by hand, or remove it first; `lopen spec check {module}` lists its gaps",
        )


def require_plan(project: Project, module: str) -> None:
    """``lopen build`` works through a recorded plan: refuse without one."""
    if not queries.planned(project, module):
        raise LopenError(
            f"module {module} has no plan to build",
            "building works through a recorded plan",
            f"run `lopen plan {module}` first",
        )


# -- runs in the background (the MCP server's start_run / resume_run) ----------------------------------

WIND_DOWN_SECONDS = 30.0  # how long start/resume waits for a run that recorded its pause or end to exit


class Background:
    """Runs ``lopen run <module> --headless`` detached from the asking process (the MCP server),
    one per module, each with its output in ``.lopen/runs/<module>-<time>.log``."""

    def __init__(self, project: Project, sleep: Callable[[float], None] | None = None) -> None:
        import time

        self.project = project
        self.sleep = sleep or time.sleep  # how a wait for a closing run passes (a test makes it do the closing)
        self._children: list[Any] = []

    def start(self, module: str, actor: str, prompt: str = "") -> dict[str, Any]:
        """Start the module's run in the background; an optional prompt is queued for the model."""
        with traced(self.project, "start_run", actor, module=module):
            self.not_running(module)
            args = ["run", module, "--headless", *(["--prompt", prompt] if prompt else [])]
            started = self._spawn(module, args)
            self._control(module, "start-run", actor, f"pid {started['pid']}, log {started['log']}")
            return started

    def resume(self, module: str, actor: str) -> dict[str, Any]:
        """Start the module's run again in the background; it resumes where the module stands."""
        with traced(self.project, "resume_run", actor, module=module) as span:
            self.not_running(module)
            session = queries.module_state(self.project, module).unfinished_session()
            args = ["run", module, "--headless", *(["--resume", session] if session else [])]
            started = self._spawn(module, args)
            detail = f"session {session or '(a new one)'}; pid {started['pid']}, log {started['log']}"
            self._control(module, "resume", actor, detail, session or "")
            span["lopen.session"] = session or ""
            return {**started, "session": session or ""}

    def not_running(self, module: str) -> None:
        """Refuse a module with no specification, or one another process is running; wait for a run
        that recorded its pause or end and is still closing."""
        import time

        from events.locks import ModuleLock

        if not queries.has_spec(self.project, module):
            raise LopenError(
                f"module {module} has no specification",
                f"Lopen builds from docs/requirements/{module}/SPECIFICATION.md",
                "write it (see docs/specifications.md), then approve it",
            )
        lock = ModuleLock(self.project.root, module)
        holder = lock.holder()
        if holder is not None and not self._has_running_session(module):
            # The holder recorded its pause or its end and is closing (a client that saw "paused"
            # and resumes at once meets it here): wait for it to let go of the module.
            deadline = time.monotonic() + WIND_DOWN_SECONDS
            while holder is not None and time.monotonic() < deadline:
                self.sleep(0.1)
                holder = lock.holder()
        if holder is not None:
            raise LopenError(
                f"module {module} is already being run (pid {holder})",
                "one run per module at a time",
                "watch it with replay_session, pause it with pause_run",
            )

    def _has_running_session(self, module: str) -> bool:
        return any(n.status == "running" for n in queries.module_state(self.project, module).sessions.values())

    def _control(self, module: str, action: str, actor: str, detail: str, session: str = "") -> None:
        control(self.project, module, actor, action, detail, session)

    def _spawn(self, module: str, args: list[str]) -> dict[str, Any]:
        """``lopen <args>`` detached from this process, its output in ``.lopen/runs/<module>-<time>.log``."""
        import subprocess
        import sys
        import threading
        import time

        from lopen.project import ensure_lopen_dir

        folder = ensure_lopen_dir(self.project.root) / "runs"
        folder.mkdir(exist_ok=True)
        log = folder / f"{module}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.log"
        n = 1
        while log.exists():
            n += 1
            log = log.with_name(f"{module}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{n}.log")
        command = [sys.executable, "-m", "lopen", *args]
        base = os.environ if self.project.env is None else self.project.env
        env = {k: v for k, v in base.items() if k != "LOPEN_MCP_TOKEN"}  # the run has no use for it
        with open(log, "ab") as out:
            child = subprocess.Popen(
                command,
                cwd=self.project.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not stopped by a Ctrl+C meant for the asking process
            )
        self._children.append(child)
        threading.Thread(target=child.wait, name=f"reap-{child.pid}", daemon=True).start()
        return {"module": module, "pid": child.pid, "log": str(log), "command": ["lopen", *args]}
