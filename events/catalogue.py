"""Every event Lopen records: immutable ``msgspec.Struct``s, one catalogue.

Each type is tagged by its class name (the ``type`` field in JSON) and carries a
``schema_version`` (class attribute, stored with the event). Every event has
``at`` (UTC seconds since the epoch, float), ``session_id`` and ``module``;
``EventStore.append`` fills the last two from the stream when they are empty.

Rules: never remove or repurpose a published type or field. To change a type,
bump its ``schema_version`` and register an upcaster in ``events.codec``.
Documented field by field in ``docs/events.md``.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import msgspec


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag=True, gc=False):
    """Base of every event. Not recorded itself."""

    schema_version: ClassVar[int] = 1
    at: float = msgspec.field(default_factory=time.time)
    session_id: str = ""
    module: str = ""


class Item(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Base of the nested records inside events."""


# -- nested records --------------------------------------------------------------------------


class Dependency(Item, kw_only=True):
    name: str
    kind: str = ""
    reason: str = ""


class ComponentSpec(Item, kw_only=True):
    name: str
    description: str = ""
    status: str = "missing"  # missing | partial | done
    depends_on: tuple[str, ...] = ()


class TaskSpec(Item, kw_only=True):
    id: str  # "<component-slug>/<n>", assigned by the workflow
    name: str
    description: str = ""
    subtasks: tuple[str, ...] = ()
    acceptance: tuple[str, ...] = ()


class Finding(Item, kw_only=True):
    severity: str
    category: str = ""
    description: str = ""
    location: str = ""


# -- session lifecycle -----------------------------------------------------------------------


class SessionStarted(Event, kw_only=True):
    lopen_version: str = ""
    models: dict[str, str] = {}
    config_digest: str = ""
    resumed_from: str = ""


class SessionPaused(Event, kw_only=True):
    reason: str = ""
    error_kind: str = ""


class SessionResumed(Event, kw_only=True):
    reason: str = ""


class SessionCompleted(Event, kw_only=True):
    reason: str = ""


class SessionFailed(Event, kw_only=True):
    reason: str = ""
    error_kind: str = ""


class SessionDeleted(Event, kw_only=True):
    reason: str = ""


# -- specification ---------------------------------------------------------------------------


class SpecApproved(Event, kw_only=True):
    spec_hash: str
    section_hashes: dict[str, str] = {}


class SpecDriftDetected(Event, kw_only=True):
    """``reentry_step`` 0 = reported only; ``section_hashes`` is the spec as now seen (the next baseline)."""

    changed_sections: tuple[str, ...] = ()
    reentry_step: int = 1
    added_sections: tuple[str, ...] = ()
    removed_sections: tuple[str, ...] = ()
    section_hashes: dict[str, str] = {}


class ResearchLogged(Event, kw_only=True):
    topic: str
    path: str = ""


# -- the loop ---------------------------------------------------------------------------------


class StepEntered(Event, kw_only=True):
    phase: str
    step: int
    why: str = ""


class InvocationStarted(Event, kw_only=True):
    invocation_id: str
    phase: str = ""
    step: int = 0
    kind: str = ""
    model: str = ""
    component: str = ""
    task: str = ""
    prompt_size: int = 0
    sections_sent: tuple[str, ...] = ()


class InvocationFinished(Event, kw_only=True):
    invocation_id: str
    outcome: str = "ok"
    error_kind: str = ""
    duration: float = 0.0


class ToolCalled(Event, kw_only=True):
    invocation_id: str = ""
    tool: str
    arguments: dict[str, Any] = {}
    success: bool = True
    result_summary: str = ""
    duration: float = 0.0
    exit_code: int | None = None  # a `bash` call's exit code, read from the CLI's result
    result_hash: str = ""  # of the whole result, so unchanged re-reads can be told apart after the summary's cut


class TokensUsed(Event, kw_only=True):
    invocation_id: str = ""
    model: str = ""
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    premium: float = 0.0


class ContextWindowMeasured(Event, kw_only=True):
    invocation_id: str = ""
    used: int
    limit: int


class ModelFellBack(Event, kw_only=True):
    invocation_id: str = ""
    from_model: str
    to_model: str
    why: str = ""


class ProgressReported(Event, kw_only=True):
    invocation_id: str = ""
    progress: str


class UserMessageQueued(Event, kw_only=True):
    message_id: str
    text: str


class UserMessageDelivered(Event, kw_only=True):
    message_id: str
    invocation_id: str = ""


# -- the plan ---------------------------------------------------------------------------------


class DependenciesRecorded(Event, kw_only=True):
    dependencies: tuple[Dependency, ...] = ()


class ComponentsRecorded(Event, kw_only=True):
    components: tuple[ComponentSpec, ...] = ()


class ComponentSelected(Event, kw_only=True):
    component: str
    reason: str = ""


class TasksRecorded(Event, kw_only=True):
    component: str
    tasks: tuple[TaskSpec, ...] = ()


class TaskStatusChanged(Event, kw_only=True):
    task_id: str
    from_state: str
    to_state: str
    reason: str = ""


class TaskReopened(Event, kw_only=True):
    """A task recorded complete whose work is gone (e.g. its commit left the branch): back to pending."""

    task_id: str
    reason: str = ""


# -- verification and back-pressure -----------------------------------------------------------


class CompletionRefused(Event, kw_only=True):
    scope: str  # task | component | module
    target: str
    why: str = ""


class OracleVerdictRecorded(Event, kw_only=True):
    scope: str
    target: str
    passed: bool
    confidence: float = 0.0
    summary: str = ""
    findings: tuple[Finding, ...] = ()
    model: str = ""
    attempt: int = 1


class VerificationEvidenceRecorded(Event, kw_only=True):
    scope: str
    target: str
    command: str
    exit_code: int
    output_tail: str = ""
    duration: float = 0.0


class GuardrailTripped(Event, kw_only=True):
    """Also the budget warning: ``category="budget"``, ``level="warn"``."""

    category: str
    level: str  # warn | pause | block
    detail: str = ""


class CorrectiveInstructionIssued(Event, kw_only=True):
    invocation_id: str = ""
    category: str = ""
    instruction: str


# -- git ----------------------------------------------------------------------------------------


class BranchEnsured(Event, kw_only=True):
    branch: str
    created: bool = False
    base: str = ""


class CommitRecorded(Event, kw_only=True):
    sha: str
    message: str = ""
    task_id: str = ""  # set when the commit completes a task


class Reverted(Event, kw_only=True):
    from_sha: str
    to_sha: str
    reason: str = ""


EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in Event.__subclasses__()  # direct subclasses only: flat catalogue
}

TASK_STATES = ("pending", "in-progress", "complete", "failed")
TASK_TRANSITIONS = frozenset(
    {("pending", "in-progress"), ("in-progress", "complete"), ("in-progress", "failed"), ("failed", "in-progress")}
)


def is_valid_transition(from_state: str, to_state: str) -> bool:
    """W5: pending→in-progress→complete|failed; failed→in-progress is a retry."""
    return (from_state, to_state) in TASK_TRANSITIONS
