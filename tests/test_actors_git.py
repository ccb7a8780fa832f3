"""The Git actor (G1, G2, G5, G6) on a real repository and a real SQLite store: it reacts on the bus to
a completed task by committing exactly the tree its verdict judged, puts back what a model moved, and
after a crash finishes (once) the commit the events say is owed. The user's checkout is never touched.

No sleeps: an actor's mailbox is FIFO, so an ask made after an event was published is answered after
the actor handled that event (``git.tip().get()`` waits for the reaction)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.git import GitActor, commit_message
from events import catalogue as ev
from events.journal import Journal
from lopen.git import Worktree
from lopen.project import ensure_lopen_dir, open_store

MODULE = "auth"
BRANCH = f"lopen/{MODULE}"
SPEC = f"docs/requirements/{MODULE}/SPECIFICATION.md"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


class Checkout:
    """The user's checkout — HEAD, index, working tree and an edit of theirs — to tell it was not touched."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.before = self.look()

    def look(self) -> tuple[str, ...]:
        return (
            git(self.root, "symbolic-ref", "HEAD"),
            git(self.root, "rev-parse", "HEAD"),
            git(self.root, "ls-files", "--stage"),
            git(self.root, "status", "--porcelain=v1", "--untracked-files=all"),
            (self.root / "app.py").read_text(encoding="utf-8"),
            (self.root / "notes.txt").read_text(encoding="utf-8"),
            git(self.root, "stash", "list"),
        )

    def untouched(self) -> bool:
        return self.look() == self.before


class World:
    """A repository with a module planned (component ``core``, tasks core/1 and core/2), its store and
    journal, its worktree, and the Git actors started for it."""

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
        # the user is in the middle of something: an edit, a staged file, an untracked note
        write(root / "app.py", "print('my edit')\n")
        write(root / "staged.py", "S = 1\n")
        git(root, "add", "staged.py")
        write(root / "notes.txt", "mine\n")
        self.user = Checkout(root)

        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, MODULE)
        self.session = self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.journal.record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)),
            ev.ComponentSelected(component="core"),
            ev.TasksRecorded(
                component="core",
                tasks=(ev.TaskSpec(id="core/1", name="Sign tokens"), ev.TaskSpec(id="core/2", name="Check tokens")),
            ),
        )
        self.worktree = Worktree(root, root / ".lopen" / "worktrees" / MODULE, BRANCH)
        self.refs: list[pykka.ActorRef] = []

    def start(self, journal: Journal | None = None, **kwargs: object) -> pykka.ActorProxy:
        ref = GitActor.start(journal or self.journal, self.worktree, self.store, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def stop(self) -> None:
        for ref in self.refs:
            ref.stop()
        self.refs.clear()

    def complete(self, task_id: str, tree: str, journal: Journal | None = None) -> None:
        """What the toolbox records when a verified task is completed."""
        (journal or self.journal).record(
            ev.TaskStatusChanged(task_id=task_id, from_state="pending", to_state="in-progress"),
            ev.TaskStatusChanged(task_id=task_id, from_state="in-progress", to_state="complete", tree=tree),
        )

    def events(self, kind: type[ev.Event]) -> list:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kind)]

    def branch_log(self, since: str) -> list[str]:
        return git(self.root, "rev-list", f"{since}..{BRANCH}").splitlines()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        w.stop()
        w.store.close()


@pytest.fixture
def git_actor(world: World) -> pykka.ActorProxy:
    actor = world.start()
    assert actor.ensure().get() == BRANCH
    return actor


# -- the branch and the worktree ----------------------------------------------------------------


def test_ensure_makes_the_worktree_on_the_module_branch_once_and_records_it(world: World) -> None:
    actor = world.start()
    actor.ensure().get()
    actor.ensure().get()

    (ensured,) = world.events(ev.BranchEnsured)
    assert (ensured.branch, ensured.created, ensured.base) == (BRANCH, True, world.base)
    assert ensured.worktree == str(world.worktree.path)
    assert world.worktree.tip() == world.base and world.worktree.head_ref() == f"refs/heads/{BRANCH}"
    assert world.journal.read(lambda s: (s.branch, s.branch_base, s.tip)) == (BRANCH, world.base, world.base)
    assert world.user.untouched()


