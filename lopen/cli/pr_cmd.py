"""`lopen pr <module>`: push lopen/<module> and open its pull request; `--comments` takes the review back.

The use cases are ``lopen.app.pull_request.propose`` and ``take_comments``; this prints what they did.
Exit codes: 0 pushed (the pull request opened, or the open one updated, with gh; or its body and the URL
to open printed), or comments queued; 1 refused (not built, no commits, no remote, the push rejected, gh missing for
``--comments``) with what/why/how on stderr.
"""

from __future__ import annotations

import typer

MODULE = typer.Argument(..., help="The module, as named under docs/requirements/.")
BASE = typer.Option(
    None,
    "--base",
    metavar="BRANCH",
    help="The branch to propose the work into. Default: the branch the module was started from, else the "
    "remote's default branch.",
)
COMMENTS = typer.Option(
    False,
    "--comments",
    help="Read the pull request's reviews and comments through gh and queue each (once) as a message for the "
    "model's next run.",
)


def pr(module: str = MODULE, base: str | None = BASE, comments: bool = COMMENTS) -> None:
    """Push lopen/<module> and open its pull request, or update the open one (with gh when signed in; else print
    its text and the URL to open); with --comments, queue the review comments for the next run."""
    from lopen.app import commands
    from lopen.app import pull_request as prs
    from lopen.app.context import Project
    from lopen.cli.output import Console

    project = Project.here()
    console = Console.for_settings(project.settings())
    if comments:
        taken = prs.take_comments(project, module, commands.face_actor("pr"))
        noun = "comment" if taken.queued == 1 else "comments"
        console.ok(
            f"queued {taken.queued} review {noun} of pull request #{taken.number} for module {module}"
            + (f" ({taken.skipped} queued before, left out)" if taken.skipped else "")
        )
        if taken.queued:
            typer.echo(f"  the model gets them in the next invocation: {taken.next_run}")
        return
    made = prs.propose(project, module, base or "")
    console.ok(f"pushed {made.branch} ({made.pushed[:8]}) to {made.remote} ({made.remote_url})")
    for note in made.notes:
        console.warn(note)
    if made.opened or made.updated:
        done = "opened" if made.opened else "updated the open"
        console.ok(f"{done} pull request{' (draft)' if made.draft else ''}: {made.url}")
        typer.echo(f"  its text: {made.body_file}")
        return
    typer.echo(f"title: {made.title}")
    typer.echo(f"--- the pull request's text (also in {made.body_file}) ---")
    typer.echo(made.body, nl=False)
    typer.echo("---")
    if made.why_not_gh:
        typer.echo(f"not opened with gh: {made.why_not_gh}")
    if made.url:
        typer.echo(
            f"open the pull request{' (as a draft)' if made.draft else ''} of {made.branch} into {made.base} at:"
        )
        typer.echo(f"  {made.url}")
    else:
        typer.echo(
            f"{made.remote} is not on GitHub: open a pull (or merge) request there of {made.branch} into {made.base}"
        )
