"""`lopen do "<request>"`: a quick request — a one-task spec drafted, approved, built (``lopen.app.quick``)."""

from __future__ import annotations

import typer

from lopen.cli.workflow import MODEL


def do(
    request: str = typer.Argument(..., help='What to change, in a sentence, e.g. "fix the failing date parser test".'),
    yes: bool = typer.Option(False, "--yes", "-y", help="Approve the drafted specification without asking."),
    model: str | None = MODEL,
) -> None:
    """Quick request: draft a one-task spec from a sentence, approve it, build it through the gated loop.

    The model drafts docs/requirements/do-<words>/SPECIFICATION.md (one task, with acceptance criteria)
    from the request and the repository; it is shown for approval (y/N), or approved unread with --yes.
    Then the module is built as `lopen run` builds one — worktree, oracle, verified commit — on
    lopen/do-<words>, and the commit and its diff stat are printed. Without a terminal, --yes is needed
    (or approve later: `lopen spec approve <module>`, then `lopen run <module>`).
    """
    import sys

    from lopen.app import commands, quick, tracing
    from lopen.app.context import Project
    from lopen.cli.workflow import _confirm, _finish

    project = Project.here()
    with tracing.traced(project, "lopen do", commands.cli_actor()) as span:
        drafted = quick.draft(project, request, typer.echo, model=model)
        span["lopen.module"] = drafted.module
        shown = drafted.spec.relative_to(project.root)
        typer.echo(f"── {shown} " + "─" * max(0, 60 - len(str(shown))))
        typer.echo(drafted.text.rstrip())
        typer.echo("─" * 64)
        terminal = sys.stdin.isatty()
        if not yes:
            if not terminal:
                raise quick.unapproved(drafted, "there is no terminal to ask for approval on, and --yes was not given")
            if not _confirm(f"Approve this specification and build it on lopen/{drafted.module}?"):
                raise quick.unapproved(drafted, "you did not approve it")
        code, session, detail = quick.build(
            project, drafted, typer.echo, model=model, ask=_confirm if terminal and not yes else None
        )
        span.update({"lopen.session": session, "lopen.exit_code": code})
        if code == 0:
            landed = quick.landed(project, drafted.module)
            typer.echo(f"on {landed.branch} (from {landed.base[:8]}):")
            for commit in landed.commits:
                typer.echo(f"  {commit}")
            typer.echo(landed.diff_stat)
            look = f"git log -p {landed.base[:8]}..{landed.branch}"
            typer.echo(f"take it: git merge {landed.branch}   (look first: {look})")
        _finish(code, session, detail, go_on=f"lopen run {drafted.module}")
