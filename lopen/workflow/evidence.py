"""The evidence collector (T8–T10, B6): what the oracle judges, gathered by Lopen, never the model.

For a scope (a task, a component, the module) it writes the worktree's content as a git tree (the
tree a passing verdict binds the completion and the commit to), takes the diff and the changed
files from the scope's recorded base commit (``ScopeStarted``) to that tree, the rubric
(``lopen.workflow.rubric``: the approved spec's criteria the scope owns, with the planner's checks),
the repository's agent instructions as the project's conventions, and runs the spec's verify commands in the worktree:
every ``verify-*`` at a component's and the module's boundary, ``verify-tests`` and the hooks declared
"per task" at a task's (``task_hooks``), and ``verify-commit`` right before Lopen commits a completed
task (``before_commit``: the toolbox refuses the completion when it fails).
A verify command already run on the same tree is not run again: its recorded result is reused
(``VerificationEvidenceRecorded(reused=True)``), so an unchanged tree runs the suite once across
task, component and module verification.
"""

from __future__ import annotations

import re
from pathlib import Path

from events import catalogue as ev
from events.fold import ModuleState, evidence_key, scope_key
from events.journal import Journal
from lopen.documents import acceptance_criteria, load_spec, skills_and_hooks
from lopen.documents.instructions import render, repository_instructions
from lopen.documents.standards import coding_standards
from lopen.documents.standards import render as render_standards
from lopen.git import Worktree
from lopen.workflow.oracle import CommandResult, Confine, Evidence, run_command
from lopen.workflow.rubric import rubric
from lopen.workflow.spec_watch import SpecWatcher

VERIFY_TESTS = "verify-tests"
VERIFY_COMMIT = "verify-commit"
_PER_TASK = re.compile(r"\bper[- ]task\b", re.IGNORECASE)


def hooks(root: Path, module: str) -> dict[str, str]:
    """The approved spec's Skills & Hooks commands, by name (verify-tests, verify-lint, …)."""
    _, doc = load_spec(root, module)
    return {h.name: h.command for h in skills_and_hooks(doc) if h.command}


def task_hooks(root: Path, module: str) -> list[tuple[str, str]]:
    """B6: the ``verify-*`` commands a task's verification runs — ``verify-tests``, and every other one
    whose description says "per task" (``- verify-lint: `ruff check .` — per task``); never
    ``verify-commit``, which runs before Lopen's commit (``EvidenceCollector.before_commit``)."""
    _, doc = load_spec(root, module)
    return [
        (h.name, h.command)
        for h in skills_and_hooks(doc)
        if h.command
        and h.name.startswith("verify-")
        and h.name != VERIFY_COMMIT
        and (h.name == VERIFY_TESTS or _PER_TASK.search(h.description))
    ]


def test_runner(command: str) -> str:
    """The word that shows a bash command ran the tests: the module after ``-m``, else the first word
    (``python -m pytest -q`` → ``pytest``, ``npm test`` → ``npm``)."""
    words = command.split()
    return words[words.index("-m") + 1] if "-m" in words[:-1] else words[0]


class EvidenceCollector:
    def __init__(
        self,
        journal: Journal,
        worktree: Worktree,
        watcher: SpecWatcher,
        root: Path,
        timeout: float = 900,
        confine: Confine | None = None,
        instructions: bool = True,
    ) -> None:
        self.journal = journal
        self.worktree = worktree
        self.watcher = watcher
        self.root = root  # the user's checkout: the approved spec
        self.module = journal.module
        self.timeout = timeout
        self.confine = confine  # the model's sandbox for the verify commands: they run the model's code
        self.instructions = instructions  # give the oracle the repository's agent instructions

    def untested(self, invocation_id: str) -> str:
        """B4: the spec's test command when the invocation never ran it, else ""."""
        command = hooks(self.root, self.module).get(VERIFY_TESTS)
        if not command:
            return ""
        runner = test_runner(command)

        def ran(state: ModuleState) -> bool:
            opened = state.invocations.get(invocation_id)
            return bool(opened and any(runner in c for c in opened.commands))

        return "" if self.journal.read(ran) else command

    def collect(self, scope: str, target: str, notes: str, invocation_id: str = "") -> Evidence:
        state = self.journal.snapshot()
        tree = self.worktree.tree()
        spec_hooks = hooks(self.root, self.module)
        _, doc = load_spec(self.root, self.module)
        judged = rubric(state, acceptance_criteria(doc), scope, target)
        if scope == "task":
            task = state.tasks.get(target)
            component, task_id = (task.component if task else ""), target
            commands = task_hooks(self.root, self.module)
        else:
            component, task_id = (target if scope == "component" else ""), ""
            commands = [
                (name, command)
                for name, command in spec_hooks.items()
                if name.startswith("verify-") and name != VERIFY_COMMIT
            ]
        base = state.scopes.get(scope_key(scope, target)) or state.branch_base
        results = [self._run(scope, target, name, command, tree, state, invocation_id) for name, command in commands]
        edited = self.watcher.edited_in(self.worktree, tree, state)
        diff, changed = self.worktree.diff_and_files(base, tree)
        return Evidence(
            module=self.module,
            scope=scope,
            target=target,
            component=component,
            task=task_id,
            diff=diff,
            changed_files=changed,
            rubric=judged,
            commands=results,
            notes=notes,
            tree=tree,
            base=base,
            problems=[edited] if edited else [],
            left_out=[f"{path} ({size / 1048576:.0f} MB)" for path, size in self.worktree.left_out],
            nested=list(self.worktree.nested),
            conventions=render(repository_instructions(self.root)) if self.instructions else "",
            standards=render_standards(coding_standards(self.root, self.module)),
        )

    def before_commit(self, task_id: str, invocation_id: str = "") -> str:
        """B6: the spec's ``verify-commit`` on the tree Lopen is about to commit for ``task_id`` (run in the
        worktree, recorded as evidence, reused on a tree it already ran on, as every verify command is).
        Returns why the commit is refused — the command failed — or "" (it passed, or there is none)."""
        command = hooks(self.root, self.module).get(VERIFY_COMMIT)
        if not command:
            return ""
        state = self.journal.snapshot()
        result = self._run("task", task_id, VERIFY_COMMIT, command, self.worktree.tree(), state, invocation_id)
        if result.passed:
            return ""
        tail = result.output_tail.strip()[-1500:]
        return f"the spec's verify-commit `{command}` failed (exit {result.exit_code})" + (
            f"; the end of its output:\n{tail}" if tail else ""
        )

    def _run(
        self, scope: str, target: str, name: str, command: str, tree: str, state: ModuleState, invocation_id: str
    ) -> CommandResult:
        known = state.evidence.get(evidence_key(tree, command))
        if known is not None:
            result = CommandResult(
                name=name, command=command, exit_code=known.exit_code, output_tail=known.output_tail, duration=0.0
            )
        else:
            result = run_command(name, command, self.worktree.path, timeout=self.timeout, confine=self.confine)
        self.journal.record(
            ev.VerificationEvidenceRecorded(
                scope=scope,  # type: ignore[arg-type]
                target=target,
                command=command,
                exit_code=result.exit_code,
                output_tail=result.output_tail,
                duration=result.duration,
                tree=tree,
                reused=known is not None,
                invocation_id=invocation_id,
            )
        )
        return result
