"""`lopen revert` (G3): put a module's branch back to a task-completion commit.

The module's history (the one fold) says which commits completed which tasks; the repository says
which of them are still on `lopen/<module>`. The default target is the last of those still on the
branch; `to_task` picks the commit that completed that task instead.

With the module's run lock held (a running `lopen run` and a revert never interleave), and only on
a clean worktree, it resets the module's worktree — and so the branch — to the target and records,
in the module's history (with the latest session's id, so that session's story shows it):

- `Reverted(from_sha, to_sha, reason)`;
- `TaskReopened` for every task recorded complete whose completion commit is no longer on the
  branch;
- `CorrectiveInstructionIssued(category="revert")` saying what was rolled back, which the next
  invocation's prompt carries.

The user's own checkout is never touched. Refusals are `LopenError`s (exit 1) and record nothing.
When the target already is the tip there is nothing to revert: the result has ``changed=False``,
nothing is recorded, and the CLI exits 0.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from events import catalogue as ev
from events.journal import Journal
from events.locks import module_lock
from events.store import EventStore
from lopen.errors import LopenError
from lopen.git import Repository, Worktree
from lopen.text import plural

CATEGORY = "revert"
_MAX_LISTED = 20


class TaskCommit(msgspec.Struct, frozen=True):
    """A commit the module's history records as completing a task."""

    task_id: str
    sha: str
    message: str = ""


class RevertResult(msgspec.Struct, frozen=True, kw_only=True):
    module: str
    session_id: str
    branch: str
    from_sha: str
    to_sha: str
    target: TaskCommit
    changed: bool
    discarded: tuple[tuple[str, str], ...] = ()  # (sha, subject) of the commits rolled back, newest first
    reopened: tuple[str, ...] = ()  # task ids, in plan order
    instruction: str = ""


def short(sha: str) -> str:
    return sha[:8]


def revert_module(
    root: Path, module: str, store: EventStore, project: str, worktree: Worktree, *, to_task: str | None = None
) -> RevertResult:
    """Reset `lopen/<module>` to a task-completion commit and record it; see the module docstring."""
    branch = worktree.branch
    repo = Repository(root)
    if not repo.is_repository():
        raise LopenError(
            f"{root} is not a git repository",
            "Lopen commits each verified task on the module branch; revert goes back to one of those commits",
            f"run `lopen run {module}` in a git repository first",
        )
    with module_lock(root, module):
        journal = Journal(store, project, module)
        state = journal.snapshot()
        session = state.last_session() or ""
        commits = [TaskCommit(task_id=t.id, sha=t.commit) for t in state.ordered_tasks() if t.commit]
        if not state.sessions:
            raise _no_task_commit(module, f"module {module} has no session in the event store")
        if not commits:
            raise _no_task_commit(module, "its history records no task-completion commit still standing")
        if not repo.branch_exists(branch):
            raise LopenError(
                f"there is no branch {branch}",
                f"Lopen commits the tasks of {module} on {branch}; this repository has no such branch",
                f"run `lopen run {module}`, or check out the repository Lopen worked in",
            )
        worktree.ensure()
        tip = worktree.tip()
        on_branch = [c for c in commits if repo.is_ancestor(c.sha, tip)]
        if not on_branch:
            raise LopenError(
                f"no task-completion commit of {module} is on {branch} any more",
                f"none of the {plural(len(commits), 'commit')} recorded for a task is an ancestor of {branch} "
                "(the branch was reset or rewritten)",
                f"check `git log {branch}`; `lopen run {module}` re-opens the lost tasks and commits them again",
            )
        target = _target(on_branch, to_task, module, branch)

        dirty = worktree.dirty_files()
        if dirty:
            listed = ", ".join(dirty[:_MAX_LISTED]) + (
                f" and {len(dirty) - _MAX_LISTED} more" if len(dirty) > _MAX_LISTED else ""
            )
            raise LopenError(
                f"the module's worktree {worktree.path} has uncommitted changes: {listed}",
                "resetting it would destroy them; revert only runs on a clean worktree",
                f"look at them (`git -C {worktree.path} status`), keep what you want elsewhere, "
                f"then `git -C {worktree.path} stash -u` and run `lopen revert {module}` again",
            )
        if tip == target.sha:
            return RevertResult(
                module=module,
                session_id=session,
                branch=branch,
                from_sha=tip,
                to_sha=target.sha,
                target=target,
                changed=False,
            )

        discarded = tuple(repo.commits_between(target.sha, tip))
        if worktree.head_ref() != worktree.ref:  # a model left HEAD elsewhere: the reset must move the branch
            worktree.restore_head()
        worktree.reset_to(target.sha)

        reopened = [t for t in state.ordered_tasks() if t.commit and not repo.is_ancestor(t.commit, target.sha)]
        reason = f"lopen revert: back to the commit that completed {target.task_id}"
        instruction = _instruction(module, branch, tip, target, discarded, [(t.id, t.name) for t in reopened])
        events: list[ev.Event] = [ev.Reverted(from_sha=tip, to_sha=target.sha, reason=reason, session_id=session)]
        events += [
            ev.TaskReopened(
                task_id=t.id, reason=f"lopen revert: its commit {short(t.commit)} was rolled back", session_id=session
            )
            for t in reopened
        ]
        events.append(ev.CorrectiveInstructionIssued(category=CATEGORY, instruction=instruction, session_id=session))
        journal.record(*events)
        return RevertResult(
            module=module,
            session_id=session,
            branch=branch,
            from_sha=tip,
            to_sha=target.sha,
            target=target,
            changed=True,
            discarded=discarded,
            reopened=tuple(t.id for t in reopened),
            instruction=instruction,
        )


