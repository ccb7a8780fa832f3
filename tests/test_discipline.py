"""Tool discipline (B5): re-reads of unchanged files and re-runs of a failing command.

Result strings are shaped like the Copilot CLI 1.0.102's, as measured through the gateway: `view`
returns the file's text; `bash` returns the output followed by `<shellId: N completed with exit
code X>` and reports `success=True` even for a non-zero exit; a failed `create`/`edit`/`view`
reports `success=False`.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.catalogue import CorrectiveInstructionIssued, ToolCalled
from lopen.copilot.results import ToolCallRecord
from lopen.workflow.discipline import (
    Finding,
    analyze,
    content_hash,
    exit_code,
    from_events,
    normalise_path,
)
from lopen.workflow.invoke import RESULT_SUMMARY

CORE = "def slugify(text):\n    return '-'.join(text.lower().split())\n"
PYTEST = "python -m pytest -q"
PYTEST_FAILURE = (
    "F\n=================================== FAILURES ===================================\n"
    "_________________________________ test_slugify _________________________________\n"
    "    def test_slugify():\n>       assert slugify('A  b!') == 'a-b'\n"
    "E       AssertionError: assert 'a-b!' == 'a-b'\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_core.py::test_slugify - AssertionError: assert 'a-b!' == 'a-b'\n"
    "1 failed in 0.03s\n"
)

_ids = itertools.count()
_shells = itertools.count()


def call(name: str, arguments: dict | str | None, result: str, success: bool = True) -> ToolCallRecord:
    return ToolCallRecord(
        call_id=f"call_{next(_ids)}", name=name, arguments=arguments, result=result, success=success, duration=0.1
    )


def view(path: str, text: str = CORE) -> ToolCallRecord:
    return call("view", {"path": path}, text)


def bash(command: str, output: str = "", code: int = 0) -> ToolCallRecord:
    return call("bash", {"command": command, "description": "run it"}, f"{output}\n<shellId: {next(_shells)} "
                f"completed with exit code {code}>" if not output.endswith("\n") else
                f"{output}<shellId: {next(_shells)} completed with exit code {code}>")  # fmt: skip


def edit(path: str) -> ToolCallRecord:
    return call("edit", {"path": path, "old_str": "a", "new_str": "b"}, f"File /w/{path} updated with changes.")


def create(path: str) -> ToolCallRecord:
    return call("create", {"path": path, "file_text": "x = 1\n"}, f"Created file /w/{path} with 6 characters")


def failing(command: str = PYTEST) -> ToolCallRecord:
    return bash(command, PYTEST_FAILURE, code=1)


def run(calls: list[ToolCallRecord], reads: int = 3, retries: int = 2, **kw: str) -> list[Finding]:
    return analyze(calls, max_file_reads=reads, max_command_retries=retries, **kw)


# -- file reads ---------------------------------------------------------------------------------


def test_five_reads_of_an_unchanged_file_make_one_finding_with_count_five() -> None:
    findings = run([view("slugify/core.py") for _ in range(5)])
    assert findings == [
        Finding(
            category="file-reads",
            subject="slugify/core.py",
            count=5,
            instruction="You read slugify/core.py 5 times without it changing; its content is unchanged — "
            "keep what you need from the first read instead of reading it again.",
        )
    ]


def test_reads_whose_content_changes_in_between_are_not_flagged() -> None:
    calls = [view("slugify/core.py", f"{CORE}# revision {i}\n") for i in range(6)]
    assert run(calls) == []


def test_a_changed_read_starts_the_count_again() -> None:
    # 3 of the old content (allowed), 4 of the new: only the second run is flagged.
    calls = [view("a.py", "old")] * 3 + [view("a.py", "new")] * 4
    assert [(f.subject, f.count) for f in run(calls)] == [("a.py", 4)]


@pytest.mark.parametrize("change", [edit, create], ids=["edit", "create"])
def test_an_edit_or_create_of_the_file_resets_the_count(change) -> None:
    # Even when the text read afterwards is the same (the edit was undone), the change resets.
    calls = [view("src/a.py")] * 3 + [change("src/a.py")] + [view("src/a.py")] * 3
    assert run(calls) == []


def test_a_change_to_another_file_does_not_reset_the_count() -> None:
    calls = [view("src/a.py")] * 2 + [edit("src/b.py")] + [view("src/a.py")] * 2
    assert [(f.subject, f.count) for f in run(calls)] == [("src/a.py", 4)]


def test_a_failed_edit_changes_nothing() -> None:
    refused = call("edit", {"path": "src/a.py", "old_str": "zz", "new_str": "b"}, "No match found", success=False)
    calls = [view("src/a.py")] * 2 + [refused] + [view("src/a.py")] * 2
    assert [f.count for f in run(calls)] == [4]


@pytest.mark.parametrize("limit", [1, 3, 5])
def test_the_read_limit_is_exact(limit: int) -> None:
    assert run([view("a.py")] * limit, reads=limit) == []
    assert [f.count for f in run([view("a.py")] * (limit + 1), reads=limit)] == [limit + 1]


def test_bash_cat_counts_as_a_read_and_matches_view() -> None:
    # The shell id differs on every call; cat's output is the same text `view` returns.
    calls = [view("slugify/core.py"), bash("cat slugify/core.py", CORE), bash("cat  ./slugify/core.py", CORE)]
    calls += [view("./slugify/core.py")]
    assert [(f.category, f.subject, f.count) for f in run(calls)] == [("file-reads", "slugify/core.py", 4)]


@pytest.mark.parametrize(
    "command",
    [
        "cat src/a.py",
        "cat -n src/a.py",
        "less src/a.py",
        "head src/a.py",
        "head -n 20 src/a.py",
        "head -20 src/a.py",
        "tail -n 5 src/a.py",
        "sed -n '1,20p' src/a.py",
        "sed -n -e '/def/p' src/a.py",
        "sed -n '$p' src/a.py",
    ],
)
def test_plain_bash_read_commands_are_reads(command: str) -> None:
    assert [(f.subject, f.count) for f in run([bash(command, "x = 1\n")] * 4)] == [("src/a.py", 4)]


@pytest.mark.parametrize(
    "command",
    [
        "cat src/a.py | grep x",
        "cat src/a.py > copy.py",
        "cat src/a.py && ls",
        "cat src/a.py b.py",
        "cat src/*.py",
        "cat $(ls src/a.py)",
        "cat",
        "sed -i 's/a/b/' src/a.py",
        "sed 's/a/b/' src/a.py",
        "head -n 3",
        "python src/a.py",
        "cat 'unterminated",
    ],
)
def test_other_bash_commands_are_not_reads(command: str) -> None:
    assert run([bash(command, "x = 1\n")] * 5) == []


def test_a_failing_cat_is_not_a_read() -> None:
    missing = "cat: src/a.py: No such file or directory\n"
    findings = run([bash("cat src/a.py", missing, code=1)] * 4, retries=5)
    assert findings == []


def test_a_failed_view_is_not_a_read() -> None:
    missing = call("view", {"path": "src/missing.py"}, "Path does not exist", success=False)
    assert run([missing] * 5) == []


def test_partial_reads_of_different_parts_do_not_count_together() -> None:
    top = call("view", {"path": "big.py", "view_range": [1, 50]}, "lines 1-50")
    rest = call("view", {"path": "big.py", "view_range": [51, 100]}, "lines 51-100")
    assert run([top, rest] * 4) == []
    assert [f.count for f in run([top] * 4)] == [4]


def test_paths_are_normalised() -> None:
    calls = [view("src/a.py"), view("./src/a.py"), view("src/../src/a.py"), view("src//a.py")]
    assert [(f.subject, f.count) for f in run(calls)] == [("src/a.py", 4)]


def test_absolute_and_relative_paths_match_by_suffix_without_a_working_directory() -> None:
    calls = [view("/home/me/proj/src/a.py"), view("src/a.py"), view("/home/me/proj/src/a.py"), view("src/a.py")]
    assert [(f.subject, f.count) for f in run(calls)] == [("src/a.py", 4)]
    # create/edit are given absolute paths by the CLI's convention: they still reset a relative read.
    calls = [view("src/a.py")] * 3 + [edit("/home/me/proj/src/a.py")] + [view("src/a.py")] * 3
    assert run(calls) == []


def test_a_working_directory_makes_absolute_paths_relative() -> None:
    calls = [view("/w/src/a.py"), view("src/a.py"), view("/w/src/a.py"), view("/w/./src/a.py")]
    assert [(f.subject, f.count) for f in run(calls, working_directory="/w/")] == [("src/a.py", 4)]


def test_different_files_are_counted_apart() -> None:
    calls = [view("a.py", "A"), view("b.py", "B")] * 4
    assert [(f.subject, f.count) for f in run(calls)] == [("a.py", 4), ("b.py", 4)]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("./src/a.py", "src/a.py"),
        ("src/../lib/b.py", "lib/b.py"),
        (" src/a.py ", "src/a.py"),
        ("../outside.py", "../outside.py"),
        ("/abs//x/../y.py", "/abs/y.py"),
        ("", ""),
    ],
)
def test_normalise_path(path: str, expected: str) -> None:
    assert normalise_path(path) == expected


def test_normalise_path_relative_to_a_working_directory() -> None:
    assert normalise_path("/w/src/a.py", "/w") == "src/a.py"
    assert normalise_path("/w", "/w") == "."
    assert normalise_path("/wx/a.py", "/w") == "/wx/a.py"
    assert normalise_path("/elsewhere/a.py", "/w") == "/elsewhere/a.py"


# -- command retries ----------------------------------------------------------------------------


def test_a_command_failing_four_times_is_flagged() -> None:
    findings = run([failing()] * 4)
    assert findings == [
        Finding(
            category="command-retries",
            subject=PYTEST,
            count=4,
            instruction="`python -m pytest -q` failed 4 times in a row with no file changed in between; "
            "read the failure, change the code, then re-run it.",
        )
    ]


def test_fail_edit_fail_is_not_flagged() -> None:
    calls = [failing()] * 3 + [edit("slugify/core.py")] + [failing()] * 3
    assert run(calls) == []


def test_a_create_resets_too() -> None:
    assert run([failing()] * 3 + [create("tests/conftest.py")] + [failing()] * 3) == []


def test_a_success_resets() -> None:
    calls = [failing()] * 3 + [bash(PYTEST, "1 passed in 0.01s\n")] + [failing()] * 3
    assert run(calls) == []


@pytest.mark.parametrize("limit", [0, 1, 2, 4])
def test_the_retry_limit_counts_re_runs_after_the_first_failure(limit: int) -> None:
    # max_command_retries = N: the first failure and N re-runs are allowed, the (N+1)th re-run is flagged.
    assert run([failing()] * (limit + 1), retries=limit) == []
    assert [f.count for f in run([failing()] * (limit + 2), retries=limit)] == [limit + 2]


def test_the_exit_code_marker_is_the_failure_signal() -> None:
    # The CLI reports success=True for a non-zero exit; the marker says it failed.
    assert failing().success is True
    assert [f.count for f in run([failing()] * 4)] == [4]
    # A call the CLI itself reports as failed (no marker) is a failure too.
    broken = call("bash", {"command": PYTEST}, "The command timed out.", success=False)
    assert [f.count for f in run([broken] * 4)] == [4]
    # Neither marker nor failure: not counted.
    assert run([call("bash", {"command": PYTEST}, "detached")] * 4) == []


def test_commands_are_compared_with_whitespace_collapsed() -> None:
    calls = [failing("python -m pytest -q"), failing("python  -m pytest -q "), failing("python -m\tpytest -q")]
    calls += [failing(" python -m pytest\n-q")]
    assert [(f.subject, f.count) for f in run(calls)] == [(PYTEST, 4)]


def test_reads_and_other_failures_in_between_do_not_reset() -> None:
    calls = [
        failing(),
        bash("cat tests/test_core.py", "def test_slugify(): ...\n"),
        failing(),
        view("slugify/core.py"),
        failing(),
        bash("ruff check .", "E501 line too long\n", code=1),
        bash("grep -n 'def ' slugify/core.py", "1:def slugify(text):\n"),
        bash("git diff", ""),
        call("read_spec", {"module": "slugify", "section": "Overview"}, "## Overview\n…"),
        failing(),
    ]
    assert [(f.subject, f.count) for f in run(calls)] == [(PYTEST, 4)]


def test_a_successful_command_that_may_change_files_resets() -> None:
    calls = [failing()] * 3 + [bash("pip install python-slugify", "Successfully installed\n")] + [failing()] * 3
    assert run(calls) == []


def test_each_command_is_counted_apart_and_findings_keep_their_order() -> None:
    lint = "ruff check ."
    calls = [failing(lint)] * 4 + [view("a.py")] * 4 + [failing()] * 5
    findings = run(calls)
    assert [(f.category, f.subject, f.count) for f in findings] == [
        ("command-retries", lint, 4),
        ("file-reads", "a.py", 4),
        ("command-retries", PYTEST, 5),
    ]


def test_one_finding_per_subject_with_the_longest_run() -> None:
    calls = [failing()] * 4 + [edit("a.py")] + [failing()] * 6 + [edit("a.py")] + [failing()] * 5
    assert [f.count for f in run(calls)] == [6]


def test_a_long_command_is_shortened_in_the_instruction_only() -> None:
    long = "python -c '" + "x = 1; " * 40 + "raise SystemExit(1)'"
    (finding,) = run([bash(long, "boom\n", code=1)] * 4)
    assert finding.subject == long
    assert "…`" in finding.instruction and len(finding.instruction) < 250


# -- robustness -----------------------------------------------------------------------------------


def test_arguments_as_a_json_string_are_understood_and_garbage_ignored() -> None:
    as_text = call("view", '{"path": "a.py"}', "x")
    assert [f.count for f in run([as_text] * 4)] == [4]
    garbage = [call("view", "{not json", "x"), call("bash", None, "x"), call("view", '["a.py"]', "x")]
    assert run(garbage * 5) == []


def test_no_calls_no_findings_and_bad_limits_are_refused() -> None:
    assert run([]) == []
    with pytest.raises(ValueError):
        run([], reads=0)
    with pytest.raises(ValueError):
        run([], retries=-1)


def test_exit_code_and_content_hash() -> None:
    assert exit_code("boom\n<shellId: 12 completed with exit code 2>") == 2
    assert exit_code("ok\n<shellId: 0 completed with exit code 0>\n") == 0
    assert exit_code("<shellId: 1 completed with exit code 2> and then more") is None
    assert exit_code("plain text") is None
    same = content_hash("x\n<shellId: 1 completed with exit code 0>")
    assert same == content_hash("x\n<shellId: 7 completed with exit code 0>") == content_hash("x\n")
    assert content_hash("x\n") != content_hash("y\n")


_tool = st.sampled_from(["view", "bash", "edit", "create", "read_spec"])
_record = st.builds(
    call,
    name=_tool,
    arguments=st.fixed_dictionaries(
        {}, optional={"path": st.sampled_from(["a.py", "./a.py", "/w/a.py", "b.py"]), "command": st.text(max_size=20)}
    ),
    result=st.sampled_from(["A", "B", "x\n<shellId: 1 completed with exit code 1>", ""]),
    success=st.booleans(),
)


@settings(max_examples=100, deadline=None)
@given(calls=st.lists(_record, max_size=30), reads=st.integers(1, 4), retries=st.integers(0, 3))
def test_findings_always_exceed_their_limit(calls: list[ToolCallRecord], reads: int, retries: int) -> None:
    findings = analyze(calls, reads, retries)
    assert len({(f.category, f.subject) for f in findings}) == len(findings)
    for finding in findings:
        limit = reads if finding.category == "file-reads" else retries + 1
        assert finding.count > limit and finding.instruction


# -- replaying ToolCalled events ------------------------------------------------------------------


def recorded(record: ToolCallRecord, **extra: object) -> ToolCalled:
    """As the workflow records a finished tool call (lopen/workflow/invoke.py)."""
    arguments = record.arguments if isinstance(record.arguments, dict) else {"raw": record.arguments}
    return ToolCalled(
        invocation_id="inv-1",
        tool=record.name,
        arguments=arguments,
        success=record.success,
        result_summary=record.result[:RESULT_SUMMARY],
        duration=record.duration,
        **extra,
    )


def test_from_events_rebuilds_records_and_skips_other_events() -> None:
    calls = [view("slugify/core.py"), call("bash", '{"command": "ls"}', "\n<shellId: 0 completed with exit code 0>")]
    events = [recorded(calls[0]), CorrectiveInstructionIssued(instruction="unrelated"), recorded(calls[1])]
    records = from_events(events)
    assert [(r.name, r.arguments, r.result, r.success) for r in records] == [
        ("view", {"path": "slugify/core.py"}, CORE, True),
        ("bash", '{"command": "ls"}', "\n<shellId: 0 completed with exit code 0>", True),
    ]
    assert len({r.call_id for r in records}) == 2


def test_from_events_finds_what_analyze_finds_when_results_are_short() -> None:
    calls = [view("slugify/core.py")] * 5 + [bash(PYTEST, "1 failed in 0.03s\n", code=1)] * 4
    assert run(from_events(recorded(c) for c in calls)) == run(calls)
    assert len(run(calls)) == 2


def test_from_events_loses_the_exit_code_of_a_long_output() -> None:
    # The limitation: a realistic pytest failure is longer than the 300-character summary, so the
    # marker at its end is cut off and the CLI's success=True hides the failure.
    calls = [failing()] * 4
    assert len(calls[0].result) > RESULT_SUMMARY and exit_code(calls[0].result[:RESULT_SUMMARY]) is None
    assert run(calls) != []
    assert run(from_events(recorded(c) for c in calls)) == []


class ToolCalledWithDigest(ToolCalled, kw_only=True):
    """ToolCalled with the two fields proposed for an exact replay."""

    exit_code: int | None = None
    result_hash: str = ""


def digested(record: ToolCallRecord) -> ToolCalled:
    base = recorded(record)
    return ToolCalledWithDigest(
        invocation_id=base.invocation_id,
        tool=base.tool,
        arguments=base.arguments,
        success=base.success,
        result_summary=base.result_summary,
        duration=base.duration,
        exit_code=exit_code(record.result),
        result_hash=content_hash(record.result),
    )


def test_from_events_is_exact_with_an_exit_code_and_a_content_hash() -> None:
    head = "x" * RESULT_SUMMARY
    calls = [failing()] * 4 + [view("big.py", head + "tail one")] * 4 + [view("big.py", head + "tail two")]
    calls += [bash("cat big.py", head + "tail two")] * 3
    expected = [("command-retries", PYTEST, 4), ("file-reads", "big.py", 4)]
    assert [(f.category, f.subject, f.count) for f in run(calls)] == expected
    replayed = run(from_events(digested(c) for c in calls))
    assert [(f.category, f.subject, f.count) for f in replayed] == expected
