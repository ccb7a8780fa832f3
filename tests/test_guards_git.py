"""Git guards that a mutation study found untested, on real repositories (no mocks of git):

- the Git actor's ``guard()`` puts back the branch and HEAD a model moved in its worktree;
- a task completed without a verified tree is never committed;
- Lopen's own git commands run no program the repository names: hooks, ``core.fsmonitor``,
  ``core.sshCommand``, an external diff or a textconv driver (``Worktree.HARDENED`` and the diff flags);
- a worktree whose git files do not agree (its ``.git`` pointer leads outside ``<common>/worktrees/``,
  its private folder's ``gitdir`` points at another worktree, its ``commondir`` at another repository)
  is not trusted: Lopen never follows it, and ``ensure()`` moves it aside and makes it again."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest
from test_actors_git import git, write

from actors.git import GitActor
from events import catalogue as ev
from events.journal import Journal
from lopen.git import Worktree
from lopen.project import ensure_lopen_dir, open_store

MODULE = "auth"
BRANCH = f"lopen/{MODULE}"


def program(path: Path, body: str) -> Path:
    write(path, f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    write(root / "app.py", "print('v1')\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    ensure_lopen_dir(root)
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def wt(repo: Path) -> Worktree:
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / MODULE, BRANCH)
    worktree.ensure()
    return worktree


def common_dir(repo: Path) -> Path:
    return Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")).resolve()


def private_dir(worktree: Path) -> Path:
    return Path(git(worktree, "rev-parse", "--path-format=absolute", "--git-dir")).resolve()


def moved_aside(worktree: Path) -> list[Path]:
    return [p for p in worktree.parent.iterdir() if p.name.startswith(f"{worktree.name}.broken-")]


# -- the Git actor: what a model moved is put back -----------------------------------------------------


class World:
    """A repository with module ``auth`` planned (tasks core/1, core/2), its store and journal, its
    worktree, and a Git actor for it (started by the ``actor`` fixture)."""

    def __init__(self, root: Path) -> None:
        self.root = make_repo(root)
        self.base = git(root, "rev-parse", "HEAD")
        self.store, project = open_store(root)
        self.journal = Journal(self.store, project, MODULE)
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
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

    def start(self) -> pykka.ActorProxy:
        ref = GitActor.start(self.journal, self.worktree, self.store)
        self.refs.append(ref)
        return ref.proxy()

    def complete(self, task_id: str, tree: str) -> None:
        """What the toolbox records when a task is completed (``tree``: the verified tree it binds to)."""
        self.journal.record(
            ev.TaskStatusChanged(task_id=task_id, from_state="pending", to_state="in-progress"),
            ev.TaskStatusChanged(task_id=task_id, from_state="in-progress", to_state="complete", tree=tree),
        )

    def events(self, kind: type[ev.Event]) -> list:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kind)]

    def branch(self) -> str:
        """Where ``lopen/auth`` is, as git in the user's checkout says."""
        return git(self.root, "rev-parse", f"refs/heads/{BRANCH}")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path / "project")
    try:
        yield w
    finally:
        for ref in w.refs:
            ref.stop()
        w.store.close()


@pytest.fixture
def actor(world: World) -> pykka.ActorProxy:
    proxy = world.start()
    assert proxy.ensure().get() == BRANCH
    return proxy


def commit_verified(world: World, actor: pykka.ActorProxy, task_id: str, name: str) -> str:
    """The model writes ``name``; the task completes on that verified tree; Lopen's commit of it."""
    write(world.worktree.path / name, f"{name} = 1\n")
    world.complete(task_id, world.worktree.tree())
    return actor.tip().get()  # answered after the actor committed the completion


