"""Where a module stands and what the run does next: pure functions, unit-tested without a run.

``assess(state)`` reads the one fold (``events.fold.ModuleState``) and says which step comes next
and why (W3: re-entrant — the recorded history is the truth, not a cached "current step").
``decide(...)`` turns an assessment, the Guardrail's answer and the run's flags into the Conductor's
next action; ``after(outcome, …)`` says what an invocation's outcome means for the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from events.fold import ModuleState
from lopen.text import plural
from lopen.workflow.steps import Kind, phase_of

COMPLETE = "complete"


class Assessment(msgspec.Struct, frozen=True):
    """Where the module really stands and what to do next (W3)."""

    step: int
    kind: str  # a Kind value, or "complete"
    why: str
    component: str = ""
    task: str = ""
    last_task_of_component: bool = False
    topics: tuple[str, ...] = ()  # research: the spec's References topics not researched yet

    @property
    def complete(self) -> bool:
        return self.kind == COMPLETE


def assess(state: ModuleState, topics: Sequence[str] = ()) -> Assessment:
    """The next step for the module whose history folded into ``state``; ``topics``: what the approved
    spec's References name (``lopen.documents.references.research_topics``), researched before planning."""
    due = research_due(state, topics)
    if due:
        return Assessment(
            step=2,
            kind=Kind.RESEARCH.value,
            topics=due,
            why=f"the specification names {plural(len(due), 'topic')} to research before planning",
        )
    if state.replan_from:
        return Assessment(step=state.replan_from, kind=Kind.PLANNING.value, why=state.replan_why or "re-planning")
    if not state.planned:
        return Assessment(step=2, kind=Kind.PLANNING.value, why="no components recorded yet")
    selected = state.components.get(state.selected)
    if selected is None or state.component_done(selected.slug):
        remaining = [slug for slug in state.components if not state.component_done(slug)]
        if remaining:
            ready = [slug for slug in remaining if not state.blocked_by(slug)]
            why = "no component selected yet" if selected is None else f"component {selected.slug} is complete"
            left = f"{len(remaining)} remain" if len(remaining) != 1 else "1 remains"
            return Assessment(step=4, kind=Kind.PLANNING.value, why=f"{why}; {left} ({', '.join(ready)} ready)")
        if state.verified("module", state.module):
            return Assessment(step=7, kind=COMPLETE, why="every component is complete and the module is verified")
        return Assessment(step=7, kind=Kind.MODULE_VERIFICATION.value, why="every component is complete")
    blocked = state.blocked_by(selected.slug)
    if blocked:
        return Assessment(
            step=4,
            kind=Kind.PLANNING.value,
            why=f"component {selected.slug} waits for {', '.join(blocked)}: select one that is ready",
        )
    tasks = state.component_tasks(selected.slug)
    if not tasks:
        return Assessment(
            step=4, kind=Kind.PLANNING.value, component=selected.slug, why=f"component {selected.slug} has no tasks yet"
        )
    building = first_open_task(state, selected.slug)
    if building is not None:
        return building
    return Assessment(
        step=6,
        kind=Kind.COMPONENT_VERIFICATION.value,
        component=selected.slug,
        why=f"all tasks of {selected.slug} are complete; the component is not verified yet",
    )


def research_due(state: ModuleState, topics: Sequence[str]) -> tuple[str, ...]:
    """The topics to research now: named by the spec, never given to a research invocation of this module
    (``ModuleState.researched``), and the plan is about to be made from step 2 (a new module, or a re-plan
    from its dependencies). Idempotent across resumes: once researched, a topic is not researched again; a
    module planned before (or a re-plan from step 3 on) gets no research."""
    if state.planned and state.replan_from != 2:
        return ()
    done = set(state.researched)
    return tuple(t for t in dict.fromkeys(topics) if t not in done)


def first_open_task(state: ModuleState, slug: str) -> Assessment | None:
    """Step 6 on component ``slug``'s first task that is not complete (tasks go in order); None when
    every task is complete."""
    open_tasks = [t for t in state.component_tasks(slug) if t.state != "complete"]
    if not open_tasks:
        return None
    task = open_tasks[0]
    return Assessment(
        step=6,
        kind=Kind.TASK.value,
        component=slug,
        task=task.id,
        last_task_of_component=len(open_tasks) == 1,
        why=f"task {task.id} is {task.state}",
    )


GuardAction = Literal["allow", "warn", "pause"]


class GuardDecision(msgspec.Struct, frozen=True):
    """The Guardrail's answer: go on, go on with a warning, pause (exit 2), or fail (exit 1)."""

    action: Literal["allow", "warn", "pause", "fail"]
    category: str = ""
    detail: str = ""
    budget_hint: str = ""
    record: bool = True  # record it as a GuardrailTripped (false when already recorded this run)
    setting: str = ""  # the budget that tripped, e.g. budget.token_budget_per_task ("" = none)


class Action(msgspec.Struct, frozen=True):
    """What the Conductor does next."""

    kind: Literal["invoke", "complete", "pause", "fail"]
    exit_code: int = 0
    reason: str = ""
    error_kind: str = ""


def decide(
    assessment: Assessment,
    guard: GuardDecision,
    *,
    stop_before: str = "",
    pause_requested: str = "",
    interrupted: str = "",
) -> Action:
    """The Conductor's choice before an invocation. Order: an interruption, then completion, a person's
    pause request, ``lopen plan`` stopping before building, then the Guardrail."""
    if interrupted:
        return Action(
            kind="pause",
            exit_code=130 if interrupted == "SIGINT" else 143,
            reason="interrupted",
            error_kind="interrupted",
        )
    if assessment.complete:
        return Action(kind="complete", reason=assessment.why)
    if pause_requested:
        return Action(kind="pause", exit_code=2, reason=f"paused at the request of {pause_requested}")
    if stop_before and phase_of(assessment.step).value == stop_before:
        return Action(kind="pause", exit_code=0, reason=f"stopped before {stop_before} as asked")
    if guard.action in ("pause", "fail"):
        return Action(
            kind=guard.action,
            exit_code=2 if guard.action == "pause" else 1,
            reason=f"{guard.category}: {guard.detail}" if guard.category else guard.detail,
            error_kind=guard.category,
        )
    return Action(kind="invoke")


CRITICAL = {
    "fatal": "the model call failed",
    "model_unavailable": "no model left",
}
WAIT = ("rate_limited", "transient")


def after(ok: bool, error_kind: str, detail: str) -> Action | None:
    """What an invocation's outcome means for the run: None = go on (a failed task is the model's to
    fix, counted by the Guardrail); a critical error fails the run; waiting it out pauses it."""
    if ok:
        return None
    if error_kind == "interrupted":
        return Action(kind="pause", exit_code=130, reason="interrupted", error_kind="interrupted")
    if error_kind == "auth":  # a key revoked or expired mid-run (the CLI has retried it): log in, then go on
        why = detail.splitlines()[0] if detail else "the provider refused the credentials"
        return Action(
            kind="pause",
            exit_code=2,
            reason=f"authentication failed: {why} — log in again (`lopen auth login` for GitHub Copilot, or a new "
            "key in LOPEN_PROVIDER__API_KEY for your own provider), then `lopen run` goes on where it stopped",
            error_kind=error_kind,
        )
    if error_kind in CRITICAL:
        return Action(kind="fail", exit_code=1, reason=f"{CRITICAL[error_kind]}: {detail}", error_kind=error_kind)
    if error_kind in WAIT:
        return Action(kind="pause", exit_code=2, reason=f"{detail}; run again later to resume", error_kind=error_kind)
    return None
