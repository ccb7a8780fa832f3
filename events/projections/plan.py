"""The plan projection: one row per module, and the row *is* the one fold (``events.fold.ModuleState``).

Every event of a module's history stream goes through ``ModuleState.apply`` — the same code the
run uses — so the plan projection, ``plan.md``, ``lopen modules``, ``session show`` and the run can
never disagree. An event the fold cannot apply is skipped and kept in the row's ``problems``: the
projection is then *stale* for that event, says so, and every command still works.

Rows are keyed ``<project>/<module>``; ``plan.md`` is rendered (for the project that opened the
store) to ``.lopen/modules/<module>/plan.md``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from events.errors import StoreWriteError
from events.fold import FOLDED, ModuleState, render_plan
from events.projections.base import Projection, Skip, Table
from events.recorded import Recorded

PlanView = ModuleState
Plans = Table[ModuleState]


def key(project: str, module: str) -> str:
    return f"{project}/{module}"


def _fold(t: Plans, records: Sequence[Recorded], skip: Skip) -> None:
    """Fold a run of one stream's events into its module's row: the row is looked up once per run (again
    only when an event names another module), and an event of a type the fold does not read only counts."""
    state: ModuleState | None = None
    project = module = k = ""
    changed = False
    for rec in records:
        e = rec.event
        if state is None or e.module != module or e.project != project:
            if changed:
                t.put(k, state)
            project, module = e.project, e.module
            k = f"{project}/{module}"  # key(), inlined
            state = t.get(k)
            changed = False
            if state is None:
                state = ModuleState(project=project, module=module)
        try:
            if type(e) in FOLDED:
                state.apply(e, rec.seq)
            state.version += 1
        except Exception as exc:  # a bug: stale for this event (and a row it would have started is not kept)
            skip(rec.seq, e, exc)
            if not changed and t.get(k) is None:
                state = None
            continue
        changed = True
    if changed:
        t.put(k, state)  # once per run: the row is the same object throughout


def render(state: ModuleState) -> str:
    return render_plan(state)


def plan_path(root: Path, module: str) -> Path:
    return root / ".lopen" / "modules" / module / "plan.md"


def write_plans(root: Path, plans: dict[str, Any], project: str = "") -> None:
    """Render changed plans of ``project`` to their files, atomically (a reader never sees half a
    file); a file that already holds the same text is left alone."""
    for state in plans.values():
        if project and state.project != project:
            continue
        path = plan_path(root, state.module)
        text = render(state)
        try:
            if path.is_file() and path.read_text(encoding="utf-8") == text:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".plan.md.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            raise StoreWriteError(
                f"cannot write {path}",
                f"{exc.strerror or exc} (errno {exc.errno})",
                f"make {path.parent} writable (and check free disk space); "
                "`lopen projections rebuild` renders it again",
            ) from exc


PROJECTION = Projection(
    name="plan",
    row=ModuleState,
    run=_fold,
    version=3,
    on_flush=write_plans,
)
