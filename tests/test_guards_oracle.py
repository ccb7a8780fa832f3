"""The oracle's guards (lopen.workflow.oracle) that tests/test_rubric.py and tests/test_guards_record.py
leave open: checks numbered for a spec without criterion ids, a verify command run confined (or with
Lopen's Python first on PATH) and stopped at its timeout, the verdict read from an answer's later
candidates and its malformed parts dropped, and the exact findings and summary Lopen's rules give —
each test written to fail on a mutation that every other test let through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lopen.workflow import oracle
from lopen.workflow.oracle import CommandResult, Evidence, Finding, Verdict, judge, parse_verdict, prompt, run_command
from lopen.workflow.rubric import CriterionCheck, Rubric
from tests.prompt_golden import oracle_module_path, render_oracle_module

S = "the reviewer's own words"


def evidence(
    *ids: str, checks: tuple[str, ...] = (), commands: list[CommandResult] | None = None, **more: object
) -> Evidence:
    return Evidence(
        module="m",
        scope="component",
        target="core",
        component="core",
        task="",
        diff="+x",
        changed_files=["a.py"],
        rubric=Rubric(criteria=tuple(CriterionCheck(id=i, text=f"text of {i}") for i in ids), checks=checks),
        commands=commands if commands is not None else [],
        **more,  # type: ignore[arg-type]
    )


def failing(command: str = "pytest -q", code: int = 1) -> CommandResult:
    return CommandResult(name="verify-tests", command=command, exit_code=code, output_tail="E boom")


def answer(passed: bool, *criteria: tuple[str, bool], findings: list[dict] | None = None, summary: str = S) -> str:
    return json.dumps(
        {
            "passed": passed,
            "summary": summary,
            "criteria": [{"id": i, "met": met, "evidence": f"{i} ev"} for i, met in criteria],
            "findings": findings or [],
        }
    )


# -- the prompt --------------------------------------------------------------------------------------------


def test_the_module_oracle_prompt_is_the_reviewed_one() -> None:
    """tests/golden/prompts/oracle-module.txt: a spec without ids (its checks numbered and listed once),
    two other components' criteria, two verify commands, files left out and no changed file."""
    golden = oracle_module_path()
    assert golden.is_file(), f"{golden} is missing: run bin/refresh-golden and review it"
    assert render_oracle_module() == golden.read_text(encoding="utf-8"), (
        f"the module oracle prompt changed: run bin/refresh-golden and review the diff of {golden.name}"
    )


def test_the_plans_further_checks_are_listed_one_per_line_beside_the_criteria() -> None:
    text = prompt(evidence("A", checks=("first check", "second check")))
    assert "\n\n## Further checks from the plan\n- first check\n- second check\n\n" in text


def test_a_scope_with_nothing_to_judge_is_judged_against_its_notes() -> None:
    text = prompt(evidence())
    assert "\n\n## Criteria to judge\n(none: judge the change against its notes)\n\n" in text
    assert "## Further checks from the plan" not in text


def test_a_spec_without_verify_commands_says_so() -> None:
    text = prompt(evidence("A"))
    assert (
        "\n\n## Verify commands (run by Lopen on exactly this tree)\n(the specification names no verify command)\n\n"
        in text
    )


# -- the checks numbered when the spec has no criterion ids --------------------------------------------------


def test_a_spec_without_ids_has_its_checks_judged_as_numbered_criteria() -> None:
    plain = evidence(checks=("a", "b"))
    assert plain.judged() == [CriterionCheck(id="#1", text="a"), CriterionCheck(id="#2", text="b")]
    read = parse_verdict(
        '{"passed": false, "summary": "s", "criteria": [{"id": "#1", "met": true}, {"id": "#2", "met": false}]}'
    )
    judged = judge(read, plain)
    assert not judged.passed
    assert judged.findings == [Finding(severity="error", category="criterion", description="[#2] is not met: b")]


# -- the verify commands ---------------------------------------------------------------------------------------


def test_a_confined_command_runs_with_the_argv_and_environment_confine_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOPEN_TEST_GH_TOKEN", "ghp_" + "x" * 36)
    asked: list[str] = []

    def confine(command: str) -> tuple[list[str], dict[str, str]]:
        asked.append(command)
        return ["/bin/sh", "-c", "echo confined; " + command], {"PATH": os.environ["PATH"], "CONFINED": "yes"}

    result = run_command("verify-env", "env", tmp_path, confine=confine)
    assert asked == ["env"]
    assert result.exit_code == 0 and result.output_tail.startswith("confined\n")
    assert "CONFINED=yes" in result.output_tail
    assert "LOPEN_TEST_GH_TOKEN" not in result.output_tail and "ghp_" not in result.output_tail
    assert (result.name, result.command) == ("verify-env", "env")


