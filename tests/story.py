"""A realistic module history, written through the journal (so every event passes the one fold's
checks), with fixed times: the store the audit tests (replay, log, MCP) read.

Module ``slugify`` of project ``story``, day 2026-11-26:

- the spec approved by Ann Auditor;
- session 1: planning (components core and cli, tasks core/1 and core/2); task core/1 — the oracle
  REJECTS its first tree (two findings), the completion claim is refused, the model fixes it, the
  oracle passes it, it is committed; task core/2 fails its tests; a budget warning; paused;
- session 2: a queued message (an MCP client), core/2 retried, passed and committed; paused at
  the iteration limit.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime
from pathlib import Path

from events import catalogue as ev
from events.journal import Journal
from events.store import EventStore

PROJECT = "story"
MODULE = "slugify"
DAY = date(2026, 11, 26)
START = datetime(2026, 11, 26, 9, 0, 0, tzinfo=UTC).timestamp()
SESSION_1 = "slugify-20261126-1"
SESSION_2 = "slugify-20261126-2"
APPROVER = "Ann Auditor <ann@example.com>"
REJECTION = (
    "normalize('ﬁnal №5') returns 'ﬁnal №5': NFKD is applied after dropping non-ASCII characters, "
    "so the ligature and the numero sign are lost instead of decomposed"
)
TREE_REJECTED, TREE_PASSED = "1" * 40, "2" * 40
COMMIT_1, COMMIT_2 = "c0ffee" + "1" * 34, "c0ffee" + "2" * 34
SPEC = """---
name: slugify
description: Text to URL slugs
---

# Slugify Specification

## Overview

Turns text into slugs.

## Acceptance Criteria

- [ ] [SLUG-01] normalize() decomposes with NFKD
- [ ] [SLUG-02] slugify() joins words with -

## Dependencies

None.

## Skills & Hooks

- verify-tests: `python -m pytest -q`

## Notes

None.

## References

- none
"""


class Clock:
    """Deterministic event times: each call is a few seconds after the last."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self, seconds: float = 3.0) -> float:
        self.now += seconds
        return self.now


