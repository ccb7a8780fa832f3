"""What a verification judges (lopen.workflow.rubric) and how Lopen rules over the verdict
(lopen.workflow.oracle.judge): each criterion where it belongs, a pass only when everything holds."""

from __future__ import annotations

import msgspec
import pytest

from events import catalogue as ev
from events.fold import ModuleState
from lopen.documents.criteria import Criterion
from lopen.workflow.oracle import CommandResult, Evidence, Finding, judge, parse_verdict, prompt
from lopen.workflow.rubric import cited, rubric

CRITERIA = [Criterion(id=f"S-0{n}", text=f"criterion {n}", checked=False, line=n) for n in range(1, 7)]
KNOWN = [c.id for c in CRITERIA if c.id]


def planned() -> ModuleState:
    """core (S-01 to S-04 by its description) with two tasks; cli citing S-05; S-06 cited by nobody."""
    state = ModuleState(project="p", module="m")
    for event in (
        ev.ComponentsRecorded(
            components=(
                ev.ComponentSpec(name="core", description="the library (S-01 to S-03)"),
                ev.ComponentSpec(name="cli", description="the command line", depends_on=("core",)),
            )
        ),
        ev.TasksRecorded(
            component="core",
            tasks=(
                ev.TaskSpec(id="core/1", name="a", acceptance=("[S-01] a works", "the tests pass")),
                ev.TaskSpec(id="core/2", name="b", acceptance=("[S-02] b works", "S-04 too")),
            ),
        ),
        ev.TasksRecorded(component="cli", tasks=(ev.TaskSpec(id="cli/1", name="c", acceptance=("[S-05] c",)),)),
    ):
        assert state.apply(event) is None
    return state


def test_ids_are_found_bracketed_bare_and_in_ranges_but_never_as_a_prefix() -> None:
    assert cited("[S-01] and S-03", KNOWN) == ["S-01", "S-03"]
    assert cited("S-02 to S-04", KNOWN) == ["S-02", "S-03", "S-04"]
    assert cited("S-011 or XS-01 or S-01x", KNOWN) == []


def test_a_task_is_judged_against_the_spec_text_of_what_it_cites_with_the_plans_check_under_it() -> None:
    judged = rubric(planned(), CRITERIA, "task", "core/1")
    assert [(c.id, c.text, c.checks) for c in judged.criteria] == [("S-01", "criterion 1", ("[S-01] a works",))]
    assert judged.checks == ("the tests pass",)
    assert judged.others == ()


def test_a_component_is_judged_on_its_own_criteria_and_told_which_are_others() -> None:
    judged = rubric(planned(), CRITERIA, "component", "core")
    assert judged.ids == ["S-01", "S-02", "S-03", "S-04"]  # its tasks' and its description's
    assert judged.others == ("[S-05] criterion 5 — component cli", "[S-06] criterion 6 — not planned yet")
    assert rubric(planned(), CRITERIA, "component", "cli").ids == ["S-05"]


def test_the_module_is_judged_on_every_criterion() -> None:
    assert rubric(planned(), CRITERIA, "module", "m").ids == KNOWN


def evidence(*ids: str, exit_code: int = 0, diff: str = "+x") -> Evidence:
    state = planned()
    judged = rubric(state, [c for c in CRITERIA if c.id in ids], "module", "m")
    return Evidence(
        module="m",
        scope="component",
        target="core",
        component="core",
        task="",
        diff=diff,
        changed_files=["a.py"],
        rubric=judged,
        commands=[CommandResult(name="verify-tests", command="pytest -q", exit_code=exit_code, output_tail="E boom")],
    )


def verdict(passed: bool, *criteria: tuple[str, bool], findings: list[dict] | None = None) -> str:
    return msgspec.json.encode(
        {
            "passed": passed,
            "summary": "s",
            "criteria": [{"id": i, "met": met, "evidence": f"{i} ev"} for i, met in criteria],
            "findings": findings or [],
        }
    ).decode()


def test_a_pass_stands_only_when_every_criterion_is_met_and_the_commands_passed() -> None:
    good = judge(parse_verdict(verdict(True, ("S-01", True), ("S-02", True))), evidence("S-01", "S-02"))
    assert good.passed and not good.reviewer_failed


def test_a_pass_with_an_unmet_criterion_fails_with_an_error_finding_for_it() -> None:
    judged = judge(parse_verdict(verdict(True, ("S-01", True), ("S-02", False))), evidence("S-01", "S-02"))
    assert not judged.passed and not judged.reviewer_failed
    assert "unmet criteria (S-02)" in judged.summary
    assert [f.description for f in judged.findings if f.severity == "error"] == ["[S-02] is not met: S-02 ev"]


def test_a_pass_with_an_error_finding_fails() -> None:
    text = verdict(True, ("S-01", True), findings=[{"severity": "error", "description": "stub"}])
    assert not judge(parse_verdict(text), evidence("S-01")).passed


