"""`lopen revert` (G3) on real git repositories and a real SQLite store, in the worktree model: the
module's history is built by recording what a run records (through the journal) and making the
commits it makes (exactly the verified tree, on `lopen/<module>` in the module's own worktree).

A revert works on the module's worktree and branch only: the user's checkout — HEAD, index, working
tree, an uncommitted edit of theirs — is never touched, and every test says so."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from events import catalogue as ev
from events.errors import ModuleLocked
from events.journal import Journal
from events.locks import module_lock
from events.store import EventStore
from lopen.app.engine import worktree_for
from lopen.config import Settings
from lopen.errors import LopenError
from lopen.git import Worktree
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.decide import assess
from lopen.workflow.revert import revert_module

DAY = date(2026, 11, 26)
MODULE = "core"
BRANCH = f"lopen/{MODULE}"
TASKS = ("core/1", "core/2")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def worktree_of(root: Path, module: str = MODULE) -> Worktree:
    """The module's worktree as `lopen run` and `lopen revert` make it, with the default settings."""
    return worktree_for(root, module, Settings())


class Checkout:
    """The user's checkout, in the middle of their own work, and a way to tell it was not touched."""

    def __init__(self, root: Path) -> None:
        self.root = root
        write(root / "README.md", "# mine, edited\n")
        write(root / "staged.py", "S = 1\n")
        git(root, "add", "staged.py")
        write(root / "notes.txt", "my notes\n")
        self.before = self.look()

    def look(self) -> tuple[str, ...]:
        return (
            git(self.root, "symbolic-ref", "HEAD"),
            git(self.root, "rev-parse", "HEAD"),
            git(self.root, "ls-files", "--stage"),
            git(self.root, "status", "--porcelain=v1", "--untracked-files=all"),
            (self.root / "README.md").read_text(encoding="utf-8"),
            (self.root / "notes.txt").read_text(encoding="utf-8"),
        )

    def untouched(self) -> bool:
        return self.look() == self.before


class Project:
    def __init__(self, root: Path, store: EventStore, project: str, journal: Journal, worktree: Worktree) -> None:
        self.root = root
        self.store = store
        self.project = project
        self.journal = journal
        self.worktree = worktree
        self.session_id = journal.session_id
        self.shas: dict[str, str] = {}
        self.base = ""
        self.user: Checkout

    def tip(self) -> str:
        return self.worktree.tip()

    def version(self) -> int:
        return self.store.version(self.journal.stream)

    def events_since(self, version: int) -> list[ev.Event]:
        return [r.event for r in self.store.read_stream(self.journal.stream, version)]

    def state(self):
        return Journal(self.store, self.project, MODULE).snapshot()

    def revert(self, to_task: str | None = None, module: str = MODULE):
        worktree = self.worktree if module == MODULE else worktree_of(self.root, module)
        return revert_module(self.root, module, self.store, self.project, worktree, to_task=to_task)


def build_project(root: Path, *, tasks: tuple[str, ...] = TASKS, commit: bool = True) -> Project:
    """A repository whose module `core` was built by a run: one commit per completed task on lopen/core
    in the module's worktree, and the history that recorded them."""
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    write(root / "README.md", "# project\n")  # no .gitignore: Lopen needs none
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "chore: start repository")
    ensure_lopen_dir(root)
    store, project_id = open_store(root)
    journal = Journal(store, project_id, MODULE)
    journal.open_session(ev.SessionStarted(lopen_version="0.1.0"), today=DAY)
    worktree = worktree_of(root)
    _, base = worktree.ensure()
    project = Project(root, store, project_id, journal, worktree)
    project.base = base
    specs = tuple(ev.TaskSpec(id=t, name=f"Task {t[-1]}") for t in tasks)
    journal.record(
        ev.BranchEnsured(branch=BRANCH, created=True, base=base, worktree=str(worktree.path)),
        ev.ComponentsRecorded(components=(ev.ComponentSpec(name=MODULE),)),
        ev.ComponentSelected(component=MODULE),
        ev.TasksRecorded(component=MODULE, tasks=specs),
    )
    for spec in specs if commit else ():
        n = spec.id[-1]
        write(worktree.path / f"task{n}.py", f"TASK = {n}\n")
        tree = worktree.tree()
        journal.record(
            ev.TaskStatusChanged(task_id=spec.id, from_state="pending", to_state="in-progress"),
            ev.TaskStatusChanged(task_id=spec.id, from_state="in-progress", to_state="complete", tree=tree),
        )
        parent = worktree.tip()
        message = f"feat({MODULE}): {spec.name} in {MODULE}"
        sha = worktree.commit(tree, parent, f"{message}\n\nLopen-Task: {spec.id}\n")
        journal.record(
            ev.CommitRecorded(sha=sha, message=message, task_id=spec.id, tree=tree, parent=parent, branch=BRANCH)
        )
        worktree.reset_to(sha)
        project.shas[spec.id] = sha
    project.user = Checkout(root)
    return project


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    p = build_project(tmp_path)
    yield p
    p.store.close()


