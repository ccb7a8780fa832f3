"""The Git actor (G1, G2, G5, G6): the module's worktree and branch, and the commit of each verified task.

It reacts to the bus: a task that became complete with a verified tree is committed — exactly that
tree, on ``lopen/<module>`` (``lopen.git.Worktree.commit``). What is owed is derived from the one
fold (``ModuleState.owed_commits``), so after a crash between a completion and its commit the next
run's Git actor finds the task owed and commits it — or, when the commit was made but not recorded,
finds it on the branch by its tree and ``Lopen-Task`` trailer and records it. Asks: ``settle()``
(every owed commit made; the tip), ``guard()`` (after an invocation: HEAD and the branch where Lopen
left them), ``reset_to_tip()`` (the worktree back to the last commit).
"""

from __future__ import annotations

from pathlib import Path

import pykka

from events import catalogue as ev
from events.bus import Subscription
from events.fold import TaskNode
from events.journal import Journal
from events.recorded import Recorded
from events.store import EventStore
from lopen.git import Repository, Worktree


def commit_message(module: str, task: TaskNode, session_id: str) -> str:
    """``feat(<module>): <task> in <component>`` (G2) with trailers naming the task and the session."""
    return (
        f"feat({module}): {task.name} in {task.component}\n\n"
        f"Lopen-Task: {task.id}\nLopen-Session: {session_id or '-'}\n"
    )


