"""The one fold: a module's plan and progress, from its history (S8).

``ModuleState`` is a pure function of the events of one module stream (``module:<project>/<module>``):
the plan (dependencies, components keyed by slug, tasks), task states with their failures, verdicts
with the tree each judged and their attempt numbers, scopes and their base commits, commits, the
approval baseline and drift, the sessions of the module, queued messages and pending corrective
notes. Everything that needs to know where a module stands reads this fold — the plan projection
(one row per module *is* a ``ModuleState``), the run (``events.journal.Journal`` applies each event it
appends to its own copy: read-your-writes inside tool calls), the Assessor, revert, ``read_plan``,
``session show``, the TUI — and nothing else folds these events.

Two ways in:

- ``check(event)`` says why an event would contradict the state (an invalid W5 transition, a task
  of an unknown component, a component whose dependencies are not complete …) or returns ``None``.
  The journal checks every event before it is appended, so the store never holds a contradiction.
- ``apply(event, seq)`` folds an event in. An event that fails ``check`` (only possible in a store
  written by an older Lopen, or by hand) is skipped and returned as a problem string: the fold
  never stops on it, and the projections mark themselves stale instead of failing every command.

The fold is plain msgspec data, so a projection can store it as a row and the run can start from
that row instead of from event #1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from events import catalogue as ev
from events.catalogue import ComponentStatus, Scope, TaskState

__all__ = [
    "MODULE_ITEM",
    "PLAN_ITEM",
    "Claim",
    "ComponentNode",
    "Lane",
    "ModuleState",
    "TaskNode",
    "aggregate",
    "render_plan",
    "scope_key",
    "slugify",
]


def slugify(name: str) -> str:
    """A component's key: ``"Token Issuer"`` → ``"token-issuer"``."""
    out = "".join(ch if ch.isalnum() else "-" for ch in name.strip().lower())
    return "-".join(part for part in out.split("-") if part) or "component"


def scope_key(scope: str, target: str) -> str:
    return f"{scope}:{target}"


def aggregate(states: Iterable[str]) -> str:
    """W5 parent state: failed wins, all complete = complete, all pending = pending, else in-progress."""
    states = list(states)
    if not states or all(s == "pending" for s in states):
        return "pending"
    if "failed" in states:
        return "failed"
    if all(s == "complete" for s in states):
        return "complete"
    return "in-progress"


class TaskNode(msgspec.Struct, kw_only=True):
    id: str
    name: str
    component: str
    description: str = ""
    subtasks: list[str] = []
    acceptance: list[str] = []
    state: TaskState = "pending"
    tree: str = ""  # the verified tree its completion is bound to
    commit: str = ""  # Lopen's commit of that tree
    invocation: str = ""  # the invocation that completed it
    failures: int = 0
    reasons: list[str] = []

    def spec(self) -> ev.TaskSpec:
        """The task as ``TasksRecorded`` records it: how a component's plan is recorded again."""
        return ev.TaskSpec(
            id=self.id,
            name=self.name,
            description=self.description,
            subtasks=tuple(self.subtasks),
            acceptance=tuple(self.acceptance),
        )


class ComponentNode(msgspec.Struct, kw_only=True):
    slug: str
    name: str
    description: str = ""
    status: ComponentStatus = "missing"
    depends_on: list[str] = []  # slugs of components (names that are not components are external)
    tasks: list[str] = []
    last_n: int = 0  # the highest task number ever given here: task ids are never reused


class VerdictNode(msgspec.Struct, kw_only=True):
    passed: bool = False
    valid: bool = False  # a passing verdict stops counting when the work it judged changes
    tree: str = ""
    attempts: int = 0
    summary: str = ""


class Approval(msgspec.Struct, kw_only=True):
    spec_hash: str
    section_hashes: dict[str, str]
    approver: str = ""
    at: float = 0.0
    seq: int = 0  # where it is in the store (a session's story starts with the approval before it)


