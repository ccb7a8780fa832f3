"""A strict reviewer in parallel work: real Copilot CLI, real git, real store, the scripted model playing a
generated module (``lopen.scripted_model.generate``: a, b, c, d at once, e after a and b) whose oracle
rejects one verdict, `lopen run gen --parallel 4`.

- a component's verdict fails in its lane: the fix task is recorded on that component, built in the same
  lane, the component verified again and merged; the module completes;
- the module's verdict fails after every lane was merged and retired: the fix task goes to the component
  owning the unmet criterion, which is claimed and built in a lane again, merged again, and the module
  verified again on the merged result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.parallel import MODULE, generated, history, of, overlapping_claims, run_here, task_invocations
from e2e.scenario import Ran, git, header
from e2e.test_parallel import _sessions, evidence_runs_once_per_tree
from events import catalogue as ev
from events.recorded import Recorded
from lopen.scripted_model import Match, Playbook, Rule, ToolCall, Turn
from lopen.scripted_model.generate import TEST_COMMAND, four_and_one, playbook

pytestmark = pytest.mark.e2e

PARTS = four_and_one(tasks=1)  # criteria GEN-01 (a), GEN-02 (b), GEN-03 (c), GEN-04 (d), GEN-05 (e)


def rejection(name: str, scope: str, target: str, criterion: str, location: str) -> Rule:
    """The oracle fails the first verdict of ``scope`` ``target``: ``criterion`` unmet, one error finding."""
    verdict = {
        "passed": False,
        "summary": f"{criterion} is not shown to hold at its edge.",
        "criteria": [{"id": criterion, "met": False, "evidence": f"no test pins {criterion}'s return type"}],
        "findings": [
            {"severity": "error", "description": f"[{criterion}] value()'s type is not tested", "location": location}
        ],
    }
    return Rule(
        name=name,
        match=Match(user_regex=header(kind="oracle", scope=scope, target=target)),
        turns=[Turn(text=json.dumps(verdict))],
        max_uses=1,
    )


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def fix_rule(task: str, component: str) -> Rule:
    """The fix task, as the generated task rules go: one more test in the component's test file (a real
    change that keeps the suite green), the tests run, verified, completed."""
    added = "\\n\\ndef test_value_is_a_string():\\n    assert isinstance(value(), str)\\n"
    append = f"printf '{added}' >> tests/test_{component}_1.py"
    return Rule(
        name=f"fix-{component}",
        match=Match(user_regex=header(kind="task", task=task)),
        turns=[
            Turn(text=f"Pinning {component}'s type.", tool_calls=[_call("bash", command=append, description="Test")]),
            Turn(text="Running the tests.", tool_calls=[_call("bash", command=TEST_COMMAND, description="Tests")]),
            Turn(text="Asking for verification.", tool_calls=[_call("verify_task_completion", task_id=task)]),
            Turn(text="Verified.", tool_calls=[_call("update_task_status", task_id=task, status="complete")]),
            Turn(text=f"{task} is done."),
        ],
    )


def strict(*first: Rule) -> Playbook:
    """The generated playbook with ``first`` placed before its general "oracle" rule."""
    book = playbook(MODULE, PARTS)
    at = next(i for i, r in enumerate(book.rules) if r.name == "oracle")
    rules = [*book.rules[:at], *first, *book.rules[at:]]
    return Playbook(name=book.name, models=book.models, default_usage=book.default_usage, rules=rules)


REJECT_A = rejection("reject-a", "component", "a", "GEN-01", "a_1.py:2")
REJECT_MODULE = rejection("reject-module", "module", MODULE, "GEN-03", "c_1.py:2")


def verdicts(records: list[Recorded], scope: str, target: str) -> list[ev.OracleVerdictRecorded]:
    return [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == scope and e.target == target]


def recorded_task(records: list[Recorded], task_id: str) -> ev.TaskSpec:
    (spec,) = {t for e in of(records, ev.TasksRecorded) for t in e.tasks if t.id == task_id}
    return spec


def ended_well(root: Path, ran: Ran, records: list[Recorded]) -> None:
    """Exit 0, the session completed, no component held by two lanes at once, every generated task's
    commit and the module's passing verdict on the module branch, the user's checkout untouched."""
    assert ran.code == 0, "\n".join(ran.lines)
    assert [s.status for s in _sessions(root)] == ["completed"]
    assert not overlapping_claims(records)
    subjects = git(root, "log", "--no-merges", "--format=%s", f"main..lopen/{MODULE}").splitlines()
    assert {f"feat({MODULE}): Value {p.name}/1 in {p.name}" for p in PARTS} <= set(subjects)
    assert verdicts(records, "module", MODULE)[-1].passed
    assert verdicts(records, "module", MODULE)[-1].tree == git(root, "rev-parse", f"lopen/{MODULE}^{{tree}}")
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    evidence_runs_once_per_tree(records)


def test_a_failed_component_verdict_becomes_a_fix_task_built_in_its_lane(tmp_path, cli_path, scripted):
    server = scripted(strict(REJECT_A, fix_rule("a/2", "a")))
    root = generated(tmp_path, PARTS)

    ran = run_here(root, server, cli_path, parallel=4, no_resume=True)

    records = history(root)
    ended_well(root, ran, records)
    assert server.uses("reject-a") == 1
    # a's verdict failed, then passed; the failure became a/2, carrying the unmet criterion and the finding
    failed, passed = verdicts(records, "component", "a")
    assert (failed.passed, passed.passed) == (False, True)
    fix = recorded_task(records, "a/2")
    assert fix.name == "Fix what component verification found (attempt 1)"
    assert any("[GEN-01]" in item for item in fix.acceptance) and any("a_1.py:2" in s for s in fix.subtasks)
    # built in a's lane (one claim, never released in between), committed on a's branch, merged with it
    assert [e.task for e, _ in task_invocations(records, "a")] == ["a/1", "a/2"]
    (fix_started,) = [e for e, _ in task_invocations(records, "a") if e.task == "a/2"]
    assert failed.at < fix_started.at
    (commit,) = [e for e in of(records, ev.CommitRecorded) if e.task_id == "a/2"]
    assert commit.branch == f"lopen/{MODULE}--a" and passed.tree == commit.tree
    subjects = git(root, "log", "--no-merges", "--format=%s", f"main..lopen/{MODULE}").splitlines()
    assert f"feat({MODULE}): Fix what component verification found (attempt 1) in a" in subjects
    assert "isinstance" in git(root, "show", f"lopen/{MODULE}:tests/test_a_1.py")
    merged = {e.component: e for e in of(records, ev.ComponentMerged)}
    assert len(of(records, ev.ComponentMerged)) == 5 and set(merged) == set("abcde")
    assert merged["a"].component_tip == commit.sha and passed.at < merged["a"].at
    # e (after a and b) started only once a, fix included, was merged
    assert merged["a"].at < task_invocations(records, "e")[0][0].at
    claims = [e.component for e in of(records, ev.ComponentClaimed) if e.component in "abcde"]
    assert sorted(claims) == list("abcde")
    released = {e.component: e.reason for e in of(records, ev.ComponentReleased) if e.component in "abcde"}
    assert released == dict.fromkeys("abcde", "merged")
    # the other components and the module passed on their first verdict
    assert [v.passed for x in "bcde" for v in verdicts(records, "component", x)] == [True] * 4
    assert [v.passed for v in verdicts(records, "module", MODULE)] == [True]


def test_a_failed_module_verdict_becomes_a_fix_task_built_in_a_lane_again(tmp_path, cli_path, scripted):
    server = scripted(strict(REJECT_MODULE, fix_rule("c/2", "c")))
    root = generated(tmp_path, PARTS)

    ran = run_here(root, server, cli_path, parallel=4, no_resume=True)

    records = history(root)
    ended_well(root, ran, records)
    assert server.uses("reject-module") == 1
    # the module's verdict failed, then passed; the fix went to c, whose task cites GEN-03
    failed, passed = verdicts(records, "module", MODULE)
    assert (failed.passed, passed.passed) == (False, True)
    fix = recorded_task(records, "c/2")
    assert fix.name == "Fix what module verification found (attempt 1)"
    assert any("[GEN-03]" in item for item in fix.acceptance)
    assert [t.id for e in of(records, ev.TasksRecorded) for t in e.tasks if t.name.startswith("Fix")] == ["c/2"]
    # c had been merged and its lane released before; it is claimed and built in a lane again
    first_merge, second_merge = [e for e in of(records, ev.ComponentMerged) if e.component == "c"]
    first_claim, second_claim = [e for e in of(records, ev.ComponentClaimed) if e.component == "c"]
    assert first_claim.at < first_merge.at
    releases = [e for e in of(records, ev.ComponentReleased) if e.component == "c"]
    assert [e.reason for e in releases] == ["merged", "merged"] and releases[0].at < failed.at < second_claim.at
    assert [e.task for e, _ in task_invocations(records, "c")] == ["c/1", "c/2"]
    (commit,) = [e for e in of(records, ev.CommitRecorded) if e.task_id == "c/2"]
    assert commit.branch == f"lopen/{MODULE}--c"
    # verified again as a component, merged again, and the module verified again on that merge
    assert [v.passed for v in verdicts(records, "component", "c")] == [True, True]
    assert verdicts(records, "component", "c")[-1].tree == commit.tree
    assert first_merge.at < failed.at < second_merge.at < passed.at
    assert second_merge.component_tip == commit.sha and passed.tree == second_merge.tree
    subjects = git(root, "log", "--no-merges", "--format=%s", f"main..lopen/{MODULE}").splitlines()
    assert f"feat({MODULE}): Fix what module verification found (attempt 1) in c" in subjects
    assert "isinstance" in git(root, "show", f"lopen/{MODULE}:tests/test_c_1.py")
    assert sorted(e.component for e in of(records, ev.ComponentClaimed) if e.component in "abcde") == [*"abccde"]
    assert [v.passed for x in "abde" for v in verdicts(records, "component", x)] == [True] * 4


def test_a_fix_for_the_module_verdict_is_built_on_the_module_as_the_reviewer_judged_it(tmp_path, cli_path, scripted):
    server = scripted(strict(REJECT_MODULE, fix_rule("c/2", "c")))
    root = generated(tmp_path, PARTS)

    ran = run_here(root, server, cli_path, parallel=4, no_resume=True)

    assert ran.code == 0, "\n".join(ran.lines)
    records = history(root)
    failed = verdicts(records, "module", MODULE)[0]
    judged = [e for e in of(records, ev.ComponentMerged) if e.at < failed.at][-1].sha  # the module tip it judged
    assert not failed.passed and git(root, "rev-parse", f"{judged}^{{tree}}") == failed.tree
    (commit,) = [e for e in of(records, ev.CommitRecorded) if e.task_id == "c/2"]
    (scope,) = [e for e in of(records, ev.ScopeStarted) if e.scope == "task" and e.target == "c/2"]
    # the fix starts where the reviewer looked: every component's files in its tree, the whole suite run
    assert scope.base_commit == commit.parent == judged
    assert git(root, "ls-tree", "--name-only", commit.sha, "e_1.py") == "e_1.py"
    evidence = [e for e in of(records, ev.VerificationEvidenceRecorded) if e.target == "c/2"]
    assert evidence and "7 passed" in evidence[0].output_tail  # 6 tests judged by the module, plus the fix's
    second = [e for e in of(records, ev.ComponentMerged) if e.component == "c"][-1]
    assert second.fast_forward and second.sha == commit.sha
