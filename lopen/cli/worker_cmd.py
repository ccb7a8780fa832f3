"""`lopen worker <module>`: build a module together with other workers (docs/parallel.md)."""

from __future__ import annotations

import typer

from lopen.cli.workflow import HEADLESS, MODULE

WORKER_PARALLEL = typer.Option(
    None, "--parallel", min=1, help="Components this worker builds at once (default: workflow.parallelism)."
)


def worker(module: str = MODULE, parallel: int | None = WORKER_PARALLEL, headless: bool = HEADLESS) -> None:
    """Work on a module with other workers: claim ready components, build and merge them, until it is complete."""
    from lopen.app import commands
    from lopen.app.context import Project
    from lopen.app.worker import run_worker
    from lopen.cli.workflow import _finish

    start = commands.start_worker(Project.here(), module, parallel)
    for warning in start.warnings:
        typer.echo(f"warning: {warning}", err=True)
    code, session_id, detail = run_worker(start.root, module, start.settings, typer.echo)
    _finish(code, session_id, detail)