class OpenInvocation(msgspec.Struct, kw_only=True):
    kind: str = ""
    session_id: str = ""
    task: str = ""
    commands: list[str] = []  # bash commands run in it (B4: were the tests run?)


class EvidenceNode(msgspec.Struct, kw_only=True):
    """A verify command's result on one tree: the same command on the same tree is not run again."""

    exit_code: int
    output_tail: str = ""
    duration: float = 0.0


EVIDENCE_KEPT = 64


PLAN_ITEM = ":plan"  # a claim on the planning invocation (one at a time across workers)
MODULE_ITEM = ":module"  # a claim on the module's verification
RESERVED_ITEMS = (PLAN_ITEM, MODULE_ITEM)


class Claim(msgspec.Struct, kw_only=True):
    """Who holds a piece of the module's work, and until when (a lease, UTC seconds)."""

    worker: str
    until: float
    at: float = 0.0


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


class SessionNode(msgspec.Struct, kw_only=True):
    status: str = "running"  # running | paused | completed | failed | deleted
    started_at: float = 0.0


class ModuleState(msgspec.Struct, kw_only=True):
    project: str = ""
    module: str
    version: int = 0  # the stream version folded so far
    approval: Approval | None = None
    approval_seqs: list[int] = []  # every approval's seq, oldest first
    baseline: dict[str, str] = {}  # the section hashes the plan was made from
    replan_from: int = 0
    replan_why: str = ""
    dependencies: list[ev.Dependency] = []
    components: dict[str, ComponentNode] = {}
    tasks: dict[str, TaskNode] = {}
    selected: str = ""
    verdicts: dict[str, VerdictNode] = {}
    scopes: dict[str, str] = {}  # scope key → base commit
    branch: str = ""
    branch_base: str = ""
    worktree: str = ""
    tip: str = ""  # the branch tip Lopen expects: its last commit, or the base
    sessions: dict[str, SessionNode] = {}
    queued: dict[str, str] = {}  # message id → text, not yet delivered
    notes: list[str] = []  # corrective instructions for the next invocation
    invocations: dict[str, OpenInvocation] = {}  # started and not finished
    unavailable: list[str] = []  # models that fell back in the latest session
    pause_requested: str = ""  # who asked, until the run pauses
    evidence: dict[str, EvidenceNode] = {}  # "<tree> <command>" → result, the latest EVIDENCE_KEPT
    task_numbers: dict[str, int] = {}  # component slug → the highest task number ever given (never reused)
    claims: dict[str, Claim] = {}  # component slug (or :plan, :module) → who holds it, until when
    lanes: dict[str, Lane] = {}  # component slug → its own branch (parallel work)
    problems: list[str] = []  # events skipped because they contradicted the state

    # -- folding -------------------------------------------------------------------------------

    def check(self, event: ev.Event) -> str | None:
        """Why ``event`` cannot follow the current state, or None when it can."""
        checker = _CHECKS.get(type(event))
        return checker(self, event) if checker is not None else None

    def apply(self, event: ev.Event, seq: int = 0) -> str | None:
        """Fold ``event`` in; a contradicting one is skipped and its problem returned (and kept)."""
        problem = self.check(event)
        if problem is not None:
            text = f"event #{seq} {type(event).__name__} skipped: {problem}" if seq else problem
            self.problems = [*self.problems[-19:], text]
            return text
        handler = _APPLY.get(type(event))
        if handler is not None:
            handler(self, event)
            if seq and type(event) is ev.SpecApproved and self.approval is not None:
                self.approval.seq = seq
                self.approval_seqs = [*self.approval_seqs, seq]
        return None

    # -- queries -------------------------------------------------------------------------------

    def component(self, name: str) -> ComponentNode | None:
        return self.components.get(slugify(name))

    def component_tasks(self, slug: str) -> list[TaskNode]:
        component = self.components.get(slug)
        return [self.tasks[t] for t in component.tasks] if component else []

    def verified(self, scope: str, target: str) -> bool:
        verdict = self.verdicts.get(scope_key(scope, target))
        return bool(verdict and verdict.passed and verdict.valid)

    def attempts(self, scope: str, target: str) -> int:
        verdict = self.verdicts.get(scope_key(scope, target))
        return verdict.attempts if verdict else 0

    def component_done(self, slug: str) -> bool:
        """One rule: recorded done with no tasks (the module's verification still judges its criteria), or
        every task complete, the component verified and its work on the module branch."""
        component = self.components.get(slug)
        if component is None:
            return False
        if not component.tasks:
            return component.status == "done"  # the planner's word; module verification still judges it
        return (
            all(t.state == "complete" for t in self.component_tasks(slug))
            and self.verified("component", slug)
            and self.merged(slug)
        )

    def merged(self, slug: str) -> bool:
        """Its work is on the module branch: built there, or its own branch merged at its tip."""
        lane = self.lanes.get(slug)
        return lane is None or (bool(lane.merged_tip) and lane.merged_tip == lane.tip)

    def tip_of(self, slug: str = "") -> str:
        """The tip of the branch ``slug``'s work goes on: its own (parallel work) or the module's."""
        lane = self.lanes.get(slug) if slug else None
        if lane is not None:
            return lane.tip or lane.base
        return self.tip or self.branch_base

    def live_claim(self, item: str, now: float) -> Claim | None:
        """The claim on ``item`` whose lease has not run out at ``now``, if any."""
        claim = self.claims.get(item)
        return claim if claim is not None and claim.until > now else None

    def started_in_place(self) -> list[str]:
        """Components built on the module branch itself that have started and are not done."""
        return [
            slug
            for slug in self.components
            if slug not in self.lanes
            and any(t.state != "pending" for t in self.component_tasks(slug))
            and not self.component_done(slug)
        ]

    def component_state(self, slug: str) -> str:
        """pending | in-progress | failed | complete (complete only when ``component_done``)."""
        if self.component_done(slug):
            return "complete"
        state = aggregate(t.state for t in self.component_tasks(slug))
        return "in-progress" if state == "complete" else state

    def blocked_by(self, slug: str) -> list[str]:
        """The components ``slug`` depends on that are not done yet."""
        component = self.components.get(slug)
        if component is None:
            return []
        return [d for d in component.depends_on if d in self.components and not self.component_done(d)]

    @property
    def planned(self) -> bool:
        return bool(self.components)

    @property
    def complete(self) -> bool:
        return (
            self.planned
            and not self.replan_from
            and all(self.component_done(s) for s in self.components)
            and self.verified("module", self.module)
        )

    @property
    def state(self) -> str:
        """not started | in progress | complete (``lopen modules``)."""
        if self.complete:
            return "complete"
        return "in progress" if (self.sessions or self.planned) else "not started"

    def owed_commits(self, lane: str = "") -> list[TaskNode]:
        """Tasks completed on a verified tree that Lopen has not committed yet (in plan order): those
        going on the module branch, or with ``lane`` those of that component's own branch."""
        return [
            t
            for t in self.ordered_tasks()
            if t.state == "complete"
            and t.tree
            and not t.commit
            and (t.component == lane if lane else t.component not in self.lanes)
        ]

    def ordered_tasks(self) -> list[TaskNode]:
        return [self.tasks[t] for c in self.components.values() for t in c.tasks]

    def next_task_id(self, slug: str, used: int = 0) -> str:
        component = self.components[slug]
        return f"{slug}/{max(component.last_n, used) + 1}"

    def unfinished_session(self) -> str | None:
        """The latest session still running or paused."""
        live = [(node.started_at, sid) for sid, node in self.sessions.items() if node.status in ("running", "paused")]
        return max(live)[1] if live else None

    def last_session(self) -> str | None:
        alive = [(node.started_at, sid) for sid, node in self.sessions.items() if node.status != "deleted"]
        return max(alive)[1] if alive else None

    def pending_drift(self) -> tuple[dict[str, str], dict[str, str]] | None:
        """(baseline, approved) when a newer approval changed sections the plan was made from."""
        if self.approval is None or not self.planned or not self.baseline:
            return None
        if self.approval.section_hashes == self.baseline:
            return None
        return dict(self.baseline), dict(self.approval.section_hashes)

    def copy(self) -> ModuleState:
        return _CLONE(self)


