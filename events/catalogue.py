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
from typing import Any, ClassVar, Literal

import msgspec

Scope = Literal["task", "component", "module"]
TaskState = Literal["pending", "in-progress", "complete", "failed"]
ComponentStatus = Literal["missing", "partial", "done"]
Level = Literal["warn", "pause", "block"]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag=True, gc=False):
    """Base of every event. Not recorded itself.

    ``project`` and ``module`` are filled from the stream on append (``module:<project>/<module>``);
    ``session_id`` is the session that recorded it ("" for facts recorded outside a session, such as
    a spec approval). ``redaction_exempt`` names fields that hold Lopen's own structural data
    (hashes, ids, section names): secret redaction never rewrites them.
    """

    schema_version: ClassVar[int] = 1
    redaction_exempt: ClassVar[frozenset[str]] = frozenset()
    at: float = msgspec.field(default_factory=time.time)
    session_id: str = ""
    module: str = ""
    project: str = ""


class Item(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Base of the nested records inside events."""


# -- nested records --------------------------------------------------------------------------


class Dependency(Item, kw_only=True):
    name: str
    kind: str = ""
    reason: str = ""


class ResearchNote(Item, kw_only=True):
    """One research document as a prompt cites it: its topic slug (``read_research``'s id), title and
    first line."""

    topic: str
    title: str = ""
    summary: str = ""


class ComponentSpec(Item, kw_only=True):
    name: str
    description: str = ""
    status: ComponentStatus = "missing"
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


class CriterionJudged(Item, kw_only=True):
    """The oracle's judgement of one acceptance criterion: met or not, with the evidence it cites."""

    id: str
    met: bool
    evidence: str = ""


# -- session lifecycle -----------------------------------------------------------------------


class SessionStarted(Event, kw_only=True):
    """``protection`` is the sandbox the model runs under (bwrap, landlock or policy); ``worktree`` the
    folder it works in; ``worker`` names the process (host:pid) for parallel workers."""

    lopen_version: str = ""
    models: dict[str, str] = {}
    config_digest: str = ""
    resumed_from: str = ""
    protection: str = ""
    worktree: str = ""
    worker: str = ""
    command: str = ""  # what started it: run, plan, build, spec draft, demo
    started_by: str = ""  # who: cli:<user>, tui:<user>, worker:<host:pid> ("" before Lopen recorded it)
    traceparent: str = ""  # the W3C trace context the run was started in (TRACEPARENT), linked from its span


class SessionPaused(Event, kw_only=True):
    reason: str = ""
    error_kind: str = ""


class SessionResumed(Event, kw_only=True):
    reason: str = ""
    traceparent: str = ""  # as SessionStarted's: the caller's trace, linked from this run's span


class SessionCompleted(Event, kw_only=True):
    reason: str = ""


class SessionFailed(Event, kw_only=True):
    reason: str = ""
    error_kind: str = ""


class SessionDeleted(Event, kw_only=True):
    reason: str = ""


class SessionAbandoned(Event, kw_only=True):
    """A session whose process is gone (killed) while other workers go on: recorded by the worker that
    releases the dead process's claims, with ``session_id`` the dead session's. It ends there."""

    reason: str = ""


# -- specification ---------------------------------------------------------------------------


class SpecApproved(Event, kw_only=True):
    """The human gate (W4). ``approver`` is the git user (or ``$USER``) who approved."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"spec_hash", "section_hashes", "approver", "via"})
    spec_hash: str
    section_hashes: dict[str, str] = {}
    approver: str = ""
    via: str = ""  # who asked, through which face: cli:<user>, tui:<user>, mcp:<client name> ("": not recorded)


class SpecDriftDetected(Event, kw_only=True):
    """``reentry_step`` 0 = reported only; ``section_hashes`` is the spec as now seen (the next baseline)."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset(
        {"changed_sections", "added_sections", "removed_sections", "section_hashes"}
    )
    changed_sections: tuple[str, ...] = ()
    reentry_step: int = 1
    added_sections: tuple[str, ...] = ()
    removed_sections: tuple[str, ...] = ()
    section_hashes: dict[str, str] = {}


class ResearchLogged(Event, kw_only=True):
    topic: str
    path: str = ""


class ResearchCompleted(Event, kw_only=True):
    """The research before planning ended (W9): the spec's topics it was given — researched now, never
    again for this module — and the research documents the module has after it, cited by later prompts
    and shown at the phase change."""

    invocation_id: str = ""
    topics: tuple[str, ...] = ()
    notes: tuple[ResearchNote, ...] = ()


# -- the loop ---------------------------------------------------------------------------------


class StepEntered(Event, kw_only=True):
    phase: str
    step: int
    why: str = ""


HELPER_KINDS = frozenset({"oracle", "summary"})  # invocations made for another one, under its id


class InvocationStarted(Event, kw_only=True):
    """``parent_invocation`` is set on an oracle invocation (the invocation whose verify tool asked) and
    on a summary invocation (``kind="summary"``: a spec section summarised for the prompt of the
    invocation it names, recorded just before that one starts). ``sections_summarised`` names the spec
    sections sent as summaries, ``sections_cut`` those cut (wholly or partly) to fit the context budget.
    ``prompt`` is the exact prompt sent, part by part (``system``: Lopen's system message; ``guidance``:
    what replaced the CLI's interactive guidelines; ``user``: the prompt itself, the sections sent
    included), each the key of a ``BlobStored`` holding its text (``EventStore.blob``)."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"prompt"})

    invocation_id: str
    phase: str = ""
    step: int = 0
    kind: str = ""
    model: str = ""
    component: str = ""
    task: str = ""
    prompt_size: int = 0
    sections_sent: tuple[str, ...] = ()
    parent_invocation: str = ""
    instructions: tuple[str, ...] = ()  # the repository's instruction files sent, as path@hash
    cli_tools: tuple[str, ...] | None = None  # the CLI's own tools offered (None = all of them)
    prompt: dict[str, str] = {}  # part ("system", "guidance", "user") → the key of the blob holding its text
    sections_summarised: tuple[str, ...] = ()
    sections_cut: tuple[str, ...] = ()


class InvocationFinished(Event, kw_only=True):
    invocation_id: str
    outcome: str = "ok"
    error_kind: str = ""
    duration: float = 0.0


class ToolCalled(Event, kw_only=True):
    """``agent_id`` is set for a call a sub-agent (the CLI's ``task`` tool) made."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"result_blob", "result_hash"})

    invocation_id: str = ""
    tool: str
    arguments: dict[str, Any] = {}
    success: bool = True
    result_summary: str = ""
    duration: float = 0.0
    exit_code: int | None = None  # a `bash` call's exit code, read from the CLI's result
    result_hash: str = ""  # of the whole result, so unchanged re-reads can be told apart after the summary's cut
    call_id: str = ""
    agent_id: str = ""
    result_blob: str = ""  # the key of the blob holding the whole result, when it is longer than the summary


class ModelSaid(Event, kw_only=True):
    """What the model wrote to the conversation (one assistant message, whole): its narration, its
    questions, why it stopped. ``agent_id`` is set for a sub-agent's message."""

    invocation_id: str = ""
    text: str
    agent_id: str = ""


class ModelReasoned(Event, kw_only=True):
    """A summary of the model's reasoning (``assistant.reasoning``: what the provider gives of its thinking,
    whole), where the SDK reports one; apart from ``ModelSaid``: it was never said to anyone.
    ``agent_id`` is set for a sub-agent's reasoning."""

    invocation_id: str = ""
    text: str
    agent_id: str = ""


class TokensUsed(Event, kw_only=True):
    """One model call's usage, recorded as it arrives (``call_id`` is the SDK's call id), so a crash
    loses nothing and nothing is counted twice. ``agent_id`` marks a sub-agent's call. ``cost`` is
    what it cost in US dollars at the prices in force when it was made (``lopen.workflow.prices``);
    ``priced`` is false when its model had no price (then ``cost`` is 0) — as for every call recorded
    before Lopen priced calls."""

    invocation_id: str = ""
    model: str = ""
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    premium: float = 0.0
    call_id: str = ""
    agent_id: str = ""
    cost: float = 0.0
    priced: bool = False


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
    invocation_id: str = ""


class ComponentsRecorded(Event, kw_only=True):
    components: tuple[ComponentSpec, ...] = ()
    invocation_id: str = ""


class ComponentSelected(Event, kw_only=True):
    component: str
    reason: str = ""
    invocation_id: str = ""


class TasksRecorded(Event, kw_only=True):
    component: str
    tasks: tuple[TaskSpec, ...] = ()
    invocation_id: str = ""


class TaskStatusChanged(Event, kw_only=True):
    """``tree`` (on a completion) is the git tree the passing verdict judged: the commit is exactly it."""

    task_id: str
    from_state: TaskState
    to_state: TaskState
    reason: str = ""
    tree: str = ""
    invocation_id: str = ""


class TaskReopened(Event, kw_only=True):
    """A task recorded complete whose work is gone (e.g. its commit left the branch): back to pending."""

    task_id: str
    reason: str = ""


class ReplanRequested(Event, kw_only=True):
    """A person asked to plan again (``lopen run --replan``): the next run re-enters at ``step``."""

    step: int = 2
    reason: str = ""
    requested_by: str = ""


class ScopeStarted(Event, kw_only=True):
    """A task, component or module scope began at ``base_commit``: the oracle's diff is from it."""

    scope: Scope
    target: str
    base_commit: str = ""


# -- verification and back-pressure -----------------------------------------------------------


class CompletionRefused(Event, kw_only=True):
    scope: Scope
    target: str
    why: str = ""
    invocation_id: str = ""


class OracleVerdictRecorded(Event, kw_only=True):
    """``tree`` is the git tree judged; ``raw`` the oracle's answer when it could not be read as a verdict;
    ``invocation_id`` the oracle's own invocation, ``parent_invocation`` the one whose verify tool asked."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"tree", "base_commit"})
    scope: Scope
    target: str
    passed: bool
    confidence: float = 0.0
    summary: str = ""
    findings: tuple[Finding, ...] = ()
    criteria: tuple[CriterionJudged, ...] = ()
    model: str = ""
    attempt: int = 1
    tree: str = ""
    base_commit: str = ""
    raw: str = ""
    invocation_id: str = ""
    parent_invocation: str = ""


class VerificationEvidenceRecorded(Event, kw_only=True):
    """``tree`` is the git tree the command ran on; ``reused`` marks a result taken from an earlier run
    of the same command on the same tree (nothing was run again)."""

    scope: Scope
    target: str
    command: str
    exit_code: int
    output_tail: str = ""
    duration: float = 0.0
    tree: str = ""
    reused: bool = False
    invocation_id: str = ""


class GuardrailTripped(Event, kw_only=True):
    """Also the budget warning: ``category="budget"``, ``level="warn"``."""

    category: str
    level: Level
    detail: str = ""
    invocation_id: str = ""  # the invocation it happened in, when it happened in one


class CorrectiveInstructionIssued(Event, kw_only=True):
    invocation_id: str = ""
    category: str = ""
    instruction: str


class PermissionDecided(Event, kw_only=True):
    """The sandbox policy's answer to one permission request of the Copilot CLI (G7).

    ``kind`` is the CLI's request kind (write, read, shell, url, mcp, …), ``target`` the path, command
    or URL it names. ``kind="network"``: a connection out of the bubblewrap sandbox that Lopen's network
    proxy refused, ``target`` its ``host:port``."""

    invocation_id: str = ""
    kind: str
    target: str = ""
    allowed: bool
    reason: str = ""
    agent_id: str = ""


class PauseRequested(Event, kw_only=True):
    """A person (the TUI's Ctrl+P, an MCP client) asked the run to pause before its next invocation."""

    requested_by: str = ""
    reason: str = ""


class ControlRequested(Event, kw_only=True):
    """A control action from outside the run (an MCP client, the TUI), recorded with its caller."""

    action: str
    caller: str = ""
    detail: str = ""


# -- parallel work: claims ---------------------------------------------------------------------


class ComponentClaimed(Event, kw_only=True):
    """A worker took a piece of the module's work until ``lease_until`` (UTC seconds): a component
    (its slug), or ``:plan`` (a planning invocation) or ``:module`` (module verification). The
    module's history refuses a claim of something another worker holds under a live lease, so two
    claimers never both win; an expired lease can be claimed by anyone (the work resumes from its
    events). ``worker`` is ``<host>:<pid>/<lane>``."""

    component: str
    worker: str
    lease_until: float


class ComponentLeaseRenewed(Event, kw_only=True):
    """The holder keeps its claim: the lease now runs until ``lease_until``."""

    component: str
    worker: str
    lease_until: float


class ComponentReleased(Event, kw_only=True):
    """The claim of ``worker`` on ``component`` ends (work done, stopped, or its process gone:
    ``reason`` says which; ``by`` is who released it when it is not the holder)."""

    component: str
    worker: str
    reason: str = ""
    by: str = ""


# -- git ----------------------------------------------------------------------------------------


class BranchEnsured(Event, kw_only=True):
    """``worktree`` is the folder Lopen builds the module in (its own git worktree on ``branch``).

    With ``component`` set it is that component's own branch and worktree (parallel work:
    ``lopen/<module>--<component>``), started at ``base`` (the module branch's tip then);
    ``created`` on such an event starts the component's branch afresh at ``base``."""

    branch: str
    created: bool = False
    base: str = ""
    worktree: str = ""
    component: str = ""


class CommitRecorded(Event, kw_only=True):
    """A commit Lopen made: ``tree`` is exactly the verified tree, ``parent`` the branch tip before it;
    ``chain`` the value of its ``Lopen-Chain`` trailer (``<version> <digest>``: the module stream's hash
    chain head when it was made, ``lopen.git.witness``), "" for a commit made without one."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"sha", "tree", "parent", "chain"})
    sha: str
    message: str = ""
    task_id: str = ""  # set when the commit completes a task
    tree: str = ""
    parent: str = ""
    branch: str = ""
    invocation_id: str = ""  # the invocation that completed the task
    merge_parent: str = ""  # a second parent: the module tip a merge-conflict resolution task merged in
    chain: str = ""  # the commit's Lopen-Chain trailer: "<version> <sha256 hex>" of the module stream
    # P2: what the commit changed, ``git diff --numstat <parent> <tree>`` (a task's commit: its verified
    # tree against the branch tip it was committed on); a binary file counts as a file, not as lines
    added: int = 0  # lines added
    removed: int = 0  # lines removed
    files: int = 0  # files changed


class ComponentMerged(Event, kw_only=True):
    """A component built on its own branch joined the module branch: ``sha`` is the module branch's new
    tip (the component's tip itself when ``fast_forward``, else a merge commit of ``parent`` and
    ``component_tip``), ``tree`` its tree. Merges are serialized by the module's history: one whose
    ``parent`` is not the module branch's tip is refused."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"sha", "parent", "component_tip", "tree", "chain"})
    component: str
    sha: str
    parent: str = ""
    component_tip: str = ""
    tree: str = ""
    fast_forward: bool = False
    branch: str = ""
    chain: str = ""  # a merge commit's Lopen-Chain trailer (none for a fast-forward: no commit is made)


class ComponentMergeConflicted(Event, kw_only=True):
    """Merging ``into`` (the module branch's tip) into the component's branch conflicted in ``files``:
    ``task_id`` is the resolution task Lopen added to the component (one invocation, verified like any
    task; its commit has ``into`` as a second parent). ``redo`` instead: the component is built again
    on top of ``into`` (its tasks re-opened, its branch started afresh)."""

    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"into", "files"})
    component: str
    into: str
    files: tuple[str, ...] = ()
    task_id: str = ""
    redo: bool = False


class Reverted(Event, kw_only=True):
    from_sha: str
    to_sha: str
    reason: str = ""


class BlobStored(Event, kw_only=True):
    """A large text kept once (a tool call's whole result, a prompt's part), in a stream of its own,
    ``blob:<project>:<key>``, where ``key`` is the xxh3-128 (hex) of the text encoded as UTF-8: a text
    stored again is not stored twice. Secrets are redacted before the key is computed (so the text is
    exempt here: redacting again could only break the key); ``lopen verify`` checks that the text
    still hashes to its key. ``size`` is its length in characters.

    Schema 2: a text of ``events.blobs.PACK_FROM`` bytes or more that compresses well is stored packed —
    ``packing`` names how (``"zlib"``: ``packed`` holds its UTF-8 bytes compressed by zlib, base64 in the
    JSON) and ``text`` is empty; ``packing`` empty: ``text`` is the text (every schema-1 blob). The key is
    always the hash of the text itself, never of its packed bytes. Read it with ``content()``."""

    schema_version: ClassVar[int] = 2
    redaction_exempt: ClassVar[frozenset[str]] = frozenset({"key", "text", "packed"})
    key: str
    text: str
    size: int = 0
    packing: str = ""
    packed: bytes = b""

    def content(self) -> str:
        """The text, unpacked (``events.blobs.unpack``; ValueError when it cannot be)."""
        if not self.packing:
            return self.text
        from events.blobs import unpack

        return unpack(self.packing, self.packed)


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
