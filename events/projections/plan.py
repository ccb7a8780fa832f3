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
from pathlib import Path
from typing import Any

from events.catalogue import EVENT_TYPES, Event
from events.errors import StoreWriteError
from events.fold import FOLDED, ModuleState, render_plan
from events.projections.base import Projection, Table

PlanView = ModuleState
Plans = Table[ModuleState]


def key(project: str, module: str) -> str:
    return f"{project}/{module}"


def _fold(t: Plans, seq: int, e: Event) -> None:
    k = f"{e.project}/{e.module}"  # key(), inlined: every event of every module comes here
    state = t.get(k)
    if state is None:
        state = ModuleState(project=e.project, module=e.module)
    if type(e) in FOLDED:
        state.apply(e, seq)
    state.version += 1
    t.put(k, state)


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
    handlers=dict.fromkeys(EVENT_TYPES.values(), _fold),
    version=3,
    on_flush=write_plans,
)