_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(ModuleState)


def _CLONE(state: ModuleState) -> ModuleState:
    return _DEC.decode(_ENC.encode(state))


# -- checks ------------------------------------------------------------------------------------


def _check_components(s: ModuleState, e: ev.ComponentsRecorded) -> str | None:
    slugs = [slugify(c.name) for c in e.components]
    if len(set(slugs)) != len(slugs):
        return f"component names must be distinct; got {', '.join(slugs)}"
    graph = {slug: [slugify(d) for d in c.depends_on] for slug, c in zip(slugs, e.components, strict=True)}
    for slug, deps in graph.items():
        if slug in deps:
            return f"component {slug} depends on itself"
    cycle = _cycle(graph)
    if cycle:
        return f"the components' depends_on form a cycle: {' → '.join(cycle)}"
    for slug, node in s.components.items():
        started = [t for t in node.tasks if s.tasks[t].state != "pending"]
        if slug not in graph and started:
            return f"component {slug} has started work ({', '.join(started)}) and cannot be dropped"
    return None


def _cycle(graph: dict[str, list[str]]) -> list[str]:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> list[str]:
        if node in done or node not in graph:
            return []
        if node in visiting:
            return [*visiting[visiting.index(node) :], node]
        visiting.append(node)
        for dep in graph[node]:
            found = visit(dep)
            if found:
                return found
        visiting.pop()
        done.add(node)
        return []

    for node in graph:
        found = visit(node)
        if found:
            return found
    return []