def test_without_confine_lopens_python_comes_first_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lopens = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = run_command("verify-path", 'printf %s "$PATH"', tmp_path)
    assert (result.exit_code, result.output_tail) == (0, f"{lopens}{os.pathsep}/usr/bin:/bin")
    monkeypatch.delenv("PATH")
    result = run_command("verify-path", 'printf %s "$PATH"', tmp_path)
    assert (result.exit_code, result.output_tail) == (0, f"{lopens}{os.pathsep}")


def test_the_default_timeout_is_fifteen_minutes_and_the_environment_is_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, object] = {}

    def slow(argv: list[str], cwd: Path, *, timeout: float | None = None, env: dict[str, str] | None = None):
        seen.update(argv=argv, cwd=cwd, timeout=timeout, env=env)
        raise subprocess.TimeoutExpired(argv, timeout or 0)

    monkeypatch.setattr(oracle, "run", slow)
    result = run_command("verify-tests", "pytest -q", tmp_path)
    assert seen["timeout"] == 900 and seen["argv"] == ["/bin/sh", "-c", "pytest -q"] and seen["cwd"] == tmp_path
    assert isinstance(seen["env"], dict) and seen["env"]["PATH"].startswith(str(Path(sys.executable).parent))
    assert result.exit_code == 124 and result.output_tail.startswith("timed out after 900 s: ")


def test_a_command_is_stopped_at_its_timeout_and_exits_124(tmp_path: Path) -> None:
    result = run_command("verify-slow", "sleep 10", tmp_path, timeout=1)
    assert result.exit_code == 124 and not result.passed
    assert result.output_tail.startswith("timed out after 1 s: ")
    assert 1 <= result.duration < 10


def test_a_commands_duration_is_recorded(tmp_path: Path) -> None:
    result = run_command("verify-sleep", "sleep 0.3", tmp_path)
    assert result.exit_code == 0 and 0.3 <= result.duration < 25


# -- reading the verdict -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{not json}\n```\nMy verdict:\n```json\n{"passed": true, "summary": "ok"}\n```',
        '```json\n{"note": "not a verdict"}\n```\nMy verdict:\n```json\n{"passed": true, "summary": "ok"}\n```',
        '\n{"passed": true, "summary": "ok"}',
        '{"passed": true, "summary": "ok"}. Done.',
    ],
    ids=["after-a-block-that-is-not-json", "after-an-object-that-is-not-a-verdict", "after-one-character", "bare"],
)
def test_the_verdict_is_found_among_the_answers_candidates(text: str) -> None:
    read = parse_verdict(text)
    assert read.passed and not read.reviewer_failed and read.summary == "ok" and read.raw == ""


@pytest.mark.parametrize("findings", ['"x"', '[{"severity": 3}]'])
def test_malformed_findings_are_dropped_and_the_verdict_stands(findings: str) -> None:
    read = parse_verdict(f'{{"passed": false, "summary": "s", "findings": {findings}}}')
    assert read.findings == [] and not read.passed and not read.reviewer_failed and read.summary == "s"


def test_criteria_ids_lose_their_brackets_and_entries_without_an_id_or_a_boolean_met_are_ignored() -> None:
    criteria = [
        {"id": "[AC-1]", "met": True, "evidence": "a.py:1"},
        {"id": " [BOX] ", "met": False},
        {"id": "A", "met": "yes"},
        {"id": "A"},
        {"met": True},
        {"id": "", "met": False},
        "C",
    ]
    read = parse_verdict(json.dumps({"passed": True, "criteria": criteria}))
    assert [(c.id, c.met, c.evidence) for c in read.criteria] == [("AC-1", True, "a.py:1"), ("BOX", False, "")]


def test_a_verdict_without_summary_or_confidence_reads_as_empty_and_zero() -> None:
    read = parse_verdict('{"passed": true}')
    assert (read.passed, read.summary, read.confidence, read.findings, read.criteria) == (True, "", 0.0, [], [])
    unreadable = parse_verdict("LGTM")
    assert unreadable.reviewer_failed and unreadable.confidence == 0.0


