"""`lopen revert` (G3) on real git repositories and a real SQLite store: the history is built by
appending the events a run records and making the commits it makes."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from lopen.workflow.run import ModuleRun
from lopen.workflow.state import RunState

from events import catalogue as ev
from events.errors import ModuleLocked
from events.locks import module_lock
from events.recorded import session_stream
from events.store import EventStore
from lopen.errors import LopenError
from lopen.git import Repository
from lopen.workflow.revert import revert_module

DAY = date(2026, 11, 26)
MODULE = "core"
TASKS = ("core/1", "core/2")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def commit_file(root: Path, name: str, text: str, message: str) -> str:
    (root / name).write_text(text, encoding="utf-8")
    git(root, "add", name)
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def events_of(store: EventStore, session_id: str) -> list[ev.Event]:
    return [r.event for r in store.read_stream(session_stream(session_id))]


class Project:
    def __init__(self, root: Path, store: EventStore, session_id: str, shas: dict[str, str]) -> None:
        self.root = root
        self.store = store
        self.session_id = session_id
        self.shas = shas

    @property
    def stream(self) -> str:
        return session_stream(self.session_id)

    def head(self) -> str:
        return git(self.root, "rev-parse", "HEAD")

    def record(self, *events: ev.Event) -> None:
        self.store.append(self.stream, events)


def build_project(root: Path, *, tasks: tuple[str, ...] = TASKS, commit: bool = True) -> Project:
    """A repository on `lopen/core` with one commit per completed task, and the session that made them."""
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    base = commit_file(root, ".gitignore", ".lopen/\n", "chore: start repository")
    git(root, "checkout", "-q", "-b", f"lopen/{MODULE}")
    store = EventStore.open(root)
    session_id = store.new_session_id(MODULE, DAY, ev.SessionStarted(lopen_version="0.1.0"))
    project = Project(root, store, session_id, {})
    specs = tuple(ev.TaskSpec(id=t, name=f"Task {t[-1]}") for t in tasks)
    project.record(
        ev.BranchEnsured(branch=f"lopen/{MODULE}", created=True, base=base),
        ev.ComponentsRecorded(components=(ev.ComponentSpec(name=MODULE),)),
        ev.ComponentSelected(component=MODULE),
        ev.TasksRecorded(component=MODULE, tasks=specs),
    )
    for spec in specs if commit else ():
        n = spec.id[-1]
        project.record(
            ev.TaskStatusChanged(task_id=spec.id, from_state="pending", to_state="in-progress"),
            ev.TaskStatusChanged(task_id=spec.id, from_state="in-progress", to_state="complete"),
        )
        message = f"feat({MODULE}): {spec.name} in {MODULE}"
        sha = commit_file(root, f"task{n}.py", f"TASK = {n}\n", message)
        project.shas[spec.id] = sha
        project.record(ev.CommitRecorded(sha=sha, message=message, task_id=spec.id))
    return project


@pytest.fixture
def project(tmp_path: Path):
    p = build_project(tmp_path)
    yield p
    p.store.close()


# -- the API ---------------------------------------------------------------------------------------


def test_reverts_to_the_last_task_commit_after_a_manual_commit(project: Project) -> None:
    manual = commit_file(project.root, "scratch.py", "x = 1\n", "wip: manual tweak")
    before = project.store.version(project.stream)

    result = revert_module(project.root, MODULE, project.store)

    assert result.changed and (result.from_sha, result.to_sha) == (manual, project.shas["core/2"])
    assert result.target.task_id == "core/2" and result.reopened == ()
    assert result.discarded == ((manual, "wip: manual tweak"),)
    assert project.head() == project.shas["core/2"]
    assert not (project.root / "scratch.py").exists() and (project.root / "task2.py").exists()
    new = events_of(project.store, project.session_id)[before:]
    assert [type(e).__name__ for e in new] == ["Reverted", "CorrectiveInstructionIssued"]
    assert (new[0].from_sha, new[0].to_sha) == (manual, project.shas["core/2"])
    assert new[1].category == "revert" and "wip: manual tweak" in new[1].instruction


def test_to_a_task_reopens_the_tasks_after_it_and_tells_the_next_invocation(project: Project) -> None:
    core1, core2 = project.shas["core/1"], project.shas["core/2"]
    before = project.store.version(project.stream)

    result = revert_module(project.root, MODULE, project.store, to_task="core/1")

    assert (result.from_sha, result.to_sha, result.reopened) == (core2, core1, ("core/2",))
    assert project.head() == core1 and git(project.root, "branch", "--show-current") == "lopen/core"
    assert not (project.root / "task2.py").exists() and (project.root / "task1.py").exists()
    new = events_of(project.store, project.session_id)[before:]
    assert [type(e).__name__ for e in new] == ["Reverted", "TaskReopened", "CorrectiveInstructionIssued"]
    reverted, reopened, instruction = new
    assert (reverted.from_sha, reverted.to_sha) == (core2, core1) and "core/1" in reverted.reason
    assert reopened.task_id == "core/2" and core2[:8] in reopened.reason
    assert instruction.category == "revert"
    for fragment in ("core/2", core2[:8], core1[:8], "re-opened"):
        assert fragment in instruction.instruction

    # the run's own fold: core/2 pending again, core/1 still complete, the note waiting for the next prompt
    state = RunState(MODULE)
    for event in events_of(project.store, project.session_id):
        state.apply(event)
    assert (state.tasks["core/1"].state, state.tasks["core/2"].state) == ("complete", "pending")
    assert state.tasks["core/2"].commit == ""
    run = ModuleRun(project.root, MODULE, project.session_id, None, project.store, Repository(project.root))
    assert run.plan().task("core/2").state == "pending"
    assert instruction.instruction in run.pending_notes()

    # the projections agree: plan.md unchecks the task, the resume point moves back
    views = project.store.projections
    views.catch_up()
    plan = views.plan.get(MODULE)
    assert {t.id: t.state for c in plan.components for t in c.tasks} == {"core/1": "complete", "core/2": "pending"}
    assert views.resume.get(project.session_id).last_good_commit == core1


def test_nothing_to_revert_when_the_target_is_head(project: Project) -> None:
    before = project.store.version(project.stream)
    result = revert_module(project.root, MODULE, project.store)
    assert not result.changed and result.to_sha == project.head() == project.shas["core/2"]
    assert project.store.version(project.stream) == before


def test_a_dirty_tree_is_refused_and_nothing_changes(project: Project) -> None:
    (project.root / "task2.py").write_text("TASK = 'edited'\n", encoding="utf-8")
    (project.root / "notes.txt").write_text("mine\n", encoding="utf-8")
    before = project.store.version(project.stream)

    with pytest.raises(LopenError) as caught:
        revert_module(project.root, MODULE, project.store, to_task="core/1")

    error = caught.value
    assert "task2.py" in error.what and "notes.txt" in error.what and "git stash" in error.how
    assert project.head() == project.shas["core/2"]
    assert (project.root / "task2.py").read_text(encoding="utf-8") == "TASK = 'edited'\n"
    assert (project.root / "notes.txt").exists()
    assert project.store.version(project.stream) == before


def test_no_task_commit_is_refused(tmp_path: Path) -> None:
    project = build_project(tmp_path, commit=False)
    try:
        before = project.store.version(project.stream)
        with pytest.raises(LopenError, match="no task-completion commit") as caught:
            revert_module(project.root, MODULE, project.store)
        assert project.session_id in caught.value.why
        assert project.store.version(project.stream) == before
        with pytest.raises(LopenError, match="no task-completion commit") as caught:
            revert_module(project.root, "other", project.store)
        assert "no session" in caught.value.why
    finally:
        project.store.close()


def test_an_unknown_task_is_refused_listing_the_known_ones(project: Project) -> None:
    with pytest.raises(LopenError, match="core/9") as caught:
        revert_module(project.root, MODULE, project.store, to_task="core/9")
    assert "core/1, core/2" in caught.value.how
    assert project.head() == project.shas["core/2"]


def test_a_task_already_rolled_back_is_refused(project: Project) -> None:
    revert_module(project.root, MODULE, project.store, to_task="core/1")
    with pytest.raises(LopenError, match="no longer on lopen/core") as caught:
        revert_module(project.root, MODULE, project.store, to_task="core/2")
    assert "core/1" in caught.value.how


def test_the_module_branch_must_be_checked_out(project: Project) -> None:
    git(project.root, "checkout", "-q", "main")
    with pytest.raises(LopenError, match="not checked out") as caught:
        revert_module(project.root, MODULE, project.store)
    assert "git checkout lopen/core" in caught.value.how
    assert git(project.root, "rev-parse", "lopen/core") == project.shas["core/2"]


def test_a_running_lopen_run_holds_the_lock(project: Project) -> None:
    with module_lock(project.root, MODULE), pytest.raises(ModuleLocked):
        revert_module(project.root, MODULE, project.store, to_task="core/1")
    assert project.head() == project.shas["core/2"]


def test_a_completed_session_is_paused_so_lopen_run_resumes_it(project: Project) -> None:
    project.record(ev.SessionCompleted(reason="module complete"))
    revert_module(project.root, MODULE, project.store, to_task="core/1")
    assert isinstance(events_of(project.store, project.session_id)[-1], ev.SessionPaused)
    views = project.store.projections
    views.catch_up()
    assert views.sessions.get(project.session_id).status == "paused"


# -- the command line ------------------------------------------------------------------------------


def lopen(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_command_exit_codes_and_messages(tmp_path: Path) -> None:
    project = build_project(tmp_path)
    project.store.close()
    root, core1, core2 = project.root, project.shas["core/1"], project.shas["core/2"]

    done = lopen(root, "revert", MODULE)
    assert done.returncode == 0, done.stderr
    assert "nothing to revert" in done.stdout and core2[:8] in done.stdout

    (root / "task1.py").write_text("changed\n", encoding="utf-8")
    done = lopen(root, "revert", MODULE, "--to", "core/1")
    assert done.returncode == 1
    assert "error: the work tree has uncommitted changes: task1.py" in done.stderr and "git stash" in done.stderr
    assert "Traceback" not in done.stderr
    git(root, "checkout", "--", "task1.py")

    done = lopen(root, "revert", MODULE, "--to", "nope/1")
    assert done.returncode == 1 and "core/1, core/2" in done.stderr

    done = lopen(root, "revert", MODULE, "--to", "core/1")
    assert done.returncode == 0, done.stderr
    assert f"reverted lopen/core: {core2[:8]} → {core1[:8]}" in done.stdout
    assert "re-opened: core/2" in done.stdout and "next: lopen run core" in done.stdout
    assert git(root, "rev-parse", "HEAD") == core1

    done = lopen(root, "revert", "ghost")
    assert done.returncode == 1 and "no task-completion commit" in done.stderr