def _check_selected(s: ModuleState, e: ev.ComponentSelected) -> str | None:
    slug = slugify(e.component)
    if slug not in s.components:
        return f"no component {e.component!r} in the plan"
    if s.component_done(slug):
        return f"component {slug} is already complete"
    blocked = s.blocked_by(slug)
    if blocked:
        return f"component {slug} depends on {', '.join(blocked)}, which are not complete yet"
    return None


def _check_tasks(s: ModuleState, e: ev.TasksRecorded) -> str | None:
    slug = slugify(e.component)
    component = s.components.get(slug)
    if component is None:
        return f"no component {e.component!r} in the plan"
    ids = [t.id for t in e.tasks]
    if len(set(ids)) != len(ids):
        return f"task ids must be distinct; got {', '.join(ids)}"
    for spec in e.tasks:
        owner = s.tasks.get(spec.id)
        if owner is not None and owner.component != slug:
            return f"task {spec.id} already belongs to component {owner.component!r}"
        if owner is None and not spec.id.startswith(f"{slug}/"):
            return f"task id {spec.id} is not of the form {slug}/<n>"
    started = [t for t in component.tasks if s.tasks[t].state != "pending" and t not in ids]
    if started:
        return f"tasks with started or finished work cannot be dropped: {', '.join(started)}"
    return None


def _check_status(s: ModuleState, e: ev.TaskStatusChanged) -> str | None:
    task = s.tasks.get(e.task_id)
    if task is None:
        return f"task {e.task_id} is not in the plan of module {s.module!r}"
    if task.state != e.from_state:
        return f"task {e.task_id} is {task.state!r}, but the event moves it from {e.from_state!r}"
    if not ev.is_valid_transition(e.from_state, e.to_state):
        return f"task {e.task_id}: {e.from_state} → {e.to_state} is not a valid transition (W5)"
    return None


def _check_task_exists(s: ModuleState, e: ev.TaskReopened) -> str | None:
    return None if e.task_id in s.tasks else f"task {e.task_id} is not in the plan of module {s.module!r}"


def _check_commit(s: ModuleState, e: ev.CommitRecorded) -> str | None:
    lane = _lane_of_branch(s, e.branch)
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


