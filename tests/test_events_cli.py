"""`lopen replay`, `lopen projections rebuild`, `lopen session …` and `lopen modules`, run as a user
runs them: in a subprocess, on a store written through the real store (and the journal, as a run
writes it) — and on a store an older Lopen wrote, holding the contradiction of issue 15."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from test_events_store import (
    AUTH,
    LEGACY_CONTRADICTION,
    LEGACY_FIRST,
    LEGACY_SECOND,
    PROJECT,
    legacy_history,
    write_legacy,
)

from events import catalogue as ev
from events.journal import Journal
from events.locks import module_lock
from events.store import EventStore

DAY = date(2026, 11, 26)
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
SPEC = """---
name: auth
description: Sign-in for the example
---

# Auth Specification

## Overview

Users sign in.

## Password Hashing

Argon2id.

## Acceptance Criteria

- [ ] [AUTH-01] A user can sign in.

## Dependencies

- none

## Skills & Hooks

- verify-tests: `python -m pytest -q`

## Notes

None.

## References

None.
"""


def lopen(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(root), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args],
        cwd=root,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def new_project(root: Path, project: str = PROJECT) -> Path:
    """A folder Lopen sees as a project, with its id recorded and a spec for module `auth`."""
    (root / ".git").mkdir(parents=True)
    (root / ".lopen").mkdir()
    (root / ".lopen" / "project-id").write_text(f"{project}\n")
    spec = root / "docs" / "requirements" / "auth" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text(SPEC)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with an approved spec and three sessions of `auth`: completed, completed, paused."""
    root = new_project(tmp_path_factory.mktemp("project"))
    with EventStore.open(root) as store:
        store.append(AUTH, [ev.SpecApproved(spec_hash="s1", section_hashes={"Overview": "h1"}, approver="ana")])
        journal = Journal(store, PROJECT, "auth")
        for n in range(3):
            journal.open_session(ev.SessionStarted(lopen_version="0.1.0"), DAY)
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
            events.append(ev.StepEntered(phase="building", step=6))
            if n == 0:
                events.append(ev.ComponentSelected(component="tokens"))
            events += [
                ev.InvocationStarted(invocation_id=f"inv{n}", model="claude-opus-4.6", kind="task"),
                ev.ToolCalled(invocation_id=f"inv{n}", tool="bash", arguments={"command": f"echo {TOKEN}"}),
                ev.TokensUsed(invocation_id=f"inv{n}", input=1000, output=100, premium=1.0),
            ]
            if n < 2:
                task = f"tokens/{n + 1}"
                events += [
                    ev.TaskStatusChanged(task_id=task, from_state="pending", to_state="in-progress"),
                    ev.TaskStatusChanged(task_id=task, from_state="in-progress", to_state="complete", tree="t"),
                    ev.CommitRecorded(sha=f"{n}" * 40, message="feat: done", task_id=task, tree="t"),
                ]
                if n == 1:
                    events.append(ev.OracleVerdictRecorded(scope="component", target="tokens", passed=True))
                events.append(ev.SessionCompleted(reason="done"))
            else:
                events += [ev.ProgressReported(progress="on it"), ev.SessionPaused(reason="budget")]
            journal.record(*events)
            journal.close()
    return root


def test_replay_json_is_one_object_per_line_with_increasing_seq(project: Path) -> None:
    out = lopen(project, "replay", "auth-20261126-1", "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    seqs = [line["seq"] for line in lines]
    assert seqs == sorted(set(seqs)) and len(seqs) == 14
    assert list(lines[0])[:3] == ["seq", "type", "at"]
    # the approval it started from, then the session's own events
    assert lines[0]["type"] == "SpecApproved" and lines[0]["approver"] == "ana"
    assert lines[1]["type"] == "SessionStarted" and lines[1]["lopen_version"] == "0.1.0"
    assert {line["session_id"] for line in lines[1:]} == {"auth-20261126-1"}
    tool = next(line for line in lines if line["type"] == "ToolCalled")
    assert tool["arguments"] == {"command": "echo [REDACTED]"} and TOKEN not in out.stdout


def test_replay_tells_one_sessions_story_starting_with_its_approval(project: Path) -> None:
    """The session's own events, in order, after the approval it worked from; nothing of the others.
    (The text view's layout is pinned by tests/test_replay.py's golden files.)"""
    out = lopen(project, "replay", "auth-20261126-3", "--json")
    assert out.returncode == 0, out.stderr
    story = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["type"] for e in story][:3] == ["SpecApproved", "SessionStarted", "StepEntered"]
    assert story[-1]["type"] == "SessionPaused" and story[-1]["reason"].startswith("budget")
    assert {e["session_id"] for e in story[1:]} == {"auth-20261126-3"}
    text = lopen(project, "replay", "auth-20261126-3", "--full").stdout
    assert "SpecApproved" in text and "StepEntered" in text and "tokens/1" not in text


