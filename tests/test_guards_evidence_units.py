"""The evidence the oracle judges, field by field (bin/mutate-guards, module ``evidence``): which verify
commands run at which scope, what a reused result says and records, the base the diff is taken from,
the test runner B4 looks for, the files and nested repositories left out and the project's conventions.

Real parts: a git repository, Lopen's worktree of it, a SQLite store and the module's journal; the
spec's hooks really run in the worktree (tests/test_guards_evidence.py drives the Oracle actor)."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from events import catalogue as ev
from events.journal import Journal
from lopen.app.engine import worktree_for
from lopen.config import Settings
from lopen.project import ensure_lopen_dir, open_store
from lopen.workflow.approval import approve_spec
from lopen.workflow.evidence import EvidenceCollector, hooks
from lopen.workflow.evidence import test_runner as runner_of  # not collected as a test
from lopen.workflow.spec_watch import SpecWatcher

MODULE = "auth"
SPEC_PATH = f"docs/requirements/{MODULE}/SPECIFICATION.md"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def spec(hook_lines: str) -> str:
    return f"""---
name: {MODULE}
description: Tokens
---

# Auth

## Overview

Sign and check tokens.

## Acceptance Criteria

- [ ] [AUTH-01] tokens are signed
- [ ] [AUTH-02] tokens are checked

## Dependencies

None.

## Skills & Hooks

{hook_lines}
## Notes

None.

## References

