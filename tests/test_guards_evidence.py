"""The evidence collector's guards, fast: until now only the end-to-end tests (tests/e2e) showed them.

Each test runs ``lopen.workflow.evidence.EvidenceCollector`` on a real git repository, a real
``lopen.git.Worktree`` (made as `lopen run` makes it) and a real journal over the SQLite store: the
spec's verify commands really run in the worktree, and write what they did to a log file outside it,
so a test can tell a command that ran from a result that was reused. Only the oracle's model is a
stand-in (tests/test_toolbox.py's ``Oracle``), and these tests check it is never asked.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_toolbox import Oracle, git, write

from actors.messages import VerifyRequest
from actors.oracle import OracleActor
from events import catalogue as ev
from events.journal import Journal
from lopen.app.engine import worktree_for
from lopen.config import Settings
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.approval import approve_spec
from lopen.workflow.evidence import EvidenceCollector
from lopen.workflow.invoke import Invoker
from lopen.workflow.oracle import Evidence, Verdict
from lopen.workflow.spec_watch import SpecWatcher

MODULE = "auth"
SPEC_PATH = f"docs/requirements/{MODULE}/SPECIFICATION.md"
CRITERION = "- [ ] [AUTH-01] tokens are signed"


def spec(hooks: str) -> str:
    return f"""---
name: {MODULE}
description: Tokens
---

# Auth

## Overview

Sign and check tokens.

## Acceptance Criteria

{CRITERION}

## Dependencies

None.

## Skills & Hooks

{hooks}
## Notes

None.

## References

