"""`lopen replay`, `lopen projections rebuild` and `lopen session …`, run as a user runs them:
in a subprocess, on a store written through the real store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from events import catalogue as ev
from events.recorded import session_stream
from events.store import EventStore

DAY = date(2026, 11, 26)
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def lopen(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with three sessions of `auth`: completed, completed, paused mid-task."""
    root = tmp_path_factory.mktemp("project")
    (root / ".git").mkdir()
    with EventStore.open(root) as store:
        for n in range(3):
            sid = store.new_session_id("auth", DAY, ev.SessionStarted(lopen_version="0.1.0"))
            events: list[ev.Event] = [ev.StepEntered(phase="planning", step=3, why="no components")]
            if n == 0:
                events += [
                    ev.ComponentsRecorded(components=(ev.ComponentSpec(name="tokens"),)),
                    ev.TasksRecorded(
                        component="tokens",
                        tasks=(
                            ev.TaskSpec(id="tokens/1", name="Parse", subtasks=("lexer",)),
                            ev.TaskSpec(id="tokens/2", name="Sign"),
                        ),
                    ),
                ]
            events += [
                ev.StepEntered(phase="building", step=6),
                ev.ComponentSelected(component="tokens"),
                ev.InvocationStarted(invocation_id=f"inv{n}", model="claude-opus-4.6"),
                ev.ToolCalled(invocation_id=f"inv{n}", tool="bash", arguments={"command": f"echo {TOKEN}"}),
                ev.TokensUsed(invocation_id=f"inv{n}", input=1000, output=100, premium=1.0),
            ]
            if n < 2:
                task = f"tokens/{n + 1}"
                events += [
                    ev.TaskStatusChanged(task_id=task, from_state="pending", to_state="in-progress"),
                    ev.TaskStatusChanged(task_id=task, from_state="in-progress", to_state="complete"),
                    ev.CommitRecorded(sha=f"{n}" * 40, message="feat: done", task_id=task),
                    ev.SessionCompleted(reason="done"),
                ]
            else:
                events += [ev.ProgressReported(progress="on it"), ev.SessionPaused(reason="budget")]
            store.append(session_stream(sid), events)
    return root


