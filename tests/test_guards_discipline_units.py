"""Tool discipline (lopen/workflow/discipline.py), one rule at a time: which calls count as reads of
one file, which shell commands count as changing files (and so forgive a failing command), and what a
replay of recorded events sees. Results are shaped like the Copilot CLI's (see tests/test_discipline.py).
"""

from __future__ import annotations

import itertools

from events.catalogue import ToolCalled
from lopen.copilot.results import ToolCallRecord
from lopen.workflow.discipline import analyze, content_hash, from_events

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


def test_a_replay_with_digests_is_as_exact_as_the_live_analysis_across_view_and_cat():
    live = [view("a.py", "same\n"), bash("cat a.py", "same\n"), view("a.py", "same\n")]
    replay = [
        event(c, code=None if c.name == "view" else 0, digest=content_hash(c.result), summary="cut") for c in live
    ]
    assert reads(live) == [("a.py", 3)]
    assert reads(from_events(replay)) == [("a.py", 3)]
