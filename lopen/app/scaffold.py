"""``lopen init <module>``: a new module's specification from the pattern, and whether git is ready.

``scaffold(module)`` is the pattern (docs/specifications.md) with ``[TODO: …]`` placeholders;
``create_module`` writes it (never over an existing one) and reports what the face shows: where,
how many placeholders, git's problems (each with why and how) or the identity Lopen commits as.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from lopen.errors import LopenError

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


class Created(msgspec.Struct, frozen=True, kw_only=True):
    path: str  # relative to the project
    placeholders: int
    git_problems: list[tuple[str, str, str]]  # (what, why, how)
    identity: str  # who Lopen commits as (when git is ready)


def create_module(root: Path, module: str) -> Created:
    """Write ``docs/requirements/<module>/SPECIFICATION.md`` from the pattern under ``root``;
    ``.lopen/`` is set up when git is ready."""
    from lopen.documents.errors import DocumentError
    from lopen.documents.paths import spec_path, validate_module
    from lopen.documents.spec_check import PLACEHOLDER
    from lopen.project import ensure_lopen_dir
    from lopen.readiness import git_identity, git_problems

    try:
        validate_module(module)
    except DocumentError as exc:
        raise LopenError(f"cannot create module {module!r}", str(exc), "choose another name") from None
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
    problems = git_problems(root)
    if not problems:
        ensure_lopen_dir(root)
    return Created(
        path=shown,
        placeholders=len(PLACEHOLDER.findall(text)),
        git_problems=[(p.what, p.why, p.how) for p in problems],
        identity="" if problems else git_identity(root),
    )