# -- the API ---------------------------------------------------------------------------------------


def test_reverts_to_the_last_task_commit_after_a_manual_commit(project: Project) -> None:
    write(project.worktree.path / "scratch.py", "x = 1\n")
    git(project.worktree.path, "add", "scratch.py")
    git(project.worktree.path, "commit", "-q", "-m", "wip: manual tweak")
    manual = project.tip()
    before = project.version()

    result = project.revert()

    assert result.changed and (result.from_sha, result.to_sha) == (manual, project.shas["core/2"])
    assert result.target.task_id == "core/2" and result.reopened == ()
    assert result.discarded == ((manual, "wip: manual tweak"),) and result.session_id == project.session_id
    assert project.tip() == project.shas["core/2"] and project.worktree.head_ref() == f"refs/heads/{BRANCH}"
    assert not (project.worktree.path / "scratch.py").exists() and (project.worktree.path / "task2.py").exists()
    assert project.worktree.dirty_files() == []
    new = project.events_since(before)
    assert [type(e).__name__ for e in new] == ["Reverted", "CorrectiveInstructionIssued"]
    assert (new[0].from_sha, new[0].to_sha) == (manual, project.shas["core/2"])
    assert new[1].category == "revert" and "wip: manual tweak" in new[1].instruction
    assert {e.session_id for e in new} == {project.session_id}
    assert project.state().tip == project.shas["core/2"]
    assert project.user.untouched()


def test_to_a_task_reopens_the_tasks_after_it_and_tells_the_next_invocation(project: Project) -> None:
    core1, core2 = project.shas["core/1"], project.shas["core/2"]
    before = project.version()

    result = project.revert(to_task="core/1")

    assert (result.from_sha, result.to_sha, result.reopened) == (core2, core1, ("core/2",))
    assert project.tip() == core1 and project.worktree.head_ref() == f"refs/heads/{BRANCH}"
    assert not (project.worktree.path / "task2.py").exists() and (project.worktree.path / "task1.py").exists()
    new = project.events_since(before)
    assert [type(e).__name__ for e in new] == ["Reverted", "TaskReopened", "CorrectiveInstructionIssued"]
    reverted, reopened, instruction = new
    assert (reverted.from_sha, reverted.to_sha) == (core2, core1) and "core/1" in reverted.reason
    assert reopened.task_id == "core/2" and core2[:8] in reopened.reason
    assert instruction.category == "revert"
    for fragment in ("core/2", core2[:8], core1[:8], "re-opened"):
        assert fragment in instruction.instruction

    # the one fold: core/2 pending again, core/1 still complete, the note waiting for the next prompt,
    # and the next step is core/2
    state = project.state()
    assert (state.tasks["core/1"].state, state.tasks["core/2"].state) == ("complete", "pending")
    assert (state.tasks["core/2"].commit, state.tasks["core/2"].tree, state.tip) == ("", "", core1)
    assert state.notes == [instruction.instruction]
    assert state.owed_commits() == []  # nothing to commit again: core/2 is to be done again
    assert (assess(state).kind, assess(state).task) == ("task", "core/2")

    # the projections agree: plan.md unchecks the task
    views = project.store.projections
    views.catch_up()
    plan = views.plan.get(MODULE)
    assert plan is not None
    assert {t.id: t.state for t in plan.ordered_tasks()} == {"core/1": "complete", "core/2": "pending"}
    assert "- [ ] `core/2`" in views.plan.markdown(MODULE)
    assert project.user.untouched()


def test_nothing_to_revert_when_the_target_is_the_tip(project: Project) -> None:
    before = project.version()
    result = project.revert()
    assert not result.changed and result.to_sha == project.tip() == project.shas["core/2"]
    assert result.reopened == () and result.discarded == ()
    assert project.version() == before
    assert project.user.untouched()


def test_a_dirty_worktree_is_refused_and_nothing_changes(project: Project) -> None:
    write(project.worktree.path / "task2.py", "TASK = 'edited'\n")
    write(project.worktree.path / "notes.txt", "the model's\n")
    before = project.version()

    with pytest.raises(LopenError) as caught:
        project.revert(to_task="core/1")

    error = caught.value
    assert "task2.py" in error.what and "notes.txt" in error.what and str(project.worktree.path) in error.what
    assert "stash" in error.how
    assert project.tip() == project.shas["core/2"]
    assert (project.worktree.path / "task2.py").read_text(encoding="utf-8") == "TASK = 'edited'\n"
    assert (project.worktree.path / "notes.txt").exists()
    assert project.version() == before
    assert project.user.untouched()


