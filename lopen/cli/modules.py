"""`lopen modules`: the project's modules, their progress and their spec-check result (W1).

The rows are the one door's (``lopen.app.queries.modules``): the TUI's picker and the MCP
``list_modules`` tool list the same ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from lopen.app.queries import ModuleRow


def render_modules(rows: Sequence[ModuleRow]) -> str:
    """A plain-text table: module, state, spec-check summary."""
    table = [("MODULE", "STATE", "SPEC CHECK"), *((r.module, r.state, r.spec_check) for r in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(2)]
    return "\n".join(f"{m:<{widths[0]}}  {s:<{widths[1]}}  {c}".rstrip() for m, s, c in table)


def modules() -> None:
    """List the modules (docs/requirements/<module>/SPECIFICATION.md) with their state and spec check."""
    from lopen.app import queries
    from lopen.app.context import Project

    rows = queries.modules(Project.here())
    if not rows:
        typer.echo("no modules yet: write docs/requirements/<module>/SPECIFICATION.md (see docs/specifications.md)")
        return
    typer.echo(render_modules(rows))
