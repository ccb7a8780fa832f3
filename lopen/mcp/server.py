"""Lopen as an MCP server (P3): Copilot Chat, the Copilot CLI or any MCP client can list, watch and —
when allowed — steer Lopen's runs. See docs/mcp.md.

``Operations`` is what the server can do, as plain functions over the project's event store (each
call opens the store and brings the projections up to date, so it always answers from the latest
events, even while a run is appending them). ``build_server`` wraps them as MCP tools and resources
on the official ``mcp`` SDK (imported only here, only when ``lopen mcp`` runs):

- reading: the modules and their state (the plan projection's rows: the one fold), a module's plan,
  the sessions, a session's replay (paged by seq), one task's log, tokens and budgets, the spec check;
- steering, only with ``--allow-control``: start a run in the background, pause it, resume it,
  queue a message for it, approve a spec. Each is recorded in the module's history as
  ``ControlRequested(action, caller, detail)`` with the MCP client's name as the caller.

Transports: stdio (``serve_stdio``), and streamable HTTP on a loopback address with a bearer token
(``serve_http``).

The ``mcp`` SDK is imported here, at the top: nothing but ``lopen mcp`` (and its tests) imports this
module. (No ``from __future__ import annotations``: the SDK reads the tools' annotations at run time.)
"""

import contextlib
import hmac
import ipaddress
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

import lopen
from events.errors import Problem
from lopen.errors import LopenError

if TYPE_CHECKING:
    from events.store import EventStore
    from lopen.config import Settings

PAGE_LIMIT = 1000  # most events one replay page returns
DEFAULT_PAGE = 200
CONTROL_TOOLS = ("start_run", "pause_run", "resume_run", "queue_message", "approve_spec")
WIND_DOWN_SECONDS = 30.0  # how long start/resume waits for a run that recorded its pause or end to exit