def _no_task_commit(module: str, why: str) -> LopenError:
    return LopenError(
        f"nothing to revert {module} to: there is no task-completion commit",
        why,
        f"revert returns to a commit Lopen made for a verified task; `lopen run {module}` makes them "
        "(with git.auto_commit on)",
    )


def _target(on_branch: list[TaskCommit], to_task: str | None, module: str, branch: str) -> TaskCommit:
    if not to_task:
        return on_branch[-1]
    for commit in reversed(on_branch):
        if commit.task_id == to_task:
            return commit
    known = list(dict.fromkeys(c.task_id for c in on_branch))
    what = f"no task-completion commit for {to_task!r} on {branch}"
    why = f"{module}'s history records none for that task still standing (not done yet, or rolled back earlier)"
    raise LopenError(
        what,
        why,
        f"pick one of the tasks whose commit is on {branch}: {', '.join(known)} "
        f"(e.g. `lopen revert {module} --to {known[0]}`), or omit --to for the last one",
    )


def _instruction(
    module: str,
    branch: str,
    head: str,
    target: TaskCommit,
    discarded: tuple[tuple[str, str], ...],
    reopened: list[tuple[str, str]],
) -> str:
    lines = [
        f"A person ran `lopen revert {module}`: {branch} was reset from {short(head)} to {short(target.sha)}, "
        f"the commit that completed task {target.task_id}.",
    ]
    if discarded:
        rolled = "; ".join(f"{short(sha)} {subject}" for sha, subject in discarded[:_MAX_LISTED])
        more = f" and {len(discarded) - _MAX_LISTED} more" if len(discarded) > _MAX_LISTED else ""
        lines.append(f"Commits rolled back (newest first): {rolled}{more}.")
    if reopened:
        names = "; ".join(f"{task_id} ({name})" if name else task_id for task_id, name in reopened)
        lines.append(f"Tasks re-opened, pending again: {names}.")
    lines.append(
        "The work of those commits is gone from the repository: do not assume it exists, and read the "
        "files again before you change them."
    )
    return " ".join(lines)
