"""Quick requests: ``lopen do "<request>"`` — a one-task module drafted from a sentence, then built.

The request gets a module of its own, named from its words (``do-fix-date-parser``; ``-2``, ``-3`` …
when the name is taken). Then, with nothing new in the workflow:

1. **draft** — the drafting step of ``lopen spec draft`` (:func:`lopen.app.drafting.draft_spec`), told
   that this is one small change: the model writes a one-task specification with acceptance criteria
   from the request and the repository. The request is the first event of the session
   (``ControlRequested(action="quick-request", detail=<request>)``); the session pauses at the gate.
2. **approve** — the person reads the draft and says yes (or ``--yes`` said it beforehand): the same
   approval as ``lopen spec approve`` (:func:`lopen.app.commands.approve`), by ``cli:<user>``. Without a
   terminal and without ``--yes`` nobody can say it: nothing more is recorded, and the error says how
   to approve later.
3. **plan** — no planner: the approved draft *is* the plan. Lopen records it as the planner would (one
   component, ``change``, selected, with one task ``change/1`` carrying the spec's criteria), so the
   audit trail shows the drafted criteria as the task's acceptance.
4. **build** — :func:`lopen.app.engine.run_module`, the loop ``lopen run`` runs (worktree, oracle,
   verified commit, events), resuming the draft's session: one session tells the whole story.

:func:`outcome` says what landed on ``lopen/<module>``: the commits and the diff stat.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import msgspec

from events import catalogue as ev
from lopen.app import commands, queries
from lopen.app.context import Project
from lopen.errors import InterventionRequired, LopenError

COMPONENT = "change"  # the one component of a quick request's plan
PREFIX = "do-"
MAX_WORDS = 4
MAX_NAME = 40
_WORDS_TO_SKIP = "a an the to of in on for and or with by from at as is are be it its this that these those please"
_SKIP = frozenset(re.findall(r"\w+", _WORDS_TO_SKIP + " some any my our"))  # a module name does without them
NOTES = (
    "This is a quick request, not a whole module: one small change to the existing repository, asked "
    "for in one sentence (below). Read the repository first (what is there, how it is tested). Then "
    "write a short specification of exactly this change, built as ONE task: an Overview of the change; "
    "two to five Acceptance Criteria as a checkbox list with ids, each one a fact a reviewer can check "
    "in the code or by running a command; Skills & Hooks with a `verify-tests` command the repository "
    "can run; Dependencies, Notes and References `None.` unless the change needs them. Do not plan "
    "components or tasks and do not write the code: Lopen builds the change once a person approves.",
)


class Drafted(msgspec.Struct, frozen=True):
    """A quick request drafted: its module, the session (paused at the gate) and the spec's path."""

    module: str
    session: str
    spec: Path
    text: str  # the drafted specification, to show for approval
    criteria: list[str]  # "[ID] text", as the task's acceptance


class Landed(msgspec.Struct, frozen=True):
    """What a finished quick request put on ``lopen/<module>``."""

    branch: str
    base: str
    commits: list[str]  # "<short sha> <subject>", newest first
    diff_stat: str


def module_for(project: Project, request: str) -> str:
    """The module a request gets: ``do-`` and its first significant words, unique in the project."""
    words = [w for w in re.findall(r"[a-z0-9]+", request.lower()) if w not in _SKIP]
    if not words:
        raise LopenError(
            "the request has no words to act on",
            "Lopen drafts a specification from what you ask for",
            'say what to change, e.g. `lopen do "fix the failing date parser test"`',
        )
    name = PREFIX + "-".join(words[:MAX_WORDS])
    name = name[:MAX_NAME].rstrip("-")
    taken = {row.module for row in queries.modules(project)}
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}-{n}"
    return queries.valid_module(unique)


