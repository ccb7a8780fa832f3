"""`lopen revert` (G3): put a module's branch back to a task-completion commit.

The module's latest session says which commits completed which tasks (`CommitRecorded` with a
`task_id`); the repository says which of them are still on `lopen/<module>`. The default target is
the last of those still on the branch; `to_task` picks the commit that completed that task instead.

With the module's run lock held (a running `lopen run` and a revert never interleave), and only on
a clean work tree with the branch checked out, it runs `git reset --hard <target>` and appends to
the session's stream:

- `Reverted(from_sha, to_sha, reason)`;
- `TaskReopened` for every task recorded complete whose completion commit is no longer on the
  branch (the same rule the Assessor applies on resume);
- `CorrectiveInstructionIssued(category="revert")` saying what was rolled back, which the run folds
  into the notes of its next invocation's prompt;
- `SessionPaused` when the session had ended (completed or failed) and tasks were re-opened, so
  that `lopen run <module>` resumes that session and its plan instead of starting a new one.

Refusals are `LopenError`s (exit 1) and record nothing. When the target already is HEAD there is
nothing to revert: the result has ``changed=False``, nothing is recorded, and the CLI exits 0.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from events import catalogue as ev
from events.locks import module_lock
from events.recorded import session_stream
from events.store import EventStore
from lopen.errors import LopenError
from lopen.git import Repository
from lopen.workflow.state import RunState

CATEGORY = "revert"
_MAX_LISTED = 20


class TaskCommit(msgspec.Struct, frozen=True):
    """A commit the session recorded as completing a task."""

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
    paused: bool = False  # the ended session was marked paused so `lopen run` resumes it


def short(sha: str) -> str:
    return sha[:8]


def revert_module(
    root: Path, module: str, store: EventStore, *, to_task: str | None = None, repo: Repository | None = None
) -> RevertResult:
    """Reset `lopen/<module>` to a task-completion commit and record it; see the module docstring."""
    repo = repo or Repository(root)
    branch = f"lopen/{module}"
    if not repo.is_repository():
        raise LopenError(
            f"{root} is not a git repository",
            "Lopen commits each verified task on the module branch; revert goes back to one of those commits",
            f"run `lopen run {module}` in a git repository first",
        )
    with module_lock(root, module):
        projections = store.projections
        projections.catch_up()
        session = projections.sessions.latest(module)
        if session is None:
            raise _no_task_commit(module, f"module {module} has no session in the event store")
        stream = session_stream(session.id)
        state = RunState(module)
        commits: list[TaskCommit] = []
        for recorded in store.read_stream(stream):
            state.apply(recorded.event)
            event = recorded.event
            if isinstance(event, ev.CommitRecorded) and event.task_id:
                commits.append(TaskCommit(task_id=event.task_id, sha=event.sha, message=event.message))
        if not commits:
            raise _no_task_commit(module, f"its latest session, {session.id}, recorded no task-completion commit")

        _require_branch(repo, module, branch)
        ref = f"refs/heads/{branch}"
        on_branch = [c for c in commits if repo.is_ancestor(c.sha, ref)]
        if not on_branch:
            raise LopenError(
                f"no task-completion commit of {module} is on {branch} any more",
                f"none of the {len(commits)} commits session {session.id} recorded for a task is an ancestor "
                f"of {branch} (the branch was reset or rewritten)",
                f"check `git log {branch}`; `lopen run {module}` re-opens the lost tasks and commits them again",
            )
        target = _target(on_branch, commits, to_task, module, branch)

        dirty = repo.dirty_files()
        if dirty:
            listed = ", ".join(dirty[:_MAX_LISTED]) + (
                f" and {len(dirty) - _MAX_LISTED} more" if len(dirty) > _MAX_LISTED else ""
            )
            raise LopenError(
                f"the work tree has uncommitted changes: {listed}",
                "`git reset --hard` would destroy them; revert only runs on a clean work tree",
                "commit them, or put them aside with `git stash` (`git stash -u` for untracked files), "
                f"then run `lopen revert {module}` again",
            )

        head = repo.head() or ""
        if head == target.sha:
            return RevertResult(
                module=module,
                session_id=session.id,
                branch=branch,
                from_sha=head,
                to_sha=target.sha,
                target=target,
                changed=False,
            )

        discarded = tuple(repo.commits_between(target.sha, head))
        repo.reset_hard(target.sha)

        reopened = [
            task
            for task in state.tasks.values()
            if task.state == "complete" and task.commit and not repo.is_ancestor(task.commit, target.sha)
        ]
        reason = f"lopen revert: back to the commit that completed {target.task_id}"
        instruction = _instruction(
            module, branch, head, target, discarded, [(t.spec.id, t.spec.name) for t in reopened]
        )
        events: list[ev.Event] = [ev.Reverted(from_sha=head, to_sha=target.sha, reason=reason)]
        events += [
            ev.TaskReopened(task_id=t.spec.id, reason=f"lopen revert: its commit {short(t.commit)} was rolled back")
            for t in reopened
        ]
        events.append(ev.CorrectiveInstructionIssued(invocation_id="", category=CATEGORY, instruction=instruction))
        paused = bool(reopened) and session.status in ("completed", "failed")
        if paused:
            events.append(
                ev.SessionPaused(
                    reason=f"lopen revert re-opened {len(reopened)} task(s); `lopen run {module}` continues",
                    error_kind=CATEGORY,
                )
            )
        store.append(stream, events)  # the lock keeps runs out; a concurrent `session delete` may append too
        return RevertResult(
            module=module,
            session_id=session.id,
            branch=branch,
            from_sha=head,
            to_sha=target.sha,
            target=target,
            changed=True,
            discarded=discarded,
            reopened=tuple(t.spec.id for t in reopened),
            instruction=instruction,
            paused=paused,
        )


def _no_task_commit(module: str, why: str) -> LopenError:
    return LopenError(
        f"nothing to revert {module} to: there is no task-completion commit",
        why,
        f"revert returns to a commit Lopen made for a verified task; `lopen run {module}` makes them "
        "(with git.auto_commit on)",
    )


def _require_branch(repo: Repository, module: str, branch: str) -> None:
    if not repo.branch_exists(branch):
        raise LopenError(
            f"there is no branch {branch}",
            f"Lopen commits the tasks of {module} on {branch}; this repository has no such branch",
            f"run `lopen run {module}`, or check out the repository Lopen worked in",
        )
    current = repo.current_branch()
    if current != branch:
        raise LopenError(
            f"{branch} is not checked out (HEAD is on {current or 'no branch'})",
            "revert resets the checked-out branch and the work tree with it",
            f"`git checkout {branch}`, then run `lopen revert {module}` again",
        )


def _target(
    on_branch: list[TaskCommit], commits: list[TaskCommit], to_task: str | None, module: str, branch: str
) -> TaskCommit:
    if not to_task:
        return on_branch[-1]
    for commit in reversed(on_branch):
        if commit.task_id == to_task:
            return commit
    known = list(dict.fromkeys(c.task_id for c in on_branch))
    lost = [c for c in commits if c.task_id == to_task]
    if lost:
        what = f"the commit that completed {to_task} ({short(lost[-1].sha)}) is no longer on {branch}"
        why = "it was rolled back earlier (or the branch was rewritten); a revert only goes back along the branch"
    else:
        what = f"no task-completion commit for {to_task!r}"
        why = f"the latest session of {module} recorded none for that task"
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
