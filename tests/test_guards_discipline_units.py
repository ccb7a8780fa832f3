"""Tool discipline (lopen/workflow/discipline.py), one rule at a time: which calls count as reads of
one file, which shell commands count as changing files (and so forgive a failing command), and what a
replay of recorded events sees. Results are shaped like the Copilot CLI's (see tests/test_discipline.py).
"""

from __future__ import annotations

import itertools

import pytest

from events.catalogue import ToolCalled
from lopen.copilot.results import ToolCallRecord
from lopen.workflow.discipline import analyze, content_hash, from_events, normalise_path

_ids = itertools.count()
PYTEST = "python -m pytest -q"


def call(name: str, arguments: dict, result: str, success: bool = True) -> ToolCallRecord:
    return ToolCallRecord(
        call_id=f"c{next(_ids)}", name=name, arguments=arguments, result=result, success=success, duration=0.1
    )


def view(path: str, text: str = "x = 1\n") -> ToolCallRecord:
    return call("view", {"path": path}, text)


def bash(command: str, output: str = "x = 1\n", code: int = 0) -> ToolCallRecord:
    return call("bash", {"command": command}, f"{output}<shellId: {next(_ids)} completed with exit code {code}>")


def edit(path: str) -> ToolCallRecord:
    return call("edit", {"path": path, "old_str": "a", "new_str": "b"}, "updated")


FAIL = bash(PYTEST, "1 failed\n", code=1)


def reads(calls: list[ToolCallRecord], limit: int = 2, **kw: str) -> list[tuple[str, int]]:
    return [(f.subject, f.count) for f in analyze(calls, limit, 5, **kw) if f.category == "file-reads"]


def retried(calls: list[ToolCallRecord], retries: int = 2) -> list[tuple[str, int]]:
    return [(f.subject, f.count) for f in analyze(calls, 99, retries) if f.category == "command-retries"]


def forgives(between: ToolCallRecord) -> bool:
    """Whether a successful call between two pairs of failures resets the failing command's count."""
    return retried([FAIL, FAIL, between, FAIL, FAIL]) == []


# -- limits --------------------------------------------------------------------------------------


def test_the_limits_errors_name_the_wrong_value():
    with pytest.raises(ValueError, match="max_file_reads must be 1 or more, not 0"):
        analyze([], 0, 1)
    with pytest.raises(ValueError, match="max_command_retries must be 0 or more, not -1"):
        analyze([], 1, -1)


# -- which reads are one file ----------------------------------------------------------------------


def test_paths_under_the_root_folder_or_a_folder_ending_in_x_become_relative():
    assert normalise_path("/a.py", "/") == "a.py"
    assert normalise_path("/box/WX/a.py", "/box/WX") == "a.py"
    assert normalise_path("/box/WX/a.py", "/box/WX/") == "a.py"


def test_a_relative_path_is_left_as_it_is_even_under_a_relative_working_directory():
    assert normalise_path("src/a.py", "src") == "src/a.py"


def test_absolute_reads_under_the_working_directory_are_named_relative(tmp_path):
    assert reads([view("/w/src/a.py")] * 3, working_directory="/w") == [("src/a.py", 3)]
    assert reads([bash("cat /w/src/a.py")] * 3, working_directory="/w") == [("src/a.py", 3)]


def test_a_read_of_another_file_with_the_same_name_does_not_reset_the_count():
    # /w/a.py (as a.py) and /w/src/a.py: only the working directory tells them apart
    other = [view("/w/src/a.py", "other\n")]
    assert reads([view("a.py")] * 2 + other + [view("a.py")], working_directory="/w") == [("a.py", 3)]
    other = [bash("cat /w/src/a.py", "other\n")]
    assert reads([view("a.py")] * 2 + other + [view("a.py")], working_directory="/w") == [("a.py", 3)]


def test_an_edit_of_another_file_with_the_same_name_does_not_reset_the_count():
    calls = [view("a.py")] * 2 + [edit("/w/src/a.py")] + [view("a.py")]
    assert reads(calls, working_directory="/w") == [("a.py", 3)]


def test_without_a_working_directory_an_edit_of_a_differently_named_file_resets_nothing():
    assert reads([view("a.py")] * 2 + [edit("/w/b.py")] + [view("a.py")]) == [("a.py", 3)]
    assert reads([view("/w/b.py", "b\n")] * 2 + [view("a.py")] + [view("/w/b.py", "b\n")]) == [("/w/b.py", 3)]


def test_an_absolute_read_is_named_as_it_was_read_and_a_relative_spelling_wins():
    assert reads([view("/w/a.py")] * 3) == [("/w/a.py", 3)]
    assert reads([view("a.py"), view("/w/a.py"), view("/w/a.py")]) == [("a.py", 3)]


def test_a_later_run_of_the_same_length_keeps_the_first_finding():
    calls = [view("/w/a.py", "one")] * 3 + [view("a.py", "two")] * 3
    assert reads(calls) == [("/w/a.py", 3)]