def _check_session(s: ModuleState, e: ev.SessionStarted) -> str | None:
    return f"session {e.session_id} already exists" if e.session_id in s.sessions else None


def _check_claim(s: ModuleState, e: ev.ComponentClaimed) -> str | None:
    if e.component not in s.components and e.component not in RESERVED_ITEMS:
        return f"no component {e.component!r} in the plan"
    if e.component in s.components and s.component_done(e.component):
        return f"component {e.component} is already complete"
    held = s.live_claim(e.component, e.at)
    if held is not None and held.worker != e.worker:
        return f"{e.component} is claimed by {held.worker} until {_clock(held.until)} (a live lease)"
    return None


def _check_holder(s: ModuleState, e: ev.ComponentLeaseRenewed | ev.ComponentReleased) -> str | None:
    claim = s.claims.get(e.component)
    if claim is None:
        return f"{e.component} is not claimed"
    if claim.worker != e.worker:
        return f"{e.component} is claimed by {claim.worker}, not {e.worker}"
    return None


def _check_branch(s: ModuleState, e: ev.BranchEnsured) -> str | None:
    if e.component and e.component not in s.components:
        return f"no component {e.component!r} in the plan"
    return None


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


def _check_conflicted(s: ModuleState, e: ev.ComponentMergeConflicted) -> str | None:
    if e.component not in s.lanes:
        return f"component {e.component} has no branch of its own"
    if e.task_id and e.task_id not in s.tasks:
        return f"task {e.task_id} is not in the plan of module {s.module!r}"
    return None


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at)) + "Z"


_CHECKS: dict[type, Callable[[ModuleState, Any], str | None]] = {
    ev.ComponentsRecorded: _check_components,
    ev.ComponentSelected: _check_selected,
    ev.TasksRecorded: _check_tasks,
    ev.TaskStatusChanged: _check_status,
    ev.TaskReopened: _check_task_exists,
    ev.CommitRecorded: _check_commit,
    ev.SessionStarted: _check_session,
    ev.ComponentClaimed: _check_claim,
    ev.ComponentLeaseRenewed: _check_holder,
    ev.ComponentReleased: _check_holder,
    ev.BranchEnsured: _check_branch,
    ev.ComponentMerged: _check_merged,
    ev.ComponentMergeConflicted: _check_conflicted,
}


# -- applying ----------------------------------------------------------------------------------


def _invalidate(s: ModuleState, scope: str, target: str) -> None:
    verdict = s.verdicts.get(scope_key(scope, target))
    if verdict is not None:
        verdict.valid = False


def _invalidate_above(s: ModuleState) -> None:
    """Component and module verdicts stop counting (drift, re-planning)."""
    for key, verdict in s.verdicts.items():
        if not key.startswith("task:"):
            verdict.valid = False


def _session(s: ModuleState, e: ev.Event, status: str) -> None:
    node = s.sessions.get(e.session_id)
    if node is not None and node.status != "deleted":
        node.status = status
    if status != "running" and s.pause_requested and e.session_id:
        s.pause_requested = ""


def _started(s: ModuleState, e: ev.SessionStarted) -> None:
    s.sessions[e.session_id] = SessionNode(status="running", started_at=e.at)
    s.unavailable = []


def _resumed(s: ModuleState, e: ev.SessionResumed) -> None:
    _session(s, e, "running")
    s.unavailable = []


def _deleted(s: ModuleState, e: ev.SessionDeleted) -> None:
    node = s.sessions.get(e.session_id)
    if node is not None:
        node.status = "deleted"


def _approved(s: ModuleState, e: ev.SpecApproved) -> None:
    s.approval = Approval(spec_hash=e.spec_hash, section_hashes=dict(e.section_hashes), approver=e.approver, at=e.at)
    if not s.planned:
        s.baseline = dict(e.section_hashes)


