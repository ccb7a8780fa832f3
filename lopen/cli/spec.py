"""`lopen spec …`: work with a module's specification. This module holds the read-only `check`."""

from __future__ import annotations

import typer

from lopen.cli.group import WholeHelpGroup

spec_app = typer.Typer(
    cls=WholeHelpGroup, name="spec", help="Check and approve module specifications.", no_args_is_help=True
)


@spec_app.command("check")
def check(module: str = typer.Argument(..., help="The module, as named under docs/requirements/.")) -> None:
    """Check a module's specification against the pattern Lopen needs; exit 1 when it has errors."""
    from lopen.app import queries
    from lopen.app.context import Project
    from lopen.cli.output import Console

    result = queries.spec_check(Project.here(), module)
    out = Console.for_settings()
    if result.ok:
        out.ok(f"{result.path} follows the specification pattern")
    else:
        out.fail(f"{result.path}: {result.summary}")
    ids, checked = result.criteria_with_ids, result.criteria_checked
    out.detail("acceptance criteria", f"{result.criteria} ({ids} with ids, {checked} checked)")
    if result.hooks:
        out.detail(
            "skills & hooks", "; ".join(f"{name}: {command or '(no command)'}" for name, command in result.hooks)
        )
    for gap in result.gaps:
        out.echo(f"  {gap.render()}")
    raise typer.Exit(0 if result.ok else 1)