def make_project(root: Path) -> Path:
    """A git repository with the spec, one commit, and the project id ``story``."""
    root.mkdir(parents=True, exist_ok=True)
    spec = root / "docs" / "requirements" / MODULE / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(SPEC, encoding="utf-8")
    git = ["git", "-c", "user.name=Story", "-c", "user.email=story@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "spec"], cwd=root, check=True)
    (root / ".lopen").mkdir(exist_ok=True)
    (root / ".lopen" / "project-id").write_text(PROJECT + "\n", encoding="utf-8")
    return root


def write_story(root: Path) -> None:
    """Record the story into ``root``'s store (SQLite under .lopen/)."""
    t = Clock()
    with EventStore.open(root) as store:
        journal = Journal(store, PROJECT, MODULE)
        journal.record(
            ev.SpecApproved(
                at=t(),
                spec_hash="9f" * 16,
                section_hashes={"Overview": "a1" * 16, "Acceptance Criteria": "b2" * 16, "Dependencies": "c3" * 16},
                approver=APPROVER,
            )
        )
        _session_1(journal, t)
        journal.close()
        _session_2(journal, t)
        journal.close()


def _session_1(j: Journal, t: Clock) -> None:
    started = ev.SessionStarted(
        at=t(60),
        lopen_version="0.1.0",
        models={"planning": "scripted-opus", "building": "scripted-opus", "oracle": "scripted-mini"},
        protection="policy",
    )
    assert j.open_session(started, today=DAY) == SESSION_1
    r = j.record
    r(ev.StepEntered(at=t(), phase="planning", step=2, why="the spec is approved and there is no plan yet"))
    r(
        ev.InvocationStarted(
            at=t(),
            invocation_id="inv-plan",
            phase="planning",
            step=2,
            kind="planning",
            model="scripted-opus",
            prompt_size=9120,
            sections_sent=("Overview", "Acceptance Criteria", "Dependencies"),
        )
    )
    r(
        ev.ToolCalled(
            at=t(),
            invocation_id="inv-plan",
            tool="read_spec",
            arguments={"module": MODULE, "section": "Acceptance Criteria"},
            result_summary="- [ ] [SLUG-01] normalize() decomposes with NFKD\n- [ ] [SLUG-02] slugify() joins words",
            duration=0.01,
        )
    )
    r(ev.DependenciesRecorded(at=t(), dependencies=(ev.Dependency(name="unicodedata", kind="stdlib"),)))
    r(
        ev.ComponentsRecorded(
            at=t(),
            components=(
                ev.ComponentSpec(name="core", description="normalize() and slugify()"),
                ev.ComponentSpec(name="cli", description="python -m slugify", depends_on=("core",)),
            ),
        )
    )
    r(ev.ComponentSelected(at=t(), component="core", reason="cli depends on it"))
    r(
        ev.TasksRecorded(
            at=t(),
            component="core",
            tasks=(
                ev.TaskSpec(id="core/1", name="Normalize text", acceptance=("SLUG-01",)),
                ev.TaskSpec(id="core/2", name="Join words", acceptance=("SLUG-02",)),
            ),
        )
    )
    r(ev.TokensUsed(at=t(), invocation_id="inv-plan", model="scripted-opus", input=9800, output=640, premium=3.0))
    r(ev.InvocationFinished(at=t(), invocation_id="inv-plan", outcome="ok", duration=21.5))

    r(ev.StepEntered(at=t(), phase="building", step=6, why="the plan is complete"))
    r(ev.ScopeStarted(at=t(), scope="task", target="core/1", base_commit="b" * 40))
    r(
        ev.InvocationStarted(
            at=t(),
            invocation_id="inv-t1",
            phase="building",
            step=6,
            kind="task",
            model="scripted-opus",
            component="core",
            task="core/1",
            prompt_size=6400,
            sections_sent=("Acceptance Criteria",),
        )
    )
    r(
        ev.TaskStatusChanged(
            at=t(), task_id="core/1", from_state="pending", to_state="in-progress", invocation_id="inv-t1"
        )
    )
    r(
        ev.ToolCalled(
            at=t(),
            invocation_id="inv-t1",
            tool="create",
            arguments={
                "path": "slugify/normalize.py",
                "file_text": "import unicodedata\n\n\ndef normalize(text):\n"
                "    text = text.encode('ascii', 'ignore').decode()\n"
                "    return unicodedata.normalize('NFKD', text).lower().strip()\n",
            },
            result_summary="Created file slugify/normalize.py with 142 characters",
            duration=0.02,
        )
    )
    r(
        ev.ToolCalled(
            at=t(),
            invocation_id="inv-t1",
            tool="bash",
            arguments={"command": "python -m pytest -q", "description": "run the tests"},
            result_summary="2 passed in 0.03s\n<shellId: 1 completed with exit code 0>",
            exit_code=0,
            duration=0.61,
        )
    )
    r(ev.ToolCalled(at=t(), invocation_id="inv-t1", tool="verify_task_completion", arguments={"task_id": "core/1"}))
    _oracle(
        j,
        t,
        "inv-o1",
        "core/1",
        passed=False,
        tree=TREE_REJECTED,
        attempt=1,
        summary="normalize() loses characters that NFKD would decompose",
        findings=(
            ev.Finding(
                severity="high", category="correctness", description=REJECTION, location="slugify/normalize.py:5"
            ),
            ev.Finding(severity="low", category="tests", description="no test covers SLUG-01's second example"),
        ),
    )
    r(
        ev.ToolCalled(
            at=t(),
            invocation_id="inv-t1",
            tool="update_task_status",
            arguments={"task_id": "core/1", "status": "complete"},
            success=False,
            result_summary="refused: task core/1 has no passing verification in this invocation "
            "(the oracle rejected it: normalize() loses characters that NFKD would decompose)",
        )
    )
    r(
        ev.CompletionRefused(
            at=t(),
            scope="task",
            target="core/1",
            why="no passing verify_task_completion in this invocation",
            invocation_id="inv-t1",
        )
    )
    r(
        ev.ToolCalled(
            at=t(),
            invocation_id="inv-t1",
            tool="edit",
            arguments={
                "path": "slugify/normalize.py",
                "old_str": "    text = text.encode('ascii', 'ignore').decode()\n"
                "    return unicodedata.normalize('NFKD', text).lower().strip()\n",
                "new_str": "    text = unicodedata.normalize('NFKD', text)\n"
                "    return text.encode('ascii', 'ignore').decode().lower().strip()\n",
            },
            result_summary="File slugify/normalize.py updated",
        )
    )
    r(ev.ToolCalled(at=t(), invocation_id="inv-t1", tool="verify_task_completion", arguments={"task_id": "core/1"}))
    _oracle(j, t, "inv-o2", "core/1", passed=True, tree=TREE_PASSED, attempt=2, summary="SLUG-01 holds")
    r(
        ev.TaskStatusChanged(
            at=t(),
            task_id="core/1",
            from_state="in-progress",
            to_state="complete",
            tree=TREE_PASSED,
            invocation_id="inv-t1",
        )
    )
    r(ev.TokensUsed(at=t(), invocation_id="inv-t1", model="scripted-opus", input=31000, output=2200, premium=3.0))
    r(ev.ContextWindowMeasured(at=t(), invocation_id="inv-t1", used=41000, limit=200000))
    r(ev.InvocationFinished(at=t(), invocation_id="inv-t1", outcome="ok", duration=95.0))
    r(
        ev.CommitRecorded(
            at=t(),
            sha=COMMIT_1,
            message="feat(slugify): Normalize text in core",
            task_id="core/1",
            tree=TREE_PASSED,
            parent="b" * 40,
            branch="lopen/slugify",
        )
    )

    r(ev.ScopeStarted(at=t(), scope="task", target="core/2", base_commit=COMMIT_1))
    r(
        ev.InvocationStarted(
            at=t(),
            invocation_id="inv-t2",
            phase="building",
            step=6,
            kind="task",
            model="scripted-opus",
            component="core",
            task="core/2",
            prompt_size=6100,
        )
    )
    r(
        ev.TaskStatusChanged(
            at=t(), task_id="core/2", from_state="pending", to_state="in-progress", invocation_id="inv-t2"
        )
    )
    r(
        ev.ToolCalled(
            at=t(),
            invocation_id="inv-t2",
            tool="bash",
            arguments={"command": "python -m pytest -q tests/test_core.py"},
            success=False,
            result_summary="F.\nFAILED tests/test_core.py::test_separator - AssertionError: 'hello-world' != "
            "'hello_world'\n1 failed, 1 passed in 0.05s\n<shellId: 2 completed with exit code 1>",
            exit_code=1,
            duration=0.7,
        )
    )
    r(
        ev.TaskStatusChanged(
            at=t(),
            task_id="core/2",
            from_state="in-progress",
            to_state="failed",
            reason="test_separator fails: the separator argument is ignored",
            invocation_id="inv-t2",
        )
    )
    r(ev.InvocationFinished(at=t(), invocation_id="inv-t2", outcome="ok", duration=40.0))
    r(ev.GuardrailTripped(at=t(), category="budget", level="warn", detail="80 % of the token budget used (40,000)"))
    r(ev.SessionPaused(at=t(), reason="budget: 90 % of the token budget used; confirm to go on"))


def _oracle(
    j: Journal,
    t: Clock,
    invocation: str,
    task: str,
    *,
    passed: bool,
    tree: str,
    attempt: int,
    summary: str,
    findings: tuple[ev.Finding, ...] = (),
    parent: str = "inv-t1",
) -> None:
    r = j.record
    r(
        ev.InvocationStarted(
            at=t(),
            invocation_id=invocation,
            phase="building",
            step=6,
            kind="oracle",
            model="scripted-mini",
            component="core",
            task=task,
            parent_invocation=parent,
        )
    )
    r(
        ev.VerificationEvidenceRecorded(
            at=t(),
            scope="task",
            target=task,
            command="python -m pytest -q",
            exit_code=0,
            output_tail="2 passed in 0.03s",
            duration=0.6,
            tree=tree,
            invocation_id=invocation,
        )
    )
    r(ev.TokensUsed(at=t(), invocation_id=invocation, model="scripted-mini", input=4100, output=210))
    r(
        ev.OracleVerdictRecorded(
            at=t(),
            scope="task",
            target=task,
            passed=passed,
            confidence=0.9 if passed else 0.8,
            summary=summary,
            findings=findings,
            criteria=(ev.CriterionJudged(id=f"SLUG-0{task[-1]}", met=passed, evidence=f"slugify/core.py ({task})"),),
            model="scripted-mini",
            attempt=attempt,
            tree=tree,
            invocation_id=invocation,
            parent_invocation=parent,
        )
    )
    r(ev.InvocationFinished(at=t(), invocation_id=invocation, outcome="ok", duration=8.0))


def _session_2(j: Journal, t: Clock) -> None:
    assert j.open_session(ev.SessionStarted(at=t(3600), lopen_version="0.1.0"), today=DAY) == SESSION_2
    r = j.record
    r(ev.ControlRequested(at=t(), action="queue-message", caller="mcp:vscode", detail="m-1"))
    r(ev.UserMessageQueued(at=t(), message_id="m-1", text="the separator must be used as given"))
    r(ev.StepEntered(at=t(), phase="building", step=6, why="task core/2 failed before; retrying"))
    r(
        ev.InvocationStarted(
            at=t(),
            invocation_id="inv-t3",
            phase="building",
            step=6,
            kind="task",
            model="scripted-opus",
            component="core",
            task="core/2",
            prompt_size=6800,
        )
    )
    r(ev.UserMessageDelivered(at=t(), message_id="m-1", invocation_id="inv-t3"))
    r(
        ev.TaskStatusChanged(
            at=t(), task_id="core/2", from_state="failed", to_state="in-progress", invocation_id="inv-t3"
        )
    )
    r(
        ev.ToolCalled(
            at=t(),
            invocation_id="inv-t3",
            tool="edit",
            arguments={"path": "slugify/core.py", "old_str": "'-'.join(", "new_str": "separator.join("},
            result_summary="File slugify/core.py updated",
        )
    )
    r(ev.ToolCalled(at=t(), invocation_id="inv-t3", tool="verify_task_completion", arguments={"task_id": "core/2"}))
    _oracle(j, t, "inv-o3", "core/2", passed=True, tree="3" * 40, attempt=1, summary="SLUG-02 holds", parent="inv-t3")
    r(
        ev.TaskStatusChanged(
            at=t(),
            task_id="core/2",
            from_state="in-progress",
            to_state="complete",
            tree="3" * 40,
            invocation_id="inv-t3",
        )
    )
    r(ev.InvocationFinished(at=t(), invocation_id="inv-t3", outcome="ok", duration=30.0))
    r(ev.CommitRecorded(at=t(), sha=COMMIT_2, message="feat(slugify): Join words in core", task_id="core/2"))
    r(ev.SessionPaused(at=t(), reason="max iterations (2) reached"))