def test_ensure_commits_the_approved_spec_on_the_branch_once(world: World, tmp_path_factory) -> None:
    approved = b"# Auth\n\n## Overview\n\nApproved text.\n"
    source = tmp_path_factory.mktemp("approved")  # where the approved spec is read (the checkout in a run)
    (source / SPEC).parent.mkdir(parents=True)
    (source / SPEC).write_bytes(approved)
    actor = world.start(spec=(source, SPEC))
    actor.ensure().get()
    actor.ensure().get()

    (commit,) = world.events(ev.CommitRecorded)
    assert commit.task_id == "" and commit.message == f"docs({MODULE}): the approved specification"
    assert world.branch_log(world.base) == [commit.sha] and commit.parent == world.base
    assert git(world.root, "show", f"{commit.sha}:{SPEC}") == approved.decode().strip()
    assert (world.worktree.path / SPEC).read_bytes() == approved and world.worktree.dirty_files() == []
    assert not (world.root / SPEC).exists()  # it went on the branch, not into the user's checkout
    assert world.user.untouched()


# -- a completed task is committed: exactly its verified tree ------------------------------------


def test_a_completed_task_is_committed_as_exactly_its_verified_tree(world: World, git_actor) -> None:
    write(world.worktree.path / "tokens.py", "def sign(): return 'signed'\n")
    verified = world.worktree.tree()
    # the model changes the files after the verdict (sabotage): the commit must not take them
    write(world.worktree.path / "tokens.py", "def sign(): return 'forged'\n")
    write(world.worktree.path / "backdoor.py", "OPEN = True\n")

    world.complete("core/1", verified)
    tip = git_actor.tip().get()  # answered after the actor reacted to the completion on the bus

    assert tip != world.base and world.worktree.tree_of(tip) == verified
    assert git(world.root, "show", f"{tip}:tokens.py") == "def sign(): return 'signed'"
    assert "backdoor.py" not in git(world.root, "ls-tree", "-r", "--name-only", tip)
    assert git(world.root, "rev-parse", f"{tip}^") == world.base
    message = git(world.root, "log", "-1", "--format=%B", tip)
    assert message.splitlines()[0] == f"feat({MODULE}): Sign tokens in core"
    assert "Lopen-Task: core/1" in message and f"Lopen-Session: {world.session}" in message

    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.sha, commit.task_id, commit.tree, commit.parent, commit.branch) == (
        tip,
        "core/1",
        verified,
        world.base,
        BRANCH,
    )
    assert world.journal.read(lambda s: (s.tasks["core/1"].commit, s.tip, s.owed_commits())) == (tip, tip, [])
    # the sabotage is still in the files until the worktree is reset to the tip
    assert (world.worktree.path / "backdoor.py").exists()
    git_actor.reset_to_tip().get()
    assert not (world.worktree.path / "backdoor.py").exists()
    assert (world.worktree.path / "tokens.py").read_text(encoding="utf-8") == "def sign(): return 'signed'\n"
    assert world.worktree.dirty_files() == [] and git_actor.leftovers().get() == []
    assert world.user.untouched()


def test_each_completed_task_gets_its_own_commit_on_top_of_the_last(world: World, git_actor) -> None:
    write(world.worktree.path / "a.py", "A = 1\n")
    first = world.worktree.tree()
    world.complete("core/1", first)
    one = git_actor.tip().get()
    write(world.worktree.path / "b.py", "B = 1\n")
    second = world.worktree.tree()
    world.complete("core/2", second)
    two = git_actor.tip().get()

    assert world.branch_log(world.base) == [two, one]
    assert (world.worktree.tree_of(one), world.worktree.tree_of(two)) == (first, second)
    assert [(c.task_id, c.parent) for c in world.events(ev.CommitRecorded)] == [("core/1", world.base), ("core/2", one)]


def test_the_commit_goes_on_lopen_s_history_even_when_the_model_committed_on_the_branch(
    world: World, git_actor
) -> None:
    write(world.worktree.path / "a.py", "A = 1\n")
    verified = world.worktree.tree()
    git(world.worktree.path, "add", "-A")
    git(world.worktree.path, "commit", "-q", "-m", "the model commits by itself")

    world.complete("core/1", verified)
    tip = git_actor.tip().get()

    assert world.branch_log(world.base) == [tip]  # the model's commit is not on the branch
    assert world.worktree.tree_of(tip) == verified


def test_no_commit_when_auto_commit_is_off(world: World) -> None:
    actor = world.start(auto_commit=False)
    actor.ensure().get()
    write(world.worktree.path / "a.py", "A = 1\n")
    world.complete("core/1", world.worktree.tree())
    assert actor.settle().get() == world.base
    assert world.events(ev.CommitRecorded) == [] and world.branch_log(world.base) == []


# -- HEAD and the branch put back ------------------------------------------------------------------


