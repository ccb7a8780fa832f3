"""`lopen worker <module>`: build a module together with other workers (docs/parallel.md)."""

from __future__ import annotations

import typer

from lopen.cli.workflow import HEADLESS, MODULE

WORKER_PARALLEL = typer.Option(
    None, "--parallel", min=1, help="Components this worker builds at once (default: workflow.parallelism)."
)


def worker(module: str = MODULE, parallel: int | None = WORKER_PARALLEL, headless: bool = HEADLESS) -> None:
    """Work on a module with other workers: claim ready components, build and merge them, until it is complete."""
    from lopen.app.worker import run_worker
    from lopen.auth import preflight
    from lopen.cli.workflow import _finish, _settings
    from lopen.documents.paths import validate_module
    from lopen.git import require_ready
    from lopen.project import ensure_lopen_dir, find_root

    validate_module(module)
    root = find_root()
    require_ready(root)
    settings = _settings(root, None, None, True, parallel)
    for warning in preflight(settings, drafting=False):
        typer.echo(f"warning: {warning}", err=True)
    ensure_lopen_dir(root)
    code, session_id, detail = run_worker(root, module, settings, typer.echo)
    _finish(code, session_id, detail)
