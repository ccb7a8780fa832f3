"""`lopen modules`: the project's modules, their progress and their spec-check result (W1)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import typer

NOT_STARTED = "not started"


def module_rows(root: Path, states: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(module, progress state, spec-check summary) for every module with a specification.

    ``states`` maps module → progress state (from the event store's projection); a module it does
    not name is "not started".
    """
    from lopen.documents import check_modules

    return [(name, states.get(name, NOT_STARTED), check.summary()) for name, check in check_modules(root).items()]


def render_modules(rows: list[tuple[str, str, str]]) -> str:
    """A plain-text table of ``module_rows``."""
    header = ("MODULE", "STATE", "SPEC CHECK")
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(2)]
    return "\n".join(f"{m:<{widths[0]}}  {s:<{widths[1]}}  {c}".rstrip() for m, s, c in (header, *rows))


def _progress(root: Path) -> dict[str, str]:
    """Each module's progress from the one fold (the plan projection); none recorded yet → empty."""
    from lopen.config import load_settings
    from lopen.project import open_store

    settings = load_settings(root)
    if not settings.store.url and not (root / ".lopen" / "store.sqlite").exists():
        return {}
    store, _ = open_store(root, settings.store.url, settings.project.id)
    with store:
        store.projections.catch_up()
        return {row.module: row.state for row in store.projections.plan.all()}


def modules() -> None:
    """List the modules (docs/requirements/<module>/SPECIFICATION.md) with their state and spec check."""
    from lopen.project import find_root

    root = find_root()
    rows = module_rows(root, states=_progress(root))
    if not rows:
        typer.echo("no modules yet: write docs/requirements/<module>/SPECIFICATION.md (see docs/specifications.md)")
        return
    typer.echo(render_modules(rows))
