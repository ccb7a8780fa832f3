"""The spec watcher (W4, W8): the approved specification is the only one a run builds from.

The source of truth is the spec in the user's checkout (``docs/requirements/<module>/SPECIFICATION.md``,
outside the worktree the model works in) together with the section hashes its approval recorded.

- The checkout's spec differs from the latest approval → the run stops for a person (exit 2): an
  edit — by a person, or a model that got out — is never adopted without ``lopen spec approve``.
- The latest approval differs from the hashes the plan was made from → drift (W8): recorded, and
  the run re-enters at the step the changed sections call for (acceptance criteria → 3,
  dependencies → 2; other sections are reported only).
- The worktree's copy of the spec is Lopen's: a tree to be judged whose spec differs from the
  approved one fails verification (``edited_in``), so a task can never commit a changed spec.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from events import catalogue as ev
from events.fold import ModuleState
from lopen.documents import load_spec
from lopen.documents.hashing import compare, section_hashes
from lopen.documents.paths import spec_path
from lopen.documents.sections import parse_document
from lopen.git import Worktree, git


class SpecStatus(msgspec.Struct, frozen=True):
    approved: bool
    unapproved: tuple[str, ...] = ()  # sections of the checkout's spec that differ from the approval
    drift: ev.SpecDriftDetected | None = None


class SpecWatcher:
    def __init__(self, root: Path, module: str) -> None:
        self.root = root
        self.module = module
        self.path = spec_path(root, module)

    def current(self) -> dict[str, str]:
        """The section hashes of the spec in the user's checkout."""
        _, doc = load_spec(self.root, self.module)
        return section_hashes(doc)

    def check(self, state: ModuleState) -> SpecStatus:
        if state.approval is None:
            return SpecStatus(approved=False)
        approved = state.approval.section_hashes
        now = compare(approved, self.current())
        if now.drifted:
            return SpecStatus(approved=True, unapproved=(*now.changed, *now.added, *now.removed))
        pending = state.pending_drift()
        if pending is None:
            return SpecStatus(approved=True)
        baseline, latest = pending
        drift = compare(baseline, latest)
        return SpecStatus(
            approved=True,
            drift=ev.SpecDriftDetected(
                changed_sections=tuple(drift.changed),
                added_sections=tuple(drift.added),
                removed_sections=tuple(drift.removed),
                reentry_step=drift.reentry_step or 0,
                section_hashes=latest,
            ),
        )

    def drift_events(self, drift: ev.SpecDriftDetected) -> list[ev.Event]:
        events: list[ev.Event] = [drift]
        if drift.reentry_step:
            sections = ", ".join((*drift.changed_sections, *drift.added_sections, *drift.removed_sections))
            events.append(
                ev.CorrectiveInstructionIssued(
                    category="drift",
                    instruction=f"The specification was changed and approved again ({sections}). Re-plan from step "
                    f"{drift.reentry_step}: record the components and tasks the changed specification needs; "
                    "work already complete stays complete unless it no longer meets the specification.",
                )
            )
        return events

    def edited_in(self, worktree: Worktree, tree: str, state: ModuleState) -> str | None:
        """Why ``tree``'s copy of the spec is not the approved one, or None when it is (or has none)."""
        if state.approval is None:
            return None
        relative = self.path.relative_to(self.root).as_posix()
        text = git(worktree.path, "cat-file", "-p", f"{tree}:{relative}", check=False)
        if not text:
            return None
        drift = compare(state.approval.section_hashes, section_hashes(parse_document(text, relative)))
        if not drift.drifted:
            return None
        sections = ", ".join((*drift.changed, *drift.added, *drift.removed))
        return (
            f"{relative} was edited ({sections}): the approved specification is a person's to change. "
            f"Restore it (`git checkout -- {relative}`), then verify again"
        )