# -- Lopen's rules over the verdict -----------------------------------------------------------------------------


def test_a_failing_commands_finding_is_an_error_located_at_the_commands_name() -> None:
    judged = judge(parse_verdict(answer(True, ("A", True))), evidence("A", commands=[failing()]))
    assert judged.findings == [
        Finding(
            severity="error",
            category="verify-command",
            description="`pytest -q` exited 1; the end of its output:\nE boom",
            location="verify-tests",
        )
    ]


def test_an_unmet_criterion_the_reviewer_reported_as_an_error_is_one_finding() -> None:
    reported = [{"severity": "error", "description": "[A] has no test", "location": "t.py:1"}]
    judged = judge(parse_verdict(answer(False, ("A", False), findings=reported)), evidence("A"))
    assert judged.findings == [Finding(severity="error", description="[A] has no test", location="t.py:1")]


def test_an_unmet_criterion_reported_only_as_a_warning_or_not_by_its_id_gets_its_own_error() -> None:
    reported = [
        {"severity": "warning", "description": "[A] is thin", "location": "a.py:1"},
        {"severity": "error", "description": "a stub in b.py", "location": "b.py:1"},
    ]
    judged = judge(parse_verdict(answer(False, ("A", False), findings=reported)), evidence("A"))
    assert judged.findings[2:] == [Finding(severity="error", category="criterion", description="[A] is not met: A ev")]
    assert len(judged.findings) == 3


def test_a_failed_verdict_with_unmet_criteria_keeps_the_reviewers_summary_and_carries_the_added_finding() -> None:
    judged = judge(parse_verdict(answer(False, ("A", False))), evidence("A"))
    assert judged.passed is False and judged.summary == S and not judged.reviewer_failed
    assert judged.findings == [Finding(severity="error", category="criterion", description="[A] is not met: A ev")]


def test_a_pass_with_unmet_criteria_gives_the_exact_reason() -> None:
    judged = judge(parse_verdict(answer(True, ("A", False), ("B", False))), evidence("A", "B"))
    assert judged.passed is False
    assert judged.summary == f"the reviewer passed it with unmet criteria (A, B). The reviewer said: {S}"


def test_a_pass_with_an_error_finding_gives_the_exact_reason() -> None:
    reported = [{"severity": "error", "description": "a stub"}]
    judged = judge(parse_verdict(answer(True, ("A", True), findings=reported)), evidence("A"))
    assert judged.passed is False
    assert judged.summary == f"the reviewer passed it with an error finding. The reviewer said: {S}"


def test_a_list_leaving_criteria_unjudged_fails_as_the_reviewers_fault_with_its_findings_kept() -> None:
    reported = [{"severity": "warning", "description": "naming", "location": "a.py:2"}]
    judged = judge(parse_verdict(answer(True, ("A", True), findings=reported)), evidence("A", "B", "C"))
    assert judged.passed is False and judged.reviewer_failed is True
    assert judged.summary == (
        "the reviewer did not judge B, C. This is not a fault in your code: "
        "call the verify tool again and Lopen asks a fresh reviewer"
    )
    assert judged.findings == [Finding(severity="warning", description="naming", location="a.py:2")]


def test_a_failing_command_and_an_unmet_criterion_give_both_reasons_then_the_reviewers_words() -> None:
    judged = judge(parse_verdict(answer(True, ("A", False))), evidence("A", commands=[failing()]))
    assert judged.passed is False
    assert judged.summary == (
        f"`pytest -q` failed (exit 1); the reviewer passed it with unmet criteria (A). The reviewer said: {S}"
    )
    silent = judge(parse_verdict(answer(True, ("A", True), summary="")), evidence("A", commands=[failing()]))
    assert silent.passed is False and silent.summary == "`pytest -q` failed (exit 1)"


def test_a_verdict_the_rules_leave_alone_is_returned_as_read() -> None:
    read = parse_verdict(answer(True, ("A", True)))
    assert judge(read, evidence("A")) == read
    assert isinstance(read, Verdict)


def test_nested_repositories_left_out_of_the_tree_are_named_under_the_changed_files() -> None:
    text = prompt(evidence("A-1", nested=["vendor/lib", "sub"]))
    files = text.split("## Changed files\n", 1)[1]
    assert files.startswith(
        "- a.py\n- vendor/lib/: a git repository of its own, left out of the tree and the commit\n"
        "- sub/: a git repository of its own, left out of the tree and the commit"
    )