def test_a_result_that_is_not_valid_text_is_still_fingerprinted():
    binary = "PK\x03\x04\udcff\udcfe"  # bytes the CLI decoded with surrogateescape
    assert content_hash(binary) != content_hash("PK\x03\x04")
    assert reads([view("archive.zip", binary)] * 3) == [("archive.zip", 3)]


def test_a_bash_call_without_a_command_does_not_end_the_analysis():
    calls = [call("bash", {"command": "  "}, "")] + [view("a.py")] * 3
    assert reads(calls) == [("a.py", 3)]


# -- which shell commands are reads ----------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "cat 'src/a.py'",
        "head -c 100 src/a.py",
        "tail --lines 5 src/a.py",
        "head --bytes 10 src/a.py",
        "sed --quiet 1,5p src/a.py",
        "sed --silent 1,5p src/a.py",
        "sed -E -n /x/p src/a.py",
        "sed -r -n /x/p src/a.py",
        "sed -n -e 1p -e 5p src/a.py",
    ],
)
def test_plain_read_commands_count_as_reads_of_their_file(command):
    assert reads([view("src/a.py")] + [bash(command, "x = 1\n")] * 2) == [("src/a.py", 3)]


def test_a_file_name_with_punctuation_is_one_file():
    assert reads([bash("cat docs/c++,notes@v2.md")] * 3) == [("docs/c++,notes@v2.md", 3)]


# -- which successful commands forgive a failing one -----------------------------------------------


def test_without_a_change_between_them_the_failures_add_up():
    assert retried([FAIL] * 4) == [(PYTEST, 4)]


@pytest.mark.parametrize(
    "command",
    [
        "cat a.py>b.py",  # a redirection without spaces writes b.py
        "ls > listing.txt",
        "ls `touch x`",
        'ls "$(touch x)"',
        "sed -n -i -e 5p notes.txt",  # in place: rewrites notes.txt
        "git commit -qam wip",
        "make diff",
        "git",
    ],
)
def test_a_command_that_may_change_files_forgives_the_failing_one(command):
    assert forgives(bash(command, ""))


@pytest.mark.parametrize("command", ["ls src", "git status", "cat a.py", "grep -n x a.py"])
def test_a_read_only_command_forgives_nothing(command):
    assert not forgives(bash(command, ""))


def test_the_failing_command_succeeding_forgives_it_whatever_its_spacing():
    assert forgives(bash("python  -m   pytest -q", ""))


def test_a_long_command_is_quoted_whole_up_to_120_characters_then_cut():
    whole = "x" * 120
    [finding] = analyze([bash(whole, "", code=1)] * 2, 99, 0)
    assert f"`{whole}` failed 2 times" in finding.instruction
    longer = "y" * 121
    [finding] = analyze([bash(longer, "", code=1)] * 2, 99, 0)
    assert f"`{'y' * 119}…` failed 2 times" in finding.instruction


# -- replaying recorded events ---------------------------------------------------------------------


def event(record: ToolCallRecord, *, code: int | None = None, digest: str = "", summary: str | None = None):
    return ToolCalled(
        invocation_id="",
        tool=record.name,
        arguments=record.arguments,
        success=record.success,
        result_summary=record.result if summary is None else summary,
        duration=record.duration,
        exit_code=code,
        result_hash=digest,
    )


def test_a_replay_reads_the_exit_code_from_the_summary_when_the_event_has_none():
    failed = bash(PYTEST, "1 failed\n", code=1)
    events = [event(failed, digest=content_hash(failed.result))] * 4
    assert [(f.subject, f.count) for f in analyze(from_events(events), 99, 2)] == [(PYTEST, 4)]


def test_a_replay_without_a_digest_tells_changed_content_apart():
    events = [event(bash("cat a.py", f"v{n}\n"), code=0) for n in range(3)]
    assert analyze(from_events(events), 2, 2) == []


def test_a_replay_without_a_digest_matches_a_summary_that_lost_its_marker():
    events = [event(bash("cat a.py", "same\n"), code=0), event(bash("cat a.py"), code=0, summary="same\n")] * 2
    assert [(f.subject, f.count) for f in analyze(from_events(events), 3, 2)] == [("a.py", 4)]


def test_a_replay_with_digests_is_as_exact_as_the_live_analysis_across_view_and_cat():
    live = [view("a.py", "same\n"), bash("cat a.py", "same\n"), view("a.py", "same\n")]
    replay = [
        event(c, code=None if c.name == "view" else 0, digest=content_hash(c.result), summary="cut") for c in live
    ]
    assert reads(live) == [("a.py", 3)]
    assert reads(from_events(replay)) == [("a.py", 3)]


def test_replayed_records_keep_the_invocation_and_the_duration():
    records = from_events([event(view("a.py"))])
    assert records[0].call_id == "invocation#0"
    assert records[0].duration == 0.1


def test_a_failing_read_only_command_that_then_succeeds_starts_its_count_again_whatever_its_spacing():
    failing = bash("grep -q TODO a.py", "", code=1)
    assert retried([failing] * 4) == [("grep -q TODO a.py", 4)]
    assert retried([failing, failing, bash("grep  -q   TODO a.py", ""), failing, failing]) == []