def test_the_user_s_own_dirty_checkout_does_not_stop_a_revert(project: Project) -> None:
    """The user's edits are theirs: revert neither refuses because of them nor touches them."""
    assert project.revert(to_task="core/1").changed
    assert project.user.untouched()


def test_caches_a_test_run_left_do_not_make_the_worktree_dirty(project: Project) -> None:
    write(project.worktree.path / "__pycache__" / "task1.cpython-311.pyc", "bytecode")
    write(project.worktree.path / ".pytest_cache" / "v" / "cache" / "lastfailed", "{}")
    assert project.worktree.tree() == project.worktree.tree_of(project.tip())
    assert project.revert(to_task="core/1").changed


def test_no_task_commit_is_refused(tmp_path: Path) -> None:
    project = build_project(tmp_path, commit=False)
    try:
        before = project.version()
        with pytest.raises(LopenError, match="no task-completion commit") as caught:
            project.revert()
        assert "records no task-completion commit" in caught.value.why
        assert project.version() == before
        with pytest.raises(LopenError, match="no task-completion commit") as caught:
            project.revert(module="other")
        assert "no session" in caught.value.why
        assert project.tip() == project.base
        assert project.user.untouched()
    finally:
        project.store.close()


def test_an_unknown_task_is_refused_listing_the_known_ones(project: Project) -> None:
    before = project.version()
    with pytest.raises(LopenError, match="core/9") as caught:
        project.revert(to_task="core/9")
    assert "core/1, core/2" in caught.value.how
    assert project.tip() == project.shas["core/2"] and project.version() == before


def test_a_task_already_rolled_back_is_refused(project: Project) -> None:
    project.revert(to_task="core/1")
    with pytest.raises(LopenError, match="no task-completion commit for 'core/2'") as caught:
        project.revert(to_task="core/2")
    assert "core/1" in caught.value.how
    assert project.tip() == project.shas["core/1"]


def test_a_branch_rewritten_outside_lopen_is_refused(project: Project) -> None:
    git(project.worktree.path, "reset", "-q", "--hard", project.base)
    with pytest.raises(LopenError, match=f"no task-completion commit of {MODULE} is on {BRANCH} any more"):
        project.revert()
    assert project.tip() == project.base


def test_a_running_lopen_run_holds_the_lock(project: Project) -> None:
    before = project.version()
    with module_lock(project.root, MODULE), pytest.raises(ModuleLocked):
        project.revert(to_task="core/1")
    assert project.tip() == project.shas["core/2"] and project.version() == before


# -- the command line ------------------------------------------------------------------------------


def lopen(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_command_exit_codes_and_messages(tmp_path: Path) -> None:
    project = build_project(tmp_path)
    project.store.close()
    root, wt, core1, core2 = project.root, project.worktree.path, project.shas["core/1"], project.shas["core/2"]

    done = lopen(root, "revert", MODULE)
    assert done.returncode == 0, done.stderr
    assert f"nothing to revert: {BRANCH} is already at {core2[:8]}" in done.stdout

    write(wt / "task1.py", "changed\n")
    done = lopen(root, "revert", MODULE, "--to", "core/1")
    assert done.returncode == 1
    assert "uncommitted changes: task1.py" in done.stderr and "stash" in done.stderr
    assert "Traceback" not in done.stderr
    git(wt, "checkout", "--", "task1.py")

    done = lopen(root, "revert", MODULE, "--to", "nope/1")
    assert done.returncode == 1 and "core/1, core/2" in done.stderr and "Traceback" not in done.stderr

    done = lopen(root, "revert", MODULE, "--to", "core/1")
    assert done.returncode == 0, done.stderr
    assert f"reverted {BRANCH}: {core2[:8]} → {core1[:8]}" in done.stdout
    assert "re-opened: core/2" in done.stdout and "next: lopen run core" in done.stdout
    assert git(wt, "rev-parse", "HEAD") == core1

    done = lopen(root, "revert", "ghost")
    assert done.returncode == 1 and "no task-completion commit" in done.stderr and "Traceback" not in done.stderr

    assert project.user.untouched()


def test_a_worktree_left_on_a_detached_head_is_reverted_on_the_branch(project: Project) -> None:
    """A run killed before the Git actor put back a HEAD the model detached: the revert still moves
    lopen/core, not a detached HEAD."""
    git(project.worktree.path, "checkout", "-q", "--detach")
    result = project.revert(to_task="core/1")
    assert result.changed
    assert project.tip() == project.shas["core/1"] == project.state().tip
    assert project.worktree.head_ref() == f"refs/heads/{BRANCH}"
