"""Branches and commits: the module's branch and tip, each component's own branch (a ``Lane``, for
parallel work) until merged, the commits on them, merges, merge conflicts and reverts.

``ModuleState`` fields: ``branch``, ``branch_base``, ``worktree``, ``tip``, ``lanes``; a commit also
binds its task (``TaskNode.commit``). Two writers committing on one tip: the second is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from events import catalogue as ev
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState


class Lane(msgspec.Struct, kw_only=True):
    """A component built on its own branch and worktree (parallel work), until merged."""

    branch: str
    base: str = ""  # the module tip it started from
    tip: str = ""  # its branch's tip: its last commit, or the base
    worktree: str = ""
    merged_tip: str = ""  # the component tip last merged onto the module branch
    merged_as: str = ""  # the module-branch commit of that merge
    resolving: str = ""  # the module tip a merge-conflict resolution task merges in
    resolution_task: str = ""
    conflicts: int = 0


def lane_of_branch(s: ModuleState, branch: str) -> Lane | None:
    if not branch or not s.lanes:
        return None
    return next((lane for lane in s.lanes.values() if lane.branch == branch), None)


# -- BranchEnsured: the module's branch, or a component's of the plan ----------------------------


def _check_branch(s: ModuleState, e: ev.BranchEnsured) -> str | None:
    if e.component and e.component not in s.components:
        return f"no component {e.component!r} in the plan"
    return None


def _branch(s: ModuleState, e: ev.BranchEnsured) -> None:
    if e.component:
        lane = s.lanes.get(e.component)
        if lane is None or e.created:
            conflicts = lane.conflicts if lane is not None else 0  # a component built again keeps its count
            s.lanes[e.component] = Lane(
                branch=e.branch, base=e.base, tip=e.base, worktree=e.worktree, conflicts=conflicts
            )
        else:
            lane.worktree = e.worktree or lane.worktree
        return
    s.branch = e.branch
    s.branch_base = s.branch_base or e.base
    s.worktree = e.worktree or s.worktree
    s.tip = s.tip or e.base


# -- CommitRecorded: on the tip the history knows, of a complete task ---------------------------------


def _check_commit(s: ModuleState, e: ev.CommitRecorded) -> str | None:
    lane = lane_of_branch(s, e.branch)
    tip = (lane.tip or lane.base) if lane is not None else (s.tip or s.branch_base)
    if e.parent and tip and e.parent != tip:  # two writers committing on one tip: the second is refused
        where = e.branch or "the branch"
        return f"{where} is at {tip[:10]} in the history, not {e.parent[:10]}: another commit came first"
    if not e.task_id:
        return None
    task = s.tasks.get(e.task_id)
    if task is None:
        return f"task {e.task_id} is not in the plan of module {s.module!r}"
    if task.state != "complete":
        return f"task {e.task_id} is {task.state}: only a complete task is committed"
    return None


def _commit(s: ModuleState, e: ev.CommitRecorded) -> None:
    if e.task_id:
        task = s.tasks[e.task_id]
        task.commit = e.sha
        task.added, task.removed, task.files = e.added, e.removed, e.files
    lane = lane_of_branch(s, e.branch)
    if lane is None:
        s.tip = e.sha
        return
    lane.tip = e.sha
    if e.task_id and e.task_id == lane.resolution_task:
        lane.resolving = lane.resolution_task = ""


# -- Reverted --------------------------------------------------------------------------------------


def _reverted(s: ModuleState, e: ev.Reverted) -> None:
    s.tip = e.to_sha


# -- ComponentMerged: a lane, merged onto the tip, its tasks complete and verified -----------------


def _check_merged(s: ModuleState, e: ev.ComponentMerged) -> str | None:
    lane = s.lanes.get(e.component)
    if lane is None:
        return f"component {e.component} has no branch of its own to merge"
    expected = s.tip or s.branch_base
    if e.parent != expected:
        return f"the module branch is at {expected[:10]}, not {e.parent[:10]}: another merge came first"
    open_tasks = [t.id for t in s.component_tasks(e.component) if t.state != "complete"]
    if open_tasks:
        return f"component {e.component} has tasks not complete: {', '.join(open_tasks)}"
    if not s.verified("component", e.component):
        return f"component {e.component} is not verified"
    if e.component_tip != (lane.tip or lane.base):
        return f"component {e.component}'s branch is at {(lane.tip or lane.base)[:10]}, not {e.component_tip[:10]}"
    busy = s.started_in_place()
    if busy:
        return f"{', '.join(busy)} is being built on the module branch itself: merge after it is done"
    return None


def _merged(s: ModuleState, e: ev.ComponentMerged) -> None:
    lane = s.lanes[e.component]
    lane.merged_tip, lane.merged_as = e.component_tip, e.sha
    s.tip = e.sha


# -- ComponentMergeConflicted: a lane (and its resolution task, if any) ----------------------------


def _check_conflicted(s: ModuleState, e: ev.ComponentMergeConflicted) -> str | None:
    if e.component not in s.lanes:
        return f"component {e.component} has no branch of its own"
    if e.task_id and e.task_id not in s.tasks:
        return f"task {e.task_id} is not in the plan of module {s.module!r}"
    return None


def _conflicted(s: ModuleState, e: ev.ComponentMergeConflicted) -> None:
    lane = s.lanes[e.component]
    lane.conflicts += 1
    if not e.redo:
        lane.resolving, lane.resolution_task = e.into, e.task_id


RULES: dict[type, Rule] = {
    ev.BranchEnsured: Rule(_check_branch, _branch),
    ev.CommitRecorded: Rule(_check_commit, _commit),
    ev.Reverted: Rule(None, _reverted),
    ev.ComponentMerged: Rule(_check_merged, _merged),
    ev.ComponentMergeConflicted: Rule(_check_conflicted, _conflicted),
}
