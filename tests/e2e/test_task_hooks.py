"""B6 per task (issue 24), end to end: the spec's ``verify-*`` hooks run where the spec says — real
`lopen run`, real Copilot CLI, git and store, the scripted model playing a generated module of two
independent components, built in parallel lanes.

- ``verify-lint`` is declared "per task": it runs in each task's verification; ``a/1`` leaves a TODO,
  the lint fails, the oracle's verdict fails with the lint's output, and the task is never completed;
- ``verify-commit`` runs before Lopen's commit: ``b/1`` passes its verification but leaves a FIXME, so
  its completion is refused (the model is told why) and nothing is committed.

Each run of a hook is evidence (``VerificationEvidenceRecorded``).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import msgspec
import pytest

from e2e.parallel import MODULE, history, of, task_invocations
from e2e.scenario import approve_module, git, header, lopen_env
from events import catalogue as ev
from lopen.scripted_model import Match, Rule, ToolCall, Turn
from lopen.scripted_model.generate import TEST_COMMAND, Part, playbook, prepare

pytestmark = pytest.mark.e2e

PARTS = [Part("a", 1), Part("b", 1)]
LINT = "! grep -rn TODO --include=*.py ."
PRE_COMMIT = "! grep -rn FIXME --include=*.py ."
HOOKS = f"""- verify-tests: `{TEST_COMMAND}` — runs the whole test suite from the project root
- verify-lint: `{LINT}` — no TODO left in the code; per task
- verify-commit: `{PRE_COMMIT}` — no FIXME is ever committed
"""


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def task(task_id: str, marker: str) -> Rule:
    """The task's usual turns (write, test, verify, complete, end) with ``marker`` left in its code."""
    c, n = task_id.split("/")
    return Rule(
        name=f"leaves-{marker}",
        match=Match(user_regex=header(kind="task", task=task_id)),
        turns=[
            Turn(
                text=f"Writing {task_id}.",
                tool_calls=[
                    call(
                        "create",
                        path=f"{{{{cwd}}}}/{c}_{n}.py",
                        file_text=f'# {marker}\ndef value():\n    return "{task_id}"\n',
                    ),
                    call(
                        "create",
                        path=f"{{{{cwd}}}}/tests/test_{c}_{n}.py",
                        file_text=f"from {c}_{n} import value\n\n\ndef test_value():\n"
                        f'    assert value() == "{task_id}"\n',
                    ),
                ],
            ),
            Turn(
                text="Running the tests.", tool_calls=[call("bash", command=TEST_COMMAND, description="Run the tests")]
            ),
            Turn(text="Asking for verification.", tool_calls=[call("verify_task_completion", task_id=task_id)]),
            Turn(
                text="Completing it.",
                tool_calls=[call("update_task_status", task_id=task_id, status="complete", reason="done")],
            ),
            Turn(text=f"{task_id} stops here."),
        ],
    )


def test_a_per_task_lint_that_fails_blocks_the_task_and_verify_commit_refuses_the_commit(tmp_path, cli_path, scripted):
    root = prepare(tmp_path / "project", MODULE, PARTS)
    spec = root / "docs" / "requirements" / MODULE / "SPECIFICATION.md"
    text = spec.read_text(encoding="utf-8")
    start = text.index("## Skills & Hooks\n\n") + len("## Skills & Hooks\n\n")
    spec.write_text(text[:start] + HOOKS + text[text.index("\n## Notes", start) :], encoding="utf-8")
    git(root, "commit", "-qam", "docs: the hooks")
    approve_module(root, MODULE)
    book = playbook(MODULE, PARTS)
    server = scripted(msgspec.structs.replace(book, rules=[task("a/1", "TODO"), task("b/1", "FIXME"), *book.rules]))

    env = lopen_env(cli_path, server.url, workflow__failure_threshold="1")
    done = subprocess.run(
        [sys.executable, "-m", "lopen", "run", MODULE, "--headless", "--parallel", "2"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
    )  # fmt: skip

    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-4000:]
    records = history(root)
    evidence = [(e.target, e.command, e.exit_code != 0) for e in of(records, ev.VerificationEvidenceRecorded)]
    # a/1: the per-task lint ran in its verification, failed, and failed the verdict with its output
    assert ("a/1", LINT, True) in evidence and ("a/1", TEST_COMMAND, False) in evidence
    (verdict_a,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.target == "a/1"]
    assert not verdict_a.passed and "failed (exit 1)" in verdict_a.summary
    assert any(f.category == "verify-command" and "a_1.py:1:# TODO" in f.description for f in verdict_a.findings)
    # b/1: passed its verification (the lint too), then verify-commit refused its completion before any commit
    assert ("b/1", LINT, False) in evidence and ("b/1", PRE_COMMIT, True) in evidence
    assert [e.passed for e in of(records, ev.OracleVerdictRecorded) if e.target == "b/1"] == [True]
    (refused,) = [e for e in of(records, ev.CompletionRefused) if e.target == "b/1"]
    assert f"verify-commit `{PRE_COMMIT}` failed (exit 1)" in refused.why and "b_1.py:1:# FIXME" in refused.why
    told = [e for e in of(records, ev.ToolCalled) if e.tool == "update_task_status" and not e.success]
    assert any("verify-commit" in e.result_summary for e in told)  # the model is told why
    # neither task completed nor committed; the run paused naming both
    assert not [e for e in of(records, ev.CommitRecorded) if e.task_id]
    assert git(root, "rev-list", "--count", f"main..lopen/{MODULE}") == "0"
    assert {e.task for c in "ab" for e, _ in task_invocations(records, c)} == {"a/1", "b/1"}
    (paused,) = of(records, ev.SessionPaused)
    assert "a: a/1 failed" in paused.reason and "b: b/1 failed" in paused.reason, paused.reason
