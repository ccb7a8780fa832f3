"""The human gate (W4): approving a spec records its hashes; drift is measured against them."""

from __future__ import annotations

from pathlib import Path

from events import catalogue as ev
from events.journal import Journal
from events.store import EventStore
from lopen.documents import acceptance_criteria, check_spec, load_spec
from lopen.documents.hashing import section_hashes, spec_hash
from lopen.errors import LopenError
from lopen.git import who


def approve_spec(
    root: Path, module: str, store: EventStore, project: str | None = None, approver: str = ""
) -> tuple[ev.SpecApproved, list[str]]:
    """Record the approval of the module's current spec (:func:`approval_of`) through the module's
    journal; returns it and the spec check's gaps. ``project`` defaults to the store's project
    (``lopen.project.open_store``), else the project id recorded under ``root``."""
    from lopen.project import project_id

    approved, gaps = approval_of(root, module, approver)
    project = project or store.projections.project or project_id(root)
    Journal(store, project, module).record(approved)
    return approved, gaps


def approval_of(root: Path, module: str, approver: str = "") -> tuple[ev.SpecApproved, list[str]]:
    """The approval of the module's current spec, not yet recorded, with who approved it (the git
    identity, else ``$USER``, unless ``approver`` names someone), and the spec check's gaps. A spec
    without acceptance criteria, or that still holds ``[TODO: …]`` placeholders, is refused."""
    from lopen.documents.spec_check import placeholder_gaps

    _, doc = load_spec(root, module)
    if not acceptance_criteria(doc):
        raise LopenError(
            f"the specification of {module} has no acceptance criteria",
            "Lopen verifies the module against them; without them nothing can be checked",
            f"add an `## Acceptance Criteria` checkbox list (see `lopen spec check {module}`)",
        )
    left = placeholder_gaps(doc)
    if left:
        raise LopenError(
            f"the specification of {module} still has {len(left)} placeholder{'s' * (len(left) != 1)}",
            "; ".join(f"line {g.line}: {g.problem.removeprefix('placeholder left: ')}" for g in left[:5])
            + (" …" if len(left) > 5 else ""),
            f"replace each [TODO: …] with your own text (`lopen spec check {module}` lists them), then approve",
        )
    approved = ev.SpecApproved(
        spec_hash=spec_hash(doc), section_hashes=section_hashes(doc), approver=approver or who(root)
    )
    return approved, [f"{gap.part}: {gap.expected}" for gap in check_spec(doc, module).gaps]
