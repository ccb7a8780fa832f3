"""The Git actor (actors/git.py), one decision at a time, on real repositories and a real SQLite store:
the messages it commits with, which events it reacts to, a component's own branch (its lane) started at
the module's tip, merges (a fast-forward, a merge commit of both, a conflict that moves nothing), the
guard on a lane, sync and retire; a branch moved between runs (brought forward to a recorded merge,
followed, or put back) and how often a refused record is tried again.

No sleeps: an ask made after an event was published is answered after the actor handled that event.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.git import GitActor, _reacts_to, commit_message, merge_message
from events import catalogue as ev
from events.fold import TaskNode
from events.journal import Journal
from lopen.git import Worktree
from lopen.git.worktree import deleted
from lopen.project import ensure_lopen_dir, open_store

MODULE = "auth"
SIGN = ev.TaskSpec(id="core/1", name="Sign tokens")
SERVE = ev.TaskSpec(id="api/1", name="Serve tokens")
BRANCH = f"lopen/{MODULE}"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


class World:
    """A repository with a module of two components (core, api), each with one task."""

    def __init__(self, root: Path) -> None:
        self.root = root
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.name", "Test")
        git(root, "config", "user.email", "test@example.com")
        write(root / "app.py", "print('v1')\n")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "initial")
        self.base = git(root, "rev-parse", "HEAD")
        ensure_lopen_dir(root)
        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, MODULE)
        self.session = self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.journal.record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"), ev.ComponentSpec(name="api"))),
            ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="core/1", name="Sign tokens"),)),
            ev.TasksRecorded(component="api", tasks=(ev.TaskSpec(id="api/1", name="Serve tokens"),)),
        )
        self.worktree = Worktree(root, root / ".lopen" / "worktrees" / MODULE, BRANCH)
        self.refs: list[pykka.ActorRef] = []

    def lane_worktree(self, component: str) -> Worktree:
        return Worktree(
            self.root, self.root / ".lopen" / "worktrees" / f"{MODULE}.components" / component, f"{BRANCH}--{component}"
        )

    def start(self, worktree: Worktree | None = None, **kwargs: object) -> pykka.ActorProxy:
        ref = GitActor.start(self.journal, worktree or self.worktree, self.store, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def complete(self, task_id: str, tree: str) -> None:
        self.journal.record(
            ev.TaskStatusChanged(task_id=task_id, from_state="pending", to_state="in-progress"),
            ev.TaskStatusChanged(task_id=task_id, from_state="in-progress", to_state="complete", tree=tree),
        )

    def events(self, kind: type[ev.Event]) -> list:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kind)]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        for ref in w.refs:
            ref.stop()
        w.store.close()


@pytest.fixture
def module(world: World) -> pykka.ActorProxy:
    actor = world.start()
    actor.ensure().get()
    return actor


def lane(world: World, component: str) -> tuple[pykka.ActorProxy, Worktree]:
    worktree = world.lane_worktree(component)
    actor = world.start(worktree, lane=component)
    assert actor.ensure().get() == worktree.branch
    return actor, worktree


def build(world: World, actor: pykka.ActorProxy, worktree: Worktree, task: str, files: dict[str, str]) -> str:
    """The model writes ``files`` in the lane, the task is completed on their tree; returns the lane's tip."""
    for name, text in files.items():
        write(worktree.path / name, text)
    tree = worktree.tree()
    world.complete(task, tree)
    tip = actor.tip().get()
    component = task.split("/")[0]
    world.journal.record(ev.OracleVerdictRecorded(scope="component", target=component, passed=True, tree=tree))
    return tip


# -- messages and reactions ------------------------------------------------------------------------


def test_the_commit_and_merge_messages_name_the_work_and_the_session():
    task = TaskNode(id="core/1", name="Sign tokens", component="core")
    assert commit_message("auth", task, "s-1") == (
        "feat(auth): Sign tokens in core\n\nLopen-Task: core/1\nLopen-Session: s-1\n"
    )
    assert commit_message("auth", task, "").endswith("Lopen-Session: -\n")
    assert merge_message("auth", "core", "s-1") == (
        "merge(auth): component core\n\nLopen-Merge: core\nLopen-Session: s-1\n"
    )
    assert merge_message("auth", "core", "").endswith("Lopen-Session: -\n")


def test_a_lanes_actor_reacts_only_to_its_components_completions_and_never_to_a_spec_change():
    done = ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete", tree="t")
    started = ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress")
    drift = ev.SpecDriftDetected()
    assert _reacts_to(done) and _reacts_to(done, "core")
    assert not _reacts_to(done, "api") and not _reacts_to(done, "cor")
    assert not _reacts_to(started) and not _reacts_to(started, "core")
    assert _reacts_to(drift) and not _reacts_to(drift, "core")


# -- lanes -----------------------------------------------------------------------------------------


def test_a_lane_starts_at_the_module_tip_on_its_own_branch(world, module):
    actor, worktree = lane(world, "core")
    assert worktree.tip() == module.tip().get() == world.base
    ensured = [e for e in world.events(ev.BranchEnsured) if e.component == "core"]
    assert [(e.branch, e.created, e.base, e.worktree) for e in ensured] == [
        (f"{BRANCH}--core", True, world.base, str(worktree.path))
    ]
    actor.ensure().get()  # again: nothing new recorded
    assert len([e for e in world.events(ev.BranchEnsured) if e.component == "core"]) == 1


def test_a_lanes_task_is_committed_on_the_lane_and_not_on_the_module_branch(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    assert tip != world.base and git(world.root, "rev-parse", f"{tip}^") == world.base
    assert module.tip().get() == world.base
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.task_id, commit.branch, commit.sha) == ("core/1", f"{BRANCH}--core", tip)


