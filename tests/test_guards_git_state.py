"""git's own files in the model's worktree, which only Lopen moves (issue #21): the ``.git`` pointer,
the private git folder's ``gitdir``, ``commondir``, ``config.worktree`` and ``HEAD``.

Lopen's own git ignores them (its folders are pinned), but the person's plain ``git`` in a worktree Lopen
leaves behind reads them: a model that points ``.git`` at a git folder of its own with ``core.fsmonitor``
set, or gives ``config.worktree`` a ``filter.<x>.clean``, would have its program run outside the
sandbox. Here a "hostile model" rewrites them (as a shell command under Landlock, or in a lane under
bubblewrap, could), on real repositories; Lopen puts them back (``Worktree.restore_git_files``), the Git
actor records it and tells the next invocation, and the person's ``git status`` / ``git add`` afterwards
run nothing of the model's — the program would touch a marker file.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest
from copilot.generated.session_events import _load_PermissionRequest
from repos import git, make_repo, write
from sandbox_project import SandboxProject, make_project

from actors.git import GitActor
from events import catalogue as ev
from events.journal import Journal
from lopen.git import Worktree
from lopen.project import open_store
from lopen.sandbox import SandboxConfig
from lopen.sandbox.policy import decide, policy_for

BRANCH = "lopen/auth"


def users_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as the person runs it later: plain, no hardening, whatever the folder's ``.git`` says."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


@pytest.fixture
def wt(repo: Path) -> Worktree:
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", BRANCH)
    worktree.ensure()
    return worktree


class Hostile:
    """What a model plants: a program that touches ``marker``, and a git folder of its own naming it."""

    def __init__(self, base: Path) -> None:
        self.marker = base / "model-program.ran"
        self.program = base / "model-program.sh"
        write(self.program, f"#!/bin/sh\ntouch {self.marker}\ncat\n")  # as a clean filter: content unchanged
        self.program.chmod(0o755)
        self.repo = base / "model-repo"
        self.repo.mkdir()
        git(self.repo, "init", "-q", "-b", "main")
        git(self.repo, "config", "core.fsmonitor", str(self.program))
        self.git_dir = self.repo / ".git"

    def ran(self) -> bool:
        return self.marker.exists()

    def forget(self) -> None:
        self.marker.unlink(missing_ok=True)


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return Hostile(tmp_path)


def private_dir(wt: Worktree) -> Path:
    return wt.repo_root / ".git" / "worktrees" / wt.path.name


# -- the .git pointer -----------------------------------------------------------------------------


def test_an_untouched_worktree_has_nothing_to_put_back(wt):
    assert wt.restore_git_files() == []
    assert wt.restore_git_files() == []


def test_a_pointer_to_the_models_git_folder_with_an_fsmonitor_is_put_back_and_runs_nothing(wt, hostile):
    pointer = wt.path / ".git"
    trusted = pointer.read_text()
    write(pointer, f"gitdir: {hostile.git_dir}\n")
    users_git(wt.path, "status")
    assert hostile.ran()  # the attack is real: the person's git status would run the model's program
    hostile.forget()

    assert wt.restore_git_files() == [f".git was rewritten to 'gitdir: {hostile.git_dir}'"]
    assert pointer.read_text() == trusted
    done = users_git(wt.path, "status", "--short")
    assert done.returncode == 0, done.stderr
    assert not hostile.ran()


def test_a_pointer_made_a_symlink_is_replaced_and_its_target_never_written(tmp_path, wt):
    victim = tmp_path / "users-file"
    write(victim, "the person's\n")
    pointer = wt.path / ".git"
    pointer.unlink()
    pointer.symlink_to(victim)
    assert wt.restore_git_files() == [f".git was made a symlink to {victim}"]
    assert not pointer.is_symlink() and pointer.read_text().startswith("gitdir: ")
    assert victim.read_text() == "the person's\n"


def test_a_pointer_made_a_whole_git_folder_is_replaced(wt, hostile):
    pointer = wt.path / ".git"
    pointer.unlink()
    subprocess.run(["cp", "-r", str(hostile.git_dir), str(pointer)], check=True)
    assert wt.restore_git_files() == [".git was made a folder"]
    users_git(wt.path, "status")
    assert not hostile.ran()


def test_a_removed_pointer_is_written_again(wt):
    (wt.path / ".git").unlink()
    assert wt.restore_git_files() == [".git was removed"]
    assert git(wt.path, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"


def test_a_worktree_lopen_never_ensured_is_left_alone(repo, wt, hostile):
    write(wt.path / ".git", f"gitdir: {hostile.git_dir}\n")
    stranger = Worktree(repo, wt.path, BRANCH)  # nothing pinned: Lopen does not know what to restore
    assert stranger.restore_git_files() == []
    assert not stranger.checked()


def test_a_worktree_moved_aside_has_its_git_pointer_disarmed(repo, wt, hostile):
    write(wt.path / ".git", f"gitdir: {hostile.git_dir}\n")
    Worktree(repo, wt.path, BRANCH).ensure()  # a new run does not trust it: moved aside, made afresh
    [aside] = [p for p in wt.path.parent.iterdir() if ".broken-" in p.name]
    assert not (aside / ".git").exists() and (aside / ".git.untrusted").is_file()
    users_git(aside, "status")
    assert not hostile.ran()


# -- the private git folder -----------------------------------------------------------------------


def test_a_commondir_leading_to_the_models_repository_is_put_back(wt, hostile):
    write(private_dir(wt) / "commondir", f"{hostile.git_dir}\n")
    assert wt.restore_git_files() == [f"the worktree's git folder's commondir was rewritten to '{hostile.git_dir}'"]
    assert (private_dir(wt) / "commondir").read_text() == "../..\n"
    users_git(wt.path, "status")
    assert not hostile.ran()


def test_a_gitdir_back_pointer_elsewhere_is_put_back(tmp_path, wt):
    write(private_dir(wt) / "gitdir", f"{tmp_path / 'elsewhere' / '.git'}\n")
    [what] = wt.restore_git_files()
    assert what.startswith("the worktree's git folder's gitdir was rewritten")
    assert (private_dir(wt) / "gitdir").read_text() == f"{wt.path.resolve() / '.git'}\n"
    Worktree(wt.repo_root, wt.path, BRANCH).remove()  # git trusts it again: it can be removed
    assert not wt.path.exists()


def test_a_clean_filter_in_config_worktree_is_removed_and_never_runs(repo, wt, hostile):
    git(repo, "config", "extensions.worktreeConfig", "true")  # the person's repository reads config.worktree
    config = private_dir(wt) / "config.worktree"
    write(config, f'[core]\n\tsparseCheckout = false\n[filter "x"]\n\tclean = {hostile.program}\n')
    write(wt.path / ".gitattributes", "* filter=x\n")
    write(wt.path / "new.py", "x = 1\n")
    users_git(wt.path, "add", "new.py")
    assert hostile.ran()  # the attack is real: the person's git add would run the model's filter
    hostile.forget()

    assert wt.restore_git_files() == ["the worktree's git folder's config.worktree set filter.x.clean: removed"]
    assert git(repo, "config", "--file", str(config), "--list") == "core.sparsecheckout=false"
    write(wt.path / "newer.py", "y = 2\n")
    done = users_git(wt.path, "add", "newer.py")
    assert done.returncode == 0, done.stderr
    assert not hostile.ran()


def test_config_worktree_keeping_only_sparse_checkout_keys_is_left_as_it_is(wt):
    config = private_dir(wt) / "config.worktree"
    write(config, "[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n")
    assert wt.restore_git_files() == []
    assert config.read_text() == "[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n"


def test_config_worktree_git_cannot_read_is_emptied(wt):
    config = private_dir(wt) / "config.worktree"
    write(config, "[core\n\tfsmonitor = /bin/evil\n")
    [what] = wt.restore_git_files()
    assert what.startswith("the worktree's git folder's config.worktree set rewritten to")
    assert config.read_text() == ""


# -- the Git actor: checked, put back, recorded, said ---------------------------------------------


class World:
    def __init__(self, root: Path, worktree: Worktree) -> None:
        self.store, self.project = open_store(root)
        self.journal = Journal(self.store, self.project, "auth")
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.worktree = worktree
        self.refs: list[pykka.ActorRef] = []

    def start(self, worktree: Worktree | None = None, **kwargs: object) -> pykka.ActorProxy:
        ref = GitActor.start(self.journal, worktree or self.worktree, self.store, **kwargs)
        self.refs.append(ref)
        return ref.proxy()

    def events(self, kind: type[ev.Event]) -> list:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kind)]


@pytest.fixture
def world(repo: Path) -> Iterator[World]:
    w = World(repo, Worktree(repo, repo / ".lopen" / "worktrees" / "auth", BRANCH))
    try:
        yield w
    finally:
        for ref in w.refs:
            ref.stop()
        w.store.close()


def test_check_puts_back_the_pointer_and_head_records_it_and_tells_the_model(world, hostile):
    actor = world.start()
    actor.ensure().get()
    wt = world.worktree
    write(wt.path / ".git", f"gitdir: {hostile.git_dir}\n")
    write(private_dir(wt) / "HEAD", "ref: refs/heads/main\n")

    pointer = f".git was rewritten to 'gitdir: {hostile.git_dir}'"
    assert actor.check().get() == [pointer, "HEAD was moved to refs/heads/main"]
    assert (private_dir(wt) / "HEAD").read_text() == f"ref: refs/heads/{BRANCH}\n"
    [tripped] = world.events(ev.GuardrailTripped)
    assert (tripped.category, tripped.level) == ("git", "warn")
    assert tripped.detail == (
        f"git's own files were tampered with: {pointer}; HEAD was moved to refs/heads/main — put back"
    )
    [note] = world.events(ev.CorrectiveInstructionIssued)
    assert note.category == "git"
    assert "Do not edit git's own files" in note.instruction and pointer in note.instruction
    assert "Do not change branches" in note.instruction
    users_git(wt.path, "status")
    assert not hostile.ran()


def test_head_rewritten_to_garbage_is_put_back(world):
    actor = world.start()
    actor.ensure().get()
    write(private_dir(world.worktree) / "HEAD", "[core]\n\tfsmonitor = /bin/evil\n")
    assert actor.check().get() == ["HEAD was moved to a detached commit"]
    assert (private_dir(world.worktree) / "HEAD").read_text() == f"ref: refs/heads/{BRANCH}\n"


def test_guard_after_an_invocation_puts_back_git_files_too(world, hostile):
    actor = world.start()
    actor.ensure().get()
    write(world.worktree.path / ".git", f"gitdir: {hostile.git_dir}\n")
    assert actor.guard().get() == [f".git was rewritten to 'gitdir: {hostile.git_dir}'"]
    assert actor.guard().get() == []
    assert len(world.events(ev.GuardrailTripped)) == 1


def test_an_actor_that_stops_checks_the_worktree_it_leaves(world, hostile):
    actor = world.start()
    actor.ensure().get()
    write(world.worktree.path / ".git", f"gitdir: {hostile.git_dir}\n")
    world.refs.pop().stop()  # the run ends
    [tripped] = world.events(ev.GuardrailTripped)
    assert ".git was rewritten" in tripped.detail
    users_git(world.worktree.path, "status")
    assert not hostile.ran()


def test_a_merged_lanes_worktree_with_a_rewritten_pointer_is_put_back_and_removed(repo, world, hostile):
    world.journal.record(
        ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"),)),
        ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="core/1", name="Sign tokens"),)),
    )
    world.start().ensure().get()
    lane_tree = Worktree(repo, repo / ".lopen" / "worktrees" / "auth.components" / "core", f"{BRANCH}--core")
    lane = world.start(lane_tree, lane="core")
    lane.ensure().get()
    write(lane_tree.path / ".git", f"gitdir: {hostile.git_dir}\n")
    lane.retire().get()
    assert not lane_tree.path.exists()  # before: git would not remove it, and the model's pointer stayed
    [tripped] = world.events(ev.GuardrailTripped)
    assert ".git was rewritten" in tripped.detail


# -- the permission policy: refused in every mode ---------------------------------------------------


def git_files(project: SandboxProject) -> list[Path]:
    """The module worktree's ``.git`` pointer, its private git folder's files and the repository's
    configuration, hooks and attributes."""
    common = project.root / ".git"
    private = common / "worktrees" / project.module
    return [
        project.worktree / ".git",
        *(private / name for name in ("HEAD", "config.worktree", "commondir", "gitdir")),
        common / "config",
        common / "hooks" / "pre-commit",
        common / "info" / "attributes",
    ]


@pytest.mark.parametrize("confinement", ["none", "bwrap", "landlock"])
def test_the_policy_refuses_the_models_writes_to_gits_own_files_in_every_mode(tmp_path, confinement):
    project = make_project(tmp_path)
    config = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree))
    policy = policy_for(config, cwd=str(project.worktree), temp_dir="", home=str(project.home), confinement=confinement)
    assert decide(policy, write_request("src/app.py")).allowed
    for path in git_files(project):
        decision = decide(policy, write_request(str(path)))
        assert not decision.allowed, path
    refused = decide(policy, shell_request(f"echo 'gitdir: {tmp_path}' > .git"))
    assert refused.allowed == (confinement != "none")  # a kernel sandbox judges shell commands itself


def test_a_lane_session_may_not_write_its_own_git_pointer(tmp_path):
    project = make_project(tmp_path)
    lanes = project.worktree.with_name(f"{project.module}.components")
    lane = lanes / "core"
    project.git("worktree", "add", "-q", "-b", f"lopen/{project.module}--core", str(lane))
    config = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree), lanes=str(lanes))
    policy = policy_for(config, cwd=str(lane), temp_dir="", home=str(project.home))
    assert decide(policy, write_request("made.py")).allowed
    decision = decide(policy, write_request(".git"))
    assert not decision.allowed and decision.target == str(lane / ".git")
    assert not decide(policy, shell_request("printf 'gitdir: /tmp/x' > .git")).allowed


def write_request(path: str) -> object:
    """A write permission request exactly as the SDK decodes it from the CLI's message."""
    fields = {"canOfferSessionApproval": True, "diff": "", "fileName": path, "intention": "Create file"}
    return _load_PermissionRequest({"kind": "write", **fields})


def shell_request(command: str) -> object:
    return _load_PermissionRequest(
        {
            "kind": "shell",
            "canOfferSessionApproval": False,
            "commands": [{"identifier": command, "readOnly": False}],
            "fullCommandText": command,
            "hasWriteFileRedirection": True,
            "intention": "Running command",
            "possiblePaths": [],
            "possibleUrls": [],
        }
    )
