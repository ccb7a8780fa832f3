"""The Assessor (W3, W8): where the module really stands, from its history and the repository.

Each ``assess()`` folds in what other writers appended (a pause asked for over MCP, a queued
message), checks the spec against its
approval (an unapproved edit stops the run; an approved change is drift and re-enters planning),
and answers with ``lopen.workflow.decide.assess`` — a pure function of the one fold and of the topics
the approved spec's References name (read in the user's checkout: research comes before planning when
some were never researched).
"""

from __future__ import annotations

import pykka

from actors.messages import Assessment, Stop
from events.journal import Journal
from lopen.documents import DocumentError, load_spec
from lopen.documents.references import research_topics
from lopen.git import Worktree
from lopen.workflow.decide import assess
from lopen.workflow.spec_watch import SpecWatcher


class AssessorActor(pykka.ThreadingActor):
    def __init__(self, journal: Journal, watcher: SpecWatcher, worktree: Worktree) -> None:
        super().__init__()
        self.journal = journal
        self.watcher = watcher
        self.worktree = worktree

    def assess(self) -> Assessment | Stop:
        self.journal.check_intact()  # the store deleted, replaced or rows removed under us: a critical error
        status = self.watcher.check(self.journal.snapshot())
        if not status.approved:
            return Stop(2, f"the specification of {self.journal.module} is not approved", "lopen spec approve")
        if status.unapproved:
            sections = ", ".join(status.unapproved)
            return Stop(
                2,
                f"the specification changed since it was approved ({sections})",
                f"review docs/requirements/{self.journal.module}/SPECIFICATION.md, then "
                f"`lopen spec approve {self.journal.module}` and run again (Lopen re-plans what the change needs)",
            )
        if status.drift is not None:
            self.journal.record(*self.watcher.drift_events(status.drift))
        topics = self._topics()
        return self.journal.read(lambda state: assess(state, topics))

    def _topics(self) -> tuple[str, ...]:
        """The topics the approved spec's References name (the checkout's spec, which the watcher has just
        found to be the approved one)."""
        try:
            return research_topics(load_spec(self.watcher.root, self.journal.module)[1])
        except DocumentError:
            return ()
