"""`lopen spec …`: work with a module's specification. This module holds the read-only `check`."""

from __future__ import annotations

import typer

spec_app = typer.Typer(name="spec", help="Check and approve module specifications.", no_args_is_help=True)


@spec_app.command("check")
def check(module: str = typer.Argument(..., help="The module, as named under docs/requirements/.")) -> None:
    """Check a module's specification against the pattern Lopen needs; exit 1 when it has errors."""
    from lopen.cli.output import Console
    from lopen.documents import DocumentError, SectionCache, acceptance_criteria, check_spec, load_spec
    from lopen.documents import skills_and_hooks as hooks_of
    from lopen.errors import LopenError
    from lopen.project import find_root

    root = find_root()
    try:
        path, doc = load_spec(root, module, SectionCache(root))
    except DocumentError as exc:
        raise LopenError(
            f"cannot check the specification of {module!r}",
            str(exc),
            f"write docs/requirements/{module}/SPECIFICATION.md (see docs/specifications.md), "
            "or run `lopen modules` to list the modules",
        ) from None
    result = check_spec(doc, module)
    out = Console.for_settings()
    shown = path.relative_to(root).as_posix()
    if result.ok:
        out.ok(f"{shown} follows the specification pattern")
    else:
        out.fail(f"{shown}: {result.summary()}")
    criteria = acceptance_criteria(doc)
    with_ids = sum(1 for c in criteria if c.id)
    checked = sum(1 for c in criteria if c.checked)
    out.detail("acceptance criteria", f"{len(criteria)} ({with_ids} with ids, {checked} checked)")
    hooks = hooks_of(doc)
    if hooks:
        out.detail("skills & hooks", "; ".join(f"{h.name}: {h.command or '(no command)'}" for h in hooks))
    for gap in result.gaps:
        out.echo(f"  {gap.render()}")
    raise typer.Exit(0 if result.ok else 1)