def test_a_failing_verify_command_fails_the_pass_and_shows_its_output() -> None:
    judged = judge(parse_verdict(verdict(True, ("S-01", True))), evidence("S-01", exit_code=1))
    assert not judged.passed and judged.summary.startswith("`pytest -q` failed (exit 1)")
    (finding,) = [f for f in judged.findings if f.category == "verify-command"]
    assert "E boom" in finding.description


def test_a_command_killed_by_a_signal_fails_too() -> None:
    assert not judge(parse_verdict(verdict(True, ("S-01", True))), evidence("S-01", exit_code=-9)).passed


def test_a_list_that_leaves_a_criterion_unjudged_is_the_reviewers_failure() -> None:
    judged = judge(parse_verdict(verdict(True, ("S-01", True))), evidence("S-01", "S-02"))
    assert not judged.passed and judged.reviewer_failed
    assert "did not judge S-02" in judged.summary and "not a fault in your code" in judged.summary


def test_a_failing_command_is_the_codes_fault_even_when_the_list_is_short() -> None:
    judged = judge(parse_verdict(verdict(True, ("S-01", True))), evidence("S-01", "S-02", exit_code=2))
    assert not judged.passed and not judged.reviewer_failed
    assert judged.summary.startswith("`pytest -q` failed (exit 2)")


@pytest.mark.parametrize("answer", ['{"passed": "true", "summary": "x"}', "LGTM, ship it", '{"passed": 1}'])
def test_only_a_json_boolean_passes_and_an_unreadable_answer_is_the_reviewers_failure(answer: str) -> None:
    read = parse_verdict(answer)
    assert not read.passed and read.reviewer_failed and read.raw == answer
    assert "not a fault in your code" in read.summary


def test_a_verdict_in_prose_with_a_fenced_block_is_read() -> None:
    text = "Here is my review.\n```json\n" + verdict(True, ("S-01", True)) + "\n```\nThanks."
    read = parse_verdict(text)
    assert read.passed and [c.id for c in read.criteria] == ["S-01"]


def test_the_prompt_shows_what_to_judge_what_is_others_and_a_cut_diff() -> None:
    state = planned()
    judged = rubric(state, CRITERIA, "component", "core")
    cut = Evidence(
        module="m",
        scope="component",
        target="core",
        component="core",
        task="",
        diff="+x\n… diff cut at 60000 characters",
        changed_files=[],
        rubric=judged,
        commands=[],
        conventions="### AGENTS.md\nuse tabs",
    )
    text = prompt(cut)
    judge_part = text.split("## Criteria to judge")[1].split("##")[0]
    assert "[S-01] criterion 1" in judge_part and "S-05" not in judge_part
    assert "[S-05] criterion 5 — component cli" in text.split("## Other components' criteria")[1]
    assert "## Diff (cut: what is not shown cannot be judged met)" in text
    assert "use tabs" in text.split("## The project's conventions")[1]
    assert "confidence" not in text


def test_findings_keep_their_fields() -> None:
    text = verdict(False, ("S-01", False), findings=[{"severity": "error", "description": "d", "location": "a.py:1"}])
    assert parse_verdict(text).findings == [Finding(severity="error", description="d", location="a.py:1")]


# --- a failed boundary verdict becomes work ------------------------------------------------------


def boundary(state: ModuleState, scope: str, target: str, text: str):
    from actors.task_runner import fix_task_events

    return fix_task_events(state, scope, target, parse_verdict(text))


def test_a_failed_component_verdict_becomes_a_fix_task_of_that_component_citing_the_unmet_criteria() -> None:
    state = planned()
    assert state.apply(ev.ComponentSelected(component="core")) is None
    text = verdict(
        False,
        ("S-01", True),
        ("S-02", False),
        findings=[{"severity": "error", "description": "no test", "location": "t.py:3"}],
    )
    events, task_id = boundary(state, "component", "core", text)
    assert task_id == "core/3"
    (recorded,) = events  # core is already the component at work: nothing else to select
    assert isinstance(recorded, ev.TasksRecorded) and [t.id for t in recorded.tasks] == ["core/1", "core/2", "core/3"]
    fix = recorded.tasks[-1]
    assert fix.acceptance[0] == "[S-02] is met: S-02 ev" and fix.subtasks == ("t.py:3: no test",)
    assert state.apply(recorded) is None and state.tasks["core/3"].state == "pending"


def test_a_failed_module_verdict_goes_to_the_component_owning_the_unmet_criterion_and_selects_it() -> None:
    state = planned()  # nothing selected: the fix's component is selected so that it is built next
    events, task_id = boundary(state, "module", "m", verdict(False, ("S-06", True), ("S-03", False)))
    assert task_id == "core/3"  # S-03 is core's (its description names S-01 to S-03)
    recorded, selected = events
    assert isinstance(recorded, ev.TasksRecorded) and recorded.component == "core"
    assert isinstance(selected, ev.ComponentSelected) and selected.component == "core"
    _, task_id = boundary(state, "module", "m", verdict(False, ("S-05", False)))
    assert task_id == "cli/2"  # cli's; it waits for core, so it is not selected yet
