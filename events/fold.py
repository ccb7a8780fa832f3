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

Where an event's meaning lives: each concern of the state is a module of ``events.folds`` holding,
per event type, its check beside its effect (a ``Rule``) — ``plan`` (components, tasks, selection),
``approval`` (approval, baseline, re-planning), ``scopes`` (scopes, verdicts, evidence), ``git``
(branches, lanes, commits, merges), ``claims``, ``sessions``, ``invocations``, ``messages`` (queued
messages, notes, pause requests), ``research`` (the References topics researched). ``DISPATCH``
composes them, keyed by event type; this module keeps the state's fields and its queries.

The fold is plain msgspec data, so a projection can store it as a row and the run can start from
that row instead of from event #1.
"""

from __future__ import annotations

import msgspec

from events import catalogue as ev
from events.folds import approval, claims, git, invocations, messages, plan, research, scopes, sessions
from events.folds.approval import Approval
from events.folds.claims import MODULE_ITEM, PLAN_ITEM, RESERVED_ITEMS, Claim, Fence
from events.folds.git import Lane
from events.folds.invocations import OpenInvocation
from events.folds.plan import ComponentNode, TaskNode, aggregate, slugify
from events.folds.rules import compose
from events.folds.scopes import (
    EVIDENCE_KEPT,
    EvidenceNode,
    VerdictNode,
    evidence_key,
    scope_key,
)
from events.folds.sessions import LIVE, SessionNode

__all__ = [
    "DISPATCH",
    "EVIDENCE_KEPT",
    "FOLDED",
    "MODULE_ITEM",
    "PLAN_ITEM",
    "RESERVED_ITEMS",
    "Approval",
    "Claim",
    "ComponentNode",
    "EvidenceNode",
    "Fence",
    "Lane",
    "ModuleState",
    "OpenInvocation",
    "SessionNode",
    "TaskNode",
    "VerdictNode",
    "aggregate",
    "evidence_key",
    "render_plan",
    "scope_key",
    "slugify",
]

DISPATCH = compose(
    sessions.RULES,
    approval.RULES,
    plan.RULES,
    scopes.RULES,
    git.RULES,
    claims.RULES,
    invocations.RULES,
    messages.RULES,
    research.RULES,
)
"""Every event's checks and effects, by type, from the concerns in ``events.folds``."""

_CHECKS = DISPATCH.checks  # the event types that can contradict the state (the journal asks)
_EFFECTS = DISPATCH.effects

FOLDED: frozenset[type] = DISPATCH.folded
"""The event types the fold reads; any other type leaves it unchanged."""


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
    claims_made: int = 0  # claims in the history so far: the last claim's token (events.folds.claims)
    lanes: dict[str, Lane] = {}  # component slug → its own branch (parallel work)
    researched: list[str] = []  # the spec's References topics a research invocation was given
    problems: list[str] = []  # events skipped because they contradicted the state

    # -- folding -------------------------------------------------------------------------------

    def check(self, event: ev.Event) -> str | None:
        """Why ``event`` cannot follow the current state, or None when it can."""
        for check in _CHECKS.get(type(event), ()):
            problem = check(self, event)
            if problem is not None:
                return problem
        return None

    def apply(self, event: ev.Event, seq: int = 0) -> str | None:
        """Fold ``event`` in; a contradicting one is skipped and its problem returned (and kept)."""
        kind = type(event)
        checks = _CHECKS.get(kind)
        if checks is not None:  # ``check`` inlined: this runs for every event of every rebuild
            for check in checks:
                problem = check(self, event)
                if problem is not None:
                    text = f"event #{seq} {kind.__name__} skipped: {problem}" if seq else problem
                    self.problems = [*self.problems[-19:], text]
                    return text
        for effect, stamped in _EFFECTS.get(kind, ()):
            if stamped:
                effect(self, event, seq)
            else:
                effect(self, event)
        return None

    # -- queries -------------------------------------------------------------------------------

    def component(self, name: str) -> ComponentNode | None:
        return self.components.get(slugify(name))

    def component_tasks(self, slug: str) -> list[TaskNode]:
        component = self.components.get(slug)
        return [self.tasks[t] for t in component.tasks] if component else []

    def changes(self, component: str = "") -> tuple[int, int, int]:
        """P2: (lines added, lines removed, files changed) by the commits of ``component``'s tasks (every
        task's when ""), summed per task (a file two tasks changed counts twice)."""
        tasks = self.component_tasks(component) if component else list(self.tasks.values())
        return (
            sum(t.added for t in tasks if t.commit),
            sum(t.removed for t in tasks if t.commit),
            sum(t.files for t in tasks if t.commit),
        )

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
        live = [(node.started_at, sid) for sid, node in self.sessions.items() if node.status in LIVE]
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
