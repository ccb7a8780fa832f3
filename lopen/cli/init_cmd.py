"""`lopen init <module>`: the first module — a specification to fill in, and a check that git is ready."""

from __future__ import annotations

import typer

from lopen.app.scaffold import TEMPLATE, scaffold

__all__ = ["TEMPLATE", "init", "scaffold"]


def init(
    module: str = typer.Argument(..., help="The new module's name, e.g. greet or token-service."),
    prompt: str | None = typer.Option(
        None, "--prompt", "-p", help="Have the model draft the specification from this instead (step 1)."
    ),
    headless: bool = typer.Option(False, "--headless", "-q", help="Plain line output; never wait for input."),
) -> None:
    """Start a module: scaffold docs/requirements/<module>/SPECIFICATION.md and check that git is ready.

    The specification follows the pattern Lopen needs (docs/specifications.md); replace its
    [TODO: …] placeholders, then `lopen spec check <module>`, `lopen spec approve <module>` and
    `lopen run <module>`. With --prompt the model drafts it instead (as `lopen spec draft`), then
    stops at the human gate. Exits 1 when git is not ready (each problem with its fix).
    """
    if prompt:
        from lopen.cli.workflow import draft

        draft(module, prompt=prompt, headless=headless, model=None)
        return
    from pathlib import Path

    from lopen.app.scaffold import create_module
    from lopen.cli.output import Console
    from lopen.project import nearest_root
    from lopen.term import plural

    created = create_module(nearest_root() or Path.cwd(), module)
    out = Console.for_settings()
    out.ok(f"wrote {created.path} from the specification pattern (docs/specifications.md)")
    left = plural(created.placeholders, "[TODO: …] placeholder")
    out.detail("next", f"replace its {left}; `lopen spec check {module}` lists what is left")
    if not created.git_problems:
        out.ok(f"git: a repository with commits; Lopen will commit as {created.identity}")
    for what, why, how in created.git_problems:
        out.fail(f"git: {what}")
        out.detail("why", why)
        out.detail("fix", how)
    out.echo(
        f"then: lopen spec approve {module} && lopen run {module}"
        "   (no Copilot subscription? docs/your-own-playbook.md runs it on a scripted model)"
    )
    raise typer.Exit(1 if created.git_problems else 0)
