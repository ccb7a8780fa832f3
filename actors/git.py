"""The Git actor (G1, G2, G5, G6): the module's worktree and branch, and the commit of each verified task.

With ``lane`` set it is a component's Git actor in parallel work: its own branch
(``lopen/<module>--<component>``) and worktree, started at the module branch's tip, where the
component's tasks are committed; the module's Git actor merges it onto ``lopen/<module>``
(``merge()``: a fast-forward when the module branch has not moved, else a merge commit of git's
three-way merge; a conflict is reported, nothing is moved). With ``remote`` (``git.remote``) each
branch Lopen moves is pushed there, and commits the history names that this clone lacks are fetched.

It reacts to the bus: a task that became complete with a verified tree is committed — exactly that
tree, on ``lopen/<module>`` (``lopen.git.Worktree.commit``). What is owed is derived from the one
fold (``ModuleState.owed_commits``), so after a crash between a completion and its commit the next
run's Git actor finds the task owed and commits it — or, when the commit was made but not recorded,
finds it on the branch by its tree and ``Lopen-Task`` trailer and records it. Asks: ``settle()``
(every owed commit made; the tip), ``check()`` (before an invocation: git's own files and HEAD as Lopen
left them), ``guard()`` (after an invocation: the same, and the branch), ``reset_to_tip()`` (the worktree
back to the last commit). A worktree is never left unchecked: a lane's is checked before it is removed,
and every one when its actor stops (the end of the run).

**The fence.** A lane's actor records through the lane's ``FencedJournal``, and calls ``journal.hold()``
— its claim checked on the store's latest history — right before each change it makes to its worktree,
its branch or the remote (ensure, commits, reset, load, restart, retire, the checks that put git's files
back, a push). A lane whose claim another worker took over (or whose lease ran out) is refused
(``Fenced``) and touches nothing. The module's actor merges a component under that lane's fence too
(``merge(component, fence)``): ``ComponentMerged`` is recorded only while the claim holds, before the
module branch moves.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pykka

from events import catalogue as ev
from events.bus import Subscription
from events.fold import Fence, ModuleState, TaskNode
from events.journal import Contradiction, Fenced, Journal
from events.recorded import Recorded
from events.store import EventStore
from lopen.git import GitError, Repository, Worktree
from lopen.git.merge import commit_merge, is_ancestor, merge_trees
from lopen.git.witness import chain_value, read_commits, trailers

PUSH_ATTEMPTS = 5  # pushes to git.remote that meet another worker's at the same moment are tried again
FETCH_WAIT_SECONDS = 60.0  # how long a commit the history names may take to reach git.remote


def commit_message(module: str, task: TaskNode, session_id: str, chain: str = "") -> str:
    """``feat(<module>): <task> in <component>`` (G2) with trailers naming the task, the session and the
    module stream's chain head (``Lopen-Chain``, ``lopen.git.witness``)."""
    return f"feat({module}): {task.name} in {task.component}\n\nLopen-Task: {task.id}\n" + trailers(session_id, chain)


def merge_message(module: str, component: str, session_id: str, chain: str = "") -> str:
    return f"merge({module}): component {component}\n\nLopen-Merge: {component}\n" + trailers(session_id, chain)


def docs_message(subject: str, session_id: str, chain: str) -> str:
    """A commit of Lopen's own documents (the approved spec, the research notes) with its trailers."""
    return f"{subject}\n\n" + trailers(session_id, chain)


class MergeResult(msgspec.Struct, frozen=True):
    """``merged`` (``sha`` is the module branch's new tip), or ``conflict``: merging ``into`` (the module
    tip) and the component conflicts in ``files``; ``tree`` is that merge with conflict markers."""

    status: str
    sha: str = ""
    fast_forward: bool = False
    into: str = ""
    files: tuple[str, ...] = ()
    tree: str = ""