def test_guard_puts_back_lopens_verified_commit_that_the_model_reset_away(world: World, actor) -> None:
    verified = commit_verified(world, actor, "core/1", "a.py")
    assert verified != world.base and world.branch() == verified
    git(world.worktree.path, "reset", "-q", "--hard", "HEAD~1")  # the model throws Lopen's commit away
    assert world.branch() == world.base

    wrong = actor.guard().get()

    assert wrong == [f"{BRANCH} was moved to {world.base[:8]}"]
    assert world.branch() == verified  # the verified commit is on the module branch again
    (tripped,) = world.events(ev.GuardrailTripped)
    assert (tripped.category, tripped.level) == ("git", "warn") and "put back" in tripped.detail
    # and the next task's commit goes on top of it, not on the model's reset
    second = commit_verified(world, actor, "core/2", "b.py")
    assert git(world.root, "rev-parse", f"{second}^") == verified


def test_guard_puts_back_the_branch_after_the_model_committed_on_it(world: World, actor) -> None:
    write(world.worktree.path / "a.py", "A = 1\n")
    git(world.worktree.path, "add", "-A")
    git(world.worktree.path, "commit", "-q", "-m", "the model commits by itself")
    stray = world.branch()
    assert stray != world.base

    assert actor.guard().get() == [f"{BRANCH} was moved to {stray[:8]}"]

    assert world.branch() == world.base  # only Lopen commits on lopen/auth
    assert git(world.root, "branch", "--contains", stray) == ""