def test_replay_json_is_one_object_per_line_with_increasing_seq(project: Path) -> None:
    out = lopen(project, "replay", "auth-20261126-1", "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    seqs = [line["seq"] for line in lines]
    assert seqs == sorted(set(seqs)) and len(seqs) == 13
    assert list(lines[0])[:3] == ["seq", "type", "at"]
    assert lines[0]["type"] == "SessionStarted" and lines[0]["lopen_version"] == "0.1.0"
    tool = next(line for line in lines if line["type"] == "ToolCalled")
    assert tool["arguments"] == {"command": "echo [REDACTED]"} and TOKEN not in out.stdout


def test_replay_text_is_one_line_per_event(project: Path) -> None:
    out = lopen(project, "replay", "auth-20261126-3")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 9
    assert lines[1].endswith('StepEntered                  phase=planning step=3 why="no components"')
    assert lines[1].startswith("2026-") and "Z  #" in lines[1]
    assert "SessionPaused" in lines[-1] and "reason=budget" in lines[-1]


def test_replay_of_an_unknown_session_says_so(project: Path) -> None:
    out = lopen(project, "replay", "auth-20261126-99")
    assert out.returncode == 1
    assert "error: no session auth-20261126-99" in out.stderr and "lopen session list" in out.stderr
    assert "Traceback" not in out.stderr


def test_session_list_and_show(project: Path) -> None:
    listed = json.loads(lopen(project, "session", "list", "--json").stdout)
    assert [s["id"] for s in listed] == ["auth-20261126-1", "auth-20261126-2", "auth-20261126-3"]
    assert [s["status"] for s in listed] == ["completed", "completed", "paused"]
    table = lopen(project, "session", "list").stdout.splitlines()
    assert table[0].split() == ["SESSION", "MODULE", "STATUS", "STEP", "STARTED", "TOKENS"]
    assert table[3].split()[:4] == ["auth-20261126-3", "auth", "paused", "6"]

    shown = json.loads(lopen(project, "session", "show", "--format", "json").stdout)  # the latest
    assert list(shown) == ["id", "module", "phase", "step", "status", "components", "tokens", "resume"]
    assert (shown["id"], shown["phase"], shown["step"], shown["status"]) == ("auth-20261126-3", "building", 6, "paused")
    assert shown["tokens"] == {"input": 1000, "output": 100, "total": 1100, "premium_requests": 1.0, "invocations": 1}
    assert list(shown["resume"]) == ["step", "component", "task", "last_good_commit"]
    assert shown["resume"]["component"] == "tokens"
    (component,) = shown["components"]
    assert (component["name"], component["state"]) == ("tokens", "complete")
    assert [t["id"] for t in component["tasks"]] == ["tokens/1", "tokens/2"]
    assert component["tasks"][0]["subtasks"] == [{"name": "lexer", "state": "complete"}]

    first = json.loads(lopen(project, "session", "show", "auth-20261126-1", "-f", "json").stdout)
    assert first["resume"]["last_good_commit"] == "0" * 40

    yaml = lopen(project, "session", "show", "auth-20261126-3", "--format", "yaml").stdout
    assert yaml.startswith('id: "auth-20261126-3"\nmodule: "auth"\nphase: "building"\nstep: 6\n')
    assert '  - name: "tokens"\n    state: "complete"\n    tasks:\n      - id: "tokens/1"' in yaml
    assert "tokens:\n  input: 1000\n" in yaml

    md = lopen(project, "session", "show", "auth-20261126-3").stdout
    assert md.startswith("# Session auth-20261126-3\n")
    assert "- status: paused" in md and "- [x] `tokens/1` Parse" in md


def test_projections_rebuild_reports_counts_and_sameness(project: Path) -> None:
    out = lopen(project, "projections", "rebuild", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["events"] == 33 and result["identical"] is True
    assert result["rows"] == {"sessions": 3, "tokens": 7, "plan": 1, "resume": 3, "modules": 1}
    text = lopen(project, "projections", "rebuild").stdout
    assert "rebuilt 5 projections from 33 events" in text and "identical" in text and "yes" in text
    assert (project / ".lopen" / "modules" / "auth" / "plan.md").read_text().startswith("# Plan: auth\n")


def test_delete_and_prune_keep_the_events(tmp_path: Path, project: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(project, root)
    out = lopen(root, "session", "delete", "auth-20261126-3")
    assert out.returncode == 0, out.stderr
    assert "deleted session auth-20261126-3" in out.stdout
    out = lopen(root, "session", "prune", "--keep", "1")
    assert out.stdout.splitlines()[0] == "deleted auth-20261126-1"
    listed = json.loads(lopen(root, "session", "list", "--json").stdout)
    assert [s["id"] for s in listed] == ["auth-20261126-2"]
    replayed = lopen(root, "replay", "auth-20261126-1", "--json").stdout.splitlines()
    assert json.loads(replayed[-1])["type"] == "SessionDeleted"  # still auditable
    again = lopen(root, "session", "delete", "auth-20261126-1")
    assert again.returncode == 1 and "it was deleted" in again.stderr


def test_a_corrupt_store_is_quarantined_with_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".lopen").mkdir()
    (tmp_path / ".lopen" / "store.sqlite").write_bytes(b"\x00garbage" * 1000)
    out = lopen(tmp_path, "session", "list")
    assert out.returncode == 1
    moved = list((tmp_path / ".lopen" / "corrupted").iterdir())
    assert len(moved) == 1 and moved[0].read_bytes() == b"\x00garbage" * 1000
    assert f"the event store {tmp_path / '.lopen' / 'store.sqlite'} cannot be read" in out.stderr
    assert str(moved[0]) in out.stderr and "fresh" in out.stderr and "Traceback" not in out.stderr
    again = lopen(tmp_path, "session", "list")
    assert again.returncode == 0 and "no sessions yet" in again.stdout


def test_a_read_only_lopen_folder_stops_with_the_path(tmp_path: Path, project: Path) -> None:
    """Tests run as root, which ignores permission bits; the immutable attribute (chattr +i) is a
    read-only folder root must respect too. The store exists, but its WAL cannot be created."""
    root = tmp_path / "copy"
    shutil.copytree(project, root)
    lopen_dir = root / ".lopen"
    if subprocess.run(["chattr", "+i", str(lopen_dir)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this filesystem")
    try:
        out = lopen(root, "session", "list")
    finally:
        subprocess.run(["chattr", "-i", str(lopen_dir)], check=True)
    assert out.returncode == 1
    assert f"cannot write the event store at {lopen_dir / 'store.sqlite'}" in out.stderr
    assert "Operation not permitted (errno 1)" in out.stderr and "Traceback" not in out.stderr


def test_a_running_session_is_not_deleted_under_its_run(tmp_path: Path, project: Path) -> None:
    from events.locks import module_lock

    root = tmp_path / "copy"
    shutil.copytree(project, root)
    with EventStore.open(root) as store:
        sid = store.new_session_id("auth", DAY)
    with module_lock(root, "auth"):
        out = lopen(root, "session", "delete", sid)
    assert out.returncode == 1 and f"session {sid} is running" in out.stderr
    assert f"pid {os.getpid()}" in out.stderr
