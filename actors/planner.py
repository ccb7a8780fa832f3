"""The Planner (steps 2–5): one planning invocation that records dependencies, components,
the selected component and its tasks (only steps 4–5 when looping back from step 7) — and, before the
first planning, one research invocation when the spec's References name topics (W9). With the module's
Git actor, git's own files and HEAD in the module's worktree are checked before and after each."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pykka

from actors.jobs import Reports
from actors.messages import Assessment, StepOutcome
from events import catalogue as ev
from events.fold import ModuleState
from events.journal import Journal
from lopen.documents.research import list_research
from lopen.text import plural
from lopen.workflow.decide import assess
from lopen.workflow.invoke import Invoker
from lopen.workflow.schedule import buildable
from lopen.workflow.steps import Kind

if TYPE_CHECKING:
    from actors.git import GitActor


class PlannerActor(Reports, pykka.ThreadingActor):
    def __init__(self, journal: Journal, invoker: Invoker, git: pykka.ActorProxy[GitActor] | None = None) -> None:
        super().__init__()
        self.journal = journal
        self.invoker = invoker
        self.git = git

    def plan(
        self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...], parallel: int = 1, lanes: bool = False
    ) -> StepOutcome:
        """One planning invocation. ``parallel`` components are built at once (the prompt says so);
        ``lanes``: planning for parallel lanes, which succeeds when a ready component gained tasks."""
        before = self.journal.snapshot() if lanes else None
        self._check_git()
        outcome = self.invoker.invoke(
            Kind.PLANNING, assessment.step, budget_hint=budget_hint, notes=notes, parallel=parallel
        )
        self._check_git()
        if not outcome.ok:
            return StepOutcome(ok=False, detail=outcome.detail, error_kind=outcome.error_kind)
        if before is not None:
            return self.journal.read(lambda after: _lanes_planned(before, after))

        def result(state: ModuleState) -> StepOutcome:
            """Planning succeeded when the module can now be built: the next step is no longer planning
            (a selected component, ready — its dependencies complete — with tasks)."""
            selected = state.components.get(state.selected)
            tasks = state.component_tasks(selected.slug) if selected else []
            after = assess(state)
            if after.kind == Kind.PLANNING.value or selected is None or not tasks:
                why = after.why if after.kind == Kind.PLANNING.value else "no selected component with tasks"
                return StepOutcome(ok=False, detail=f"the planning invocation left the plan unfinished: {why}")
            n = len(tasks)
            left = sum(t.state != "complete" for t in tasks)
            done = f", {n - left} already complete" if left < n else ""
            return StepOutcome(ok=True, detail=f"planned {selected.slug}: {plural(n, 'task')}{done}")

        return self.journal.read(result)

    def research(self, assessment: Assessment, budget_hint: str, notes: tuple[str, ...]) -> StepOutcome:
        """One research invocation on the topics ``assessment`` names (the research model, read-only tools
        and ``log_research``). When it ends well ``ResearchCompleted`` records the topics — never researched
        again — and the research documents the module has now, which later prompts cite; a model that
        logged nothing still ends the research (it found nothing worth a note)."""
        self._check_git()
        outcome = self.invoker.invoke(
            Kind.RESEARCH, assessment.step, budget_hint=budget_hint, notes=notes, topics=assessment.topics
        )
        self._check_git()
        if not outcome.ok:
            return StepOutcome(ok=False, detail=outcome.detail, error_kind=outcome.error_kind)
        docs = list_research(self.invoker.workdir, self.journal.module)
        self.journal.record(
            ev.ResearchCompleted(
                invocation_id=outcome.invocation_id,
                topics=assessment.topics,
                notes=tuple(ev.ResearchNote(topic=d.slug, title=d.title, summary=d.summary) for d in docs),
            )
        )
        if docs and self.git is not None:
            self.git.commit_research().get()  # on the branch: every later worktree, a lane's too, has them
        found = ", ".join(d.slug for d in docs) if docs else "no research notes"
        return StepOutcome(ok=True, detail=f"researched {plural(len(assessment.topics), 'topic')}: {found}")

    def _check_git(self) -> None:
        """git's own files and HEAD in the module's worktree as Lopen left them (``GitActor.check``)."""
        if self.git is not None:
            self.git.check().get()


def _lanes_planned(before: ModuleState, after: ModuleState) -> StepOutcome:
    fresh = [slug for slug in buildable(after) if slug not in buildable(before)]
    if not fresh:
        return StepOutcome(ok=False, detail="the planning invocation gave no ready component tasks")
    counts = ", ".join(f"{slug} ({len(after.components[slug].tasks)})" for slug in fresh)
    return StepOutcome(ok=True, detail=f"planned {counts}")