def draft(project: Project, request: str, say: Callable[[str], None], *, model: str | None = None) -> Drafted:
    """Check that a run could follow (git, settings, credentials), name the module and have the model
    draft its one-task specification; the session pauses at the human gate."""
    from lopen.app.drafting import draft_spec
    from lopen.documents.criteria import acceptance_criteria
    from lopen.documents.sections import read_document

    if not request.strip():
        raise LopenError(
            "the request is empty",
            "Lopen drafts a specification from what you ask for",
            'say what to change, e.g. `lopen do "fix the failing date parser test"`',
        )
    module = module_for(project, request)
    start = commands.start_run(project, module, prompt=request, headless=True, model=model)
    for warning in start.warnings:
        say(f"warning: {warning}")
    say(f"module {module}: docs/requirements/{module}/SPECIFICATION.md")
    actor = commands.cli_actor()
    asked = ev.ControlRequested(action="quick-request", caller=actor, detail=request)
    code, session, detail = draft_spec(
        start.root, module, start.settings, say, request, notes=NOTES, opening=(asked,), command="do", actor=actor
    )
    if code != 2:
        raise LopenError(
            f"the specification of {module} was not drafted",
            detail,
            f"see what happened with `lopen replay {session}`, then ask again",
        )
    path = start.root / "docs" / "requirements" / module / "SPECIFICATION.md"
    doc = read_document(path)
    criteria = [f"[{c.id}] {c.text}" if c.id else c.text for c in acceptance_criteria(doc)]
    return Drafted(module, session, path, path.read_text(encoding="utf-8"), criteria)


def unapproved(drafted: Drafted, why: str) -> InterventionRequired:
    """The gate was not passed: the draft stays, nothing else is recorded."""
    m = drafted.module
    return InterventionRequired(
        f"the drafted specification of {m} is not approved, so nothing was built",
        why,
        f"review docs/requirements/{m}/SPECIFICATION.md, then `lopen spec approve {m}` and `lopen run {m}` "
        "(which plans it as any module); or ask again with --yes, which approves a new draft without asking",
    )


def build(
    project: Project,
    drafted: Drafted,
    say: Callable[[str], None],
    *,
    model: str | None = None,
    ask: Callable[[str], bool] | None = None,
) -> tuple[int, str, str]:
    """Approve the draft (the person said yes), record it as the plan, and run the module's loop in the
    draft's session; returns ``run_module``'s (exit code, session, detail)."""
    from lopen.app.engine import run_module

    module = drafted.module
    actor = commands.cli_actor()
    approved = commands.approve(project, module, actor)
    say(f"✓ approved the specification of {module} by {approved.approver}")
    plan(project, drafted)
    settings = commands.settings_for_run(project.root, model)
    return run_module(project.root, module, settings, say, resume=drafted.session, ask=ask, actor=actor)


def plan(project: Project, drafted: Drafted) -> None:
    """Record the approved draft as the plan: one component, selected, with one task carrying its criteria."""
    from events.journal import Journal
    from lopen.documents.sections import read_document

    doc = read_document(drafted.spec)
    title = doc.title.title if doc.title is not None else drafted.module
    overview = doc.named("Overview")
    description = " ".join(doc.body_text(overview).split()) if overview is not None else ""
    task = ev.TaskSpec(id=f"{COMPONENT}/1", name=title, description=description, acceptance=tuple(drafted.criteria))
    why = "a quick request: the approved draft is the plan, one task"
    with project.store() as (store, project_id):
        Journal(store, project_id, drafted.module).record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name=COMPONENT, description=description),)),
            ev.ComponentSelected(component=COMPONENT, reason=why),
            ev.TasksRecorded(component=COMPONENT, tasks=(task,)),
        )


def landed(project: Project, module: str) -> Landed:
    """The commits on ``lopen/<module>`` since it left the base, and their diff stat."""
    from lopen.git.repository import git

    state = queries.module_state(project, module)
    branch = f"lopen/{module}"
    base = state.branch_base
    if not base:
        return Landed(branch, "", [], "")
    commits = git(project.root, "log", "--format=%h %s", f"{base}..{branch}").splitlines()
    stat = git(project.root, "diff", "--stat", base, branch)
    return Landed(branch, base, commits, stat)