def _drift(s: ModuleState, e: ev.SpecDriftDetected) -> None:
    s.baseline = dict(e.section_hashes)
    if e.reentry_step:
        s.replan_from = min(s.replan_from or e.reentry_step, e.reentry_step)
        s.replan_why = "the approved specification changed: re-planning"
        _invalidate_above(s)


def _replan(s: ModuleState, e: ev.ReplanRequested) -> None:
    s.replan_from = min(s.replan_from or e.step, e.step)
    s.replan_why = f"{e.requested_by or 'a person'} asked to re-plan" + (f" ({e.reason})" if e.reason else "")
    _invalidate_above(s)


def _dependencies(s: ModuleState, e: ev.DependenciesRecorded) -> None:
    s.dependencies = list(e.dependencies)


def _components(s: ModuleState, e: ev.ComponentsRecorded) -> None:
    old = s.components
    fresh: dict[str, ComponentNode] = {}
    for spec in e.components:
        slug = slugify(spec.name)
        known = old.get(slug)
        fresh[slug] = ComponentNode(
            slug=slug,
            name=spec.name,
            description=spec.description,
            status=spec.status,
            depends_on=list(dict.fromkeys(slugify(d) for d in spec.depends_on)),
            tasks=known.tasks if known else [],
            last_n=known.last_n if known else s.task_numbers.get(slug, 0),
        )
    for slug, node in old.items():  # a dropped component's pending tasks go with it
        if slug not in fresh:
            for task_id in node.tasks:
                s.tasks.pop(task_id, None)
    s.components = fresh
    if s.selected and s.selected not in fresh:
        s.selected = ""
    if not s.baseline and s.approval is not None:
        s.baseline = dict(s.approval.section_hashes)


def _selected(s: ModuleState, e: ev.ComponentSelected) -> None:
    s.selected = slugify(e.component)


def _tasks(s: ModuleState, e: ev.TasksRecorded) -> None:
    slug = slugify(e.component)
    component = s.components[slug]
    ids = [t.id for t in e.tasks]
    for task_id in component.tasks:
        if task_id not in ids:
            s.tasks.pop(task_id, None)
    for spec in e.tasks:
        known = s.tasks.get(spec.id)
        node = TaskNode(
            id=spec.id,
            name=spec.name,
            component=slug,
            description=spec.description,
            subtasks=list(spec.subtasks),
            acceptance=list(spec.acceptance),
        )
        if known is not None:
            node.state, node.tree, node.commit = known.state, known.tree, known.commit
            node.failures, node.reasons = known.failures, known.reasons
        s.tasks[spec.id] = node
        number = spec.id.rsplit("/", 1)[-1]
        if number.isdigit():
            component.last_n = max(component.last_n, int(number))
            s.task_numbers[slug] = max(s.task_numbers.get(slug, 0), int(number))
    component.tasks = ids
    _invalidate(s, "component", slug)


def _status(s: ModuleState, e: ev.TaskStatusChanged) -> None:
    task = s.tasks[e.task_id]
    task.state = e.to_state
    if e.to_state == "complete":
        task.tree, task.invocation = e.tree, e.invocation_id
    else:
        _invalidate(s, "task", e.task_id)
    if e.to_state == "failed":
        task.failures += 1
        task.reasons = [*task.reasons, e.reason][-10:]
    if e.to_state == "in-progress":
        task.tree = task.commit = ""
        _invalidate(s, "component", task.component)
        _invalidate(s, "module", s.module)


def _reopened(s: ModuleState, e: ev.TaskReopened) -> None:
    task = s.tasks[e.task_id]
    task.state, task.tree, task.commit = "pending", "", ""
    task.failures, task.reasons = 0, []  # a re-opened task starts afresh: earlier failures were another try
    s.scopes.pop(scope_key("task", e.task_id), None)
    _invalidate(s, "task", e.task_id)
    _invalidate(s, "component", task.component)
    _invalidate(s, "module", s.module)


def _scope(s: ModuleState, e: ev.ScopeStarted) -> None:
    s.scopes[scope_key(e.scope, e.target)] = e.base_commit


