"""`lopen revert <module> [--to <task>]` (G3): back to a task-completion commit.

The use case is `lopen.app.commands.revert` (the rules in `lopen.workflow.revert`); this prints
what it did. Exit codes: 0 reverted, or nothing to revert (the target already is the branch tip);
1 refused (a dirty worktree, no task-completion commit, an unknown task) with what/why/how on
stderr. The user's own checkout is never touched: the module's worktree and its branch are reset.
"""

from __future__ import annotations

import typer

MODULE = typer.Argument(..., help="The module, as named under docs/requirements/.")
TO = typer.Option(
    None,
    "--to",
    metavar="TASK",
    help="Go back to the commit that completed this task (e.g. core/1); the tasks after it are re-opened. "
    "Default: the last task-completion commit still on lopen/<module>.",
)


def revert(module: str = MODULE, to: str | None = TO) -> None:
    """Reset lopen/<module> to the last verified task's commit (or --to TASK) and re-open the tasks after it."""
    from lopen.app import commands
    from lopen.app.commands import short
    from lopen.app.context import Project
    from lopen.cli.output import Console

    project = Project.here()
    console = Console.for_settings(project.settings())
    result = commands.revert(project, module, commands.cli_actor(), to_task=to)

    target = f"{short(result.to_sha)}, the commit that completed {result.target.task_id}"
    if not result.changed:
        console.ok(f"nothing to revert: {result.branch} is already at {target}")
        return
    arrow = "->" if console.ascii else "→"
    console.ok(f"reverted {result.branch}: {short(result.from_sha)} {arrow} {target}")
    for sha, subject in result.discarded:
        console.detail("rolled back", f"{short(sha)} {subject}")
    console.detail("re-opened", ", ".join(result.reopened) if result.reopened else "no task (only later commits)")
    console.detail("recorded", f"in session {result.session_id}; the next invocation is told what was rolled back")
    console.detail("note", "the rolled-back commits stay reachable through `git reflog`")
    console.echo(f"next: lopen run {module}")