class Operations:
    """Lopen's operations on the project at ``root``; every result is plain JSON-able data."""

    sleep = staticmethod(time.sleep)  # how a wait for a closing run passes (a test makes it do the closing)

    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.env = dict(os.environ if env is None else env)
        self._children: list[subprocess.Popen[bytes]] = []

    # -- plumbing ---------------------------------------------------------------------------------

    def settings(self) -> "Settings":
        from lopen.config import load_settings

        return load_settings(self.root, env=self.env)

    @contextlib.contextmanager
    def store(self) -> Iterator[tuple["EventStore", str]]:
        """The project's store with its projections caught up, and the project id."""
        from lopen.project import open_store

        settings = self.settings()
        store, project = open_store(self.root, settings.store.url, settings.project.id)
        with store:
            store.projections.catch_up()
            yield store, project

    def _state(self, store: "EventStore", module: str) -> Any:
        from events.fold import ModuleState
        from lopen.documents.errors import DocumentError
        from lopen.documents.paths import validate_module

        try:
            validate_module(module)
        except DocumentError as exc:
            raise LopenError(f"{module!r} is not a module name", str(exc), "list them with list_modules") from None
        return store.projections.plan.get(module) or ModuleState(project=store.projections.project, module=module)

    # -- reading ----------------------------------------------------------------------------------

    def modules(self) -> list[dict[str, Any]]:
        """Every module with a specification or a history: its state, spec check and progress."""
        from lopen.documents import check_modules

        checks = check_modules(self.root)
        with self.store() as (store, _):
            states = {s.module: s for s in store.projections.plan.all()}
        out = []
        for name in sorted(set(checks) | set(states)):
            state = states.get(name)
            tasks = state.ordered_tasks() if state else []
            out.append(
                {
                    "module": name,
                    "state": state.state if state else "not started",
                    "spec_check": checks[name].summary() if name in checks else "no specification",
                    "approved": bool(state and state.approval),
                    "tasks": len(tasks),
                    "tasks_complete": sum(t.state == "complete" for t in tasks),
                    "unfinished_session": (state.unfinished_session() if state else None) or "",
                }
            )
        return out

    def module(self, module: str) -> dict[str, Any]:
        """One module's state from the one fold: plan, tasks, approval, sessions, pending requests."""
        with self.store() as (store, _):
            state = self._state(store, module)
        approval = state.approval
        return {
            "module": state.module,
            "state": state.state,
            "approval": {
                "approver": approval.approver,
                "at": _iso(approval.at),
                "spec_hash": approval.spec_hash,
                "section_hashes": approval.section_hashes,
            }
            if approval
            else None,
            "components": [
                {
                    "slug": slug,
                    "name": c.name,
                    "state": state.component_state(slug),
                    "depends_on": c.depends_on,
                    "tasks": [
                        {
                            "id": t.id,
                            "name": t.name,
                            "state": t.state,
                            "commit": t.commit,
                            "failures": t.failures,
                            "last_failure": t.reasons[-1] if t.reasons else "",
                        }
                        for t in state.component_tasks(slug)
                    ],
                }
                for slug, c in state.components.items()
            ],
            "selected_component": state.selected,
            "branch": state.branch,
            "sessions": {sid: node.status for sid, node in state.sessions.items()},
            "unfinished_session": state.unfinished_session() or "",
            "pause_requested_by": state.pause_requested,
            "queued_messages": len(state.queued),
            "problems": state.problems,
        }

    def plan(self, module: str) -> str:
        from events.fold import render_plan

        with self.store() as (store, _):
            return render_plan(self._state(store, module))

    def sessions(self, module: str = "") -> list[dict[str, Any]]:
        with self.store() as (store, _):
            views = store.projections
            out = []
            for s in views.sessions.all():
                if module and s.module != module:
                    continue
                tokens = views.tokens.session(s.id)
                out.append(
                    {
                        "id": s.id,
                        "module": s.module,
                        "status": s.status,
                        "phase": s.phase,
                        "step": s.step,
                        "task": s.task,
                        "reason": s.reason,
                        "started_at": _iso(s.started_at),
                        "updated_at": _iso(s.updated_at),
                        "first_seq": s.first_seq,
                        "last_seq": s.last_seq,
                        "tokens": tokens.total if tokens else 0,
                    }
                )
            return out

    def session(self, session_id: str) -> dict[str, Any]:
        from lopen.app.views.report import session_report

        with self.store() as (store, _):
            report = session_report(store.projections, session_id)
        if report is None:
            raise _no_session(session_id)
        return report

    def replay(
        self,
        session_id: str,
        after_seq: int = 0,
        limit: int = DEFAULT_PAGE,
        task: str = "",
        invocation: str = "",
        types: list[str] | None = None,
    ) -> dict[str, Any]:
        """One page of a session's history (``lopen replay --json``): events with ``seq > after_seq``;
        ``next_after_seq`` continues it (None at the end)."""
        from lopen.app.views import replay as rp

        limit = max(1, min(limit, PAGE_LIMIT))
        try:
            selection = rp.Selection(task=task, invocation=invocation, types=rp.event_type_names(types or []))
        except ValueError as exc:
            raise LopenError("unknown event type", str(exc), "docs/events.md lists every event type") from None
        with self.store() as (store, project):
            session = store.projections.sessions.get(session_id)
            if session is None:
                raise _no_session(session_id)
            events: list[Any] = []
            more = False
            # a task or invocation filter follows invocations from their start: read from the session's start
            start = 0 if (task or invocation) else after_seq
            for rec in rp.select(rp.session_records(store, project, session_id, start), selection):
                if rec.seq <= after_seq:
                    continue
                if len(events) == limit:
                    more = True
                    break
                events.append(msgspec.json.decode(rp.json_line(rec)))
        return {
            "session": session_id,
            "events": events,
            "next_after_seq": events[-1]["seq"] if more else None,
        }

    def task_log(self, task: str, module: str = "") -> dict[str, Any]:
        """Every event of one task across sessions (``lopen log --json``)."""
        from lopen.app.views import replay as rp

        with self.store() as (store, project):
            states = [s for s in store.projections.plan.all() if task in s.tasks and (not module or s.module == module)]
            if len(states) != 1:
                why = "no module has it" if not states else f"modules {', '.join(s.module for s in states)} have it"
                raise LopenError(f"cannot tell which task {task} is meant", why, "pass the module")
            events = [
                msgspec.json.decode(rp.json_line(r)) for r in rp.task_records(store, project, states[0].module, task)
            ]
        return {"module": states[0].module, "task": task, "events": events}

    def tokens(self, module: str = "", session_id: str = "") -> dict[str, Any]:
        """Token and premium-request totals (a module's, a session's, or each module's) with the budgets."""
        budget = self.settings().budget
        with self.store() as (store, _):
            views = store.projections
            if session_id:
                if views.sessions.get(session_id) is None:
                    raise _no_session(session_id)
                return {"session": session_id, **_totals(views.tokens.session(session_id))}
            names = [module] if module else [s.module for s in views.plan.all()]
            rows = {name: _totals(views.tokens.module(name)) for name in names}
        out = []
        for name, totals in rows.items():
            used = {
                "tokens": _share(totals["total"], budget.token_budget_per_module),
                "premium_requests": _share(totals["premium_requests"], budget.premium_budget_per_module),
            }
            out.append({"module": name, **totals, "budget_used": used})
        return {
            "budget": {
                "token_budget_per_module": budget.token_budget_per_module,
                "premium_budget_per_module": budget.premium_budget_per_module,
                "warning_threshold": budget.warning_threshold,
                "confirmation_threshold": budget.confirmation_threshold,
            },
            "modules": out,
        }

    def spec_check(self, module: str) -> dict[str, Any]:
        from lopen.documents import DocumentError, acceptance_criteria, check_spec, load_spec

        try:
            path, doc = load_spec(self.root, module)
        except DocumentError as exc:
            raise LopenError(
                f"cannot check the specification of {module!r}",
                str(exc),
                f"write docs/requirements/{module}/SPECIFICATION.md (see docs/specifications.md)",
            ) from None
        result = check_spec(doc, module)
        return {
            "path": path.relative_to(self.root).as_posix(),
            "ok": result.ok,
            "summary": result.summary(),
            "acceptance_criteria": len(acceptance_criteria(doc)),
            "gaps": [msgspec.to_builtins(g) for g in result.gaps],
        }

    # -- steering ---------------------------------------------------------------------------------

    def start_run(self, module: str, caller: str, prompt: str = "") -> dict[str, Any]:
        """Start ``lopen run <module> --headless`` in the background; its output goes to a log file."""
        self._not_running(module)
        args = ["run", module, "--headless", *(["--prompt", prompt] if prompt else [])]
        started = self._spawn(module, args)
        self._record(module, "start-run", caller, f"pid {started['pid']}, log {started['log']}")
        return started

    def pause_run(self, module: str, caller: str, reason: str = "") -> dict[str, Any]:
        """Ask the module's running session to pause before its next invocation."""
        from events import catalogue as ev

        with self.store() as (store, _):
            state = self._state(store, module)
            session = state.unfinished_session()
            if session is None or state.sessions[session].status != "running":
                raise LopenError(
                    f"module {module} has no running session to pause",
                    "its sessions are: " + (", ".join(f"{s} {n.status}" for s, n in state.sessions.items()) or "none"),
                    "start one with start_run, or resume a paused one with resume_run",
                )
            why = reason or f"pause requested by {caller}"
            self._append(
                store,
                module,
                ev.PauseRequested(requested_by=caller, reason=why, session_id=session),
                ev.ControlRequested(action="pause", caller=caller, detail=why, session_id=session),
            )
        return {"module": module, "session": session, "requested_by": caller, "reason": why}

    def resume_run(self, module: str, caller: str) -> dict[str, Any]:
        """Start the module's run again in the background; it resumes where the module stands."""
        self._not_running(module)
        with self.store() as (store, _):
            session = self._state(store, module).unfinished_session()
        args = ["run", module, "--headless", *(["--resume", session] if session else [])]
        started = self._spawn(module, args)
        detail = f"session {session or '(a new one)'}; pid {started['pid']}, log {started['log']}"
        self._record(module, "resume", caller, detail, session or "")
        return {**started, "session": session or ""}

    def queue_message(self, module: str, text: str, caller: str) -> dict[str, Any]:
        """Queue a message for the model: delivered in the next invocation, never injected mid-run."""
        from events import catalogue as ev

        if not text.strip():
            raise LopenError("the message is empty", "there would be nothing to deliver", "give the message's text")
        from lopen.documents.paths import spec_path

        message_id = str(uuid.uuid4())
        with self.store() as (store, _):
            state = self._state(store, module)
            if store.projections.plan.get(module) is None and not spec_path(self.root, module).is_file():
                raise LopenError(
                    f"there is no module {module}",
                    f"it has neither a specification (docs/requirements/{module}/SPECIFICATION.md) nor a history",
                    "list the modules with list_modules",
                )
            session = state.unfinished_session() or ""
            self._append(
                store,
                module,
                ev.ControlRequested(action="queue-message", caller=caller, detail=message_id, session_id=session),
                ev.UserMessageQueued(message_id=message_id, text=text, session_id=session),
            )
        return {"module": module, "message_id": message_id, "session": session}

    def approve_spec(self, module: str, caller: str) -> dict[str, Any]:
        """The human gate: approve the module's specification as it is now."""
        from lopen.workflow.approval import approve_spec

        with self.store() as (store, project):
            approved, gaps = approve_spec(self.root, module, store, project)
        self._record(module, "approve-spec", caller, f"spec {approved.spec_hash} approved by {approved.approver}")
        return {
            "module": module,
            "approver": approved.approver,
            "spec_hash": approved.spec_hash,
            "section_hashes": approved.section_hashes,
            "notes": gaps,
        }

    # -- steering helpers -------------------------------------------------------------------------

    def _append(self, store: "EventStore", module: str, *events: Any) -> None:
        from events.recorded import module_stream

        store.append(module_stream(store.projections.project, module), list(events))

    def _record(self, module: str, action: str, caller: str, detail: str, session: str = "") -> None:
        from events import catalogue as ev

        with self.store() as (store, _):
            self._append(
                store, module, ev.ControlRequested(action=action, caller=caller, detail=detail, session_id=session)
            )

    def _not_running(self, module: str) -> None:
        from events.locks import ModuleLock
        from lopen.documents.errors import DocumentError
        from lopen.documents.paths import spec_path, validate_module

        try:
            validate_module(module)
        except DocumentError as exc:
            raise LopenError(f"{module!r} is not a module name", str(exc), "list them with list_modules") from None
        if not spec_path(self.root, module).is_file():
            raise LopenError(
                f"module {module} has no specification",
                f"Lopen builds from docs/requirements/{module}/SPECIFICATION.md",
                "write it (see docs/specifications.md), then approve it",
            )
        lock = ModuleLock(self.root, module)
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
        with self.store() as (store, _):
            return any(node.status == "running" for node in self._state(store, module).sessions.values())

    def _spawn(self, module: str, args: list[str]) -> dict[str, Any]:
        """``lopen <args>`` detached from this server, its output in ``.lopen/runs/<module>-<time>.log``."""
        from lopen.project import ensure_lopen_dir

        folder = ensure_lopen_dir(self.root) / "runs"
        folder.mkdir(exist_ok=True)
        log = folder / f"{module}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.log"
        n = 1
        while log.exists():
            n += 1
            log = log.with_name(f"{module}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{n}.log")
        command = [sys.executable, "-m", "lopen", *args]
        env = {k: v for k, v in self.env.items() if k != "LOPEN_MCP_TOKEN"}  # the run has no use for it
        with open(log, "ab") as out:
            child = subprocess.Popen(
                command,
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not stopped by a Ctrl+C meant for the server
            )
        self._children.append(child)
        threading.Thread(target=child.wait, name=f"reap-{child.pid}", daemon=True).start()
        return {"module": module, "pid": child.pid, "log": str(log), "command": ["lopen", *args]}


