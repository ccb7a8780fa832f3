"""Parallel work (P1): which pieces of a module can be worked on now, and by whom — pure functions of
the one fold (``events.fold.ModuleState``), unit-tested without a run.

A module's work comes in pieces a worker claims through the module's history
(``ComponentClaimed``): a component (built in a lane of its own — its own branch
``lopen/<module>--<component>`` and worktree — then merged onto ``lopen/<module>``), a planning
invocation (``:plan``, one at a time) and the module's verification (``:module``).

- ``fan_out(state, parallelism)``: whether a `lopen run` hands the module to parallel lanes now —
  more than one component can be worked on at once, or lane work is under way — and nothing is being
  built on the module branch itself (a component alone is built there, as with parallelism 1).
- ``next_work(...)``: what a worker should start now, given what it runs and what others hold.
- ``component_step(state, slug)``: the next step inside one component (tasks in order, then its
  verification, then its merge).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import msgspec

from events.fold import MODULE_ITEM, PLAN_ITEM, ModuleState
from lopen.workflow.decide import Assessment, first_open_task
from lopen.workflow.steps import Kind

__all__ = [
    "MERGE",
    "MODULE_ITEM",
    "PLAN_ITEM",
    "Work",
    "buildable",
    "component_step",
    "fan_out",
    "lane_branch",
    "lanes_pending",
    "next_work",
    "ready",
    "waiting_on",
]

MERGE = "merge"  # component_step's kind when the component is verified on its own branch, not merged yet
DONE = "done"


def lane_branch(module: str, component: str) -> str:
    """A component's own branch. Not ``lopen/<module>/<component>``: git cannot hold that beside the
    branch ``lopen/<module>`` (a ref cannot be both a file and a folder)."""
    return f"lopen/{module}--{component}"


def ready(state: ModuleState) -> list[str]:
    """Components not done whose dependencies are done (merged onto the module branch), in plan order."""
    return [slug for slug in state.components if not state.component_done(slug) and not state.blocked_by(slug)]


def waiting_on(state: ModuleState, given_up: Collection[str]) -> dict[str, list[str]]:
    """The components not done that wait, directly or through others, for a component given up (P1: a
    failure blocks only its dependents), each with the given-up ones it waits for, in plan order."""
    stuck = set(given_up)

    def behind(slug: str, seen: frozenset[str]) -> list[str]:
        found: list[str] = []
        for dep in state.components[slug].depends_on:
            if dep not in state.components or dep in seen or state.component_done(dep):
                continue
            for cause in [dep] if dep in stuck else behind(dep, seen | {dep}):
                if cause not in found:
                    found.append(cause)
        return found

    waits = {
        slug: behind(slug, frozenset({slug}))
        for slug in state.components
        if slug not in stuck and not state.component_done(slug)
    }
    return {slug: causes for slug, causes in waits.items() if causes}


def buildable(state: ModuleState) -> list[str]:
    """Ready components with tasks recorded."""
    return [slug for slug in ready(state) if state.components[slug].tasks]


def lanes_pending(state: ModuleState) -> bool:
    """A component built on its own branch is not done yet (not finished, or not merged)."""
    return any(slug in state.lanes and not state.component_done(slug) for slug in state.components)


def fan_out(state: ModuleState, parallelism: int) -> bool:
    """Whether the module's work goes to parallel lanes now (see the module docstring). Lane work under
    way is finished in lanes whatever the parallelism (it is merged there)."""
    if state.replan_from or not state.planned or state.started_in_place():
        return False
    if lanes_pending(state):
        return True
    return parallelism >= 2 and len(ready(state)) >= 2


def component_step(state: ModuleState, slug: str) -> Assessment:
    """The next step of component ``slug`` in its lane: its first unfinished task, its verification,
    its merge (kind ``merge``), or ``done``."""
    building = first_open_task(state, slug)
    if building is not None:
        return building
    if not state.component_tasks(slug):
        return Assessment(step=4, kind=Kind.PLANNING.value, component=slug, why=f"component {slug} has no tasks yet")
    if not state.verified("component", slug):
        return Assessment(
            step=6,
            kind=Kind.COMPONENT_VERIFICATION.value,
            component=slug,
            why=f"all tasks of {slug} are complete; the component is not verified yet",
        )
    if not state.merged(slug):
        return Assessment(step=6, kind=MERGE, component=slug, why=f"component {slug} is verified on its own branch")
    return Assessment(step=6, kind=DONE, component=slug, why=f"component {slug} is complete")


class Work(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker starts now."""

    start: tuple[str, ...] = ()  # components to build, each in a lane of its own
    plan: bool = False  # a planning invocation (ready components have no tasks yet)
    verify_module: bool = False
    held: tuple[str, ...] = ()  # work other workers hold under live leases
    complete: bool = False
    why: str = ""

    @property
    def anything(self) -> bool:
        return bool(self.start or self.plan or self.verify_module)


def next_work(
    state: ModuleState,
    *,
    now: float,
    mine: Callable[[str], bool],
    running: frozenset[str] = frozenset(),
    planning: bool = False,
    slots: int = 1,
    given_up: frozenset[str] = frozenset(),
    verify_module: bool = True,
) -> Work:
    """What to start now. ``mine(worker)`` tells this process's claims from others'; ``running`` are the
    components its lanes build, ``planning`` whether its planning invocation runs, ``slots`` its free
    lanes, ``given_up`` components it stopped trying in this run (churn); ``verify_module`` whether it
    verifies the module itself (a `lopen worker`; `lopen run` leaves that to its Conductor)."""
    if state.complete:
        return Work(complete=True, why="the module is complete")

    def held_by_other(item: str) -> bool:
        claim = state.live_claim(item, now)
        return claim is not None and not mine(claim.worker)

    if state.replan_from or not state.planned:
        if planning or held_by_other(PLAN_ITEM):
            return Work(held=(PLAN_ITEM,) if not planning else (), why="planning is under way")
        return Work(plan=True, why=state.replan_why or "no components recorded yet")
    candidates = [slug for slug in ready(state) if slug not in running and slug not in given_up]
    held = tuple(slug for slug in candidates if held_by_other(slug))
    free = [slug for slug in candidates if slug not in held]
    start = tuple(slug for slug in free if state.components[slug].tasks)[: max(slots, 0)]
    unplanned = [slug for slug in free if not state.components[slug].tasks]
    plan = bool(unplanned) and not planning
    if plan and held_by_other(PLAN_ITEM):
        plan, held = False, (*held, PLAN_ITEM)
    module = False
    if verify_module and all(state.component_done(slug) for slug in state.components):
        if held_by_other(MODULE_ITEM):
            held = (*held, MODULE_ITEM)
        elif not running:
            module = True
    why = "; ".join(
        part
        for part in (
            f"build {', '.join(start)}" if start else "",
            f"plan {', '.join(unplanned)}" if plan else "",
            "verify the module" if module else "",
            f"held by other workers: {', '.join(held)}" if held else "",
        )
        if part
    )
    return Work(start=start, plan=plan, verify_module=module, held=held, why=why or "nothing to start")
