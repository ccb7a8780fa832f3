"""`lopen do "<request>"` end to end: real CLI, real git, real store, the scripted model (issue 23, item 5).

A fresh repository (one commit, no .gitignore, an empty HOME): the request is drafted into a one-task
spec, approved with --yes, built through the gated loop and committed on lopen/<module>; the request
and the drafted criteria are in the audit trail. Without --yes and without a terminal the draft is
all that happens.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from events import catalogue as ev
from events.selection import session_records
from lopen.project import open_store
from lopen.scripted_model import load_playbook
from tests.e2e.test_workflow import lopen_env

pytestmark = pytest.mark.e2e
PLAYBOOK = Path(__file__).parents[1] / "playbooks" / "quick_request.toml"
REQUEST = "add a greet function"
MODULE = "do-add-greet-function"  # from the request's words


def fresh_repository(root: Path) -> Path:
    root.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "Ada"], ["config", "user.email", "ada@x.org"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "README.md").write_text("# A project\n")
    subprocess.run(["git", "add", "README.md"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=root, check=True)
    return root


def lopen(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,  # no terminal
        capture_output=True,
        text=True,
        timeout=300,
    )


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def environment(tmp_path: Path, cli_path: str, url: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**lopen_env(cli_path, url), "HOME": str(home), "PYTHONPATH": str(Path(__file__).parents[2])}


def test_a_quick_request_is_drafted_approved_built_and_committed(tmp_path, cli_path, scripted):
    server = scripted(load_playbook(PLAYBOOK))
    root = fresh_repository(tmp_path / "project")
    env = environment(tmp_path, cli_path, server.url)

    done = lopen(root, env, "do", REQUEST, "--yes")

    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    spec = root / "docs" / "requirements" / MODULE / "SPECIFICATION.md"
    assert "[GREET-01]" in spec.read_text()  # the drafted spec, in the checkout for the person
    assert "[GREET-01]" in out  # shown before it is built
    # no planner: the drafted spec is the one task; the model was asked to draft it as one
    prompts = [
        " ".join(str(m["content"]) for m in r.body["messages"] if m["role"] == "user") for r in server.chat_requests
    ]
    assert not [p for p in prompts if "kind=planning" in p], "a planning invocation was made"
    assert [r.rule for r in server.chat_requests].count("task-change-1") == 6, out
    draft_request = server.chat_requests[0].body["messages"]
    assert "one task" in " ".join(str(m["content"]) for m in draft_request if m["role"] == "system").lower()
    # one verified commit on lopen/<module> with the change; the checkout is untouched but for the spec
    branch = f"lopen/{MODULE}"
    commits = git(root, "log", "--format=%s", f"main..{branch}").splitlines()
    assert commits == [f"feat({MODULE}): Add a greet function in change", f"docs({MODULE}): the approved specification"]
    changed = git(root, "diff", "--name-only", "main", branch).splitlines()
    assert "greet.py" in changed and "tests/test_greet.py" in changed
    assert git(root, "show", f"{branch}:greet.py").endswith('return f"Hello, {name}!"')
    assert git(root, "status", "--porcelain") == "?? docs/"
    # the end of the output: the commit, the diff stat, how to take it
    stat = git(root, "diff", "--stat", "main", branch)
    assert stat.splitlines()[-1] in out and "greet.py" in out
    assert f"git merge {branch}" in out
    assert git(root, "log", "-1", "--format=%h", branch) in out
    # the audit trail: the request, who approved, the drafted criteria as the task's acceptance
    store, project = open_store(root)
    with store:
        store.projections.catch_up()
        (session,) = store.projections.sessions.all()
        events = [r.event for r in session_records(store, project, session.id)]
    asked = [e for e in events if isinstance(e, ev.ControlRequested) and e.action == "quick-request"]
    assert [e.detail for e in asked] == [REQUEST] and asked[0].caller.startswith("cli")
    approvals = [e for e in events if isinstance(e, ev.ControlRequested) and e.action == "approve-spec"]
    assert len(approvals) == 1 and approvals[0].caller.startswith("cli")
    (tasks,) = [e for e in events if isinstance(e, ev.TasksRecorded)]
    assert tasks.tasks[0].acceptance[0].startswith("[GREET-01]")
    (commit,) = [e for e in events if isinstance(e, ev.CommitRecorded) and e.task_id == "change/1"]
    (verdict,) = [e for e in events if isinstance(e, ev.OracleVerdictRecorded) and e.target == "change/1"]
    assert verdict.passed and git(root, "rev-parse", f"{commit.sha}^{{tree}}") == verdict.tree
    replay = lopen(root, env, "replay", session.id, "--full")
    assert replay.returncode == 0, replay.stderr
    assert REQUEST in replay.stdout and "quick-request" in replay.stdout
    assert (
        '"acceptance":["[GREET-01] `greet(\\"Ada\\")` returns `Hello, Ada!`"' in replay.stdout
    )  # the drafted criteria
    assert "SessionCompleted" in replay.stdout


def test_without_yes_and_without_a_terminal_only_the_draft_is_recorded(tmp_path, cli_path, scripted):
    server = scripted(load_playbook(PLAYBOOK))
    root = fresh_repository(tmp_path / "project")
    env = environment(tmp_path, cli_path, server.url)

    done = lopen(root, env, "do", REQUEST)

    assert done.returncode == 2, done.stdout + done.stderr
    assert "not approved" in done.stderr and "--yes" in done.stderr
    assert f"lopen spec approve {MODULE}" in done.stderr and "Traceback" not in done.stderr
    assert (root / "docs" / "requirements" / MODULE / "SPECIFICATION.md").is_file()
    assert {r.rule for r in server.chat_requests} == {"draft-quick"}  # the draft, nothing built
    store, project = open_store(root)
    with store:
        store.projections.catch_up()
        (session,) = store.projections.sessions.all()
        kinds = [type(r.event).__name__ for r in session_records(store, project, session.id)]
        state = store.projections.plan.get(MODULE)
    assert kinds[:2] == ["SessionStarted", "ControlRequested"] and kinds[-1] == "SessionPaused"
    assert state.approval is None and not state.planned
    assert "SpecApproved" not in kinds
    assert git(root, "log", "--format=%s", f"main..lopen/{MODULE}") == ""  # nothing committed


def test_on_a_terminal_the_draft_is_shown_and_a_no_builds_nothing(tmp_path, cli_path, scripted):
    import os
    import pty
    import selectors
    import time

    server = scripted(load_playbook(PLAYBOOK))
    root = fresh_repository(tmp_path / "project")
    env = environment(tmp_path, cli_path, server.url)
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "lopen", "do", REQUEST],
        cwd=root,
        env=env,
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(terminal)
    shown = b""
    deadline = time.monotonic() + 120
    with selectors.DefaultSelector() as waiting:
        waiting.register(child.stdout, selectors.EVENT_READ)
        while b"[y/N]" not in shown and time.monotonic() < deadline:  # the question, then the answer
            if waiting.select(timeout=deadline - time.monotonic()):
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:
                    break
                shown += chunk
    os.write(controller, b"n\n")
    rest, errors = child.communicate(timeout=60)
    os.close(controller)
    out = (shown + rest).decode()

    assert child.returncode == 2, out + errors.decode()
    assert f"Approve this specification and build it on lopen/{MODULE}? [y/N]" in out
    assert out.index("[GREET-01]") < out.index("[y/N]")  # the draft is shown before the question
    assert "you did not approve it" in errors.decode()
    assert {r.rule for r in server.chat_requests} == {"draft-quick"}
    assert git(root, "log", "--format=%s", f"main..lopen/{MODULE}") == ""