def _iso(at: float) -> str:
    from lopen.app.views.replay import iso

    return iso(at) if at else ""


def _totals(row: Any) -> dict[str, Any]:
    if row is None:
        return {"input": 0, "output": 0, "total": 0, "premium_requests": 0.0, "invocations": 0, "model_calls": 0}
    return {
        "input": row.input,
        "output": row.output,
        "total": row.total,
        "cache_read": row.cache_read,
        "premium_requests": row.premium,
        "invocations": row.invocations,
        "oracle_invocations": row.oracle_invocations,
        "model_calls": row.calls,
    }


def _share(used: float, budget: float) -> float | None:
    return round(used / budget, 4) if budget else None


def _no_session(session_id: str) -> LopenError:
    return LopenError(f"no session {session_id}", "this project's event store has none by that id", "list_sessions")


# -- the MCP server -------------------------------------------------------------------------------------


def caller_of(ctx: Context) -> str:
    """``mcp:<client name>`` from the client's own description of itself (its ``clientInfo``)."""
    try:
        info = ctx.session.client_params.client_info
        name = f"{info.name} {info.version}".strip() if info.version else info.name
    except AttributeError:
        name = ""
    return f"mcp:{name or 'unnamed client'}"


def build_server(ops: Operations, allow_control: bool = False) -> MCPServer:
    """The MCP server with Lopen's tools and resources (the control tools only when allowed)."""
    server = MCPServer(
        name="lopen",
        version=lopen.__version__,
        instructions=(
            "Lopen builds a software module from its specification by driving GitHub Copilot. Read where "
            "modules stand (list_modules, module_state, read_plan), what happened (list_sessions, "
            "replay_session, task_log), what it cost (tokens), and whether a spec is ready (check_spec)."
            + (
                " You may also steer runs: start_run, pause_run, resume_run, queue_message, approve_spec."
                if allow_control
                else " This server was started without --allow-control: it cannot change anything."
            )
        ),
        log_level="WARNING",
    )

    def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
        """A Lopen error becomes a tool error an agent can read: what, why, how to fix it."""

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Problem as exc:
                raise ToolError(exc.render()) from None

        call.__name__, call.__doc__ = fn.__name__, fn.__doc__
        return call

    # -- reading tools ----------------------------------------------------------------------------

    @server.tool(description="The project's modules: state, spec check, progress, unfinished session.")
    def list_modules() -> list[dict[str, Any]]:
        return guarded(ops.modules)()

    @server.tool(description="One module's state: components and tasks with their states, approval, sessions.")
    def module_state(module: str) -> dict[str, Any]:
        return guarded(ops.module)(module)

    @server.tool(description="A module's plan as a markdown checkbox tree (what .lopen/modules/<m>/plan.md holds).")
    def read_plan(module: str) -> str:
        return guarded(ops.plan)(module)

    @server.tool(description="The project's sessions (optionally of one module), oldest first.")
    def list_sessions(module: str = "") -> list[dict[str, Any]]:
        return guarded(ops.sessions)(module)

    @server.tool(description="One session: phase, step, status, plan tree, tokens, where it would resume.")
    def show_session(session_id: str) -> dict[str, Any]:
        return guarded(ops.session)(session_id)

    @server.tool(
        description=(
            "A session's history for audit, one page at a time: events with seq > after_seq (at most limit, "
            f"up to {PAGE_LIMIT}), each with seq, type, at (ISO-8601 UTC) and its fields. Continue with "
            "after_seq = next_after_seq until it is null. Optional filters: task (e.g. core/1), invocation, "
            "types (event type names, e.g. OracleVerdictRecorded)."
        )
    )
    def replay_session(
        session_id: str,
        after_seq: int = 0,
        limit: int = DEFAULT_PAGE,
        task: str = "",
        invocation: str = "",
        types: list[str] | None = None,
    ) -> dict[str, Any]:
        return guarded(ops.replay)(session_id, after_seq, limit, task, invocation, types)

    @server.tool(description="One task's events across every session: invocations, tool calls, verdicts, commits.")
    def task_log(task: str, module: str = "") -> dict[str, Any]:
        return guarded(ops.task_log)(task, module)

    @server.tool(description="Tokens and premium requests used (per module, or one session), against the budgets.")
    def tokens(module: str = "", session_id: str = "") -> dict[str, Any]:
        return guarded(ops.tokens)(module, session_id)

    @server.tool(description="Check a module's specification against the pattern Lopen needs (`lopen spec check`).")
    def check_spec(module: str) -> dict[str, Any]:
        return guarded(ops.spec_check)(module)

    # -- resources --------------------------------------------------------------------------------

    def as_json(value: Any) -> str:
        return msgspec.json.encode(value).decode()

    @server.resource("lopen://modules", name="modules", mime_type="application/json")
    def modules_resource() -> str:
        return as_json(guarded(ops.modules)())

    @server.resource("lopen://modules/{module}", name="module", mime_type="application/json")
    def module_resource(module: str) -> str:
        return as_json(guarded(ops.module)(module))

    @server.resource("lopen://modules/{module}/plan", name="plan", mime_type="text/markdown")
    def plan_resource(module: str) -> str:
        return guarded(ops.plan)(module)

    @server.resource("lopen://modules/{module}/tokens", name="tokens", mime_type="application/json")
    def tokens_resource(module: str) -> str:
        return as_json(guarded(ops.tokens)(module))

    @server.resource("lopen://sessions", name="sessions", mime_type="application/json")
    def sessions_resource() -> str:
        return as_json(guarded(ops.sessions)())

    @server.resource("lopen://sessions/{session_id}", name="session", mime_type="application/json")
    def session_resource(session_id: str) -> str:
        return as_json(guarded(ops.session)(session_id))

    @server.resource(
        "lopen://sessions/{session_id}/replay",
        name="replay",
        description=f"The first {PAGE_LIMIT} events of a session as JSON lines; page on with replay_session.",
        mime_type="application/x-ndjson",
    )
    def replay_resource(session_id: str) -> str:
        page = guarded(ops.replay)(session_id, 0, PAGE_LIMIT)
        return "".join(as_json(e) + "\n" for e in page["events"])

    if not allow_control:
        return server

    # -- steering tools ---------------------------------------------------------------------------

    @server.tool(
        description=(
            "Start `lopen run <module> --headless` in the background (its output goes to a log file under "
            ".lopen/runs/); returns its pid and log path. An optional prompt is queued for the model."
        )
    )
    def start_run(module: str, ctx: Context, prompt: str = "") -> dict[str, Any]:
        return guarded(ops.start_run)(module, caller_of(ctx), prompt)

    @server.tool(description="Ask the module's running session to pause before its next model invocation.")
    def pause_run(module: str, ctx: Context, reason: str = "") -> dict[str, Any]:
        return guarded(ops.pause_run)(module, caller_of(ctx), reason)

    @server.tool(description="Run the module again in the background: it resumes its unfinished session.")
    def resume_run(module: str, ctx: Context) -> dict[str, Any]:
        return guarded(ops.resume_run)(module, caller_of(ctx))

    @server.tool(description="Queue a message for the model; it is delivered in the next invocation, never mid-run.")
    def queue_message(module: str, text: str, ctx: Context) -> dict[str, Any]:
        return guarded(ops.queue_message)(module, text, caller_of(ctx))

    @server.tool(description="Approve the module's specification as it is now: the human gate before planning.")
    def approve_spec(module: str, ctx: Context) -> dict[str, Any]:
        return guarded(ops.approve_spec)(module, caller_of(ctx))

    return server