def test_replay_of_an_unknown_session_says_so(project: Path) -> None:
    out = lopen(project, "replay", "auth-20261126-99")
    assert out.returncode == 1
    assert "error: no session auth-20261126-99" in out.stderr and "lopen session list" in out.stderr
    assert "Traceback" not in out.stderr
    bad = lopen(project, "replay", "not-a-session")
    assert bad.returncode == 1 and "<module>-YYYYMMDD-<n>" in bad.stderr and "Traceback" not in bad.stderr


def test_session_list_and_show(project: Path) -> None:
    listed = json.loads(lopen(project, "session", "list", "--json").stdout)
    assert [s["id"] for s in listed] == ["auth-20261126-1", "auth-20261126-2", "auth-20261126-3"]
    assert [s["status"] for s in listed] == ["completed", "completed", "paused"]
    assert {s["project"] for s in listed} == {PROJECT} and [s["tokens"] for s in listed] == [1100] * 3
    table = lopen(project, "session", "list").stdout.splitlines()
    assert table[0].split() == ["SESSION", "MODULE", "STATUS", "STEP", "STARTED", "TOKENS"]
    assert table[3].split()[:5] == ["auth-20261126-3", "auth", "paused", "6", "building"]

    shown = json.loads(lopen(project, "session", "show", "--format", "json").stdout)  # the latest
    assert list(shown) == [
        "id",
        "module",
        "phase",
        "step",
        "status",
        "protection",
        "worktree",
        "components",
        "tokens",
        "changes",
        "resume",
        "problems",
    ]
    assert (shown["id"], shown["phase"], shown["step"], shown["status"]) == ("auth-20261126-3", "building", 6, "paused")
    assert shown["tokens"] == {
        "input": 1000,
        "output": 100,
        "total": 1100,
        "premium_requests": 1.0,
        "invocations": 1,
        "cost": "unpriced",  # the test's model has no price
        "cost_usd": 0.0,
        "unpriced_calls": 1,
    }
    assert list(shown["resume"]) == ["step", "component", "task", "last_good_commit"]
    assert shown["resume"]["component"] == "tokens" and shown["problems"] == []
    (component,) = shown["components"]
    assert (component["name"], component["slug"], component["state"]) == ("tokens", "tokens", "complete")
    assert [t["id"] for t in component["tasks"]] == ["tokens/1", "tokens/2"]
    assert [t["commit"] for t in component["tasks"]] == ["0" * 40, "1" * 40]
    assert component["tasks"][0]["subtasks"] == [{"name": "lexer", "state": "complete"}]

    # a session is a view of its module's one history: the first session shows the module as it is now
    first = json.loads(lopen(project, "session", "show", "auth-20261126-1", "-f", "json").stdout)
    assert first["status"] == "completed" and first["resume"]["last_good_commit"] == "1" * 40
    assert first["tokens"]["input"] == 1000 and first["components"] == shown["components"]

    yaml = lopen(project, "session", "show", "auth-20261126-3", "--format", "yaml").stdout
    assert yaml.startswith('id: "auth-20261126-3"\nmodule: "auth"\nphase: "building"\nstep: 6\n')
    assert '  - name: "tokens"\n    slug: "tokens"\n    state: "complete"\n' in yaml
    assert '    tasks:\n      - id: "tokens/1"' in yaml
    assert "tokens:\n  input: 1000\n" in yaml

    md = lopen(project, "session", "show", "auth-20261126-3").stdout
    assert md.startswith("# Session auth-20261126-3\n")
    assert "- status: paused" in md and "- [x] `tokens/1` Parse" in md and "Problems" not in md


def test_modules_shows_the_progress_from_the_one_fold(project: Path) -> None:
    out = lopen(project, "modules")
    assert out.returncode == 0, out.stderr
    (row,) = [line for line in out.stdout.splitlines() if line.startswith("auth")]
    assert row.split()[:3] == ["auth", "in", "progress"]  # every task done, but not verified as a module