def test_a_lane_whose_branch_the_model_moved_is_put_back_by_the_guard(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    git(worktree.path, "reset", "-q", "--hard", world.base)
    assert actor.guard().get() == [f"{BRANCH}--core was moved to {world.base[:8]}"]
    assert worktree.tip() == tip


def test_a_lane_whose_branch_moved_outside_lopen_is_put_back_where_its_history_says(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    git(worktree.path, "reset", "-q", "--hard", world.base)
    actor.stop()
    again = world.start(worktree, lane="core")
    again.ensure().get()
    assert worktree.tip() == tip


def test_a_merge_onto_an_unmoved_module_branch_is_a_fast_forward_and_is_recorded(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    result = module.merge("core").get()
    assert (result.status, result.sha, result.fast_forward) == ("merged", tip, True)
    assert module.tip().get() == tip
    assert (world.worktree.path / "core.py").read_text() == "C = 1\n"  # the module's worktree followed
    (merged,) = world.events(ev.ComponentMerged)
    assert (merged.component, merged.sha, merged.parent, merged.component_tip, merged.fast_forward) == (
        "core",
        tip,
        world.base,
        tip,
        True,
    )
    assert merged.chain == ""  # a fast-forward makes no commit: no trailer for the chain to vouch for
    again = module.merge("core").get()  # already merged at that tip: nothing more
    assert (again.status, again.sha) == ("merged", tip)
    assert len(world.events(ev.ComponentMerged)) == 1


def test_a_merge_onto_a_moved_module_branch_is_a_merge_commit_of_both(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    core_tip = build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    api_tip = build(world, api, api_wt, "api/1", {"api.py": "A = 1\n"})
    assert module.merge("core").get().fast_forward
    result = module.merge("api").get()
    assert result.status == "merged" and not result.fast_forward
    sha = module.tip().get()
    assert sha == result.sha
    assert git(world.root, "rev-list", "--parents", "-n1", sha).split()[1:] == [core_tip, api_tip]
    assert git(world.root, "log", "-n1", "--format=%B", sha).startswith("merge(auth): component api")
    assert sorted(git(world.root, "ls-tree", "--name-only", sha).split()) == ["api.py", "app.py", "core.py"]
    assert (world.worktree.path / "api.py").is_file() and (world.worktree.path / "core.py").is_file()


def test_a_conflicting_merge_moves_nothing_and_names_the_files(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    build(world, core, core_wt, "core/1", {"app.py": "print('core')\n"})
    build(world, api, api_wt, "api/1", {"app.py": "print('api')\n"})
    into = module.merge("core").get().sha
    result = module.merge("api").get()
    assert (result.status, result.into, result.files) == ("conflict", into, ("app.py",))
    assert "<<<<<<<" in git(world.root, "cat-file", "blob", f"{result.tree}:app.py")
    assert module.tip().get() == into
    assert len(world.events(ev.ComponentMerged)) == 1


def test_a_retired_lane_loses_its_worktree_but_keeps_its_branch(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    left = worktree.path.with_name(f".{worktree.path.name}.removed-1-2")  # a killed run's, moved aside
    (left / "deep").mkdir(parents=True)
    actor.retire().get()
    assert not worktree.path.exists()
    assert str(worktree.path) not in git(world.root, "worktree", "list")  # git forgot it at once
    assert git(world.root, "rev-parse", worktree.branch) == tip
    assert deleted(timeout=60)  # the files go in the background, the killed run's leftover with them
    assert not [p.name for p in worktree.path.parent.iterdir() if p.name.startswith(f".{worktree.path.name}.")]
    module.retire().get()  # the module's own worktree is never retired
    assert world.worktree.path.is_dir()


# -- the module branch -------------------------------------------------------------------------------


def test_sync_brings_the_module_branch_to_the_recorded_merge(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    module.merge("core").get()
    git(world.root, "update-ref", f"refs/heads/{BRANCH}", world.base)  # e.g. another clone's, behind
    assert module.sync().get() == tip
    assert module.tip().get() == tip
    assert (world.worktree.path / "core.py").is_file()


def test_sync_without_a_move_changes_nothing(world, module):
    assert module.sync().get() == world.base
    assert module.tip().get() == world.base


def test_reset_to_tip_and_leftovers(world, module):
    write(world.worktree.path / "stray.py", "x\n")
    assert module.leftovers().get() == ["stray.py"]
    module.reset_to_tip().get()
    assert module.leftovers().get() == []
    assert not (world.worktree.path / "stray.py").exists()


# -- the guard's report ------------------------------------------------------------------------------


def test_everything_the_model_moved_is_put_back_and_told_in_one_instruction(world, module):
    git(world.worktree.path, "checkout", "-q", "-b", "elsewhere")
    write(world.worktree.path / "a.py", "A = 1\n")
    git(world.worktree.path, "add", "-A")
    git(world.worktree.path, "commit", "-q", "-m", "on another branch")
    git(world.root, "update-ref", "-d", f"refs/heads/{BRANCH}")  # and the module branch deleted
    wrong = module.guard().get()
    assert wrong == ["HEAD was moved to refs/heads/elsewhere", f"{BRANCH} was moved to nothing"]
    assert module.tip().get() == world.base
    (tripped,) = world.events(ev.GuardrailTripped)
    assert tripped.detail == f"HEAD was moved to refs/heads/elsewhere; {BRANCH} was moved to nothing — put back"
    (note,) = world.events(ev.CorrectiveInstructionIssued)
    assert note.instruction == (
        "Do not change branches, commit, reset or check out in git: Lopen commits verified work on "
        f"{BRANCH} itself. In the last invocation HEAD was moved to refs/heads/elsewhere; {BRANCH} was moved to "
        "nothing, and Lopen put it back."
    )


def test_a_merge_commit_names_the_session(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    build(world, api, api_wt, "api/1", {"api.py": "A = 1\n"})
    module.merge("core").get()
    sha = module.merge("api").get().sha
    body = git(world.root, "log", "-n1", "--format=%B", sha).strip().splitlines()
    merged = [e for e in world.events(ev.ComponentMerged) if e.sha == sha]
    assert body[-2:] == [f"Lopen-Session: {world.session}", f"Lopen-Chain: {merged[0].chain}"]
    version, digest = merged[0].chain.split()
    assert int(version) > 0 and len(digest) == 64  # the module stream's head when the merge commit was made


def test_a_lane_loads_a_tree_and_starts_afresh_where_asked(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    write(worktree.path / "core.py", "<<<<<<< conflict\n")
    tree = worktree.tree()
    actor.reset_to_tip().get()
    actor.load(tree).get()
    assert (worktree.path / "core.py").read_text() == "<<<<<<< conflict\n" and actor.tip().get() == tip
    actor.restart_at(world.base).get()
    assert actor.tip().get() == world.base and not (worktree.path / "core.py").exists()


# -- a lane started again, made again, or moved by the model ------------------------------------------


def test_a_merged_component_given_work_again_restarts_its_lane_at_the_module_tip(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    core_tip = build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    build(world, api, api_wt, "api/1", {"api.py": "A = 1\n"})
    module.merge("core").get()
    into = module.merge("api").get().sha  # a merge commit: neither lane's tip
    world.journal.record(ev.TasksRecorded(component="core", tasks=(SIGN, ev.TaskSpec(id="core/2", name="Fix"))))
    core.stop()
    again = world.start(core_wt, lane="core")
    again.ensure().get()
    assert core_wt.tip() == into != core_tip  # the module as the reviewer judged it, not the lane's old tip
    assert (core_wt.path / "api.py").is_file()
    restarted = [e for e in world.events(ev.BranchEnsured) if e.component == "core"][-1]
    assert (restarted.created, restarted.base, restarted.worktree) == (True, into, str(core_wt.path))
    state = world.journal.snapshot()
    assert (state.lanes["core"].base, state.lanes["core"].tip) == (into, into)


def test_a_merged_and_done_component_keeps_its_lane_where_it_is(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    core_tip = build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    build(world, api, api_wt, "api/1", {"api.py": "A = 1\n"})
    module.merge("core").get()
    module.merge("api").get()
    core.stop()
    again = world.start(core_wt, lane="core")
    again.ensure().get()
    assert core_wt.tip() == core_tip
    assert len([e for e in world.events(ev.BranchEnsured) if e.component == "core"]) == 1
    assert "lopen: branch restored" not in git(world.root, "log", "-g", "--format=%gs", core_wt.branch)


def test_a_lane_branch_left_by_an_unrecorded_attempt_starts_at_the_module_tip(world, module):
    stale = world.lane_worktree("core")
    git(world.root, "branch", stale.branch, world.base)
    stale.ensure()
    write(stale.path / "half.py", "H = 1\n")
    git(stale.path, "add", "-A")
    git(stale.path, "commit", "-q", "-m", "an attempt never recorded")
    _actor, worktree = lane(world, "core")
    assert worktree.tip() == world.base
    assert not (worktree.path / "half.py").exists()
    (ensured,) = [e for e in world.events(ev.BranchEnsured) if e.component == "core"]
    assert (ensured.created, ensured.base) == (True, world.base)


def test_a_lane_whose_branch_and_worktree_are_gone_is_made_again_at_its_recorded_tip(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    actor.stop()
    git(world.root, "worktree", "remove", "--force", str(worktree.path))
    git(world.root, "branch", "-D", worktree.branch)
    elsewhere = Worktree(world.root, world.root / ".lopen" / "worktrees" / "elsewhere-core", worktree.branch)
    again = world.start(elsewhere, lane="core")
    assert again.ensure().get() == worktree.branch
    assert elsewhere.tip() == tip
    assert (elsewhere.path / "core.py").read_text() == "C = 1\n"
    ensured = [e for e in world.events(ev.BranchEnsured) if e.component == "core"]
    assert [(e.created, e.base, e.worktree) for e in ensured] == [
        (True, world.base, str(worktree.path)),
        (False, world.base, str(elsewhere.path)),  # the new folder recorded; the lane not started afresh
    ]
    state = world.journal.snapshot()
    assert (state.lanes["core"].tip, state.lanes["core"].worktree) == (tip, str(elsewhere.path))


def test_a_lane_commit_made_but_not_recorded_is_found_and_recorded_not_put_back(world, module):
    actor, worktree = lane(world, "core")
    actor.stop()
    write(worktree.path / "core.py", "C = 1\n")
    tree = worktree.tree()
    message = "feat(auth): Sign tokens in core\n\nmade by a run killed before recording it\nLopen-Task: core/1\n"
    made = worktree.commit(tree, world.base, message)
    world.complete("core/1", tree)  # no actor listening: owed
    again = world.start(worktree, lane="core")
    again.ensure().get()
    assert worktree.tip() == made
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.sha, commit.task_id, commit.parent, commit.branch) == (made, "core/1", world.base, worktree.branch)
    assert world.events(ev.GuardrailTripped) == []


def test_a_lane_branch_the_model_moved_before_the_commit_is_put_back_and_the_model_told(world, module):
    actor, worktree = lane(world, "core")
    write(worktree.path / "core.py", "C = 1\n")
    tree = worktree.tree()
    git(worktree.path, "add", "-A")
    git(worktree.path, "commit", "-q", "-m", "the model's own commit")
    moved = git(worktree.path, "rev-parse", "HEAD")
    world.complete("core/1", tree)
    tip = actor.tip().get()
    assert tip != moved and git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [world.base]
    assert git(world.root, "rev-parse", f"{tip}^{{tree}}") == tree
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.sha, commit.parent, commit.branch) == (tip, world.base, worktree.branch)
    (tripped,) = world.events(ev.GuardrailTripped)
    assert tripped.detail == f"{worktree.branch} was moved to {moved[:8]} — put back"
    (note,) = world.events(ev.CorrectiveInstructionIssued)
    assert f"on {worktree.branch} itself" in note.instruction


def test_a_resolution_tasks_commit_merges_the_module_tip_in(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    build(world, core, core_wt, "core/1", {"app.py": "print('core')\n"})
    api_tip = build(world, api, api_wt, "api/1", {"app.py": "print('api')\n"})
    into = module.merge("core").get().sha
    conflict = module.merge("api").get()
    world.journal.record(
        ev.TasksRecorded(component="api", tasks=(SERVE, ev.TaskSpec(id="api/2", name="Resolve"))),
        ev.ComponentMergeConflicted(component="api", into=into, files=conflict.files, task_id="api/2"),
    )
    write(api_wt.path / "app.py", "print('both')\n")
    world.complete("api/2", api_wt.tree())
    tip = api.tip().get()
    assert git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [api_tip, into]
    commit = world.events(ev.CommitRecorded)[-1]
    assert (commit.task_id, commit.merge_parent) == ("api/2", into)
    assert world.journal.snapshot().lanes["api"].resolving == ""
    world.journal.record(ev.OracleVerdictRecorded(scope="component", target="api", passed=True, tree=api_wt.tree()))
    result = module.merge("api").get()
    assert (result.status, result.sha, result.fast_forward) == ("merged", tip, True)


@pytest.mark.parametrize("restarted", [True, False])
def test_more_work_on_a_merged_lane_is_merged_again(world, module, restarted):
    actor, worktree = lane(world, "core")
    first = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    assert module.merge("core").get().sha == first
    world.journal.record(ev.TasksRecorded(component="core", tasks=(SIGN, ev.TaskSpec(id="core/2", name="Fix"))))
    if restarted:
        actor.ensure().get()  # the lane starts again at the module's tip (the merge)
    second = build(world, actor, worktree, "core/2", {"core.py": "C = 2\n"})
    assert second != first
    result = module.merge("core").get()
    assert (result.status, result.sha) == ("merged", second)
    assert module.tip().get() == second
    assert (world.worktree.path / "core.py").read_text() == "C = 2\n"
    assert [e.sha for e in world.events(ev.ComponentMerged)] == [first, second]
    last = world.events(ev.ComponentMerged)[-1]
    assert (last.tree, last.branch) == (git(world.root, "rev-parse", f"{second}^{{tree}}"), BRANCH)


def test_a_merge_the_history_keeps_refusing_gives_up_and_says_why(world, module):
    from lopen.git import GitError

    _actor, worktree = lane(world, "core")
    write(worktree.path / "core.py", "C = 1\n")
    world.complete("core/1", worktree.tree())  # committed, never verified: every merge is refused
    with pytest.raises(GitError) as refused:
        module.merge("core").get()
    assert (refused.value.what, refused.value.why, refused.value.how) == (
        "could not merge component core onto lopen/auth",
        "other merges kept coming first",
        "run the module again: the merge is tried again",
    )
    assert module.tip().get() == world.base and world.events(ev.ComponentMerged) == []


def test_a_spec_approved_while_the_local_branch_is_behind_goes_on_top_of_the_history(world, module):
    spec = world.root / "docs" / "spec.md"
    write(spec, "# v1\n")
    actor = world.start(spec=(world.root, "docs/spec.md"))
    actor.ensure().get()
    adopted = actor.tip().get()
    core, core_wt = lane(world, "core")
    merged = build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    assert actor.merge("core").get().sha == merged
    git(world.root, "update-ref", f"refs/heads/{BRANCH}", adopted)  # the local branch behind the history
    write(spec, "# v2\n")
    world.journal.record(ev.SpecDriftDetected())
    tip = actor.tip().get()
    assert git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [merged]  # the merge kept
    assert git(world.root, "show", f"{tip}:docs/spec.md") == "# v2"
    assert (world.worktree.path / "core.py").read_text() == "C = 1\n"  # the worktree followed
    assert (world.worktree.path / "docs" / "spec.md").read_text() == "# v2\n"
    assert world.journal.snapshot().tip == tip
    adopted_v2 = world.events(ev.CommitRecorded)[-1]
    assert (adopted_v2.sha, adopted_v2.parent, adopted_v2.branch) == (tip, merged, BRANCH)
    assert adopted_v2.tree == git(world.root, "rev-parse", f"{tip}^{{tree}}")


def test_a_component_another_machine_built_is_fetched_from_the_remote_and_merged(world, tmp_path_factory, monkeypatch):
    monkeypatch.setattr("actors.git.FETCH_WAIT_SECONDS", 1.0)  # a wrong fetch fails fast
    bare = tmp_path_factory.mktemp("remote") / "origin.git"
    git(world.root, "init", "-q", "--bare", str(bare))
    module = world.start(remote=str(bare))
    module.ensure().get()
    other = tmp_path_factory.mktemp("machine-2") / "clone"
    git(world.root, "clone", "-q", "-b", BRANCH, str(bare), str(other))
    git(other, "config", "user.name", "Other")
    git(other, "config", "user.email", "other@example.com")
    branch = f"{BRANCH}--core"
    git(other, "checkout", "-q", "-b", branch)
    write(other / "core.py", "C = 1\n")
    git(other, "add", "core.py")
    git(other, "commit", "-q", "-m", "feat(auth): Sign tokens in core\n\nLopen-Task: core/1\n")
    git(other, "push", "-q", "origin", branch)
    tip, tree = git(other, "rev-parse", "HEAD"), git(other, "rev-parse", "HEAD^{tree}")
    assert subprocess.run(["git", "cat-file", "-e", tip], cwd=world.root).returncode != 0  # not here yet
    world.journal.record(
        ev.BranchEnsured(branch=branch, created=True, base=world.base, worktree=str(other), component="core"),
        ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress"),
        ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete", tree=tree),
        ev.CommitRecorded(sha=tip, message="feat", task_id="core/1", tree=tree, parent=world.base, branch=branch),
        ev.OracleVerdictRecorded(scope="component", target="core", passed=True, tree=tree),
    )
    result = module.merge("core").get()
    assert (result.status, result.sha, result.fast_forward) == ("merged", tip, True)
    assert module.tip().get() == tip and git(bare, "rev-parse", BRANCH) == tip  # moved and published
    assert (world.worktree.path / "core.py").read_text() == "C = 1\n"


# -- another machine's work, on the remote ---------------------------------------------------------------


def other_machine(world: World, tmp_path_factory, monkeypatch, branch: str = BRANCH) -> tuple[Path, Path]:
    """A bare remote and a second clone of it (another machine sharing the event store), whose commits this
    clone lacks until it fetches them; a wrong fetch fails within a second."""
    monkeypatch.setattr("actors.git.FETCH_WAIT_SECONDS", 1.0)
    bare = tmp_path_factory.mktemp("remote") / "origin.git"
    git(world.root, "init", "-q", "--bare", str(bare))
    git(world.root, "push", "-q", str(bare), f"HEAD:refs/heads/{branch}")
    other = tmp_path_factory.mktemp("machine-2") / "clone"
    git(world.root, "clone", "-q", "-b", branch, str(bare), str(other))
    git(other, "config", "user.name", "Other")
    git(other, "config", "user.email", "other@example.com")
    return bare, other


def commit_there(other: Path, branch: str, name: str, text: str) -> tuple[str, str]:
    git(other, "checkout", "-q", "-B", branch)
    write(other / name, text)
    git(other, "add", name)
    git(other, "commit", "-q", "-m", f"{name}\n\nLopen-Task: {name}\n")
    git(other, "push", "-q", "-f", "origin", branch)
    return git(other, "rev-parse", "HEAD"), git(other, "rev-parse", "HEAD^{tree}")


def lacks(world: World, sha: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", sha], cwd=world.root).returncode != 0


def test_a_lane_another_machine_built_is_made_here_from_its_own_branch_on_the_remote(
    world, tmp_path_factory, monkeypatch
):
    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    branch = f"{BRANCH}--core"
    tip, tree = commit_there(other, branch, "core.py", "C = 1\n")
    assert lacks(world, tip)
    world.journal.record(
        ev.BranchEnsured(branch=branch, created=True, base=world.base, worktree=str(other), component="core"),
        ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress"),
        ev.TaskStatusChanged(task_id="core/1", from_state="in-progress", to_state="complete", tree=tree),
        ev.CommitRecorded(sha=tip, message="feat", task_id="core/1", tree=tree, parent=world.base, branch=branch),
    )
    worktree = world.lane_worktree("core")
    actor = world.start(worktree, lane="core", remote=str(bare))
    assert actor.ensure().get() == branch
    assert worktree.tip() == tip and (worktree.path / "core.py").read_text() == "C = 1\n"


def test_a_module_tip_only_on_the_remote_is_fetched_by_the_branch_the_history_names(
    world, tmp_path_factory, monkeypatch
):
    """The module branch here is ``team/auth`` (as recorded), not ``lopen/auth``: the fetches name it."""
    branch = "team/auth"
    bare, other = other_machine(world, tmp_path_factory, monkeypatch, branch)
    module_wt = Worktree(world.root, world.root / ".lopen" / "worktrees" / MODULE, branch)
    module = world.start(module_wt, remote=str(bare))
    module.ensure().get()
    core, core_wt = lane(world, "core")
    core_tip = build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    git(other, "fetch", "-q", "origin")
    into, tree = commit_there(other, branch, "other.py", "O = 1\n")  # another machine's work on the module
    assert lacks(world, into)
    world.journal.record(ev.CommitRecorded(sha=into, message="o", tree=tree, parent=world.base, branch=branch))
    result = module.merge("core").get()  # onto the module's tip, fetched first
    assert result.status == "merged" and not result.fast_forward
    assert git(world.root, "rev-list", "--parents", "-n1", result.sha).split()[1:] == [into, core_tip]
    assert git(bare, "rev-parse", branch) == result.sha


def test_a_merge_leaves_a_module_branch_a_person_moved_elsewhere_alone(world, module):
    actor, worktree = lane(world, "core")
    build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    write(world.worktree.path / "mine.py", "M = 1\n")
    git(world.worktree.path, "add", "mine.py")
    git(world.worktree.path, "commit", "-q", "-m", "a person's own commit")
    mine = git(world.worktree.path, "rev-parse", "HEAD")
    assert module.merge("core").get().status == "merged"  # recorded on Lopen's history
    assert git(world.root, "rev-parse", BRANCH) == mine  # the person's commit is not thrown off the branch
    assert (world.worktree.path / "mine.py").is_file()


def test_a_merge_onto_a_module_branch_left_behind_brings_the_worktree_to_the_merge(world, module):
    core, core_wt = lane(world, "core")
    api, api_wt = lane(world, "api")
    build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    build(world, api, api_wt, "api/1", {"api.py": "A = 1\n"})
    module.merge("core").get()
    git(world.root, "update-ref", f"refs/heads/{BRANCH}", world.base)  # behind: e.g. another clone's
    git(world.worktree.path, "reset", "-q", "--hard", world.base)
    sha = module.merge("api").get().sha
    assert module.tip().get() == sha
    assert (world.worktree.path / "core.py").is_file() and (world.worktree.path / "api.py").is_file()
    assert module.leftovers().get() == []


def test_a_lane_starts_at_a_module_tip_only_on_the_remote_fetched_by_the_branch_the_history_names(
    world, tmp_path_factory, monkeypatch
):
    branch = "team/auth"
    bare, other = other_machine(world, tmp_path_factory, monkeypatch, branch)
    module_wt = Worktree(world.root, world.root / ".lopen" / "worktrees" / MODULE, branch)
    world.start(module_wt, remote=str(bare)).ensure().get()
    into, tree = commit_there(other, branch, "other.py", "O = 1\n")
    assert lacks(world, into)
    world.journal.record(ev.CommitRecorded(sha=into, message="o", tree=tree, parent=world.base, branch=branch))
    api_wt = world.lane_worktree("api")
    world.start(api_wt, lane="api", remote=str(bare)).ensure().get()
    assert api_wt.tip() == into and (api_wt.path / "other.py").is_file()


def test_sync_before_the_branch_was_recorded_leaves_a_branch_of_that_name_alone(world):
    git(world.root, "branch", BRANCH, world.base)
    actor = world.start()
    assert actor.sync().get() == ""
    assert git(world.root, "rev-parse", BRANCH) == world.base


# -- the module branch: made again, moved, told -------------------------------------------------------


def test_another_modules_spec_change_never_commits_this_modules_unapproved_spec(world):
    spec = world.root / "docs" / "spec.md"
    write(spec, "# approved\n")
    actor = world.start(spec=(world.root, "docs/spec.md"))
    actor.ensure().get()
    tip = actor.tip().get()
    write(spec, "# edited, not approved\n")
    other = Journal(world.store, world.project, "billing")
    other.open_session(ev.SessionStarted(lopen_version="test"))
    other.record(ev.SpecDriftDetected())
    world.journal.record(ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress"))
    assert actor.tip().get() == tip
    assert git(world.root, "show", f"{tip}:docs/spec.md") == "# approved"


def test_a_module_branch_the_model_deleted_before_the_commit_is_put_back_and_told(world, module):
    write(world.worktree.path / "a.py", "A = 1\n")
    tree = world.worktree.tree()
    git(world.root, "update-ref", "-d", f"refs/heads/{BRANCH}")
    world.journal.record(
        ev.TaskStatusChanged(task_id="core/1", from_state="pending", to_state="in-progress"),
        ev.TaskStatusChanged(
            task_id="core/1", from_state="in-progress", to_state="complete", tree=tree, invocation_id="inv-7"
        ),
    )
    tip = module.tip().get()
    assert git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [world.base]
    (tripped,) = world.events(ev.GuardrailTripped)
    assert tripped.detail == f"{BRANCH} was moved to nothing — put back"
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.message, commit.invocation_id, commit.merge_parent) == (
        "feat(auth): Sign tokens in core",
        "inv-7",
        "",
    )


def test_a_module_branch_and_worktree_gone_are_made_again_where_the_history_says(world, module):
    write(world.worktree.path / "a.py", "A = 1\n")
    world.complete("core/1", world.worktree.tree())
    tip = module.tip().get()
    assert tip != world.base
    git(world.root, "worktree", "remove", "--force", str(world.worktree.path))
    git(world.root, "branch", "-D", BRANCH)
    moved = Worktree(world.root, world.root / ".lopen" / "worktrees" / "auth-moved", BRANCH)
    again = world.start(moved)
    again.ensure().get()
    assert moved.tip() == tip and (moved.path / "a.py").read_text() == "A = 1\n"
    assert world.events(ev.Reverted) == [] and world.events(ev.TaskReopened) == []
    assert world.journal.snapshot().worktree == str(moved.path)


def test_a_fresh_clone_makes_the_module_branch_from_the_remote_where_the_history_says(
    world, tmp_path_factory, monkeypatch
):
    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    tip, tree = commit_there(other, BRANCH, "a.py", "A = 1\n")
    assert lacks(world, tip)
    world.journal.record(
        ev.BranchEnsured(branch=BRANCH, created=True, base=world.base, worktree=str(other)),
        ev.CommitRecorded(sha=tip, message="a", tree=tree, parent=world.base, branch=BRANCH),
    )
    actor = world.start(remote=str(bare))
    actor.ensure().get()
    assert world.worktree.tip() == tip and (world.worktree.path / "a.py").read_text() == "A = 1\n"
    assert world.events(ev.Reverted) == []


def test_a_module_worktree_made_in_a_new_folder_is_recorded_there(world, module):
    git(world.root, "worktree", "remove", "--force", str(world.worktree.path))  # the branch stays
    moved = Worktree(world.root, world.root / ".lopen" / "worktrees" / "auth-moved", BRANCH)
    world.start(moved).ensure().get()
    assert moved.tip() == world.base
    last = world.events(ev.BranchEnsured)[-1]
    assert (last.created, last.worktree, last.base) == (False, str(moved.path), world.base)
    assert world.journal.snapshot().worktree == str(moved.path)


def test_a_merge_that_meets_another_workers_commit_is_merged_again_on_top_of_it(world, module, monkeypatch):
    """Another worker records work on the module branch while this merge is computed: the merge's record
    is refused, and it is computed again on that work, which it keeps."""
    import actors.git as git_actor

    actor, worktree = lane(world, "core")
    core_tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    other = Journal(world.store, world.project, MODULE)  # another worker, on the same history
    write(world.root / "theirs.txt", "T\n")
    git(world.root, "add", "theirs.txt")
    tree = git(world.root, "write-tree")
    git(world.root, "reset", "-q")
    theirs = git(world.root, "commit-tree", tree, "-p", world.base, "-m", "their work")
    real = git_actor.is_ancestor
    calls: list[int] = []

    def meanwhile(*args: object) -> bool:
        if not calls:
            other.refresh()
            other.record(ev.CommitRecorded(sha=theirs, message="t", tree=tree, parent=world.base, branch=BRANCH))
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(git_actor, "is_ancestor", meanwhile)
    result = module.merge("core").get()
    assert result.status == "merged" and not result.fast_forward
    assert git(world.root, "rev-list", "--parents", "-n1", result.sha).split()[1:] == [theirs, core_tip]
    assert [e.parent for e in world.events(ev.ComponentMerged)] == [theirs]
    assert module.tip().get() == result.sha


def test_a_spec_adopted_while_another_worker_commits_goes_on_top_of_that_commit(world, monkeypatch):
    """The spec's commit is made, then its record is refused (another worker's commit came first): it is
    made again on that commit, and the branch ends where the history says."""
    spec = world.root / "docs" / "spec.md"
    write(spec, "# v1\n")
    actor = world.start(spec=(world.root, "docs/spec.md"))
    actor.ensure().get()
    adopted = actor.tip().get()
    other = Journal(world.store, world.project, MODULE)
    theirs = world.worktree.commit(world.worktree.tree_of(adopted), adopted, "their work")
    world.worktree.move_branch(adopted)  # made on the other worker's clone: not on this branch yet
    real = Worktree.tree_of
    calls: list[int] = []

    def meanwhile(self: Worktree, commit: str) -> str:
        if not calls:
            other.refresh()
            other.record(
                ev.CommitRecorded(sha=theirs, message="t", tree=real(self, theirs), parent=adopted, branch=BRANCH)
            )
        calls.append(1)
        return real(self, commit)

    monkeypatch.setattr(Worktree, "tree_of", meanwhile)
    write(spec, "# v2\n")
    world.journal.record(ev.SpecDriftDetected())
    tip = actor.tip().get()
    assert git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [theirs]
    assert git(world.root, "show", f"{tip}:docs/spec.md") == "# v2"
    assert (world.worktree.path / "docs" / "spec.md").read_text() == "# v2\n" and actor.leftovers().get() == []
    world.journal.refresh()
    assert world.journal.snapshot().tip == tip


def test_a_spec_change_never_throws_a_persons_commit_off_the_module_branch(world):
    spec = world.root / "docs" / "spec.md"
    write(spec, "# v1\n")
    actor = world.start(spec=(world.root, "docs/spec.md"))
    actor.ensure().get()
    write(world.worktree.path / "mine.py", "M = 1\n")
    git(world.worktree.path, "add", "mine.py")
    git(world.worktree.path, "commit", "-q", "-m", "a person's own commit")
    mine = git(world.worktree.path, "rev-parse", "HEAD")
    write(spec, "# v2\n")
    world.journal.record(ev.SpecDriftDetected())
    actor.tip().get()
    assert git(world.root, "rev-parse", BRANCH) == mine


def test_a_spec_change_after_another_machines_commit_goes_on_it_fetched(world, tmp_path_factory, monkeypatch):
    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    spec = world.root / "docs" / "spec.md"
    write(spec, "# v1\n")
    actor = world.start(spec=(world.root, "docs/spec.md"), remote=str(bare))
    actor.ensure().get()
    adopted = actor.tip().get()
    git(other, "pull", "-q", "origin", BRANCH)
    theirs, tree = commit_there(other, BRANCH, "theirs.py", "T = 1\n")
    assert lacks(world, theirs)
    world.journal.record(ev.CommitRecorded(sha=theirs, message="t", tree=tree, parent=adopted, branch=BRANCH))
    write(spec, "# v2\n")
    world.journal.record(ev.SpecDriftDetected())
    tip = actor.tip().get()
    assert git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [theirs]
    assert git(world.root, "show", f"{tip}:docs/spec.md") == "# v2"
    assert git(bare, "rev-parse", BRANCH) == tip


def test_a_lane_started_afresh_at_another_machines_commit_fetches_it_first(world, tmp_path_factory, monkeypatch):
    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    world.start(remote=str(bare)).ensure().get()
    worktree = world.lane_worktree("core")
    actor = world.start(worktree, lane="core", remote=str(bare))
    actor.ensure().get()
    theirs, _tree = commit_there(other, BRANCH, "theirs.py", "T = 1\n")
    assert lacks(world, theirs)
    actor.restart_at(theirs).get()
    assert worktree.tip() == theirs and (worktree.path / "theirs.py").is_file()
    assert git(bare, "rev-parse", worktree.branch) == theirs  # published


def test_a_module_branch_a_person_reset_is_followed_and_the_lost_tasks_reopened(world, module):
    write(world.worktree.path / "a.py", "A = 1\n")
    world.complete("core/1", world.worktree.tree())
    committed = module.tip().get()
    git(world.root, "update-ref", f"refs/heads/{BRANCH}", world.base)  # a person's reset, between runs
    world.start().ensure().get()
    (reverted,) = world.events(ev.Reverted)
    assert (reverted.from_sha, reverted.to_sha) == (committed, world.base)
    assert [e.task_id for e in world.events(ev.TaskReopened)] == ["core/1"]
    assert world.journal.snapshot().tip == world.base


def test_a_lane_with_work_after_its_merge_keeps_that_work_when_made_again(world, module):
    actor, worktree = lane(world, "core")
    first = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    module.merge("core").get()
    world.journal.record(ev.TasksRecorded(component="core", tasks=(SIGN, ev.TaskSpec(id="core/2", name="Fix"))))
    second = build(world, actor, worktree, "core/2", {"core.py": "C = 2\n"})  # on the lane, not merged yet
    assert second != first
    actor.stop()
    world.start(worktree, lane="core").ensure().get()  # the next run
    assert worktree.tip() == second and (worktree.path / "core.py").read_text() == "C = 2\n"


# -- a branch moved between runs: brought forward to the history, or followed, or put back -----------------


def test_a_recorded_merge_the_module_branch_has_not_followed_is_brought_forward_on_the_next_run(world, module):
    """A run killed after it recorded a merge, before it moved the branch: the next run moves it (and the
    worktree's files) to the merge, and re-opens nothing."""
    write(world.worktree.path / "docs" / "requirements" / MODULE / "RESEARCH.md", "notes\n")
    before = module.commit_research().get()  # the module branch's own commit, on no branch of the person's
    actor, worktree = lane(world, "core")  # the only lane, started there
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    assert module.merge("core").get().sha == tip
    git(world.worktree.path, "reset", "-q", "--hard", before)  # the branch and files where the kill left them
    world.start().ensure().get()
    assert world.worktree.tip() == tip
    assert (world.worktree.path / "core.py").read_text() == "C = 1\n"
    assert world.worktree.dirty_files() == []
    assert world.events(ev.Reverted) == [] and world.events(ev.TaskReopened) == []
    assert world.journal.snapshot().tip == tip


def test_a_module_branch_a_person_reset_after_a_merge_is_followed_not_brought_back(world, module):
    """Lopen's history is past a merge (a commit on top of it); a person resets the branch to the merge:
    that is the person's move, followed, and the task whose commit is gone is re-opened."""
    actor, worktree = lane(world, "core")
    merged = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    assert module.merge("core").get().sha == merged
    world.journal.record(ev.TasksRecorded(component="api", tasks=(SERVE,)))
    write(world.worktree.path / "api.py", "A = 1\n")
    world.complete("api/1", world.worktree.tree())  # built on the module branch itself
    committed = module.tip().get()
    assert committed != merged
    git(world.worktree.path, "reset", "-q", "--hard", merged)  # a person's reset, between runs
    world.start().ensure().get()
    assert world.worktree.tip() == merged
    (reverted,) = world.events(ev.Reverted)
    assert (reverted.from_sha, reverted.to_sha) == (committed, merged)
    assert [e.task_id for e in world.events(ev.TaskReopened)] == ["api/1"]


def test_a_module_branch_another_machine_recorded_while_this_one_started_is_fetched_and_followed(
    world, tmp_path_factory, monkeypatch
):
    """Two machines start the module at once: the other's branch and commit are recorded between this one's
    first look at the history and its own record. The commit is fetched and the branch brought to it — the
    other machine's work is not taken for a person's reset."""
    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    theirs, tree = commit_there(other, BRANCH, "a.py", "A = 1\n")
    assert lacks(world, theirs)
    elsewhere = Journal(world.store, world.project, MODULE)
    real = Worktree.ensure
    calls: list[int] = []

    def meanwhile(self: Worktree, start_at: str = "") -> tuple[bool, str]:
        made = real(self, start_at)
        if not calls:
            calls.append(1)
            elsewhere.refresh()
            elsewhere.record(
                ev.BranchEnsured(branch=BRANCH, created=True, base=world.base, worktree=str(other)),
                ev.CommitRecorded(sha=theirs, message="a", tree=tree, parent=world.base, branch=BRANCH),
            )
        return made

    monkeypatch.setattr(Worktree, "ensure", meanwhile)
    world.start(remote=str(bare)).ensure().get()
    assert world.worktree.tip() == theirs and (world.worktree.path / "a.py").read_text() == "A = 1\n"
    assert world.events(ev.Reverted) == []
    assert world.journal.snapshot().tip == theirs


def test_a_persons_commit_on_the_module_branch_is_kept_when_a_task_done_again_is_owed(world, module):
    """core/1 was committed, re-opened and completed again on the same tree (its work was already there),
    then the run ended before the commit; a person committed on the branch meanwhile. The old commit of
    core/1 is not the one owed: the person's move is followed, not thrown off as the model's."""
    write(world.worktree.path / "a.py", "A = 1\n")
    tree = world.worktree.tree()
    world.complete("core/1", tree)
    first = module.tip().get()
    world.refs[0].stop()  # the run ends: nothing commits what follows
    world.journal.record(ev.TaskReopened(task_id="core/1", reason="done again"))
    world.complete("core/1", tree)
    write(world.worktree.path / "mine.py", "M = 1\n")
    git(world.worktree.path, "add", "mine.py")
    git(world.worktree.path, "commit", "-q", "-m", "a person's own commit")
    mine = git(world.worktree.path, "rev-parse", "HEAD")
    world.start().ensure().get()
    assert world.worktree.tip() == mine
    (reverted,) = world.events(ev.Reverted)
    assert (reverted.from_sha, reverted.to_sha) == (first, mine)
    assert world.events(ev.GuardrailTripped) == []


def test_a_task_done_again_on_the_same_tree_gets_a_commit_of_its_own(world, module):
    write(world.worktree.path / "a.py", "A = 1\n")
    tree = world.worktree.tree()
    world.complete("core/1", tree)
    first = module.tip().get()
    world.journal.record(ev.TaskReopened(task_id="core/1", reason="done again"))
    world.complete("core/1", tree)
    again = module.tip().get()
    assert again != first and git(world.root, "rev-parse", f"{again}^") == first
    last = world.events(ev.CommitRecorded)[-1]
    assert (last.sha, last.parent, last.task_id) == (again, first, "core/1")


def test_a_lane_moved_between_runs_is_put_back_silently_when_a_task_done_again_is_owed(world, module):
    """As above on a lane: its old commit of core/1 is not the owed one, so the lane is put back where its
    history says before the commit — and the model is not told it moved it."""
    actor, worktree = lane(world, "core")
    first = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    tree = worktree.tree()
    actor.stop()
    world.journal.record(ev.TaskReopened(task_id="core/1", reason="done again"))
    world.complete("core/1", tree)
    write(worktree.path / "stray.py", "S = 1\n")
    git(worktree.path, "add", "stray.py")
    git(worktree.path, "commit", "-q", "-m", "left on the lane")
    world.start(worktree, lane="core").ensure().get()
    tip = worktree.tip()
    assert git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [first]
    last = world.events(ev.CommitRecorded)[-1]
    assert (last.sha, last.parent, last.task_id) == (tip, first, "core/1")
    assert world.events(ev.GuardrailTripped) == []


def test_a_merged_lane_given_work_again_is_published_where_it_starts_afresh(world, tmp_path_factory, monkeypatch):
    """With a remote, the lane started afresh at the module's tip is pushed: another clone makes it there."""
    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    module = world.start(remote=str(bare))
    module.ensure().get()
    core_wt, api_wt = world.lane_worktree("core"), world.lane_worktree("api")
    core, api = world.start(core_wt, lane="core", remote=str(bare)), world.start(api_wt, lane="api", remote=str(bare))
    core.ensure().get()
    api.ensure().get()
    core_tip = build(world, core, core_wt, "core/1", {"core.py": "C = 1\n"})
    build(world, api, api_wt, "api/1", {"api.py": "A = 1\n"})
    module.merge("core").get()
    into = module.merge("api").get().sha
    assert git(bare, "rev-parse", core_wt.branch) == core_tip
    world.journal.record(ev.TasksRecorded(component="core", tasks=(SIGN, ev.TaskSpec(id="core/2", name="Fix"))))
    core.stop()
    world.start(core_wt, lane="core", remote=str(bare)).ensure().get()
    assert core_wt.tip() == into
    assert git(bare, "rev-parse", core_wt.branch) == into


def test_a_lane_starts_at_the_module_tip_while_the_persons_checkout_has_no_commit_yet(world, module):
    """The person switched their checkout to a new, empty branch: the lane still starts at the module's tip."""
    git(world.root, "checkout", "-q", "--orphan", "fresh")
    _actor, worktree = lane(world, "core")
    assert worktree.tip() == world.base
    assert (worktree.path / "app.py").read_text() == "print('v1')\n"


def test_the_reasons_of_a_followed_reset_name_the_branch(world, module):
    write(world.worktree.path / "a.py", "A = 1\n")
    world.complete("core/1", world.worktree.tree())
    assert module.tip().get() != world.base  # committed
    git(world.root, "update-ref", f"refs/heads/{BRANCH}", world.base)  # a person's reset, between runs
    world.start().ensure().get()
    (reverted,) = world.events(ev.Reverted)
    assert reverted.reason == f"{BRANCH} was moved outside Lopen"
    (reopened,) = world.events(ev.TaskReopened)
    assert (reopened.task_id, reopened.reason) == ("core/1", f"its work is no longer on {BRANCH}")


# -- tries, counted --------------------------------------------------------------------------------------


def refused_every(world: World, monkeypatch, kind: type[ev.Event]) -> list[int]:
    """Every record holding a ``kind`` is refused (as when other writers keep coming first); returns the
    list that counts the tries."""
    from events.journal import Contradiction

    tries: list[int] = []
    real = world.journal.record

    def record(*events: ev.Event, **kwargs: object) -> None:
        if any(isinstance(e, kind) for e in events):
            tries.append(1)
            raise Contradiction(events[0], "another writer came first")
        real(*events, **kwargs)

    monkeypatch.setattr(world.journal, "record", record)
    return tries


def test_a_merge_the_history_keeps_refusing_is_tried_twenty_times(world, module, monkeypatch):
    from lopen.git import GitError

    actor, worktree = lane(world, "core")
    build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    tries = refused_every(world, monkeypatch, ev.ComponentMerged)
    with pytest.raises(GitError):
        module.merge("core").get()
    assert len(tries) == 20
    assert module.tip().get() == world.base


def test_a_spec_whose_commit_the_history_keeps_refusing_is_tried_five_times_then_left(world, monkeypatch):
    spec = world.root / "docs" / "spec.md"
    write(spec, "# v1\n")
    actor = world.start(spec=(world.root, "docs/spec.md"))
    actor.ensure().get()
    adopted = actor.tip().get()
    tries = refused_every(world, monkeypatch, ev.CommitRecorded)
    write(spec, "# v2\n")
    actor.adopt_spec().get()
    assert len(tries) == 5
    assert actor.tip().get() == adopted  # each refused commit taken back: the branch is where the history says


def test_a_module_branch_made_before_lopen_is_built_on_where_it_is(world):
    """A person made ``lopen/auth`` (with work of theirs) before Lopen's first run: Lopen starts from
    that branch's tip — it records that as the base, and never reports it as moved outside Lopen."""
    git(world.root, "checkout", "-q", "-b", BRANCH)
    write(world.root / "theirs.py", "T = 1\n")
    git(world.root, "add", "theirs.py")
    git(world.root, "commit", "-q", "-m", "their start")
    theirs = git(world.root, "rev-parse", "HEAD")
    git(world.root, "checkout", "-q", "main")
    world.start().ensure().get()
    ensured = world.events(ev.BranchEnsured)
    assert [(e.created, e.base) for e in ensured] == [(False, theirs)]
    assert world.events(ev.Reverted) == []
    assert world.worktree.tip() == theirs and (world.worktree.path / "theirs.py").is_file()


def test_a_run_killed_between_a_task_commit_and_its_reset_leaves_a_worktree_whose_status_is_clean(world, module):
    """Issue 21 (low): SIGKILL right after a task commit — the branch holds the commit, the worktree's own
    index still the tree before it, so `git status` there showed the task's files as deleted and
    untracked. The next run's actor brings the index to the tip (the files are left as they are)."""
    write(world.worktree.path / "core.py", "C = 1\n")
    world.complete("core/1", world.worktree.tree())
    tip = module.settle().get()  # committed; the kill comes before reset_to_tip
    assert "Lopen-Task: core/1" in git(world.worktree.path, "log", "-1", "--format=%B")
    assert git(world.worktree.path, "status", "--porcelain") != ""  # what the person saw
    world.start().ensure().get()  # the next run
    assert git(world.worktree.path, "status", "--porcelain") == ""
    assert world.worktree.tip() == tip and (world.worktree.path / "core.py").read_text() == "C = 1\n"


# -- a commit another worker recorded: fetched from the remote, waiting for its push -------------------------


class Clock:
    """``actors.git``'s clock while it waits for a push: each pause advances the time at once (no sleep),
    and ``arrives`` runs after the pause of that number — another worker's push landing meanwhile."""

    def __init__(self, arrives: dict[int, object] | None = None) -> None:
        self.now = 0.0
        self.pauses: list[float] = []
        self.arrives = arrives or {}

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        assert len(self.pauses) <= 20, f"the wait never ends: {self.pauses}"  # pauses that shrink, say
        self.now += seconds
        landing = self.arrives.get(len(self.pauses))
        if callable(landing):
            landing()


def fetches(monkeypatch) -> list[tuple[str, str]]:
    """Every fetch the actor asks of git (remote, branch); git still runs each."""
    seen: list[tuple[str, str]] = []
    real = Worktree.fetch

    def fetch(self: Worktree, remote: str, branch: str = "") -> bool:
        seen.append((remote, branch))
        return real(self, remote, branch)

    monkeypatch.setattr(Worktree, "fetch", fetch)
    return seen


def unpushed(world: World, other: Path, name: str) -> str:
    """Another machine commits on the module branch and records it, without pushing yet; returns the sha."""
    git(other, "checkout", "-q", "-B", BRANCH)
    write(other / name, "T = 1\n")
    git(other, "add", name)
    git(other, "commit", "-q", "-m", name)
    sha, tree = git(other, "rev-parse", "HEAD"), git(other, "rev-parse", "HEAD^{tree}")
    world.journal.record(ev.CommitRecorded(sha=sha, message=name, tree=tree, parent=world.base, branch=BRANCH))
    return sha


def test_a_commit_never_pushed_is_waited_for_backing_off_then_named_in_a_what_why_fix_error(
    world, tmp_path_factory, monkeypatch
):
    from lopen.git import GitError

    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    module = world.start(remote=str(bare))
    module.ensure().get()
    theirs = unpushed(world, other, "theirs.py")
    pauses = [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]  # doubling from 50 ms, at most a second
    wait = 0.0
    for p in pauses:
        wait += p  # the wait ends exactly after these pauses (as the clock adds them)
    monkeypatch.setattr("actors.git.FETCH_WAIT_SECONDS", wait)
    clock = Clock()
    monkeypatch.setattr("actors.git.time", clock)
    seen = fetches(monkeypatch)
    with pytest.raises(GitError) as missing:
        module.sync().get()
    assert (missing.value.what, missing.value.why, missing.value.how) == (
        f"commit {theirs[:10]} is in the module's history but not in {bare}",
        "the worker that recorded it has not pushed it within 3 s",
        "check that worker (its push may have failed), then run again",
    )
    assert clock.pauses == pauses
    assert seen == [(str(bare), BRANCH)] * 7  # the module branch, once at the start and after each pause
    assert world.worktree.tip() == world.base and lacks(world, theirs)


def test_a_commit_whose_push_lands_while_waiting_is_fetched_then_and_followed(world, tmp_path_factory, monkeypatch):
    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    module = world.start(remote=str(bare))
    module.ensure().get()
    theirs = unpushed(world, other, "theirs.py")
    clock = Clock({2: lambda: git(other, "push", "-q", "origin", BRANCH)})  # lands during the second pause
    monkeypatch.setattr("actors.git.time", clock)
    seen = fetches(monkeypatch)
    assert module.sync().get() == theirs
    assert clock.pauses == [0.05, 0.1]  # no pause after the fetch that brought it
    assert seen == [(str(bare), BRANCH)] * 3
    assert world.worktree.tip() == theirs and (world.worktree.path / "theirs.py").read_text() == "T = 1\n"


def test_a_commit_this_clone_has_is_never_fetched(world, tmp_path_factory, monkeypatch):
    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    world.start(remote=str(bare)).ensure().get()
    worktree = world.lane_worktree("core")
    actor = world.start(worktree, lane="core", remote=str(bare))
    actor.ensure().get()
    seen = fetches(monkeypatch)
    actor.restart_at(world.base).get()  # a commit this clone has
    assert seen == [] and git(bare, "rev-parse", worktree.branch) == world.base


# -- publishing: which branch is pushed, forced or not, and how often it is tried ------------------------------


def pushes(monkeypatch, failing: int = 0) -> list[tuple[str, bool]]:
    """Every push the actor asks of git (branch, forced); the first ``failing`` are refused as git refuses
    a push whose ref another push holds locked at that moment, the others run."""
    from lopen.git import GitError

    seen: list[tuple[str, bool]] = []
    real = Worktree.push

    def push(self: Worktree, remote: str, force: bool = False) -> None:
        seen.append((self.branch, force))
        if len(seen) <= failing:
            raise GitError("git push failed", f"cannot lock ref 'refs/heads/{self.branch}'", "try again")
        real(self, remote, force)

    monkeypatch.setattr(Worktree, "push", push)
    return seen


def notes(world: World, text: str) -> None:
    write(world.worktree.path / "docs" / "requirements" / MODULE / "RESEARCH.md", text)


def test_a_lanes_branch_is_pushed_forced_where_it_starts_afresh(world, tmp_path_factory, monkeypatch):
    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    world.start(remote=str(bare)).ensure().get()
    worktree = world.lane_worktree("core")
    actor = world.start(worktree, lane="core", remote=str(bare))
    actor.ensure().get()
    built = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    assert git(bare, "rev-parse", worktree.branch) == built
    seen = pushes(monkeypatch)
    actor.restart_at(world.base).get()  # behind what the remote has: only a forced push moves it
    assert seen == [(worktree.branch, True)]
    assert git(bare, "rev-parse", worktree.branch) == world.base


def test_a_lanes_push_refused_once_is_tried_again(world, tmp_path_factory, monkeypatch):
    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    world.start(remote=str(bare)).ensure().get()
    worktree = world.lane_worktree("core")
    actor = world.start(worktree, lane="core", remote=str(bare))
    actor.ensure().get()
    seen = pushes(monkeypatch, failing=4)
    actor.restart_at(world.base).get()
    assert seen == [(worktree.branch, True)] * 5
    assert git(bare, "rev-parse", worktree.branch) == world.base


def test_a_lanes_push_refused_five_times_stops_with_gits_error(world, tmp_path_factory, monkeypatch):
    from lopen.git import GitError

    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    world.start(remote=str(bare)).ensure().get()
    worktree = world.lane_worktree("core")
    actor = world.start(worktree, lane="core", remote=str(bare))
    actor.ensure().get()
    seen = pushes(monkeypatch, failing=5)
    with pytest.raises(GitError) as refused:
        actor.restart_at(world.base).get()
    assert refused.value.why == f"cannot lock ref 'refs/heads/{worktree.branch}'"
    assert len(seen) == 5


def test_the_module_branchs_push_that_meets_a_locked_ref_is_tried_again_until_it_lands(
    world, tmp_path_factory, monkeypatch
):
    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    module = world.start(remote=str(bare))
    module.ensure().get()
    seen = pushes(monkeypatch, failing=4)
    notes(world, "notes\n")
    sha = module.commit_research().get()
    assert seen == [(BRANCH, False)] * 5  # never forced
    assert git(bare, "rev-parse", BRANCH) == sha


def test_the_module_branchs_push_refused_five_times_stops_with_gits_error(world, tmp_path_factory, monkeypatch):
    from lopen.git import GitError

    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    module = world.start(remote=str(bare))
    module.ensure().get()
    seen = pushes(monkeypatch, failing=5)
    notes(world, "notes\n")
    with pytest.raises(GitError) as refused:
        module.commit_research().get()
    assert refused.value.why == f"cannot lock ref 'refs/heads/{BRANCH}'"
    assert len(seen) == 5
    assert git(bare, "rev-parse", BRANCH) == world.base


def test_the_module_branchs_push_behind_a_later_push_that_holds_it_is_left_there(world, tmp_path_factory, monkeypatch):
    """Another worker pushed a later commit on top of this one's tip: the push is refused (not a
    fast-forward), and that is fine — the remote holds this tip; nothing is forced or tried again."""
    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    later, _tree = commit_there(other, BRANCH, "later.py", "L = 1\n")
    seen = pushes(monkeypatch)
    world.start(remote=str(bare)).ensure().get()  # makes the branch at the person's HEAD and publishes it
    assert seen == [(BRANCH, False)]
    assert git(bare, "rev-parse", BRANCH) == later


def test_the_module_branch_is_never_forced_over_another_workers_commit(world, tmp_path_factory, monkeypatch):
    """The remote's module branch moved elsewhere (a commit this tip does not hold): the push is refused
    once, the remote keeps that commit, and the run stops with git's own error."""
    from lopen.git import GitError

    bare, other = other_machine(world, tmp_path_factory, monkeypatch)
    module = world.start(remote=str(bare))
    module.ensure().get()
    theirs, _tree = commit_there(other, BRANCH, "theirs.py", "T = 1\n")
    seen = pushes(monkeypatch)
    notes(world, "notes\n")
    with pytest.raises(GitError):
        module.commit_research().get()
    assert seen == [(BRANCH, False)]
    assert git(bare, "rev-parse", BRANCH) == theirs


def test_the_module_branchs_push_refused_by_a_remote_without_that_branch_stops_at_once(
    world, tmp_path_factory, monkeypatch
):
    """The push is refused and the remote has no such branch to compare with: git's error, no second try."""
    from lopen.git import GitError

    bare, _other = other_machine(world, tmp_path_factory, monkeypatch)
    module = world.start(remote=str(bare))
    module.ensure().get()
    git(bare, "update-ref", "-d", f"refs/heads/{BRANCH}")
    seen = pushes(monkeypatch, failing=5)
    notes(world, "notes\n")
    with pytest.raises(GitError):
        module.commit_research().get()
    assert len(seen) == 1


# -- research notes --------------------------------------------------------------------------------------


def test_research_notes_are_committed_on_the_history_tip_only_when_they_differ(world, module):
    folder = world.worktree.path / "docs" / "requirements" / MODULE
    write(folder / "RESEARCH.md", "notes\n")
    write(folder / "RESEARCH-index.md", "index\n")
    write(folder / "draft.md", "not a note\n")
    sha = module.commit_research().get()
    assert sha == world.worktree.tip() and git(world.root, "rev-parse", f"{sha}^") == world.base
    names = git(world.root, "ls-tree", "-r", "--name-only", sha).split()
    assert sorted(names) == [
        "app.py",
        f"docs/requirements/{MODULE}/RESEARCH-index.md",
        f"docs/requirements/{MODULE}/RESEARCH.md",
    ]
    (recorded,) = world.events(ev.CommitRecorded)
    assert (recorded.sha, recorded.message, recorded.parent, recorded.branch, recorded.task_id) == (
        sha,
        f"docs({MODULE}): research notes",
        world.base,
        BRANCH,
        "",
    )
    assert recorded.tree == git(world.root, "rev-parse", f"{sha}^{{tree}}")
    assert git(world.root, "log", "-n1", "--format=%B", sha).strip() == (
        f"docs({MODULE}): research notes\n\nLopen-Session: {world.session}\nLopen-Chain: {recorded.chain}"
    )
    assert module.commit_research().get() == ""  # nothing differs: no commit, nothing recorded
    assert len(world.events(ev.CommitRecorded)) == 1 and world.worktree.tip() == sha
    write(folder / "RESEARCH.md", "notes, more\n")
    again = module.commit_research().get()
    assert git(world.root, "diff", "--name-only", sha, again) == f"docs/requirements/{MODULE}/RESEARCH.md"
    assert world.events(ev.CommitRecorded)[-1].parent == sha


def test_research_notes_go_on_the_history_tip_when_the_local_branch_is_behind(world, module):
    actor, worktree = lane(world, "core")
    merged = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    assert module.merge("core").get().sha == merged
    git(world.root, "update-ref", f"refs/heads/{BRANCH}", world.base)  # the local branch behind the history
    notes(world, "notes\n")
    sha = module.commit_research().get()
    assert git(world.root, "rev-parse", f"{sha}^") == merged
    assert world.events(ev.CommitRecorded)[-1].parent == merged
    assert (world.worktree.path / "core.py").read_text() == "C = 1\n"  # the worktree followed


def test_research_notes_whose_commit_the_history_refuses_are_taken_back(world, module, monkeypatch):
    refused_every(world, monkeypatch, ev.CommitRecorded)
    notes(world, "notes\n")
    assert module.commit_research().get() == ""
    assert world.worktree.tip() == world.base  # the unrecorded commit is not left on the branch


# -- what the model is told when Lopen puts git back -----------------------------------------------------------


DONT_EDIT = (
    "Do not edit git's own files — the worktree's .git pointer, its git folder, git configuration: they decide "
    "which programs git runs for the person, outside the sandbox. "
)


def test_git_files_and_a_moved_branch_are_put_back_and_told_in_two_sentences(world, module):
    git(world.worktree.path, "checkout", "-q", "-b", "elsewhere")
    write(world.worktree.path / ".git", "gitdir: /tmp/the-models-own-git\n")
    pointer = ".git was rewritten to 'gitdir: /tmp/the-models-own-git'"
    assert module.guard().get() == [pointer, "HEAD was moved to refs/heads/elsewhere"]
    (tripped,) = world.events(ev.GuardrailTripped)
    assert tripped.detail == (
        f"git's own files were tampered with: {pointer}; HEAD was moved to refs/heads/elsewhere — put back"
    )
    (note,) = world.events(ev.CorrectiveInstructionIssued)
    assert note.instruction == (
        f"{DONT_EDIT}In the last invocation {pointer}, and Lopen put it back. "
        "Do not change branches, commit, reset or check out in git: Lopen commits verified work on "
        f"{BRANCH} itself. In the last invocation HEAD was moved to refs/heads/elsewhere, and Lopen put it back."
    )


def test_git_files_alone_are_put_back_by_the_check_and_told_as_such(world, module):
    private = world.root / ".git" / "worktrees" / world.worktree.path.name
    write(world.worktree.path / ".git", "gitdir: /tmp/the-models-own-git\n")
    write(private / "commondir", "/tmp/the-models-common-git\n")
    wrong = module.check().get()
    assert len(wrong) == 2 and wrong[0] == ".git was rewritten to 'gitdir: /tmp/the-models-own-git'"
    assert "commondir" in wrong[1] and "/tmp/the-models-common-git" in wrong[1]
    both = f"{wrong[0]}; {wrong[1]}"
    (tripped,) = world.events(ev.GuardrailTripped)
    assert (tripped.category, tripped.level, tripped.detail) == (
        "git",
        "warn",
        f"git's own files were tampered with: {both} — put back",
    )
    (note,) = world.events(ev.CorrectiveInstructionIssued)
    assert (note.category, note.instruction) == (
        "git",
        f"{DONT_EDIT}In the last invocation {both}, and Lopen put it back.",
    )
    assert module.check().get() == []  # put back


def test_head_alone_moved_is_put_back_by_the_check_and_told(world, module):
    git(world.worktree.path, "checkout", "-q", "-b", "elsewhere")
    assert module.check().get() == ["HEAD was moved to refs/heads/elsewhere"]
    assert git(world.worktree.path, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    (tripped,) = world.events(ev.GuardrailTripped)
    assert tripped.detail == "HEAD was moved to refs/heads/elsewhere — put back"
    (note,) = world.events(ev.CorrectiveInstructionIssued)
    assert note.instruction.startswith("Do not change branches") and "git's own files" not in note.instruction


def test_nothing_moved_records_nothing(world, module):
    assert module.check().get() == [] and module.guard().get() == []
    assert world.events(ev.GuardrailTripped) == [] and world.events(ev.CorrectiveInstructionIssued) == []


# -- a branch made before Lopen, commits' trailers and figures ------------------------------------------------


def test_a_branch_made_before_lopen_while_the_checkout_is_on_an_orphan_branch_is_built_on(world):
    """The person made ``lopen/auth`` (with work of theirs), then switched their checkout to a new branch
    with no commit yet: Lopen starts from ``lopen/auth``'s tip, reports no move, and commits on top of it."""
    git(world.root, "checkout", "-q", "-b", BRANCH)
    write(world.root / "theirs.py", "T = 1\n")
    git(world.root, "add", "theirs.py")
    git(world.root, "commit", "-q", "-m", "their start")
    theirs = git(world.root, "rev-parse", "HEAD")
    git(world.root, "checkout", "-q", "--orphan", "fresh")
    actor = world.start()
    actor.ensure().get()
    assert [(e.created, e.base) for e in world.events(ev.BranchEnsured)] == [(False, theirs)]
    assert world.events(ev.Reverted) == [] and world.events(ev.TaskReopened) == []
    write(world.worktree.path / "core.py", "C = 1\n")
    world.complete("core/1", world.worktree.tree())
    tip = actor.tip().get()
    assert git(world.root, "rev-list", "--parents", "-n1", tip).split()[1:] == [theirs]
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.sha, commit.parent) == (tip, theirs)


def test_a_tasks_commit_counts_the_lines_and_files_it_changed(world, module):
    write(world.worktree.path / "app.py", "print('v2')\nprint('more')\n")  # 1 line out, 2 in
    write(world.worktree.path / "core.py", "A = 1\nB = 2\nC = 3\n")  # 3 in
    world.complete("core/1", world.worktree.tree())
    module.tip().get()
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.added, commit.removed, commit.files) == (5, 1, 2)


def test_a_tasks_commit_carries_the_chain_head_it_was_made_on(world, module):
    world.refs[0].stop()  # no actor commits what follows until the next run
    write(world.worktree.path / "core.py", "C = 1\n")
    world.complete("core/1", world.worktree.tree())
    version, digest = world.store.head(world.journal.stream)
    world.start().ensure().get()  # the next run commits it: nothing is recorded before
    (commit,) = world.events(ev.CommitRecorded)
    assert commit.chain == f"{version} {digest}"
    body = git(world.root, "log", "-n1", "--format=%B", commit.sha).strip().splitlines()
    assert body[-3:] == ["Lopen-Task: core/1", f"Lopen-Session: {world.session}", f"Lopen-Chain: {version} {digest}"]


def test_a_commit_made_by_a_killed_run_is_recorded_with_the_chain_its_trailer_names(world, module):
    world.refs[0].stop()
    write(world.worktree.path / "core.py", "C = 1\n")
    tree = world.worktree.tree()
    chain = "3 " + "ab" * 32
    message = f"feat(auth): Sign tokens in core\n\nLopen-Task: core/1\nLopen-Session: s\nLopen-Chain: {chain}\n"
    made = world.worktree.commit(tree, world.base, message)
    world.complete("core/1", tree)
    world.start().ensure().get()
    assert world.worktree.tip() == made
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.sha, commit.chain, commit.parent) == (made, chain, world.base)
    assert world.events(ev.Reverted) == []


def test_a_lanes_worktree_left_after_a_commit_before_its_reset_shows_a_clean_status_next_run(world, module):
    actor, worktree = lane(world, "core")
    tip = build(world, actor, worktree, "core/1", {"core.py": "C = 1\n"})
    assert git(worktree.path, "status", "--porcelain") != ""  # the index still the tree before the commit
    actor.stop()
    world.start(worktree, lane="core").ensure().get()
    assert git(worktree.path, "status", "--porcelain") == ""
    assert worktree.tip() == tip


def test_a_branch_recorded_without_a_base_is_not_taken_for_a_move(world):
    """A history from before Lopen recorded an existing branch's own tip as its base: the person's branch
    was recorded with no base (their checkout was on an orphan branch). The next run finds the branch at
    a commit while the history names none: nothing to compare, so nothing is reported as moved."""
    git(world.root, "branch", BRANCH, world.base)
    made, _base = world.worktree.ensure()
    assert not made
    world.journal.record(ev.BranchEnsured(branch=BRANCH, created=False, base="", worktree=str(world.worktree.path)))
    world.start().ensure().get()
    assert world.events(ev.Reverted) == [] and world.events(ev.TaskReopened) == []
    assert world.worktree.tip() == world.base


def test_the_approved_specs_commit_names_the_session_and_the_chain_head_it_was_made_on(world):
    write(world.root / "docs" / "spec.md", "# v1\n")
    actor = world.start(spec=(world.root, "docs/spec.md"))
    actor.ensure().get()
    (recorded,) = [r for r in world.store.read_stream(world.journal.stream) if isinstance(r.event, ev.CommitRecorded)]
    adopted = recorded.event
    assert adopted.chain.split()[0] == str(recorded.version - 1)  # the head just before it was recorded
    assert git(world.root, "log", "-n1", "--format=%B", adopted.sha).strip() == (
        f"docs({MODULE}): the approved specification\n\nLopen-Session: {world.session}\nLopen-Chain: {adopted.chain}"
    )


def test_a_branch_the_engine_made_before_the_actor_started_is_recorded_as_created(world):
    """The engine makes the worktree before the Copilot CLI starts (its sandbox binds it) and tells the
    actor so: the record says the branch was created, at the person's HEAD."""
    made, _base = world.worktree.ensure()
    assert made
    world.start().ensure(True).get()
    (ensured,) = world.events(ev.BranchEnsured)
    assert (ensured.branch, ensured.created, ensured.base, ensured.worktree) == (
        BRANCH,
        True,
        world.base,
        str(world.worktree.path),
    )
    world.refs[0].stop()
    world.start().ensure().get()  # the next run: made before, recorded before
    assert len(world.events(ev.BranchEnsured)) == 1


def test_a_stopped_actor_no_longer_listens_to_the_history(world):
    """One process (the TUI, the MCP server) runs the module many times: each run's stopped actor leaves the
    store's subscribers as they were, so no dead actor is called on every later event, and what is recorded
    after the run's end is committed by the next run, not by the stopped actor."""
    before = len(world.store._bus._subs)
    for _ in range(3):
        world.start().ensure().get()
        world.refs[-1].stop()
    assert len(world.store._bus._subs) == before
    write(world.worktree.path / "core.py", "C = 1\n")
    world.complete("core/1", world.worktree.tree())
    assert world.events(ev.CommitRecorded) == [] and world.worktree.tip() == world.base


def test_a_module_branch_the_engine_made_before_the_actor_is_published_too(world, tmp_path_factory):
    """``ensure(created=True)``: the engine (or a worker) made the worktree and its branch first, so the actor's
    own ensure makes nothing — the branch is still new to the remote, and another clone waits for it there."""
    bare = tmp_path_factory.mktemp("remote") / "origin.git"
    git(world.root, "init", "-q", "--bare", str(bare))
    made, _base = world.worktree.ensure(None)
    assert made
    world.start(remote=str(bare)).ensure(created=True).get()
    remote = subprocess.run(["git", "rev-parse", f"refs/heads/{BRANCH}"], cwd=bare, capture_output=True, text=True)
    assert remote.stdout.strip() == git(world.root, "rev-parse", BRANCH), remote.stderr