def _verdict(s: ModuleState, e: ev.OracleVerdictRecorded) -> None:
    key = scope_key(e.scope, e.target)
    verdict = s.verdicts.get(key) or VerdictNode()
    verdict.attempts += 1
    verdict.passed = verdict.valid = e.passed
    verdict.tree, verdict.summary = e.tree, e.summary
    s.verdicts[key] = verdict


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


def _lane_of_branch(s: ModuleState, branch: str) -> Lane | None:
    if not branch or not s.lanes:
        return None
    return next((lane for lane in s.lanes.values() if lane.branch == branch), None)


def _commit(s: ModuleState, e: ev.CommitRecorded) -> None:
    if e.task_id:
        s.tasks[e.task_id].commit = e.sha
    lane = _lane_of_branch(s, e.branch)
    if lane is None:
        s.tip = e.sha
        return
    lane.tip = e.sha
    if e.task_id and e.task_id == lane.resolution_task:
        lane.resolving = lane.resolution_task = ""


def _claimed(s: ModuleState, e: ev.ComponentClaimed) -> None:
    s.claims[e.component] = Claim(worker=e.worker, until=e.lease_until, at=e.at)


def _renewed(s: ModuleState, e: ev.ComponentLeaseRenewed) -> None:
    s.claims[e.component].until = e.lease_until


def _released(s: ModuleState, e: ev.ComponentReleased) -> None:
    s.claims.pop(e.component, None)


def _merged(s: ModuleState, e: ev.ComponentMerged) -> None:
    lane = s.lanes[e.component]
    lane.merged_tip, lane.merged_as = e.component_tip, e.sha
    s.tip = e.sha


def _conflicted(s: ModuleState, e: ev.ComponentMergeConflicted) -> None:
    lane = s.lanes[e.component]
    lane.conflicts += 1
    if not e.redo:
        lane.resolving, lane.resolution_task = e.into, e.task_id


def _reverted(s: ModuleState, e: ev.Reverted) -> None:
    s.tip = e.to_sha


def _invocation_started(s: ModuleState, e: ev.InvocationStarted) -> None:
    s.invocations[e.invocation_id] = OpenInvocation(kind=e.kind, session_id=e.session_id, task=e.task)
    if e.kind != "oracle":
        s.notes = []  # the invocation that starts now was given them


def _invocation_finished(s: ModuleState, e: ev.InvocationFinished) -> None:
    opened = s.invocations.pop(e.invocation_id, None)
    if opened is not None and opened.kind == "planning" and e.outcome == "ok":
        s.replan_from, s.replan_why = 0, ""


def _tool(s: ModuleState, e: ev.ToolCalled) -> None:
    command = e.arguments.get("command") if e.tool == "bash" else None
    opened = s.invocations.get(e.invocation_id)
    if isinstance(command, str) and opened is not None:
        opened.commands.append(command)


def _fell_back(s: ModuleState, e: ev.ModelFellBack) -> None:
    if e.from_model not in s.unavailable:
        s.unavailable = [*s.unavailable, e.from_model]


def _queued(s: ModuleState, e: ev.UserMessageQueued) -> None:
    s.queued[e.message_id] = e.text


def _delivered(s: ModuleState, e: ev.UserMessageDelivered) -> None:
    s.queued.pop(e.message_id, None)


def _note(s: ModuleState, e: ev.CorrectiveInstructionIssued) -> None:
    s.notes = [*s.notes, e.instruction]


def _pause(s: ModuleState, e: ev.PauseRequested) -> None:
    s.pause_requested = e.requested_by or "someone"


def evidence_key(tree: str, command: str) -> str:
    return f"{tree} {command}"


def _evidence(s: ModuleState, e: ev.VerificationEvidenceRecorded) -> None:
    if not e.tree or e.reused:
        return
    s.evidence[evidence_key(e.tree, e.command)] = EvidenceNode(
        exit_code=e.exit_code, output_tail=e.output_tail, duration=e.duration
    )
    while len(s.evidence) > EVIDENCE_KEPT:
        s.evidence.pop(next(iter(s.evidence)))