class GitActor(pykka.ThreadingActor):
    def __init__(
        self,
        journal: Journal,
        worktree: Worktree,
        store: EventStore,
        *,
        auto_commit: bool = True,
        spec: tuple[Path, str] | None = None,
        lane: str = "",
        remote: str = "",
    ) -> None:
        """``spec`` is (the user's checkout, the spec's path in it): the approved spec the branch carries;
        ``lane`` the component whose own branch this actor keeps (parallel work), "" for the module's."""
        super().__init__()
        self.journal = journal
        self.worktree = worktree
        self.store = store
        self.auto_commit = auto_commit
        self.spec = spec
        self.lane = lane
        self.remote = remote
        self.subscription: Subscription | None = None

    def on_start(self) -> None:
        me = self.actor_ref.proxy()
        stream = self.journal.stream
        lane = self.lane
        self.subscription = self.store.subscribe(
            lambda rec: me.observe(rec) if rec.stream_id == stream and _reacts_to(rec.event, lane) else None
        )

    def on_stop(self) -> None:
        """The run ends: the worktree Lopen leaves behind is checked once more (the person's own git will
        run there), after the last invocation."""
        if self.subscription is not None:
            self.subscription.cancel()
        if self.worktree.checked():
            try:
                self.check()
            except Fenced:  # the claim is another's: this worker's own folder keeps git's files, unrecorded
                self.worktree.restore_git_files()

    def ensure(self, created: bool = False) -> str:
        """The worktree and branch exist (made where the history says, else from the user's HEAD;
        recorded once — ``created`` when the engine made them before the CLI started), owed commits
        are made, and the branch holds the approved spec (``docs(<module>): the approved specification``)."""
        if self.lane:
            self.journal.hold()
            return self._ensure_lane()
        state = self.journal.snapshot()
        self._have(state.tip)
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
        if self.worktree.tip():
            self.worktree.sync_index()  # a run killed after a commit, before its reset
        self.adopt_spec()
        if created:  # new to the remote too, whoever made it (the engine makes it before the actor starts)
            self._publish()
        return self.worktree.branch

    def _ensure_lane(self) -> str:
        """A component's branch and worktree: started at the module branch's tip the first time
        (``BranchEnsured(component=…)``), moved forward to it when a merged component gets work again
        (a fix of the module's verdict), else made again where its history says (another worker's,
        fetched from the remote when this clone lacks it)."""
        state = self.journal.snapshot()
        lane = state.lanes.get(self.lane)
        again = lane is not None and bool(lane.merged_tip) and state.merged(self.lane)
        if lane is None or (again and not state.component_done(self.lane)):
            # The first time, or merged before and given work again (a fix of the module's verdict): the
            # module branch holds the component's, so the lane starts at the module as the reviewer judged it.
            base = state.tip_of("")
            self._have(base)
            self.worktree.ensure(base)
            if lane is not None:
                self.restart_at(base)  # published with a remote: another clone makes the lane where it now is
            elif self.worktree.tip() != base:  # a branch left by an attempt that was never recorded
                self.worktree.restart_at(base)
            self.journal.record(
                ev.BranchEnsured(
                    branch=self.worktree.branch,
                    created=True,
                    base=base,
                    worktree=str(self.worktree.path),
                    component=self.lane,
                )
            )
        else:
            expected = lane.tip or lane.base
            self._have(expected, self.worktree.branch)
            self.worktree.ensure(expected)
            tip = self.worktree.tip()
            owed = state.owed_commits(self.lane)
            found = any(self.worktree.find_commit(t.tree, expected, f"Lopen-Task: {t.id}") for t in owed)
            if tip != expected and not found:
                self.worktree.move_branch(expected)  # Lopen's history says where it is; the files stay
            if lane.worktree != str(self.worktree.path):
                self.journal.record(
                    ev.BranchEnsured(
                        branch=self.worktree.branch,
                        base=lane.base,
                        worktree=str(self.worktree.path),
                        component=self.lane,
                    )
                )
        self.settle()
        if self.worktree.tip():
            self.worktree.sync_index()  # a run killed after a commit, before its reset
        return self.worktree.branch

    def _have(self, sha: str, branch: str = "") -> None:
        """With a remote: fetch ``branch`` (default: the module's) when this clone lacks ``sha``.

        Another worker records a merge before it pushes it, so the history can name a commit the remote
        does not have yet: the fetch is tried again (backing off) for up to ``FETCH_WAIT_SECONDS``."""
        if not (self.remote and sha):
            return
        repo = Repository(self.worktree.repo_root)
        deadline, pause = time.monotonic() + FETCH_WAIT_SECONDS, 0.05
        while not repo.has_commit(sha):
            self.worktree.fetch(self.remote, branch or self._module_branch())
            if repo.has_commit(sha):
                return
            if time.monotonic() >= deadline:
                raise GitError(
                    f"commit {sha[:10]} is in the module's history but not in {self.remote}",
                    f"the worker that recorded it has not pushed it within {FETCH_WAIT_SECONDS:.0f} s",
                    "check that worker (its push may have failed), then run again",
                )
            time.sleep(pause)  # the other worker's push is on its way
            pause = min(pause * 2, 1.0)

    def _module_branch(self) -> str:
        return self.journal.read(lambda s: s.branch) or f"lopen/{self.journal.module}"

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
        and the owed completions whose base went with them. A branch behind what the history says (a merge
        recorded by another worker, or by a run killed before it moved the branch) is brought forward."""
        state = self.journal.snapshot()
        tip = self.worktree.tip()
        expected = state.tip or state.branch_base
        if not expected or not tip or tip == expected:
            return
        repo = Repository(self.worktree.repo_root)  # the user's checkout: its git files are Lopen's to trust
        self._have(expected)
        merged = any(lane.merged_as == expected for lane in state.lanes.values())
        if (merged or self.remote) and repo.has_commit(expected) and repo.is_ancestor(tip, expected):
            self.worktree.move_branch(expected)  # a recorded merge the branch has not followed yet
            self.worktree.advance(tip, expected)
            return
        owed = {t.id for t in state.owed_commits()}
        if any(self.worktree.find_commit(t.tree, expected, f"Lopen-Task: {t.id}") for t in state.owed_commits()):
            return
        lost = [t for t in state.ordered_tasks() if (t.commit and not repo.is_ancestor(t.commit, tip)) or t.id in owed]
        events: list[ev.Event] = [
            ev.Reverted(from_sha=expected, to_sha=tip, reason=f"{self.worktree.branch} was moved outside Lopen")
        ]
        events += [
            ev.TaskReopened(task_id=t.id, reason=f"its work is no longer on {self.worktree.branch}") for t in lost
        ]
        self.journal.record(*events)

    def _adopt_spec(self, relative: str, content: bytes) -> None:
        for _ in range(5):  # another worker may adopt it first: then its commit is the one
            self.journal.refresh()
            module, parent = self.journal.read(lambda s: (s.module, s.tip or s.branch_base))
            self._have(parent)
            if self.worktree.show(parent, relative) == content:
                return
            subject = f"docs({module}): the approved specification"
            if self.worktree.tip() != parent:
                self._follow_to(parent)
            chain = self._chain()
            sha = self.worktree.commit_file(relative, content, parent, docs_message(subject, self._session(), chain))
            tree = self.worktree.tree_of(sha)
            try:
                self.journal.record(
                    ev.CommitRecorded(
                        sha=sha, message=subject, tree=tree, parent=parent, branch=self.worktree.branch, chain=chain
                    )
                )
            except Contradiction:
                self.worktree.move_branch(parent)  # not recorded: the next try goes on the history's tip
                continue
            self._publish()
            return

    def commit_research(self) -> str:
        """Commit the module's research notes and their index (``RESEARCH*.md`` next to the spec, as the
        model wrote them in the worktree) onto the branch when its copies differ —
        ``docs(<module>): research notes`` — so every later worktree (a lane's too) starts with them.
        Returns the commit's sha ("" when nothing differed, or another writer moved the history first:
        the notes then go with the next verified task, as any file the model leaves)."""
        module = self.journal.module
        folder = self.worktree.path / "docs" / "requirements" / module
        files = {
            p.relative_to(self.worktree.path).as_posix(): p.read_bytes() for p in sorted(folder.glob("RESEARCH*.md"))
        }
        self.journal.refresh()
        parent = self.journal.read(lambda s: s.tip or s.branch_base)
        changed = {
            relative: content for relative, content in files.items() if self.worktree.show(parent, relative) != content
        }
        if not changed:
            return ""
        if self.worktree.tip() != parent:
            self._follow_to(parent)
        subject = f"docs({module}): research notes"
        chain = self._chain()
        sha = self.worktree.commit_files(changed, parent, docs_message(subject, self._session(), chain))
        try:
            self.journal.record(
                ev.CommitRecorded(
                    sha=sha,
                    message=subject,
                    tree=self.worktree.tree_of(sha),
                    parent=parent,
                    branch=self.worktree.branch,
                    chain=chain,
                )
            )
        except Contradiction:
            self.worktree.move_branch(parent)
            return ""
        self._publish()
        return sha

    def _follow_to(self, expected: str) -> None:
        """The local branch is behind the history (another clone's commits, fetched): bring it forward."""
        local = self.worktree.tip()
        if local and local != expected and is_ancestor(self.worktree.repo_root, local, expected):
            self.worktree.move_branch(expected)
            self.worktree.advance(local, expected)

    def observe(self, recorded: Recorded) -> None:
        if isinstance(recorded.event, ev.SpecDriftDetected):
            self.adopt_spec()  # a spec approved mid-run: the branch carries it before anything is verified
        else:
            with contextlib.suppress(Fenced):  # a lane that lost its claim commits nothing more
                self.settle()

    def settle(self) -> str:
        """Commit every task owed a commit (in plan order); return the branch tip."""
        if self.auto_commit:
            lane = self.lane
            for task in self.journal.read(lambda s: s.owed_commits(lane)):
                self.journal.hold()
                self._commit(task)
        return self.worktree.tip()

    def _commit(self, task: TaskNode) -> None:
        trailer = f"Lopen-Task: {task.id}"
        lane = self.lane

        def where(s: ModuleState) -> tuple[str, str, str]:
            node = s.lanes.get(lane) if lane else None
            merging = node.resolving if node is not None and node.resolution_task == task.id else ""
            return s.module, s.tip_of(lane), merging

        module, parent, merge_parent = self.journal.read(where)
        found = self.worktree.find_commit(task.tree, parent, trailer)
        chain = self._chain()
        message = commit_message(module, task, self.journal.session_id, chain)
        if found is None:
            tip = self.worktree.tip()
            if tip != parent:  # the model moved it: Lopen's commits go on Lopen's history, and it is told
                self.worktree.move_branch(parent)
                self._put_back([f"{self.worktree.branch} was moved to {tip[:8] or 'nothing'}"])
            found = self.worktree.commit(task.tree, parent, message, merge_parent=merge_parent)
        else:  # made by a run killed before it recorded it: the commit says which head it saw
            made = read_commits(self.worktree.repo_root, [found]).get(found)
            chain = made.chain if made is not None else ""
        added, removed, files = self.worktree.numstat(parent or None, task.tree)
        self.journal.record(
            ev.CommitRecorded(
                sha=found,
                message=message.splitlines()[0],
                task_id=task.id,
                tree=task.tree,
                parent=parent,
                branch=self.worktree.branch,
                invocation_id=task.invocation,
                merge_parent=merge_parent,
                chain=chain,
                added=added,
                removed=removed,
                files=files,
            )
        )
        self._publish()

    def _chain(self) -> str:
        """The ``Lopen-Chain`` trailer's value for a commit made now: the module stream's head as stored
        (read from the store, not this process's fold: a lane's or another worker's events count too)."""
        return chain_value(*self.store.head(self.journal.stream))

    def _session(self) -> str:
        return self.journal.session_id

    def _publish(self) -> None:
        """With a remote: push the branch Lopen just moved (a component's is forced: it can start afresh).
        The module branch's push may lose to another worker's push of a later merge, which holds this one."""
        if not self.remote:
            return
        self.journal.hold()
        for attempt in range(PUSH_ATTEMPTS):
            try:
                self.worktree.push(self.remote, force=bool(self.lane))
                return
            except GitError:
                last = attempt == PUSH_ATTEMPTS - 1
                if self.lane:  # a component's branch: one holder, so only a transient failure (a ref locked)
                    if last:
                        raise
                    continue
                if not self.worktree.fetch(self.remote):
                    raise
                root, tip = self.worktree.repo_root, self.worktree.tip()
                if is_ancestor(root, tip, "FETCH_HEAD"):
                    return  # another worker pushed a later merge, which holds this one
                if last or not is_ancestor(root, "FETCH_HEAD", tip):
                    raise
                # the remote is behind this tip: the push met another at the same moment (a ref locked)

    # -- parallel work --------------------------------------------------------------------------------

    def merge(self, component: str, fence: Fence | None = None) -> MergeResult:
        """Merge ``component``'s verified branch onto the module branch (this actor's): a fast-forward when
        the module branch is where the component started, else a merge commit of exactly git's merged tree.
        The merge is recorded first (``ComponentMerged``, refused when another merge came first: then it is
        computed again on the new tip; refused for good — ``Fenced`` — when the lane's claim, ``fence``, is
        no longer its own), then the branch moves and the worktree follows."""
        for _ in range(20):
            self.journal.refresh()
            state = self.journal.snapshot()
            lane = state.lanes[component]
            into, tip = state.tip_of(""), lane.tip or lane.base
            if lane.merged_tip and lane.merged_tip == tip:
                return MergeResult("merged", sha=lane.merged_as)
            self._have(into)
            self._have(tip, lane.branch)
            root = self.worktree.repo_root
            chain = ""
            if is_ancestor(root, into, tip):
                sha, fast, tree = tip, True, self.worktree.tree_of(tip)
            else:
                merged = merge_trees(root, into, tip)
                if not merged.clean:
                    return MergeResult("conflict", into=into, files=merged.conflicts, tree=merged.tree)
                tree, fast = merged.tree, False
                chain = self._chain()
                sha = commit_merge(
                    root, tree, (into, tip), merge_message(state.module, component, self.journal.session_id, chain)
                )
            try:
                self.journal.record(
                    ev.ComponentMerged(
                        component=component,
                        sha=sha,
                        parent=into,
                        component_tip=tip,
                        tree=tree,
                        fast_forward=fast,
                        branch=self.worktree.branch,
                        chain=chain,
                    ),
                    fence=fence,
                )
            except Contradiction:
                continue  # another merge (or work on the module branch) came first: merge on what is there now
            self._move_to(into, sha)
            return MergeResult("merged", sha=sha, fast_forward=fast)
        raise GitError(
            f"could not merge component {component} onto {self.worktree.branch}",
            "other merges kept coming first",
            "run the module again: the merge is tried again",
        )

    def _move_to(self, old: str, new: str) -> None:
        """The module branch goes from ``old`` to ``new`` (recorded): the ref, its worktree, the remote."""
        local = self.worktree.tip()
        if local == old or (local and is_ancestor(self.worktree.repo_root, local, new)):
            self.worktree.move_branch(new)
            self.worktree.advance(local or old, new)
        self._publish()

    def sync(self) -> str:
        """Bring the module branch and its worktree to where the history says (merges other workers
        recorded); return the tip."""
        self.journal.refresh()
        expected = self.journal.read(lambda s: s.tip_of(""))
        local = self.worktree.tip()
        if expected and local != expected:
            self._have(expected)
            self.worktree.move_branch(expected)
            self.worktree.advance(local or expected, expected)
        return expected

    def load(self, tree: str) -> None:
        """Put ``tree``'s files in this worktree (a merge with conflict markers, for its resolution task)."""
        self.journal.hold()
        self.worktree.load(tree)

    def retire(self) -> None:
        """A merged component's worktree goes (its branch stays: its commits are on the module branch).
        Checked first: git removes only a worktree whose files agree, so a model's rewritten ``.git``
        pointer would otherwise keep it — with the model's git folder — after the run."""
        if self.lane:
            self.journal.hold()
            if self.worktree.checked():
                self.check()
            self.worktree.remove()

    def restart_at(self, sha: str) -> None:
        """This component's branch and worktree start afresh at ``sha`` (the component is built again)."""
        self._have(sha)
        self.journal.hold()
        self.worktree.restart_at(sha)
        self._publish()

    def check(self) -> list[str]:
        """Before an invocation (and when a worktree is left): git's own files for this worktree — its
        ``.git`` pointer, its private git folder's pointers and ``config.worktree``
        (``Worktree.restore_git_files``) — and HEAD put back where Lopen left them; return what was wrong
        (recorded, with a corrective instruction for the next invocation)."""
        self.journal.hold()
        files = self.worktree.restore_git_files()
        moved = self._restore_head()
        self._put_back(moved, files)
        return files + moved

    def guard(self) -> list[str]:
        """After an invocation: what ``check`` puts back, and the branch where Lopen left it; return what
        was wrong (recorded, with a corrective instruction for the next invocation)."""
        self.journal.hold()
        files = self.worktree.restore_git_files()
        moved = self._restore_head()
        lane = self.lane
        expected = self.journal.read(lambda s: s.tip_of(lane))
        tip = self.worktree.tip()
        if expected and tip != expected:
            self.worktree.move_branch(expected)
            moved.append(f"{self.worktree.branch} was moved to {tip[:8] or 'nothing'}")
        self._put_back(moved, files)
        return files + moved

    def _restore_head(self) -> list[str]:
        head = self.worktree.head_ref()
        if head == self.worktree.ref:
            return []
        self.worktree.restore_head()
        return [f"HEAD was moved to {head or 'a detached commit'}"]

    def _put_back(self, wrong: list[str], files: Sequence[str] = ()) -> None:
        """Record what the model changed in git and Lopen put back, and tell the next invocation: ``wrong``
        (HEAD, the branch) and ``files`` (git's own files, which decide what plain git runs)."""
        if not wrong and not files:
            return
        what = "; ".join([*files, *wrong])
        said = []
        if files:
            said.append(
                "Do not edit git's own files — the worktree's .git pointer, its git folder, git configuration: "
                "they decide which programs git runs for the person, outside the sandbox. "
                f"In the last invocation {'; '.join(files)}, and Lopen put it back."
            )
        if wrong:
            said.append(
                "Do not change branches, commit, reset or check out in git: Lopen commits verified work on "
                f"{self.worktree.branch} itself. In the last invocation {'; '.join(wrong)}, and Lopen put it back."
            )
        detail = f"{what} — put back" if not files else f"git's own files were tampered with: {what} — put back"
        self.journal.record(
            ev.GuardrailTripped(category="git", level="warn", detail=detail),
            ev.CorrectiveInstructionIssued(category="git", instruction=" ".join(said)),
        )

    def reset_to_tip(self) -> None:
        """The worktree's files become the last commit (after a completed task: its leftovers go)."""
        self.journal.hold()
        self.worktree.reset_to_tip()

    def leftovers(self) -> list[str]:
        return self.worktree.dirty_files()

    def tip(self) -> str:
        return self.worktree.tip()


def _reacts_to(event: ev.Event, lane: str = "") -> bool:
    """A task completed (commit it: a lane's actor only its component's), or an approved spec change
    (the module's actor adopts it)."""
    if isinstance(event, ev.SpecDriftDetected):
        return not lane
    return (
        isinstance(event, ev.TaskStatusChanged)
        and event.to_state == "complete"
        and (not lane or event.task_id.startswith(f"{lane}/"))
    )