None.
"""


class Bench:
    """A project whose approved spec has the hooks ``names`` (each command appends its name to
    ``self.ran``, outside the worktree), its module worktree, a journal with an open session, the
    evidence collector and the Oracle actor over them."""

    def __init__(self, tmp: Path, names: tuple[str, ...]) -> None:
        self.ran = tmp / "ran.log"  # outside the project, so outside the worktree and its tree
        self.root = root = tmp / "project"
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.name", "Test")
        git(root, "config", "user.email", "test@example.com")
        log = shlex.quote(str(self.ran))
        hooks = "".join(f"- {name}: `echo {name} >> {log} && echo ok` — appends its name\n" for name in names)
        write(root / SPEC_PATH, spec(hooks))
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "spec")
        ensure_lopen_dir(root)
        self.store, self.project = open_store(root)
        approve_spec(root, MODULE, self.store, self.project, approver="Ann")
        self.journal = Journal(self.store, self.project, MODULE)
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        self.worktree = worktree_for(root, MODULE, Settings())
        _, base = self.worktree.ensure()
        self.journal.record(ev.BranchEnsured(branch=self.worktree.branch, created=True, base=base))
        self.collector = EvidenceCollector(self.journal, self.worktree, SpecWatcher(root, MODULE), root, timeout=60)
        self.model = Oracle()
        self.oracle = OracleActor.start(
            self.journal, self.collector, Invoker(self.journal, self.model, Settings(), self.worktree.path)
        )

    def runs(self) -> list[str]:
        """The hooks that really ran, in order."""
        return self.ran.read_text().split() if self.ran.exists() else []

    def collect(self, scope: str, target: str) -> Evidence:
        return self.collector.collect(scope, target, "", invocation_id="task-1")

    def verify(self, scope: str, target: str) -> Verdict:
        request = VerifyRequest(scope=scope, target=target, notes="", invocation_id="task-1")
        return self.oracle.proxy().verify(request).get(timeout=120)

    def recorded(self, kind: type[ev.Event]) -> list:
        return [r.event for r in self.store.read_stream(self.journal.stream) if isinstance(r.event, kind)]


@pytest.fixture
def bench(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Bench]:
    names = getattr(request, "param", ("verify-tests",))
    b = Bench(tmp_path, names)
    try:
        yield b
    finally:
        b.oracle.stop()
        b.store.close()


def names(evidence: Evidence) -> list[str]:
    return [c.name for c in evidence.commands]


# -- a. the approved spec edited in the worktree fails verification, whatever the oracle says ----------


def test_the_approved_spec_edited_in_the_worktree_is_a_problem_of_the_evidence(bench: Bench) -> None:
    write(bench.worktree.path / "tokens.py", "def sign():\n    return 'signed'\n")
    assert bench.collect("task", "core/1").problems == []  # the spec as approved: no problem

    copy = bench.worktree.path / SPEC_PATH
    copy.write_text(copy.read_text().replace(CRITERION, "- [ ] [AUTH-01] tokens are signed, or not"))
    (problem,) = bench.collect("task", "core/1").problems
    assert problem.startswith(f"{SPEC_PATH} was edited (Acceptance Criteria)")
    assert f"git checkout -- {SPEC_PATH}" in problem


def test_the_oracle_fails_an_edited_spec_without_asking_its_model(bench: Bench) -> None:
    write(bench.worktree.path / "tokens.py", "def sign():\n    return 'signed'\n")
    assert bench.verify("task", "core/1").passed  # the stand-in model passes what it is asked
    assert len(bench.model.requests) == 1

    copy = bench.worktree.path / SPEC_PATH
    copy.write_text(copy.read_text().replace(CRITERION, "- [ ] [AUTH-01] tokens may be signed"))
    verdict = bench.verify("task", "core/1")  # the stand-in would pass it again: it is not asked
    assert not verdict.passed and verdict.confidence == 1.0
    assert f"{SPEC_PATH} was edited" in verdict.summary
    assert len(bench.model.requests) == 1
    recorded = bench.recorded(ev.OracleVerdictRecorded)[-1]
    assert (recorded.passed, recorded.invocation_id, recorded.model) == (False, "", "")
    assert f"{SPEC_PATH} was edited" in recorded.summary


# -- b. evidence is keyed by the tree: reused on the same tree, run again on another ---------------------


def test_a_verify_command_runs_once_per_tree_and_again_when_the_tree_changes(bench: Bench) -> None:
    write(bench.worktree.path / "tokens.py", "def sign():\n    return 'signed'\n")
    first = bench.collect("task", "core/1")
    again = bench.collect("task", "core/1")
    component = bench.collect("component", "core")  # another scope, the same tree
    assert bench.runs() == ["verify-tests"]  # run once
    assert first.tree == again.tree == component.tree
    assert again.commands[0].exit_code == 0 and again.commands[0].output_tail == first.commands[0].output_tail
    recorded = bench.recorded(ev.VerificationEvidenceRecorded)
    assert [(e.scope, e.reused, e.tree) for e in recorded] == [
        ("task", False, first.tree),
        ("task", True, first.tree),
        ("component", True, first.tree),
    ]

    write(bench.worktree.path / "tokens.py", "def sign():\n    return 'signed!'\n")
    changed = bench.collect("task", "core/1")
    assert changed.tree != first.tree
    assert bench.runs() == ["verify-tests", "verify-tests"]  # a new tree: run again
    last = bench.recorded(ev.VerificationEvidenceRecorded)[-1]
    assert (last.reused, last.tree) == (False, changed.tree)

    bench.collect("module", "")  # and that result is reused in turn
    assert bench.runs() == ["verify-tests", "verify-tests"]
    assert bench.recorded(ev.VerificationEvidenceRecorded)[-1].reused


# -- c. which verify commands run at which scope --------------------------------------------------------

HOOKS = ("verify-tests", "verify-lint", "verify-types", "verify-commit", "build-docs")


@pytest.mark.parametrize("bench", [HOOKS], indirect=True, ids=["five-hooks"])
def test_every_verify_hook_but_verify_commit_runs_at_component_and_module_scope(bench: Bench) -> None:
    write(bench.worktree.path / "tokens.py", "def sign():\n    return 'signed'\n")
    assert names(bench.collect("task", "core/1")) == ["verify-tests"]
    assert bench.runs() == ["verify-tests"]

    component = bench.collect("component", "core")
    assert names(component) == ["verify-tests", "verify-lint", "verify-types"]
    assert all(c.exit_code == 0 for c in component.commands)
    assert bench.runs() == ["verify-tests", "verify-lint", "verify-types"]  # verify-tests reused

    write(bench.worktree.path / "tokens.py", "def sign():\n    return 'signed!'\n")  # so the module's run
    assert names(bench.collect("module", "")) == ["verify-tests", "verify-lint", "verify-types"]
    assert bench.runs() == ["verify-tests", "verify-lint", "verify-types"] * 2
    assert "verify-commit" not in bench.runs() and "build-docs" not in bench.runs()


@pytest.mark.parametrize("bench", [HOOKS], indirect=True, ids=["five-hooks"])
def test_only_verify_tests_runs_at_task_scope(bench: Bench) -> None:
    evidence = bench.collect("task", "core/1")
    assert names(evidence) == ["verify-tests"] and bench.runs() == ["verify-tests"]
    assert [e.command for e in bench.recorded(ev.VerificationEvidenceRecorded)] == [evidence.commands[0].command]
