"""`lopen init <module>`: the first module — a specification to fill in, and a check that git is ready."""

from __future__ import annotations

import re

import typer

TEMPLATE = """\
---
name: {module}
description: "[TODO: one line on what {module} is]"
---

# {title} Specification

## Overview

[TODO: what {module} does, for whom, and what is out of scope — a few paragraphs; the model reads it first.]

## Acceptance Criteria

- [ ] [{prefix}-01] [TODO: one behaviour that can be checked, e.g. `greet("Ada")` returns `"Hello, Ada!"`]
- [ ] [{prefix}-02] [TODO: another; the oracle verifies every criterion, so each should be testable]

## Dependencies

[TODO: the libraries, services and other modules it needs; write "None" when there are none.]

## Skills & Hooks

- verify-tests: `[TODO: the command that runs the tests, e.g. python -m pytest -q]`

## Notes

[TODO: decisions, constraints and open questions; "None" is fine.]

## References

- [TODO: links to related specifications, research notes or outside sources; "None" is fine.]
"""


def scaffold(module: str) -> str:
    """The specification pattern (docs/specifications.md) for ``module``, with ``[TODO: …]`` to fill in."""
    words = re.split(r"[-_.]+", module)
    title = " ".join(w[:1].upper() + w[1:] for w in words if w) or module
    prefix = re.sub(r"[^A-Za-z0-9]", "", module).upper()[:8] or "REQ"
    return TEMPLATE.format(module=module, title=title, prefix=prefix)


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

    from lopen.cli.output import Console
    from lopen.documents.errors import DocumentError
    from lopen.documents.paths import spec_path, validate_module
    from lopen.documents.spec_check import PLACEHOLDER
    from lopen.errors import LopenError
    from lopen.project import ensure_lopen_dir, nearest_root
    from lopen.readiness import git_identity, git_problems
    from lopen.text import plural

    try:
        validate_module(module)
    except DocumentError as exc:
        raise LopenError(f"cannot create module {module!r}", str(exc), "choose another name") from None
    root = nearest_root() or Path.cwd()
    path = spec_path(root, module)
    shown = path.relative_to(root).as_posix()
    if path.exists():
        raise LopenError(
            f"{shown} already exists",
            "lopen init never overwrites a specification",
            f"edit it, check it with `lopen spec check {module}`, or choose another module name",
        )
    text = scaffold(module)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise LopenError(
            f"cannot write {path}", f"{exc.strerror or exc} (errno {exc.errno})", f"make {root} writable"
        ) from None
    out = Console.for_settings()
    todo = len(PLACEHOLDER.findall(text))
    out.ok(f"wrote {shown} from the specification pattern (docs/specifications.md)")
    left = plural(todo, "[TODO: …] placeholder")
    out.detail("next", f"replace its {left}; `lopen spec check {module}` lists what is left")
    problems = git_problems(root)
    if not problems:
        ensure_lopen_dir(root)
        out.ok(f"git: a repository with commits; Lopen will commit as {git_identity(root)}")
    for problem in problems:
        out.fail(f"git: {problem.what}")
        out.detail("why", problem.why)
        out.detail("fix", problem.how)
    out.echo(
        f"then: lopen spec approve {module} && lopen run {module}"
        "   (no Copilot subscription? docs/your-own-playbook.md runs it on a scripted model)"
    )
    raise typer.Exit(1 if problems else 0)