def test_guard_puts_head_back_on_the_module_branch_after_a_checkout(world: World, actor) -> None:
    git(world.worktree.path, "checkout", "-q", "-b", "other")
    write(world.worktree.path / "a.py", "A = 1\n")
    git(world.worktree.path, "add", "-A")
    git(world.worktree.path, "commit", "-q", "-m", "on another branch")

    assert actor.guard().get() == ["HEAD was moved to refs/heads/other"]

    # git in the worktree (what the model's next `git` sees) is on the module branch again
    assert git(world.worktree.path, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert world.branch() == world.base
    (note,) = world.events(ev.CorrectiveInstructionIssued)
    assert "HEAD was moved to refs/heads/other" in note.instruction


# -- no commit without a verified tree -------------------------------------------------------------------


def test_a_task_completed_without_a_verified_tree_gets_no_commit(world: World, actor) -> None:
    write(world.worktree.path / "a.py", "A = 'never verified'\n")
    world.complete("core/1", "")  # complete, but bound to no verified tree

    assert actor.settle().get() == world.base  # nothing owed, nothing committed, no failure
    assert world.branch() == world.base and world.events(ev.CommitRecorded) == []
    assert world.journal.read(lambda s: (s.tasks["core/1"].state, s.owed_commits())) == ("complete", [])

    # a verified completion after it is committed, alone, on the base
    write(world.worktree.path / "b.py", "B = 1\n")
    verified = world.worktree.tree()
    world.complete("core/2", verified)
    tip = actor.settle().get()
    (commit,) = world.events(ev.CommitRecorded)
    assert (commit.task_id, commit.tree, commit.parent) == ("core/2", verified, world.base)
    assert world.branch() == tip and world.worktree.tree_of(tip) == verified


# -- Lopen's git runs no program the repository names ----------------------------------------------------


HOOKS = (
    "pre-commit",
    "commit-msg",
    "post-commit",
    "reference-transaction",
    "post-index-change",
    "post-checkout",
    "post-merge",
    "post-rewrite",
    "pre-auto-gc",
)


def lopens_git_operations(wt: Worktree) -> None:
    """Every git operation of ``Worktree`` after the worktree is made: tree, diff, commit, and the rest."""
    base = wt.tip()
    write(wt.path / "app.py", "print('v2')\n")
    tree = wt.tree()
    wt.diff(base, tree)
    wt.changed_files(base, tree)
    wt.dirty_files()
    first = wt.commit(tree, base, "feat: v2")
    second = wt.commit_file("docs/spec.md", b"# spec\n", first, "docs: spec")
    assert wt.show(second, "docs/spec.md") == b"# spec\n"
    assert wt.find_commit(tree, base, "nothing") is None
    wt.move_branch(first)
    wt.restore_head()
    wt.advance(first, second)
    wt.load(tree)
    wt.reset_to(second)
    wt.restart_at(first)
    assert wt.tip() == first and wt.head_ref() == wt.ref  # it all happened


def test_lopens_git_runs_none_of_the_repositorys_hooks(tmp_path: Path, wt: Worktree) -> None:
    ran = tmp_path / "hooks-ran.txt"
    hooks = wt.repo_root / ".git" / "hooks"
    git(wt.repo_root, "config", "core.hooksPath", str(hooks))  # git's default, whatever the global config says
    for name in HOOKS:
        program(hooks / name, f'echo {name} >> "{ran}"')

    lopens_git_operations(Worktree(wt.repo_root, wt.path, wt.branch))

    assert not ran.exists(), ran.read_text()
    git(wt.path, "update-ref", "refs/heads/probe", "HEAD")  # the hooks are live: plain git runs them
    assert "reference-transaction" in ran.read_text()


@pytest.mark.parametrize("where", ["the repository's config", "the worktree's own config.worktree"])
def test_lopens_git_never_runs_a_configured_fsmonitor(tmp_path: Path, wt: Worktree, where: str) -> None:
    """The model can write its worktree's private git folder (git's index and HEAD live there), so with
    ``extensions.worktreeConfig`` it can plant ``core.fsmonitor`` in ``config.worktree``."""
    ran = tmp_path / "fsmonitor-ran.txt"
    monitor = program(tmp_path / "monitor.sh", f'echo ran >> "{ran}"\nexit 1')
    if where == "the repository's config":
        git(wt.repo_root, "config", "core.fsmonitor", str(monitor))
    else:
        git(wt.repo_root, "config", "extensions.worktreeConfig", "true")
        write(private_dir(wt.path) / "config.worktree", f"[core]\n\tfsmonitor = {monitor}\n")

    lopens_git_operations(Worktree(wt.repo_root, wt.path, wt.branch))

    assert not ran.exists()
    git(wt.path, "add", "-A")  # it is live: plain git in the worktree runs it
    assert ran.exists()


def test_lopens_diff_runs_no_external_diff_and_no_textconv(tmp_path: Path, wt: Worktree) -> None:
    """``.gitattributes`` is the model's to write; the drivers it names must not run for Lopen's diff."""
    ran = tmp_path / "driver-ran.txt"
    external = program(tmp_path / "external.sh", f'echo external >> "{ran}"')
    textconv = program(tmp_path / "textconv.sh", f'echo textconv >> "{ran}"\necho FORGED')
    git(wt.repo_root, "config", "diff.external", str(external))
    git(wt.repo_root, "config", "diff.evil.textconv", str(textconv))
    base = wt.tip()
    write(wt.path / ".gitattributes", "*.py diff=evil\n")
    write(wt.path / "app.py", "print('v2')\n")
    tree = wt.tree()

    text, files = wt.diff_and_files(base, tree)

    assert not ran.exists(), ran.read_text()
    assert "-print('v1')\n+print('v2')" in text and "FORGED" not in text  # the real change, as git stores it
    assert files == [".gitattributes", "app.py"]


def test_lopens_git_never_runs_the_repositorys_ssh_command(
    tmp_path: Path, wt: Worktree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partial clone fetches a missing object from its promisor remote on demand — over ssh, with
    ``core.sshCommand``: reading that object must not run the configured program."""
    for name in ("GIT_SSH_COMMAND", "GIT_SSH", "GIT_SSH_VARIANT", "GIT_NO_LAZY_FETCH"):
        monkeypatch.delenv(name, raising=False)
    ran = tmp_path / "ssh-ran.txt"
    ssh = program(tmp_path / "ssh.sh", f'echo ran >> "{ran}"\nexit 1')
    sha = wt.commit_file("remote-only.txt", b"only on the remote\n", wt.tip(), "docs: remote")
    blob = git(wt.repo_root, "rev-parse", f"{sha}:remote-only.txt")
    (common_dir(wt.repo_root) / "objects" / blob[:2] / blob[2:]).unlink()  # as if never fetched
    for key, value in (
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.url", "ssh://git@example.invalid/repo.git"),
        ("remote.origin.promisor", "true"),
        ("core.sshCommand", str(ssh)),
    ):
        git(wt.repo_root, "config", key, value)

    assert Worktree(wt.repo_root, wt.path, wt.branch).show(sha, "remote-only.txt") is None

    assert not ran.exists()
    subprocess.run(["git", "cat-file", "-p", blob], cwd=wt.repo_root, capture_output=True, check=False)
    assert ran.exists()  # it is live: plain git runs it


# -- a worktree whose git files do not agree is not trusted ----------------------------------------------


def test_a_git_pointer_leading_outside_the_repositorys_worktrees_is_not_followed(tmp_path: Path, wt: Worktree) -> None:
    """The worktree's ``.git`` names a git folder outside ``<common>/worktrees/`` that is otherwise
    consistent (its ``gitdir`` points back, its ``commondir`` leads to the repository) and whose HEAD
    is the user's ``main``: Lopen reads its own worktree's HEAD, and ``ensure`` makes the worktree again."""
    common = common_dir(wt.repo_root)
    forged = tmp_path / "forged-gitdir"
    write(forged / "HEAD", "ref: refs/heads/main\n")
    write(forged / "gitdir", f"{wt.path / '.git'}\n")
    write(forged / "commondir", f"{common}\n")
    write(wt.path / ".git", f"gitdir: {forged}\n")
    write(wt.path / "notes.txt", "the model's work\n")

    fresh = Worktree(wt.repo_root, wt.path, wt.branch)
    assert fresh.head_ref() == wt.ref  # not the forged HEAD's refs/heads/main
    fresh.ensure()

    (aside,) = moved_aside(wt.path)
    assert (aside / "notes.txt").is_file()  # kept for inspection
    assert private_dir(wt.path).parent == common / "worktrees"
    assert git(wt.path, "symbolic-ref", "HEAD") == wt.ref


def test_a_worktree_whose_private_folder_points_back_at_another_worktree_is_not_followed(
    repo: Path, wt: Worktree
) -> None:
    """A component's worktree whose ``.git`` names the module worktree's private folder (a real one under
    ``<common>/worktrees/``, whose ``gitdir`` points back at the module's worktree, not at it)."""
    lane = Worktree(repo, repo / ".lopen" / "worktrees" / f"{MODULE}.components" / "core", f"{BRANCH}--core")
    lane.ensure()
    write(lane.path / ".git", f"gitdir: {private_dir(wt.path)}\n")

    fresh = Worktree(repo, lane.path, lane.branch)
    assert fresh.head_ref() == lane.ref  # not the module worktree's HEAD
    fresh.ensure()

    assert len(moved_aside(lane.path)) == 1
    assert git(lane.path, "symbolic-ref", "HEAD") == lane.ref
    assert private_dir(lane.path) != private_dir(wt.path)
    assert git(wt.path, "symbolic-ref", "HEAD") == wt.ref  # the module's worktree is left as it was


def test_a_worktree_whose_commondir_leads_to_another_repository_is_made_again(tmp_path: Path, wt: Worktree) -> None:
    other = make_repo(tmp_path / "other")
    write(private_dir(wt.path) / "commondir", f"{common_dir(other)}\n")
    assert common_dir(wt.path) == common_dir(other)  # git in the worktree now works on another repository

    Worktree(wt.repo_root, wt.path, wt.branch).ensure()

    assert len(moved_aside(wt.path)) == 1
    assert common_dir(wt.path) == common_dir(wt.repo_root)
    assert git(wt.path, "symbolic-ref", "HEAD") == wt.ref