def serve_stdio(root: Path, allow_control: bool) -> None:
    build_server(Operations(root), allow_control).run("stdio")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(32)


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <the token lopen mcp printed>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="lopen"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(root: Path, allow_control: bool, host: str, port: int, token: str, say: Callable[[str], None]) -> None:
    """Streamable HTTP at ``http://<host>:<port>/mcp``, loopback only, bearer token required."""
    import anyio
    import uvicorn

    if not is_loopback(host):
        raise LopenError(
            f"--host {host} is not a loopback address",
            "the MCP server exposes your project's history (and with --allow-control, runs): it listens on "
            "this machine only",
            "use --host 127.0.0.1 (the default), ::1 or localhost; reach it from elsewhere through an SSH tunnel",
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise LopenError(
            f"cannot listen on {host}:{port}",
            exc.strerror or str(exc),
            "choose another --port (0 picks a free one)",
        ) from None
    sock.listen(64)
    bound = sock.getsockname()[1]
    server = build_server(Operations(root), allow_control)
    app = BearerAuth(server.streamable_http_app(host=host), token)
    shown = f"[{host}]" if ":" in host else host
    say(f"Lopen MCP server on http://{shown}:{bound}/mcp (streamable HTTP)")
    say(f"bearer token: {token}")
    say("control tools: " + ("enabled (--allow-control)" if allow_control else "off (read-only)"))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])