def test_a_model_that_committed_on_the_branch_gets_it_put_back_and_is_told(world: World, git_actor) -> None:
    write(world.worktree.path / "a.py", "A = 1\n")
    git(world.worktree.path, "add", "-A")
    git(world.worktree.path, "commit", "-q", "-m", "the model commits by itself")
    stray = world.worktree.tip()

    wrong = git_actor.guard().get()

    assert wrong == [f"{BRANCH} was moved to {stray[:8]}"]
    assert world.worktree.tip() == world.base and world.worktree.head_ref() == f"refs/heads/{BRANCH}"
    assert world.worktree.dirty_files() == ["a.py"]  # its work stays in the files, uncommitted
    (tripped,) = world.events(ev.GuardrailTripped)
    assert (tripped.category, tripped.level) == ("git", "warn") and stray[:8] in tripped.detail
    (note,) = world.events(ev.CorrectiveInstructionIssued)
    assert note.category == "git" and "Do not change branches, commit" in note.instruction
    assert world.journal.read(lambda s: s.notes) == [note.instruction]  # the next invocation is told
    assert world.user.untouched()


def test_a_model_that_moved_head_gets_it_put_back(world: World, git_actor) -> None:
    git(world.worktree.path, "checkout", "-q", "-b", "elsewhere")
    write(world.worktree.path / "a.py", "A = 1\n")
    git(world.worktree.path, "add", "-A")
    git(world.worktree.path, "commit", "-q", "-m", "on another branch")

    wrong = git_actor.guard().get()

    assert wrong == ["HEAD was moved to refs/heads/elsewhere"]
    assert world.worktree.head_ref() == f"refs/heads/{BRANCH}" and world.worktree.tip() == world.base
    assert "HEAD was moved to refs/heads/elsewhere" in world.events(ev.CorrectiveInstructionIssued)[0].instruction


def test_a_detached_head_is_put_back(world: World, git_actor) -> None:
    git(world.worktree.path, "checkout", "-q", "--detach")
    assert git_actor.guard().get() == ["HEAD was moved to a detached commit"]
    assert world.worktree.head_ref() == f"refs/heads/{BRANCH}"


def test_nothing_is_recorded_when_nothing_was_moved(world: World, git_actor) -> None:
    version = world.journal.version
    assert git_actor.guard().get() == []
    assert world.journal.version == version


# -- crash consistency -------------------------------------------------------------------------------


def test_a_completion_without_its_commit_is_committed_by_the_next_run(world: World, git_actor) -> None:
    write(world.worktree.path / "a.py", "A = 1\n")
    verified = world.worktree.tree()
    world.stop()  # the run dies between the completion and the commit
    world.complete("core/1", verified)
    write(world.worktree.path / "a.py", "A = 'later'\n")  # the files moved on since

    journal = Journal(world.store, world.project, MODULE)  # the next run: a new process's view
    assert [t.id for t in journal.read(lambda s: s.owed_commits())] == ["core/1"]
    actor = world.start(journal)
    actor.ensure().get()

    (sha,) = world.branch_log(world.base)
    assert world.worktree.tree_of(sha) == verified
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.sha, commit.task_id, commit.tree) == (sha, "core/1", verified)
    assert journal.read(lambda s: (s.tasks["core/1"].commit, s.owed_commits())) == (sha, [])
    assert world.user.untouched()


def test_a_commit_made_but_not_recorded_is_recorded_not_made_twice(world: World, git_actor) -> None:
    write(world.worktree.path / "a.py", "A = 1\n")
    verified = world.worktree.tree()
    world.stop()
    world.complete("core/1", verified)
    # the dying run's Git actor had made the commit, but was killed before it recorded it
    task = world.journal.read(lambda s: s.tasks["core/1"])
    made = world.worktree.commit(verified, world.base, commit_message(MODULE, task, world.session))

    journal = Journal(world.store, world.project, MODULE)
    world.start(journal).ensure().get()

    assert world.branch_log(world.base) == [made]
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.sha, commit.task_id, commit.tree, commit.parent) == (made, "core/1", verified, world.base)
    assert journal.read(lambda s: s.tip) == made


def test_settle_makes_every_owed_commit_in_plan_order(world: World, git_actor) -> None:
    world.stop()
    write(world.worktree.path / "a.py", "A = 1\n")
    first = world.worktree.tree()
    write(world.worktree.path / "b.py", "B = 1\n")
    second = world.worktree.tree()
    world.complete("core/2", second)
    world.complete("core/1", first)

    journal = Journal(world.store, world.project, MODULE)
    tip = world.start(journal).settle().get()

    two, one = world.branch_log(world.base)
    assert tip == two and [c.task_id for c in world.events(ev.CommitRecorded)] == ["core/1", "core/2"]
    assert (world.worktree.tree_of(one), world.worktree.tree_of(two)) == (first, second)