class GitActor(pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        worktree: Worktree,
        store: EventStore,
        *,
        auto_commit: bool = True,
        spec: tuple[Path, str] | None = None,
    ) -> None:
        """``spec`` is (the user's checkout, the spec's path in it): the approved spec the branch carries."""
        super().__init__()
        self.journal = journal
        self.worktree = worktree
        self.store = store
        self.auto_commit = auto_commit
        self.spec = spec
        self.subscription: Subscription | None = None

    def on_start(self) -> None:
        me = self.actor_ref.proxy()
        stream = self.journal.stream
        self.subscription = self.store.subscribe(
            lambda rec: me.observe(rec) if rec.stream_id == stream and _reacts_to(rec.event) else None
        )

    def on_stop(self) -> None:
        if self.subscription is not None:
            self.subscription.cancel()

    def ensure(self, created: bool = False) -> str:
        """The worktree and branch exist (made where the history says, else from the user's HEAD;
        recorded once — ``created`` when the engine made them before the CLI started), owed commits
        are made, and the branch holds the approved spec (``docs(<module>): the approved specification``)."""
        state = self.journal.snapshot()
        made, base = self.worktree.ensure(state.tip)
        created = created or made
        if created or state.worktree != str(self.worktree.path):
            self.journal.record(
                ev.BranchEnsured(
                    branch=self.worktree.branch,
                    created=created,
                    base=state.branch_base or base,
                    worktree=str(self.worktree.path),
                )
            )
        self._follow_branch()
        self.settle()
        self.adopt_spec()
        return self.worktree.branch

    def adopt_spec(self) -> None:
        """Commit the approved spec (the user's checkout's, which the Assessor checked against the
        approval) onto the branch when the branch's copy differs."""
        if self.spec is None:
            return
        root, relative = self.spec
        self._adopt_spec(relative, (root / relative).read_bytes())

    def _follow_branch(self) -> None:
        """Before this run: the branch moved outside Lopen since the last run. When the move is a commit
        Lopen owes (made, then killed before recording it), that commit is recorded by ``settle``; any other
        move is a person's (a reset): Lopen follows it and re-opens the tasks whose commits are gone,
        and the owed completions whose base went with them."""
        state = self.journal.snapshot()
        tip = self.worktree.tip()
        expected = state.tip or state.branch_base
        if not expected or not tip or tip == expected:
            return
        owed = {t.id for t in state.owed_commits()}
        if any(self.worktree.find_commit(t.tree, expected, f"Lopen-Task: {t.id}") for t in state.owed_commits()):
            return
        repo = Repository(self.worktree.repo_root)  # the user's checkout: its git files are Lopen's to trust
        lost = [t for t in state.ordered_tasks() if (t.commit and not repo.is_ancestor(t.commit, tip)) or t.id in owed]
        events: list[ev.Event] = [
            ev.Reverted(from_sha=expected, to_sha=tip, reason=f"{self.worktree.branch} was moved outside Lopen")
        ]
        events += [
            ev.TaskReopened(task_id=t.id, reason=f"its work is no longer on {self.worktree.branch}") for t in lost
        ]
        self.journal.record(*events)

    def _adopt_spec(self, relative: str, content: bytes) -> None:
        state = self.journal.snapshot()
        parent = state.tip or state.branch_base
        if self.worktree.show(parent, relative) == content:
            return
        message = f"docs({state.module}): the approved specification"
        sha = self.worktree.commit_file(relative, content, parent, message)
        tree = self.worktree.tree_of(sha)
        self.journal.record(
            ev.CommitRecorded(sha=sha, message=message, tree=tree, parent=parent, branch=self.worktree.branch)
        )

    def observe(self, recorded: Recorded) -> None:
        if isinstance(recorded.event, ev.SpecDriftDetected):
            self.adopt_spec()  # a spec approved mid-run: the branch carries it before anything is verified
        else:
            self.settle()

    def settle(self) -> str:
        """Commit every task owed a commit (in plan order); return the branch tip."""
        if self.auto_commit:
            for task in self.journal.read(lambda s: s.owed_commits()):
                self._commit(task)
        return self.worktree.tip()

    def _commit(self, task: TaskNode) -> None:
        state = self.journal.snapshot()
        trailer = f"Lopen-Task: {task.id}"
        parent = state.tip or state.branch_base
        found = self.worktree.find_commit(task.tree, parent, trailer)
        message = commit_message(state.module, task, self.journal.session_id)
        if found is None:
            tip = self.worktree.tip()
            if tip != parent:  # the model moved it: Lopen's commits go on Lopen's history, and it is told
                self.worktree.move_branch(parent)
                self._put_back([f"{self.worktree.branch} was moved to {tip[:8] or 'nothing'}"])
            found = self.worktree.commit(task.tree, parent, message)
        self.journal.record(
            ev.CommitRecorded(
                sha=found,
                message=message.splitlines()[0],
                task_id=task.id,
                tree=task.tree,
                parent=parent,
                branch=self.worktree.branch,
                invocation_id=task.invocation,
            )
        )

    def guard(self) -> list[str]:
        """After an invocation: put HEAD and the branch back where Lopen left them; return what was wrong
        (recorded, with a corrective instruction for the next invocation)."""
        state = self.journal.snapshot()
        wrong = []
        head = self.worktree.head_ref()
        if head != self.worktree.ref:
            self.worktree.restore_head()
            wrong.append(f"HEAD was moved to {head or 'a detached commit'}")
        expected = state.tip or state.branch_base
        tip = self.worktree.tip()
        if expected and tip != expected:
            self.worktree.move_branch(expected)
            wrong.append(f"{self.worktree.branch} was moved to {tip[:8] or 'nothing'}")
        self._put_back(wrong)
        return wrong

    def _put_back(self, wrong: list[str]) -> None:
        """Record what the model changed in git and Lopen put back, and tell the next invocation."""
        if not wrong:
            return
        what = "; ".join(wrong)
        instruction = (
            "Do not change branches, commit, reset or check out in git: Lopen commits verified work on "
            f"{self.worktree.branch} itself. In the last invocation {what}, and Lopen put it back."
        )
        self.journal.record(
            ev.GuardrailTripped(category="git", level="warn", detail=f"{what} — put back"),
            ev.CorrectiveInstructionIssued(category="git", instruction=instruction),
        )

    def reset_to_tip(self) -> None:
        """The worktree's files become the last commit (after a completed task: its leftovers go)."""
        tip = self.worktree.tip()
        if tip:
            self.worktree.reset_to(tip)

    def leftovers(self) -> list[str]:
        return self.worktree.dirty_files()

    def tip(self) -> str:
        return self.worktree.tip()


def _reacts_to(event: ev.Event) -> bool:
    """A task completed (commit it), or an approved spec change (adopt it)."""
    if isinstance(event, ev.SpecDriftDetected):
        return True
    return isinstance(event, ev.TaskStatusChanged) and event.to_state == "complete"
