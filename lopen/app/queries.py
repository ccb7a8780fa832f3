"""The read side of the one door: what every face asks about a project, answered once.

Each function takes a :class:`~lopen.app.context.Project` and reads the one fold (the plan
projection's ``ModuleState`` rows) and the other projections (sessions, tokens), brought up to date
on every call, so a face always answers from the latest events — even while a run appends them.
Results are plain data a face renders: :class:`ModuleRow` for the module list, JSON-shaped dicts
for the MCP tools and ``--json`` views, the fold itself for the screens that draw a plan.

Bad input (an invalid module name, an unknown session) raises :class:`~lopen.errors.LopenError`
with what, why and how to fix it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from lopen.errors import LopenError

if TYPE_CHECKING:
    from events.fold import ModuleState
    from events.store import EventStore
    from lopen.app.context import Project

PAGE_LIMIT = 1000  # most events one replay page returns
DEFAULT_PAGE = 200
NOT_STARTED = "not started"


class ModuleRow(msgspec.Struct, frozen=True):
    """One module as every face lists it (``lopen modules``, the TUI's picker, ``list_modules``)."""

    module: str
    state: str  # not started | in progress | complete
    spec_check: str  # the spec check's summary, or "no specification"
    approved: bool = False
    tasks: int = 0
    tasks_complete: int = 0
    unfinished_session: str = ""


# -- modules --------------------------------------------------------------------------------------------


def modules(project: Project) -> list[ModuleRow]:
    """Every module with a specification or a recorded history, by name: its state (from the one
    fold), spec check and progress. A project where nothing was recorded yet opens no store."""
    from lopen.documents import check_modules

    checks = check_modules(project.root)
    states: dict[str, ModuleState] = {}
    if project.has_store():
        with project.store(read_only=True) as (store, _):
            states = {s.module: s for s in store.projections.plan.all()}
    rows = []
    for name in sorted(set(checks) | set(states)):
        state = states.get(name)
        tasks = state.ordered_tasks() if state else []
        rows.append(
            ModuleRow(
                module=name,
                state=state.state if state else NOT_STARTED,
                spec_check=checks[name].summary() if name in checks else "no specification",
                approved=bool(state and state.approval),
                tasks=len(tasks),
                tasks_complete=sum(t.state == "complete" for t in tasks),
                unfinished_session=(state.unfinished_session() if state else None) or "",
            )
        )
    return rows


def valid_module(module: str) -> str:
    """``module`` when it is a module name, else a ``LopenError`` saying why."""
    from lopen.documents.errors import DocumentError
    from lopen.documents.paths import validate_module

    try:
        validate_module(module)
    except DocumentError as exc:
        raise LopenError(
            f"{module!r} is not a module name", str(exc), "list them with `lopen modules` (MCP: list_modules)"
        ) from None
    return module


def state_in(store: EventStore, module: str) -> ModuleState:
    """The module's fold from the plan projection (an empty one for a module with no history)."""
    from events.fold import ModuleState

    valid_module(module)
    return store.projections.plan.get(module) or ModuleState(project=store.projections.project, module=module)


def module_state(project: Project, module: str) -> ModuleState:
    """One module's fold: plan, tasks, approval, sessions, pending requests."""
    with project.store(read_only=True) as (store, _):
        return state_in(store, module)


def module_view(project: Project, module: str) -> dict[str, Any]:
    """One module's state as JSON-shaped data (``module_state``)."""
    state = module_state(project, module)
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


def plan_text(project: Project, module: str) -> str:
    """A module's plan as a markdown checkbox tree (what ``.lopen/modules/<m>/plan.md`` holds)."""
    return render_plan(module_state(project, module))


def render_plan(state: ModuleState) -> str:
    """The plan tree of a fold a face already holds (the TUI's plan viewer)."""
    from events.fold import render_plan as render

    return render(state)


def planned(project: Project, module: str) -> bool:
    """Whether the module has a recorded plan (``lopen build`` needs one)."""
    return module_state(project, module).planned


# -- sessions -------------------------------------------------------------------------------------------


def module_of_session(session_id: str) -> str:
    """The module a session id names (``<module>-YYYYMMDD-<n>``), else a ``LopenError``."""
    from events.recorded import parse_session_id

    try:
        return parse_session_id(session_id)[0]
    except ValueError as exc:
        raise LopenError(
            f"{session_id!r} is not a session id",
            f"{exc} (session ids look like <module>-YYYYMMDD-<n>)",
            "see `lopen session list`",
        ) from None


def sessions(project: Project, module: str = "") -> list[dict[str, Any]]:
    """The project's sessions (of one module when given), oldest first, with their token totals."""
    with project.store(read_only=True) as (store, _):
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


def session_to_watch(project: Project) -> str:
    """What ``lopen watch`` follows with no session named: the running session that moved last, else the
    session that moved last; ``LopenError`` when the project has none."""
    with project.store(read_only=True) as (store, _):
        store.projections.catch_up()
        rows = [s for s in store.projections.sessions.all() if not s.deleted]
    if not rows:
        raise LopenError(
            "no session to watch in this project",
            "nothing has run here yet (or every session was deleted)",
            "start one with `lopen run <module>`, then `lopen watch` from another terminal",
        )
    running = [s for s in rows if s.status == "running"]
    return max(running or rows, key=lambda s: (s.last_seq, s.id)).id


def session(project: Project, session_id: str) -> dict[str, Any]:
    """One session's report (``lopen session show --format json``)."""
    from lopen.app.views.report import session_report

    with project.store(read_only=True) as (store, _):
        report = session_report(store.projections, session_id)
    if report is None:
        raise no_session(session_id)
    return report


def replay(
    project: Project,
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
    with project.store(read_only=True) as (store, project_id):
        if store.projections.sessions.get(session_id) is None:
            raise no_session(session_id)
        events: list[Any] = []
        more = False
        # a task or invocation filter follows invocations from their start: read from the session's start
        start = 0 if (task or invocation) else after_seq
        for rec in rp.select(rp.session_records(store, project_id, session_id, start), selection):
            if rec.seq <= after_seq:
                continue
            if len(events) == limit:
                more = True
                break
            events.append(msgspec.json.decode(rp.json_line(rec)))
    return {"session": session_id, "events": events, "next_after_seq": events[-1]["seq"] if more else None}


def task_owner(store: EventStore, task: str, module: str | None = None) -> ModuleState:
    """The fold of the one module that has ``task`` (of ``module`` when given); a ``LopenError``
    naming the tasks there are, or the modules that have it, otherwise."""
    states = store.projections.plan.all()
    if module:
        states = [s for s in states if s.module == module]
        if not states:
            raise LopenError(
                f"no module {module} in this project's history",
                f"the event store at {store.location} has nothing recorded for it",
                "see `lopen modules`",
            )
    owners = [s for s in states if task in s.tasks]
    if not owners:
        known = sorted({t for s in states for t in s.tasks})
        raise LopenError(
            f"no task {task}" + (f" in module {module}" if module else ""),
            ("tasks recorded: " + ", ".join(known[:20]) + (" …" if len(known) > 20 else ""))
            if known
            else "no plan has been recorded yet",
            "task ids look like <component>/<n>; `lopen session show` lists a module's tasks",
        )
    if len(owners) > 1:
        raise LopenError(
            f"task {task} exists in several modules: {', '.join(s.module for s in owners)}",
            "task ids are unique within a module only",
            f"say which with --module, e.g. `lopen log {task} --module {owners[0].module}`",
        )
    return owners[0]


def task_log(project: Project, task: str, module: str = "") -> dict[str, Any]:
    """Every event of one task across sessions (``lopen log --json``)."""
    from lopen.app.views import replay as rp

    with project.store(read_only=True) as (store, project_id):
        owner = task_owner(store, task, module)
        events = [msgspec.json.decode(rp.json_line(r)) for r in rp.task_records(store, project_id, owner.module, task)]
    return {"module": owner.module, "task": task, "events": events}


def tokens(project: Project, module: str = "", session_id: str = "") -> dict[str, Any]:
    """Token, premium-request and money totals (a module's, a session's, or each module's) with the budgets."""
    budget = project.settings().budget
    with project.store(read_only=True) as (store, _):
        views = store.projections
        if session_id:
            if views.sessions.get(session_id) is None:
                raise no_session(session_id)
            return {"session": session_id, **_totals(views.tokens.session(session_id))}
        names = [module] if module else [s.module for s in views.plan.all()]
        rows = {name: _totals(views.tokens.module(name)) for name in names}
    out = []
    for name, totals in rows.items():
        used = {
            "tokens": _share(totals["total"], budget.token_budget_per_module),
            "premium_requests": _share(totals["premium_requests"], budget.premium_budget_per_module),
            "money": _share(totals["cost_usd"], budget.money_budget_per_module),
        }
        out.append({"module": name, **totals, "budget_used": used})
    return {
        "budget": {
            "token_budget_per_module": budget.token_budget_per_module,
            "premium_budget_per_module": budget.premium_budget_per_module,
            "money_budget_per_module": budget.money_budget_per_module,
            "token_budget_per_task": budget.token_budget_per_task,
            "premium_budget_per_task": budget.premium_budget_per_task,
            "money_budget_per_task": budget.money_budget_per_task,
            "warning_threshold": budget.warning_threshold,
            "confirmation_threshold": budget.confirmation_threshold,
        },
        "modules": out,
    }


# -- specifications -------------------------------------------------------------------------------------


class SpecReport(msgspec.Struct, frozen=True, kw_only=True):
    """A specification checked against the pattern Lopen needs (``lopen spec check``, ``check_spec``)."""

    path: str  # relative to the project
    ok: bool
    summary: str
    criteria: int  # acceptance criteria
    criteria_with_ids: int
    criteria_checked: int
    hooks: list[tuple[str, str]]  # (name, command) of the Skills & Hooks entries
    gaps: list[Any]  # lopen.documents.Gap: part, expected, severity…; ``render()`` is its line

    def as_json(self) -> dict[str, Any]:
        """The MCP tool's result."""
        return {
            "path": self.path,
            "ok": self.ok,
            "summary": self.summary,
            "acceptance_criteria": self.criteria,
            "gaps": [msgspec.to_builtins(g) for g in self.gaps],
        }


def spec_check(project: Project, module: str) -> SpecReport:
    """A module's specification checked against the pattern Lopen needs."""
    from lopen.documents import DocumentError, SectionCache, acceptance_criteria, check_spec, load_spec
    from lopen.documents import skills_and_hooks as hooks_of

    valid_module(module)  # a name with a path in it: say so, and never suggest writing there
    try:
        path, doc = load_spec(project.root, module, SectionCache(project.root))
    except DocumentError as exc:
        raise LopenError(
            f"cannot check the specification of {module!r}",
            str(exc),
            f"write docs/requirements/{module}/SPECIFICATION.md (see docs/specifications.md), "
            "or run `lopen modules` to list the modules",
        ) from None
    result = check_spec(doc, module)
    criteria = acceptance_criteria(doc)
    return SpecReport(
        path=path.relative_to(project.root).as_posix(),
        ok=result.ok,
        summary=result.summary(),
        criteria=len(criteria),
        criteria_with_ids=sum(1 for c in criteria if c.id),
        criteria_checked=sum(1 for c in criteria if c.checked),
        hooks=[(h.name, h.command) for h in hooks_of(doc)],
        gaps=list(result.gaps),
    )


def draft_gaps(text: str, module: str) -> list[Any]:
    """The spec check's gaps of a draft's text (step 1's conversation shows them as it goes)."""
    from lopen.documents import check_spec, parse_document

    return list(check_spec(parse_document(text), module).gaps) if text.strip() else []


def research(root: Path, module: str) -> list[tuple[str, str]]:
    """(slug, title) of the module's research documents, by slug (none when the folder is unreadable)."""
    from lopen.documents import list_research

    try:
        return [(d.slug, d.title or d.slug) for d in list_research(root, module)]
    except OSError:
        return []


def document(root: Path, module: str, kind: str, ref: str = "") -> str:
    """The markdown of one of a module's documents: ``spec`` (the specification), ``section`` (its
    section ``ref``) or ``research`` (the research on topic ``ref``). ``LopenError`` when it cannot be
    read here."""
    from lopen.documents import DocumentError, load_spec, read_research

    try:
        if kind == "research":
            return read_research(root, module, ref)
        _, doc = load_spec(root, module)
        return doc.source if kind == "spec" else doc.text(doc.find(ref, "the specification"))
    except (DocumentError, OSError) as exc:
        raise LopenError(f"cannot read the {kind} of {module}", str(exc), "check the project's files") from None


def openable_sections(root: Path, module: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``names`` that open a section of the module's spec (``document(…, "section", name)``):
    a prompt's own parts (its task, a file's contents) are not spec sections. The spec is read again
    only when the file changed (the TUI asks on every frame)."""
    from lopen.documents import DocumentError
    from lopen.documents.paths import spec_path

    try:
        stamp = spec_path(root, module).stat().st_mtime_ns
    except OSError:
        return ()
    doc = _spec_document(root, module, stamp)
    if doc is None:
        return ()
    found = []
    for name in names:
        try:
            doc.find(name, "the specification")
        except DocumentError:
            continue
        found.append(name)
    return tuple(found)


@functools.lru_cache(maxsize=8)
def _spec_document(root: Path, module: str, _stamp: int) -> Any:
    from lopen.documents import DocumentError, load_spec

    try:
        return load_spec(root, module)[1]
    except (DocumentError, OSError):
        return None


def similar_module(project: Project, module: str) -> str:
    """A module with a specification whose name is close to ``module`` (a typo's "did you mean"), or ""."""
    import difflib

    from lopen.documents.spec_check import list_modules

    names = [name for name in list_modules(project.root) if name != module]
    near = difflib.get_close_matches(module, names, n=1, cutoff=0.75)
    return near[0] if near else ""


def has_spec(project: Project, module: str) -> bool:
    """Whether ``docs/requirements/<module>/SPECIFICATION.md`` exists (the name validated first)."""
    from lopen.documents.paths import spec_path

    return spec_path(project.root, valid_module(module)).is_file()


# -- helpers --------------------------------------------------------------------------------------------


def session_row(views: Any, session_id: str) -> Any:
    """The session's row of the projections (caught up by the caller), or a what/why/fix error: a
    malformed id says so, a well-formed one that is not in this project's store says that."""
    row = views.sessions.get(session_id)
    if row is None:
        module_of_session(session_id)
        raise LopenError(
            f"no session {session_id}", "this project's event store has none by that id", "see `lopen session list`"
        )
    return row


def no_session(session_id: str) -> LopenError:
    return LopenError(f"no session {session_id}", "this project's event store has none by that id", "list_sessions")


def _iso(at: float) -> str:
    from lopen.app.views.replay import iso

    return iso(at) if at else ""


def _totals(row: Any) -> dict[str, Any]:
    if row is None:
        return {
            "input": 0,
            "output": 0,
            "total": 0,
            "premium_requests": 0.0,
            "cost_usd": 0.0,
            "cost": "$0.00",
            "invocations": 0,
            "model_calls": 0,
        }
    return {
        "input": row.input,
        "output": row.output,
        "total": row.total,
        "cache_read": row.cache_read,
        "premium_requests": row.premium,
        "cost_usd": round(row.cost, 6),
        "unpriced_calls": row.unpriced,
        "cost": row.money,
        "invocations": row.invocations,
        "oracle_invocations": row.oracle_invocations,
        "model_calls": row.calls,
    }


def _share(used: float, budget: float) -> float | None:
    return round(used / budget, 4) if budget else None