def test_reset_to_tip_makes_the_worktree_the_last_commit(world: World, git_actor) -> None:
    write(world.worktree.path / "a.py", "A = 1\n")
    world.complete("core/1", world.worktree.tree())
    tip = git_actor.tip().get()
    write(world.worktree.path / "a.py", "A = 2\n")
    write(world.worktree.path / "left" / "over.py", "x = 1\n")
    assert sorted(set(git_actor.leftovers().get())) == ["a.py", "left/over.py"]

    git_actor.reset_to_tip().get()

    assert world.worktree.dirty_files() == [] and world.worktree.tree() == world.worktree.tree_of(tip)
    assert world.user.untouched()


def test_a_stopped_actor_no_longer_reacts(world: World, git_actor) -> None:
    world.stop()
    write(world.worktree.path / "a.py", "A = 1\n")
    world.complete("core/1", world.worktree.tree())
    assert world.events(ev.CommitRecorded) == [] and world.branch_log(world.base) == []


def test_events_of_another_module_are_not_its_business(world: World, git_actor) -> None:
    other = Journal(world.store, world.project, "billing")
    other.record(
        ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)),
        ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="core/1", name="Bill"),)),
    )
    world.complete("core/1", world.worktree.tree(), journal=other)
    git_actor.tip().get()
    assert world.events(ev.CommitRecorded) == [] and world.branch_log(world.base) == []


def test_a_push_that_meets_another_at_the_same_moment_is_tried_again(world: World, tmp_path_factory) -> None:
    """CI, issue 14: two workers pushing the module branch to git.remote at once; one push failed (the
    remote's ref was locked by the other) while its commit was ahead of the remote, and the worker died.
    The remote here refuses the first push once, as a locked ref does; the second goes through."""
    bare = tmp_path_factory.mktemp("remote") / "origin.git"
    git(world.root, "init", "-q", "--bare", str(bare))
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        f'#!/bin/sh\nif [ ! -e "{bare}/refused" ]; then touch "{bare}/refused"; '
        'echo "cannot lock ref: reference already locked" >&2; exit 1; fi\n'
    )
    hook.chmod(0o755)
    actor = world.start(remote=str(bare))
    (bare / "refused").touch()  # the branch's first publication goes through
    assert actor.ensure().get() == BRANCH
    (bare / "refused").unlink()

    write(world.worktree.path / "a.py", "A = 1\n")
    world.complete("core/1", world.worktree.tree())
    tip = actor.tip().get()

    assert tip != world.base and (bare / "refused").exists()  # the first push was refused
    assert git(bare, "rev-parse", BRANCH) == tip  # and the second published the commit


def test_a_commit_the_history_names_before_its_worker_pushed_it_is_fetched_once_it_lands(
    world: World, tmp_path_factory, monkeypatch
) -> None:
    """CI, issue 14 (two machines): a worker records its merge, then pushes it; the other worker read the
    history in between, fetched, and failed with 'not something we can merge'. The fetch is tried again
    until the commit lands. Here the other machine's push lands right after the first fetch."""
    bare = tmp_path_factory.mktemp("remote") / "origin.git"
    git(world.root, "init", "-q", "--bare", str(bare))
    actor = world.start(remote=str(bare))
    assert actor.ensure().get() == BRANCH  # the module branch is published

    other = tmp_path_factory.mktemp("machine-2") / "clone"
    git(world.root, "clone", "-q", "-b", BRANCH, str(bare), str(other))
    git(other, "config", "user.name", "Other")
    git(other, "config", "user.email", "other@example.com")
    write(other / "merged.py", "M = 1\n")
    git(other, "add", "merged.py")
    git(other, "commit", "-q", "-m", "merge of component b")
    merged, tree = git(other, "rev-parse", "HEAD"), git(other, "rev-parse", "HEAD^{tree}")
    world.journal.record(  # recorded by the other machine, not pushed yet
        ev.CommitRecorded(sha=merged, message="merge", tree=tree, parent=world.base, branch=BRANCH)
    )

    fetches: list[str] = []
    fetch = Worktree.fetch

    def push_lands_after_the_first_fetch(self: Worktree, remote: str, branch: str = "") -> bool:
        done = fetch(self, remote, branch)
        fetches.append(branch)
        if len(fetches) == 1:
            git(other, "push", "-q", "origin", BRANCH)
        return done

    monkeypatch.setattr(Worktree, "fetch", push_lands_after_the_first_fetch)
    assert actor.sync().get() == merged
    assert len(fetches) == 2 and world.worktree.tip() == merged
    assert (world.worktree.path / "merged.py").read_text() == "M = 1\n"