_APPLY: dict[type, Callable[[ModuleState, Any], None]] = {
    ev.SessionStarted: _started,
    ev.SessionPaused: lambda s, e: _session(s, e, "paused"),
    ev.SessionResumed: _resumed,
    ev.SessionCompleted: lambda s, e: _session(s, e, "completed"),
    ev.SessionFailed: lambda s, e: _session(s, e, "failed"),
    ev.SessionDeleted: _deleted,
    ev.SpecApproved: _approved,
    ev.SpecDriftDetected: _drift,
    ev.ReplanRequested: _replan,
    ev.DependenciesRecorded: _dependencies,
    ev.ComponentsRecorded: _components,
    ev.ComponentSelected: _selected,
    ev.TasksRecorded: _tasks,
    ev.TaskStatusChanged: _status,
    ev.TaskReopened: _reopened,
    ev.ScopeStarted: _scope,
    ev.OracleVerdictRecorded: _verdict,
    ev.BranchEnsured: _branch,
    ev.CommitRecorded: _commit,
    ev.Reverted: _reverted,
    ev.InvocationStarted: _invocation_started,
    ev.InvocationFinished: _invocation_finished,
    ev.ToolCalled: _tool,
    ev.ModelFellBack: _fell_back,
    ev.UserMessageQueued: _queued,
    ev.UserMessageDelivered: _delivered,
    ev.CorrectiveInstructionIssued: _note,
    ev.PauseRequested: _pause,
    ev.VerificationEvidenceRecorded: _evidence,
    ev.ComponentClaimed: _claimed,
    ev.ComponentLeaseRenewed: _renewed,
    ev.ComponentReleased: _released,
    ev.ComponentMerged: _merged,
    ev.ComponentMergeConflicted: _conflicted,
}

FOLDED: frozenset[type] = frozenset(_APPLY) | frozenset(_CHECKS)
"""The event types the fold reads; any other type leaves it unchanged."""


def task_scope(scope: Scope) -> bool:
    return scope == "task"


# -- the plan as text ----------------------------------------------------------------------------


def _box(state: str) -> str:
    return "[x]" if state == "complete" else "[ ]"


def render_plan(state: ModuleState) -> str:
    """The plan as a markdown checkbox tree (``plan.md``, the ``read_plan`` tool, ``session show``)."""
    tasks = state.ordered_tasks()
    done = sum(t.state == "complete" for t in tasks)
    noun = "task" if len(tasks) == 1 else "tasks"
    lines = [
        f"# Plan: {state.module}",
        "",
        "<!-- Rendered by lopen from the event store; edits here are overwritten. -->",
        "",
        f"State: {state.state} — {done} of {len(tasks)} {noun} complete",
        "",
    ]
    if state.dependencies:
        lines += ["## Dependencies", ""]
        lines += [
            f"- {d.name}" + (f" ({d.kind})" if d.kind else "") + (f": {d.reason}" if d.reason else "")
            for d in state.dependencies
        ]
        lines.append("")
    lines += ["## Components", ""]
    for slug, c in state.components.items():
        cstate = state.component_state(slug)
        notes = []
        if slug == state.selected:
            notes.append("selected")
        if c.depends_on:
            notes.append("depends on " + ", ".join(c.depends_on))
        suffix = f" ({'; '.join(notes)})" if notes else ""
        lines.append(f"- {_box(cstate)} **{c.name}** `{slug}` — {cstate}{suffix}")
        for task in state.component_tasks(slug):
            note = f" — {task.state}" if task.state in ("in-progress", "failed") else ""
            lines.append(f"  - {_box(task.state)} `{task.id}` {task.name}{note}")
            lines += [f"    - {_box(task.state)} {s}" for s in task.subtasks]
    if not state.components:
        lines.append("_No components recorded yet._")
    return "\n".join(lines) + "\n"