None.
"""


class Desk:
    """A project whose approved spec has the hook lines given, its module worktree and a journal."""

    def __init__(self, tmp: Path, hook_lines: str, agents: str = "", **collector: object) -> None:
        self.ran = tmp / "ran.log"
        self.root = root = tmp / "project"
        root.mkdir(parents=True)
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.name", "Test")
        git(root, "config", "user.email", "test@example.com")
        (root / SPEC_PATH).parent.mkdir(parents=True)
        (root / SPEC_PATH).write_text(spec(hook_lines.replace("LOG", shlex.quote(str(self.ran)))), encoding="utf-8")
        if agents:
            (root / "AGENTS.md").write_text(agents, encoding="utf-8")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "spec")
        ensure_lopen_dir(root)
        self.store, self.project = open_store(root)
        approve_spec(root, MODULE, self.store, self.project, approver="Ann")
        self.journal = Journal(self.store, self.project, MODULE)
        self.journal.open_session(ev.SessionStarted(lopen_version="test"))
        settings = Settings()
        self.worktree = worktree_for(root, MODULE, settings)
        _, self.base = self.worktree.ensure()
        self.journal.record(ev.BranchEnsured(branch=self.worktree.branch, created=True, base=self.base))
        self.collector = EvidenceCollector(
            self.journal,
            self.worktree,
            SpecWatcher(root, MODULE),
            root,
            **collector,  # type: ignore[arg-type]
        )

    def write(self, name: str, text: str) -> None:
        path = self.worktree.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def runs(self) -> list[str]:
        return self.ran.read_text().split() if self.ran.exists() else []

    def recorded(self) -> list[ev.VerificationEvidenceRecorded]:
        return [
            r.event
            for r in self.store.read_stream(self.journal.stream)
            if isinstance(r.event, ev.VerificationEvidenceRecorded)
        ]

    def plan(self) -> None:
        self.journal.record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="Core"), ev.ComponentSpec(name="API")))
        )
        self.journal.record(
            ev.TasksRecorded(
                component="core",
                tasks=(ev.TaskSpec(id="core/1", name="Sign", acceptance=("[AUTH-01] sign() signs",)),),
            )
        )


HOOKS = (
    "- verify-tests: `printf 'tested\\n' && echo verify-tests >> LOG` — the tests\n"
    "- verify-lint: `echo verify-lint >> LOG && echo linted && exit 3` — lint\n"
    "- verify-commit: `echo verify-commit >> LOG` — before a commit\n"
    "- build-docs: `echo build-docs >> LOG` — docs\n"
    "- verify-nothing:\n"
)


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    d = Desk(tmp_path, HOOKS)
    try:
        yield d
    finally:
        d.store.close()


# -- the test runner B4 looks for --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "runner"),
    [
        ("python -m pytest -q", "pytest"),
        ("python3 -m unittest discover -s tests", "unittest"),
        ("npm test", "npm"),
        ("pytest", "pytest"),
        ("cargo test -m", "cargo"),  # a trailing -m names no module
        ("uv run -m pytest", "pytest"),
    ],
)
def test_the_runner_of_a_test_command(command: str, runner: str) -> None:
    assert runner_of(command) == runner


def test_hooks_are_the_named_commands_of_the_approved_spec(desk: Desk) -> None:
    assert list(hooks(desk.root, MODULE)) == ["verify-tests", "verify-lint", "verify-commit", "build-docs"]
    assert hooks(desk.root, MODULE)["verify-lint"].startswith("echo verify-lint >> ")


def test_untested_names_the_test_command_until_the_invocation_runs_it(desk: Desk) -> None:
    command = hooks(desk.root, MODULE)["verify-tests"]
    desk.journal.record(ev.InvocationStarted(invocation_id="i1", kind="task"))
    desk.journal.record(ev.InvocationStarted(invocation_id="i2", kind="task"))
    assert desk.collector.untested("i1") == command
    desk.journal.record(ev.ToolCalled(invocation_id="i2", tool="bash", arguments={"command": "echo hi"}))
    assert desk.collector.untested("i2") == command  # another command: not the tests
    desk.journal.record(ev.ToolCalled(invocation_id="i2", tool="bash", arguments={"command": "echo x; echo y"}))
    assert desk.collector.untested("i2") == command
    desk.journal.record(ev.ToolCalled(invocation_id="i2", tool="bash", arguments={"command": "cd src && printf x"}))
    assert desk.collector.untested("i2") == ""  # the runner of `printf … && echo …` is printf
    assert desk.collector.untested("i1") == command  # another invocation ran them
    assert desk.collector.untested("never-started") == command


def test_untested_asks_nothing_when_the_spec_has_no_test_command(tmp_path: Path) -> None:
    d = Desk(tmp_path, "- verify-lint: `echo lint` — lint\n")
    try:
        d.journal.record(ev.InvocationStarted(invocation_id="i1", kind="task"))
        assert d.collector.untested("i1") == ""
        assert d.collector.collect("task", "core/1", "").commands == []  # no test command: none at task scope
    finally:
        d.store.close()


# -- which commands run, and what they leave -----------------------------------------------------------------


def test_a_task_runs_only_the_tests_and_records_what_ran(desk: Desk) -> None:
    desk.plan()
    desk.write("tokens.py", "x = 1\n")
    evidence = desk.collector.collect("task", "core/1", "see tokens.py", invocation_id="i7")
    assert [c.name for c in evidence.commands] == ["verify-tests"]
    (result,) = evidence.commands
    assert (result.exit_code, result.output_tail.strip()) == (0, "tested")
    assert desk.runs() == ["verify-tests"]
    (recorded,) = desk.recorded()
    assert (recorded.scope, recorded.target, recorded.invocation_id, recorded.reused) == ("task", "core/1", "i7", False)
    assert (recorded.command, recorded.exit_code, recorded.tree) == (result.command, 0, evidence.tree)
    assert recorded.output_tail == result.output_tail and recorded.duration == result.duration > 0
    assert (evidence.module, evidence.scope, evidence.target) == (MODULE, "task", "core/1")
    assert (evidence.component, evidence.task, evidence.notes) == ("core", "core/1", "see tokens.py")
    assert evidence.changed_files == ["tokens.py"] and "+x = 1" in evidence.diff
    assert evidence.tree == desk.worktree.tree()
    assert [c.id for c in evidence.rubric.criteria] == ["AUTH-01"]


def test_a_task_not_in_the_plan_has_no_component(desk: Desk) -> None:
    evidence = desk.collector.collect("task", "core/9", "")
    assert (evidence.component, evidence.task) == ("", "core/9")


def test_a_component_and_the_module_run_every_verify_hook_but_verify_commit(desk: Desk) -> None:
    desk.plan()
    component = desk.collector.collect("component", "core", "")
    assert [(c.name, c.exit_code) for c in component.commands] == [("verify-tests", 0), ("verify-lint", 3)]
    assert (component.component, component.task) == ("core", "")
    assert desk.runs() == ["verify-tests", "verify-lint"]
    assert [r.invocation_id for r in desk.recorded()] == ["", ""]  # collected outside an invocation
    module = desk.collector.collect("module", MODULE, "")
    assert (module.component, module.task) == ("", "")
    assert [c.name for c in module.commands] == ["verify-tests", "verify-lint"]
    assert [c.id for c in module.rubric.criteria] == ["AUTH-01", "AUTH-02"]


def test_a_reused_result_says_what_the_run_said_and_took_no_time(desk: Desk) -> None:
    desk.plan()
    first = desk.collector.collect("component", "core", "")
    again = desk.collector.collect("module", MODULE, "", invocation_id="m1")
    assert desk.runs() == ["verify-tests", "verify-lint"]  # nothing ran again
    for before, now in zip(first.commands, again.commands, strict=True):
        assert (now.name, now.command, now.exit_code, now.output_tail) == (
            before.name,
            before.command,
            before.exit_code,
            before.output_tail,
        )
        assert now.duration == 0.0
    reused = desk.recorded()[2:]
    assert [(r.scope, r.target, r.reused, r.exit_code, r.invocation_id) for r in reused] == [
        ("module", MODULE, True, 0, "m1"),
        ("module", MODULE, True, 3, "m1"),
    ]
    assert [r.output_tail.strip() for r in reused] == ["tested", "linted"]
    assert all(r.duration == 0.0 and r.tree == first.tree for r in reused)


def test_the_diff_is_taken_from_the_scopes_base_else_the_branch_base(desk: Desk) -> None:
    desk.plan()
    desk.write("a.py", "a = 1\n")
    assert desk.collector.collect("task", "core/1", "").base == desk.base
    commit = git(desk.worktree.path, "rev-parse", "HEAD")
    git(desk.worktree.path, "add", "a.py")
    git(desk.worktree.path, "commit", "-q", "-m", "a")
    started = git(desk.worktree.path, "rev-parse", "HEAD")
    assert started != commit
    desk.journal.record(ev.ScopeStarted(scope="task", target="core/1", base_commit=started))
    desk.write("b.py", "b = 2\n")
    evidence = desk.collector.collect("task", "core/1", "")
    assert evidence.base == started
    assert evidence.changed_files == ["b.py"]  # a.py was there when the task started
    other = desk.collector.collect("component", "core", "")
    assert other.base == desk.base and other.changed_files == ["a.py", "b.py"]


def test_the_conventions_are_the_repositorys_agent_instructions_unless_turned_off(tmp_path: Path) -> None:
    on = Desk(tmp_path / "on", HOOKS, agents="Use tabs.\n")
    off = Desk(tmp_path / "off", HOOKS, agents="Use tabs.\n", instructions=False)
    try:
        assert on.collector.collect("module", MODULE, "").conventions == "### AGENTS.md\nUse tabs."
        assert off.collector.collect("module", MODULE, "").conventions == ""
    finally:
        on.store.close()
        off.store.close()


def test_a_command_past_its_timeout_is_stopped_and_recorded_so(tmp_path: Path) -> None:
    d = Desk(tmp_path, "- verify-tests: `sleep 5` — slow\n", timeout=0.2)
    try:
        (result,) = d.collector.collect("task", "core/1", "").commands
        assert result.exit_code == 124 and result.output_tail.startswith("timed out after 0 s")
        assert d.recorded()[0].exit_code == 124
    finally:
        d.store.close()


def test_the_verify_commands_run_confined_when_told(tmp_path: Path) -> None:
    marker = tmp_path / "confined.log"

    def confine(command: str) -> tuple[list[str], dict[str, str]]:
        return ["/bin/sh", "-c", f"echo confined >> {shlex.quote(str(marker))} && {command}"], {"PATH": "/usr/bin:/bin"}

    d = Desk(tmp_path, HOOKS, confine=confine)
    try:
        d.collector.collect("task", "core/1", "")
        assert marker.read_text().split() == ["confined"]
    finally:
        d.store.close()


def test_files_too_large_for_the_tree_are_named_with_their_size(tmp_path: Path) -> None:
    d = Desk(tmp_path, HOOKS)
    try:
        d.worktree.max_file_bytes = 1024 * 1024
        d.write("big.bin", "x" * (3 * 1024 * 1024 + 1))
        d.write("small.py", "s = 1\n")
        evidence = d.collector.collect("module", MODULE, "")
        assert evidence.left_out == ["big.bin (3 MB)"]
        assert evidence.changed_files == ["small.py"]
    finally:
        d.store.close()


def test_a_left_out_files_size_is_rounded_to_the_nearest_mb(tmp_path: Path) -> None:
    d = Desk(tmp_path, HOOKS)
    try:
        d.worktree.max_file_bytes = 1024 * 1024
        d.write("half.bin", "x" * (3 * 512 * 1024 + 1))  # 1.5 MB (MiB) and a byte
        assert d.collector.collect("module", MODULE, "").left_out == ["half.bin (2 MB)"]
    finally:
        d.store.close()


def test_nested_repositories_left_out_of_the_tree_are_named(desk: Desk) -> None:
    desk.write("vendor/lib/g.py", "g = 1\n")
    git(desk.worktree.path / "vendor" / "lib", "init", "-q")  # a model's `git init`, or a cloned dependency
    desk.write("small.py", "s = 1\n")
    evidence = desk.collector.collect("module", MODULE, "")
    assert evidence.nested == ["vendor/lib"]
    assert evidence.changed_files == ["small.py"]