def test_projections_rebuild_reports_counts_and_sameness(project: Path) -> None:
    out = lopen(project, "projections", "rebuild", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["events"] == 33 and result["identical"] is True and result["problems"] == []
    assert result["rows"] == {"sessions": 3, "tokens": 7, "plan": 1}
    text = lopen(project, "projections", "rebuild").stdout
    assert "rebuilt 3 projections from 33 events" in text and "identical" in text and "yes" in text
    assert "skipped" not in text
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
    shown = json.loads(lopen(root, "session", "show", "auth-20261126-2", "-f", "json").stdout)
    assert [t["state"] for t in shown["components"][0]["tasks"]] == ["complete", "complete"]  # the work stays done


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


def test_a_read_only_lopen_folder_is_read_and_a_write_stops_with_the_path(tmp_path: Path, project: Path) -> None:
    """Tests run as root, which ignores permission bits; the immutable attribute (chattr +i) is a
    read-only folder root must respect too. The store exists, but its WAL cannot be created."""
    root = tmp_path / "copy"
    shutil.copytree(project, root)
    lopen_dir = root / ".lopen"
    if subprocess.run(["chattr", "+i", str(lopen_dir)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this filesystem")
    try:
        listed = lopen(root, "session", "list")  # reading needs no write: it reads a private copy (issue 21)
        out = lopen(root, "session", "delete", "auth-20261126-1")
    finally:
        subprocess.run(["chattr", "-i", str(lopen_dir)], check=True)
    assert listed.returncode == 0 and "auth-20261126-1" in listed.stdout
    assert out.returncode == 1
    assert f"cannot write the event store at {lopen_dir / 'store.sqlite'}" in out.stderr
    assert "Operation not permitted (errno 1)" in out.stderr and "Traceback" not in out.stderr


def test_a_running_session_is_not_deleted_under_its_run(tmp_path: Path, project: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(project, root)
    with EventStore.open(root) as store:
        sid = Journal(store, PROJECT, "auth").open_session(ev.SessionStarted(), DAY)
    with module_lock(root, "auth"):
        out = lopen(root, "session", "delete", sid)
    assert out.returncode == 1 and f"session {sid} is running" in out.stderr
    assert f"pid {os.getpid()}" in out.stderr


# -- a store an older Lopen wrote --------------------------------------------------------------------------


@pytest.fixture
def legacy_project(tmp_path: Path) -> Path:
    """The store of issue 15, in the layout before project ids: every command used to fail on it with
    "projection 'plan' cannot apply event #…: task core/1 is 'complete', but the event moves it from 'pending'"."""
    root = new_project(tmp_path / "old")
    with EventStore.open(root) as store:
        write_legacy(store)
    return root


def test_every_command_works_on_the_store_of_issue_15(legacy_project: Path) -> None:
    root = legacy_project
    listed = lopen(root, "session", "list", "--json")  # the first command migrates it into this project
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(s["id"], s["status"], s["project"]) for s in rows] == [
        (LEGACY_FIRST, "completed", PROJECT),
        (LEGACY_SECOND, "paused", PROJECT),
    ]
    assert [s["tokens"] for s in rows] == [1100, 550]
    with EventStore.open(root) as store:
        bad = next(
            r.seq
            for r in store.read_stream(AUTH)
            if isinstance(r.event, ev.TaskStatusChanged) and r.event.session_id == LEGACY_SECOND
        )
    problem = f"event #{bad} TaskStatusChanged skipped: {LEGACY_CONTRADICTION}"

    table = lopen(root, "session", "list")
    assert table.returncode == 0 and LEGACY_SECOND in table.stdout, table.stderr
    shown = lopen(root, "session", "show")  # the latest: the run that recorded the contradiction
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"# Session {LEGACY_SECOND}\n")
    assert "## Problems in the history" in shown.stdout and f"- {problem}" in shown.stdout
    assert "- [x] `core/1` Parse" in shown.stdout  # done work stays done
    first = json.loads(lopen(root, "session", "show", LEGACY_FIRST, "-f", "json").stdout)
    assert first["problems"] == [problem] and first["resume"]["last_good_commit"] == "c2" * 20
    modules = lopen(root, "modules")
    assert modules.returncode == 0 and "auth" in modules.stdout, modules.stderr
    replay = lopen(root, "replay", LEGACY_SECOND, "--json")
    assert replay.returncode == 0, replay.stderr
    events = [json.loads(line) for line in replay.stdout.splitlines()]
    assert any(e["seq"] == bad and e["type"] == "TaskStatusChanged" for e in events)  # audit shows it as stored
    assert events[0]["type"] == "SpecApproved" and events[1]["type"] == "SessionStarted"

    rebuilt = lopen(root, "projections", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (
        f"skipped: {problem}" in rebuilt.stdout
        and "identical to the projections kept incrementally: yes" in rebuilt.stdout
    )
    as_json = json.loads(lopen(root, "projections", "rebuild", "--json").stdout)
    assert as_json["problems"] == [problem]

    deleted = lopen(root, "session", "delete", LEGACY_SECOND)
    assert deleted.returncode == 0, deleted.stderr
    assert [s["id"] for s in json.loads(lopen(root, "session", "list", "--json").stdout)] == [LEGACY_FIRST]

    with EventStore.open(root) as store:  # migrated exactly once, the originals kept
        assert store.version("meta:legacy-migrated") == 1
        assert store.version("session:" + LEGACY_FIRST) == sum(
            stream == "session:" + LEGACY_FIRST for stream, _ in legacy_history()
        )
        assert store.version(AUTH) == len(legacy_history()) + 2  # the copies, the deletion and who asked for it
