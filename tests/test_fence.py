"""Fenced workers (issue 21): a lane works under its claim's token, and once that claim is another's —
its worker was paused past its lease and taken over — nothing it does lands: no event, no commit, no
merge, no change to a worktree, a branch or the remote.

On a real git repository and a real SQLite store: worker A's lane (its own ``FencedJournal`` and Git
actor, in its own folder ``core@A``) builds a task; worker B takes the component over after A's lease
ran out (two journals on one store: two processes); then every action of A's lane is refused and the
repository, A's folder with its uncommitted files, and the history are exactly as they were. B's lane
starts in a folder of its own, from the component's recorded tip.

No sleeps: a lease that ran out is a renewal recorded with a past ``lease_until``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest
from repos import git, make_repo, write

from actors.git import GitActor
from actors.lane import LaneActor, LaneResult, Tally
from events import catalogue as ev
from events.fold import Fence, ModuleState
from events.journal import Fenced, FencedJournal, Journal
from lopen.app.crew import lane_folder
from lopen.copilot.gateway import Cancel
from lopen.git import Worktree
from lopen.project import open_store
from lopen.workflow.schedule import lane_branch

MODULE = "auth"
A, B = "host:100/1", "host:200/1"


class World:
    """A module of one component, ``core`` (tasks core/1, core/2), and two workers' journals on one store."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = make_repo(tmp_path)
        self.store, self.project = open_store(self.root)
        self.a = Journal(self.store, self.project, MODULE)
        self.a.open_session(ev.SessionStarted(lopen_version="test", worker="host:100"))
        self.a.record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)),
            ev.TasksRecorded(
                component="core", tasks=(ev.TaskSpec(id="core/1", name="One"), ev.TaskSpec(id="core/2", name="Two"))
            ),
        )
        self.module_tree = Worktree(self.root, self.root / ".lopen" / "worktrees" / MODULE, f"lopen/{MODULE}")
        self.b = Journal(self.store, self.project, MODULE)
        self.b.open_session(ev.SessionStarted(lopen_version="test", worker="host:200"))
        self.refs: list[pykka.ActorRef] = []

    def claim(self, journal: Journal, worker: str, lease: float = 60.0) -> Fence:
        journal.record(ev.ComponentClaimed(component="core", worker=worker, lease_until=time.time() + lease))
        return Fence(item="core", worker=worker, token=journal.read(lambda s: s.claims["core"].token))

    def lane_tree(self, worker: str) -> Worktree:
        path = lane_folder(self.module_tree.path, "core", worker.split("/")[0])
        return Worktree(self.root, path, lane_branch(MODULE, "core"), shared_branch=True)

    def start(self, journal: Journal, tree: Worktree, **kwargs: object) -> pykka.ActorProxy:
        ref = GitActor.start(journal, tree, self.store, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def complete(self, journal: Journal, task: str, tree: str) -> None:
        journal.record(
            ev.TaskStatusChanged(task_id=task, from_state="pending", to_state="in-progress"),
            ev.TaskStatusChanged(task_id=task, from_state="in-progress", to_state="complete", tree=tree),
        )

    def version(self) -> int:
        return self.store.version(self.a.stream)

    def lapse_and_take_over(self, fence: Fence) -> Fence:
        """A's lease runs out (its last renewal ended in the past: it was paused), then B claims core."""
        self.a.record(ev.ComponentLeaseRenewed(component="core", worker=fence.worker, lease_until=time.time() - 1))
        self.b.refresh()
        return self.claim(self.b, B)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        for ref in w.refs:
            ref.stop()
        w.store.close()


def test_every_claim_gets_a_new_token_and_the_fence_says_why_it_no_longer_holds(world: World) -> None:
    first = world.claim(world.a, A)
    again = world.claim(world.a, A)  # the same worker claiming again: a new claim, a new token
    assert (first.token, again.token) == (1, 2)
    now = time.time()
    state: ModuleState = world.a.snapshot()
    assert again.problem(state, now) is None
    assert "claimed again, by host:100/1 (claim #2, not #1)" in (first.problem(state, now) or "")
    assert "ran out" in (again.problem(state, state.claims["core"].until + 1) or "")
    world.a.record(ev.ComponentReleased(component="core", worker=A, reason="done"))
    assert "no longer claimed" in (again.problem(world.a.snapshot(), now) or "")
    assert world.b.read_fresh(lambda s: s.claims_made) == 2  # every fold of the history counts alike


def test_a_record_under_a_stale_fence_is_refused_even_from_a_fold_that_has_not_seen_the_takeover(
    world: World,
) -> None:
    fence = world.claim(world.a, A)
    world.a.record(ev.ComponentLeaseRenewed(component="core", worker=A, lease_until=time.time() - 1))
    world.b.refresh()
    world.claim(world.b, B)  # A's journal has not read this yet: its fold still names A
    assert world.a.read(lambda s: s.claims["core"].worker) == A
    before = world.version()
    lost: list[str] = []
    lane = FencedJournal(world.a, fence, on_lost=lost.append)
    started = ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress")
    with pytest.raises(Fenced, match="claimed again, by host:200/1"):
        lane.record(started)
    assert world.version() == before  # nothing stored
    assert len(lost) == 1 and lane.lost  # told once; from now on refused at once
    with pytest.raises(Fenced):
        lane.hold()
    with pytest.raises(Fenced):
        lane.record(started)
    assert len(lost) == 1
    world.a.record(started)  # the module's own journal (no fence) is not the lane's


def test_a_lapsed_lane_touches_nothing_its_folder_its_branch_the_history_and_the_merge_stay(world: World) -> None:
    module = world.start(world.a, world.module_tree)
    module.ensure().get()
    fence = world.claim(world.a, A)
    cancelled = Cancel()
    lane_journal = FencedJournal(world.a, fence, on_lost=lambda why: cancelled.set())
    tree_a = world.lane_tree(A)
    lane_a = world.start(lane_journal, tree_a, lane="core")
    lane_a.ensure().get()
    write(tree_a.path / "one.py", "ONE = 1\n")
    world.complete(lane_journal, "core/1", tree_a.tree())
    tip = lane_a.settle().get()  # A committed core/1 while it held the claim
    assert world.a.read(lambda s: s.tasks["core/1"].commit) == tip
    write(tree_a.path / "two.py", "TWO = 2\n")  # A's uncommitted work
    (tree_a.path / "one.py").write_text("ONE = 'changed'\n")
    two = tree_a.tree()

    world.lapse_and_take_over(fence)  # A was paused past its lease; B holds core now
    world.complete(world.a, "core/2", two)  # a completion A's lane would commit (the bus tells its Git actor)

    version, branch = world.version(), git(world.root, "rev-parse", lane_branch(MODULE, "core"))
    status = git(tree_a.path, "status", "--porcelain")
    for action in (
        lane_a.reset_to_tip,
        lane_a.check,
        lane_a.guard,
        lane_a.settle,
        lane_a.ensure,
        lane_a.retire,
        lambda: lane_a.restart_at(tip),
        lambda: lane_a.load(tree_a.tree_of(tip)),
        lambda: module.merge("core", fence),
    ):
        with pytest.raises(Fenced):
            action().get()
    assert cancelled.is_set()  # the lane's invocation in flight is aborted
    assert world.version() == version  # no event
    assert git(world.root, "rev-parse", lane_branch(MODULE, "core")) == branch  # no commit, no branch move
    assert git(world.root, "rev-parse", f"lopen/{MODULE}") == world.a.read(lambda s: s.branch_base)  # no merge
    assert git(tree_a.path, "status", "--porcelain") == status  # no reset, no clean
    assert (tree_a.path / "two.py").read_text() == "TWO = 2\n"
    assert (tree_a.path / "one.py").read_text() == "ONE = 'changed'\n"


def test_the_worker_that_took_over_works_in_a_folder_of_its_own_from_the_recorded_tip(world: World) -> None:
    world.start(world.a, world.module_tree).ensure().get()
    fence = world.claim(world.a, A)
    tree_a = world.lane_tree(A)
    lane_a = world.start(FencedJournal(world.a, fence), tree_a, lane="core")
    lane_a.ensure().get()
    write(tree_a.path / "one.py", "ONE = 1\n")
    world.complete(world.a, "core/1", tree_a.tree())
    tip = lane_a.settle().get()
    write(tree_a.path / "half.py", "# A's cut-off work\n")

    taken = world.lapse_and_take_over(fence)
    tree_b = world.lane_tree(B)
    lane_b = world.start(FencedJournal(world.b, taken), tree_b, lane="core")
    lane_b.ensure().get()  # the branch is checked out in A's folder too: B gets its own

    assert tree_b.path != tree_a.path and tree_b.path.name == "core@host-200"
    assert git(tree_b.path, "rev-parse", "HEAD") == tip  # the recorded tip …
    assert (tree_b.path / "one.py").is_file() and not (tree_b.path / "half.py").exists()  # … not A's folder
    write(tree_b.path / "b.py", "# B's uncommitted work\n")
    assert world.b.read_fresh(lambda s: s.lanes["core"].worktree) == str(tree_b.path)
    with pytest.raises(Fenced):
        lane_a.reset_to_tip().get()
    assert (tree_b.path / "b.py").is_file() and (tree_a.path / "half.py").is_file()


class _Runner(pykka.ThreadingActor):
    """A TaskRunner that must never be asked: the lane's claim is gone before its first step."""

    def run_task(self, *args: object) -> None:
        raise AssertionError("a lane whose claim is lost runs no task")


def test_a_lane_whose_claim_is_lost_ends_lost_before_its_next_step(world: World) -> None:
    from actors.guardrail import GuardrailActor
    from actors.metrics import MetricsActor
    from lopen.config import Settings

    world.start(world.a, world.module_tree).ensure().get()
    fence = world.claim(world.a, A)
    lane_journal = FencedJournal(world.a, fence)
    tree_a = world.lane_tree(A)
    git_a = world.start(lane_journal, tree_a, lane="core")
    git_a.ensure().get()
    world.lapse_and_take_over(fence)
    metrics = MetricsActor.start(world.store, world.project, MODULE)
    guardrail = GuardrailActor.start(world.a, Settings(), metrics.proxy(), None)
    runner = _Runner.start()
    world.refs += [metrics, guardrail, runner]
    lane = LaneActor.start(
        lane_journal,
        "core",
        git=git_a,
        module_git=git_a,
        task_runner=runner.proxy(),
        guardrail=guardrail.proxy(),
        tally=Tally(),
        say=lambda line: None,
        stop=threading.Event(),
    )
    world.refs.append(lane)
    before = world.version()
    result = lane.proxy().build().get(timeout=30)
    assert result.outcome == "lost" and "claimed again, by host:200/1" in result.detail
    assert isinstance(result, LaneResult) and world.version() == before
