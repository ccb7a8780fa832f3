"""`lopen replay` and `lopen log` as an auditor uses them: the real CLI in a subprocess, on a store
holding a realistic story (tests/story.py).

Golden files live in tests/golden/replay/: each holds the output of one command line of ``GOLDEN``
on the story, and the tests only compare. After an intended change of the text view, rewrite them with
``bin/refresh-golden`` (which runs ``render`` below, outside the test session) and review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import msgspec
import pytest
import story

from events import catalogue as ev
from events.recorded import Recorded, module_stream
from events.store import EventStore
from lopen.app.views.replay import Selection, TextView, iso, json_line, parse_bound, session_records

GOLDEN_DIR = Path(__file__).parent / "golden" / "replay"
# golden file → the `lopen` command line whose output it holds, and the terminal width (COLUMNS) it runs in
GOLDEN: dict[str, tuple[tuple[str, ...], int | None]] = {
    "session-1-80.txt": (("replay", story.SESSION_1), 80),
    "session-1-200.txt": (("replay", story.SESSION_1), 200),
    "session-1-full.txt": (("replay", story.SESSION_1, "--full"), 80),
    "session-1-tree-80.txt": (("replay", story.SESSION_1, "--tree"), 80),
    "session-1-tree-200.txt": (("replay", story.SESSION_1, "--tree"), 200),
    "session-1-task-core-1.txt": (("replay", story.SESSION_1, "--task", "core/1"), 200),
    "session-1-types.txt": (
        ("replay", story.SESSION_1, "--type", "oracleverdictrecorded", "--type", "CommitRecorded"),
        None,
    ),
    "session-1-since-until.txt": (
        ("replay", story.SESSION_1, "--since", "2026-11-26T09:02:30Z", "--until", "#33"),
        None,
    ),
    "log-core-2-120.txt": (("log", "core/2"), 120),
}


def lopen(root: Path, *args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])  # this checkout's code, whatever is installed
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def story_project(root: Path) -> Path:
    """A project at ``root`` whose store holds the story (tests/story.py)."""
    story.make_project(root)
    story.write_story(root)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return story_project(tmp_path_factory.mktemp("audit") / "project")


def render(project: Path, name: str) -> str:
    """The output golden file ``name`` holds: its command line of ``GOLDEN`` run on ``project``."""
    args, columns = GOLDEN[name]
    return ok(lopen(project, *args, columns=columns))


def refresh(scratch: Path) -> list[Path]:
    """Write every golden file again from a story project made under ``scratch`` (bin/refresh-golden)."""
    project = story_project(scratch / "project")
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    for name in GOLDEN:
        path = GOLDEN_DIR / name
        path.write_text(render(project, name), encoding="utf-8")
        written.append(path)
    return written


def golden(project: Path, name: str) -> str:
    """``name``'s output, which must be the golden file's text (compared, never written)."""
    text = render(project, name)
    path = GOLDEN_DIR / name
    assert path.is_file(), f"{path} is missing: run bin/refresh-golden and review it"
    assert text == path.read_text(encoding="utf-8"), (
        f"the output differs from {path.name}: after an intended change run bin/refresh-golden and review the diff"
    )
    return text


def test_every_golden_file_is_compared() -> None:
    assert sorted(p.name for p in GOLDEN_DIR.iterdir()) == sorted(GOLDEN), "a stale or unlisted golden file"


def ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", out.stderr
    return out.stdout


# -- the text view ---------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [80, 200])
def test_text_view_fits_the_terminal_width(project: Path, columns: int) -> None:
    text = golden(project, f"session-1-{columns}.txt")
    assert all(len(line) <= columns for line in text.splitlines())
    # the session's story starts with the approval it worked from: who approved, what was approved
    first = text.splitlines()[1 if columns < 120 else 0]
    assert "SpecApproved" in first and story.APPROVER in first
    assert "§ Acceptance Criteria " + "b2" * 16 in text
    # findings and failure causes are in the text view, whole (wrapped, not cut)
    flat = " ".join(line.strip(" │") for line in text.splitlines())
    assert " ".join(story.REJECTION.split()) in " ".join(flat.split())
    assert "why: test_separator fails: the separator argument is ignored" in flat
    assert "why: no passing verify_task_completion in this invocation" in flat
    assert "AssertionError: 'hello-world' != 'hello_world'" in flat


def test_a_narrow_terminal_cuts_values_longest_first(project: Path) -> None:
    text = ok(lopen(project, "replay", story.SESSION_1, "--width", "80"))
    assert text == ok(lopen(project, "replay", story.SESSION_1, columns=80))
    commit = next(line for line in text.splitlines() if "CommitRecorded" in line)
    assert "c0ffee111111" in commit and "…" in commit  # the sha abbreviated, a long value cut
    tokens = next(line for line in text.splitlines() if "TokensUsed" in line and "inv-plan" in line)
    assert "input=9800" in tokens  # short values stay whole


def test_full_cuts_nothing(project: Path) -> None:
    text = golden(project, "session-1-full.txt")
    assert "…" not in text
    assert story.REJECTION in text
    assert story.COMMIT_1 in text and story.TREE_PASSED in text  # hashes unabbreviated
    assert "def normalize(text):\\n" in text  # a tool call's arguments whole, as JSON
    assert any(len(line) > 200 for line in text.splitlines())


@pytest.mark.parametrize("columns", [80, 200])
def test_tree_groups_invocations_tool_calls_and_verdicts(project: Path, columns: int) -> None:
    text = golden(project, f"session-1-tree-{columns}.txt")
    lines = text.splitlines()
    task = next(i for i, line in enumerate(lines) if "┌ InvocationStarted" in line and "inv-t1" in line)
    end = next(i for i, line in enumerate(lines) if "└ InvocationFinished" in line and "inv-t1" in line)
    inside = lines[task + 1 : end]
    assert all("│" in line for line in inside)
    oracle = next(line for line in inside if "InvocationStarted" in line and "inv-o1" in line)
    assert "│ ┌ InvocationStarted" in oracle  # nested one level under the task's invocation
    verdict = next(line for line in inside if "REJECTED" in line)
    assert "│ │ OracleVerdictRecorded" in verdict  # inside the oracle invocation
    assert any("│ │     finding [high] correctness" in line for line in inside)
    assert any("│ ToolCalled" in line and "bash" in line for line in inside)


def test_tree_falls_back_to_ascii_when_asked(project: Path) -> None:
    (project / ".lopen" / "config.json").write_text('{"display": {"ascii": true}}')
    try:
        text = ok(lopen(project, "replay", story.SESSION_1, "--tree", columns=120))
    finally:
        (project / ".lopen" / "config.json").unlink()
    assert "│" not in text and "┌" not in text and "| + InvocationStarted" in text


# -- filters ---------------------------------------------------------------------------------------


def seqs(text: str) -> list[int]:
    return [int(word[1:]) for line in text.splitlines() for word in line.split()[1:3] if word.startswith("#")]


def test_task_filter_follows_the_tasks_invocations_and_their_oracles(project: Path) -> None:
    text = golden(project, "session-1-task-core-1.txt")
    assert "inv-o1" in text and "inv-o2" in text and "REJECTED" in text and "c0ffee111111" in text
    assert "core/2" not in text.replace("tasks=2[core/1, core/2]", "")
    assert "inv-plan" not in text and "inv-t2" not in text


def test_a_filter_that_matches_nothing_says_so_and_names_the_tasks(project: Path) -> None:
    out = lopen(project, "replay", story.SESSION_1, "--task", "core/9")
    assert out.returncode == 0 and out.stdout == ""
    assert (
        out.stderr.strip() == f"no event of session {story.SESSION_1} matches --task core/9 (its tasks: core/1, core/2)"
    )


def test_invocation_filter_keeps_its_oracle_invocations(project: Path) -> None:
    text = ok(lopen(project, "replay", story.SESSION_1, "--invocation", "inv-t1", "--json"))
    events = [json.loads(line) for line in text.splitlines()]
    invocations = {e.get("invocation_id") for e in events}
    assert invocations == {"inv-t1", "inv-o1", "inv-o2"}
    assert events[0]["type"] == "InvocationStarted"
    assert sum(e["type"] == "OracleVerdictRecorded" for e in events) == 2


def test_type_filter_is_repeatable_and_case_insensitive(project: Path) -> None:
    text = golden(project, "session-1-types.txt")
    kinds = [line.split()[3] for line in text.splitlines() if line[:1].isdigit()]
    assert kinds == ["OracleVerdictRecorded", "OracleVerdictRecorded", "CommitRecorded"]


def test_since_and_until_take_times_and_seqs(project: Path) -> None:
    by_time = golden(project, "session-1-since-until.txt")
    assert seqs(by_time) == [31, 32, 33]
    by_seq = ok(lopen(project, "replay", story.SESSION_1, "--since", "31", "--until", "2026-11-26T09:02:36"))
    assert by_time == by_seq
    before = lopen(project, "replay", story.SESSION_2, "--until", "2026-11-25")
    assert before.stdout == "" and "matches --until 2026-11-25" in before.stderr
    whole_day = ok(lopen(project, "replay", story.SESSION_2, "--since", "2026-11-26", "--until", "2026-11-26"))
    assert whole_day == ok(lopen(project, "replay", story.SESSION_2))


def test_bad_filters_say_what_why_and_how(project: Path) -> None:
    out = lopen(project, "replay", story.SESSION_1, "--since", "yesterday")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "error: --since 'yesterday' is not understood" in out.stderr and "fix:" in out.stderr
    out = lopen(project, "replay", story.SESSION_1, "--type", "verdict")
    assert out.returncode == 1 and "did you mean OracleVerdictRecorded" in out.stderr
    out = lopen(project, "replay", story.SESSION_1, "--tree", "--json")
    assert out.returncode == 1 and "--tree and --json" in out.stderr


# -- JSON ------------------------------------------------------------------------------------------


def test_json_times_are_iso_8601_and_seq_is_kept(project: Path) -> None:
    text = ok(lopen(project, "replay", story.SESSION_1, "--json"))
    events = [json.loads(line) for line in text.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, 46))
    assert list(events[0])[:3] == ["seq", "type", "at"]
    for e in events:
        assert datetime.fromisoformat(e["at"]).utcoffset().total_seconds() == 0
    assert datetime.fromisoformat(events[0]["at"]).timestamp() == story.START + 3
    assert events[0]["type"] == "SpecApproved" and events[0]["approver"] == story.APPROVER
    verdict = next(e for e in events if e["type"] == "OracleVerdictRecorded")
    assert verdict["findings"][0]["description"] == story.REJECTION


def test_json_line_keeps_every_field() -> None:
    at = datetime.fromisoformat("2026-11-26T10:00:00Z").timestamp() + 0.25
    event = ev.ToolCalled(at=at, tool="bash", arguments={"command": "a,b"}, exit_code=1)
    line = json.loads(json_line(Recorded(7, "module:p/m", 1, event)))
    assert line == {
        "seq": 7,
        "type": "ToolCalled",
        "at": iso(at),
        **{k: v for k, v in msgspec.to_builtins(event).items() if k != "at"},
    }
    assert line["at"] == "2026-11-26T10:00:00.250000Z"


def test_parse_bound() -> None:
    assert parse_bound("#12").seq == 12 and parse_bound("12").seq == 12
    assert parse_bound("2026-11-26T10:00:00Z").at == datetime.fromisoformat("2026-11-26T10:00:00+00:00").timestamp()
    assert parse_bound("2026-11-26T10:00:00") == parse_bound("2026-11-26T10:00:00Z")  # naive = UTC
    day_end = parse_bound("2026-11-26", upper=True).at
    assert day_end is not None and 0 < datetime.fromisoformat("2026-11-27T00:00:00Z").timestamp() - day_end < 0.001
    with pytest.raises(ValueError, match="neither an event number nor an ISO-8601 time"):
        parse_bound("soon")


# -- lopen log ----------------------------------------------------------------------------------------


def test_log_tells_one_task_across_sessions(project: Path) -> None:
    text = golden(project, "log-core-2-120.txt")
    assert text.count("── session ") == 2
    flat = " ".join(" ".join(line.strip(" │") for line in text.splitlines()).split())
    assert "prompt: [lopen] module=slugify phase=building step=6 component=core task=core/2 kind=task" in flat
    order = ["in-progress → failed", "why: test_separator fails", "failed → in-progress", "✓ passed", "c0ffee222222"]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)


def test_log_of_an_unknown_task_lists_the_known_ones(project: Path) -> None:
    out = lopen(project, "log", "core/9")
    assert out.returncode == 1 and "error: no task core/9" in out.stderr and "core/1, core/2" in out.stderr


def test_an_auditor_finds_which_tasks_commit_the_oracle_rejected_first_and_why(project: Path) -> None:
    """ "Which task's commit did the oracle reject first, and why?" — from `lopen replay` and `lopen log` alone."""
    verdicts = [
        json.loads(line)
        for session in (story.SESSION_1, story.SESSION_2)
        for line in ok(lopen(project, "replay", session, "--type", "OracleVerdictRecorded", "--json")).splitlines()
    ]
    first = min((v for v in verdicts if not v["passed"]), key=lambda v: v["seq"])
    task = first["target"]
    why = [f["description"] for f in first["findings"] if f["severity"] == "high"]
    assert (first["scope"], task, why) == ("task", "core/1", [story.REJECTION])

    # and what happened to it: its log shows the rejection, the refused claim, the fix, the pass, the commit
    log = ok(lopen(project, "log", task, "--full"))
    order = ["✗ REJECTED", story.REJECTION, "✗ refused", '"old_str"', "✓ passed", story.COMMIT_1]
    assert [log.index(marker) for marker in order] == sorted(log.index(marker) for marker in order)
    committed = next(line for line in log.splitlines() if "CommitRecorded" in line)
    assert f"tree={story.TREE_PASSED}" in committed  # the commit is the tree the passing verdict judged


# -- streaming -------------------------------------------------------------------------------------------


def test_replay_streams_page_by_page(tmp_path: Path) -> None:
    """The first event comes out after reading one page, whatever the session's length."""
    root = story.make_project(tmp_path / "big")
    with EventStore.open(root) as store:
        stream = module_stream(story.PROJECT, "big")
        sid = "big-20261126-1"
        store.append(stream, [ev.SessionStarted(session_id=sid)])
        for n in range(5):
            store.append(stream, [ev.ProgressReported(progress=f"p{n}-{i}", session_id=sid) for i in range(1000)])
        store.projections.for_project(story.PROJECT).catch_up()
        pages: list[int] = []
        real = store.pages

        def counting(after: int = 0, size: int = 1000):
            for page in real(after, size):
                pages.append(len(page))
                yield page

        store.pages = counting  # type: ignore[method-assign]
        records = session_records(store, story.PROJECT, sid)
        view = TextView(80)
        first = next(records)
        assert "SessionStarted" in view.render(first)[-1]
        assert len(pages) == 1
        assert sum(1 for _ in records) == 5000 and len(pages) == 6


def test_selection_memory_is_bounded_by_the_task(project: Path) -> None:
    with EventStore.open(project) as store:
        store.projections.for_project(story.PROJECT).catch_up()
        selection = Selection(task="core/1")
        list(r for r in session_records(store, story.PROJECT, story.SESSION_1) if selection.wants(r))
    assert selection._invocations == {"inv-t1", "inv-o1", "inv-o2"}


def test_log_says_why_each_failed_or_incomplete_invocation_stopped_in_the_model_s_words(tmp_path: Path) -> None:
    """Issue 22: a task that "ended without completing" had no recorded reason; `lopen log` now gives the
    model's last message under each invocation of the task that failed or did not complete it."""
    root = story_project(tmp_path / "project")
    t = story.Clock()
    t.now = story.START + 86_400
    asked = "Should `slugify` keep the separator when the text is empty? I stop here until someone decides."
    with EventStore.open(root) as store:
        j = story.Journal(store, story.PROJECT, story.MODULE)
        j.open_session(ev.SessionStarted(at=t(), lopen_version="0.1.0"), today=story.DAY)
        for inv, said, outcome in (
            ("inv-t4", ["Running the tests first.", "The CLI timed out while the tests ran; giving up."], "error"),
            ("inv-t5", ["Looking at core.py.", asked], "ok"),
        ):
            j.record(
                ev.InvocationStarted(at=t(), invocation_id=inv, step=6, kind="task", component="core", task="core/2")
            )
            j.record(*(ev.ModelSaid(at=t(), invocation_id=inv, text=text) for text in said))
            j.record(
                ev.InvocationFinished(
                    at=t(), invocation_id=inv, outcome=outcome, error_kind="timeout" if outcome == "error" else ""
                )
            )
        j.close()

    text = ok(lopen(root, "log", "core/2", columns=200))

    flat = " ".join(" ".join(line.strip(" │└") for line in text.splitlines()).split())
    assert "why it stopped (it failed), in the model's words: The CLI timed out while the tests ran; giving up." in flat
    assert f"why it stopped (its task was not completed), in the model's words: {asked}" in flat
    assert flat.count("why it stopped") == 2  # not under inv-t3, which completed core/2


def test_the_transcript_shows_the_model_s_reasoning_apart_from_what_it_said(tmp_path: Path) -> None:
    """Issue 22, the transcript: a summary of the model's reasoning the SDK reports (``assistant.reasoning``)
    goes from the gateway through the invoker into the store, and `lopen replay --transcript` shows it,
    marked as reasoning, beside what the model said — which stays its words in `lopen log`."""
    from copilot.generated.session_events import SessionEvent

    from lopen.config import Settings
    from lopen.copilot.gateway import _SessionRun
    from lopen.workflow.invoke import Invoker

    def sdk(kind: str, data: dict[str, object], agent: str = "") -> SessionEvent:
        raw = {"id": "0b9e4a4e-7f41-4a52-9d0b-3a1f0f6f2b11", "timestamp": "2026-11-27T09:00:00Z", "type": kind}
        return SessionEvent.from_dict({**raw, "data": data, **({"agentId": agent} if agent else {})})

    thought = "The empty case is ambiguous.\nThe spec says nothing: better to ask than to guess."
    asked = "Should `slugify` keep the separator when the text is empty? I stop here until someone decides."
    streamed: list[object] = []
    run = _SessionRun("scripted-main", streamed.append)
    for event in (
        sdk("assistant.reasoning", {"content": thought, "reasoningId": "r1"}),
        sdk("assistant.reasoning", {"content": "Look in core.py only.", "reasoningId": "r2"}, agent="explore-1"),
        sdk("assistant.message", {"content": asked, "messageId": "m1"}),
        sdk("assistant.reasoning", {"content": "", "reasoningId": "r3"}),  # nothing to keep
    ):
        run.observe(event)

    root = story_project(tmp_path / "project")
    t = story.Clock()
    t.now = story.START + 86_400
    with EventStore.open(root) as store:
        j = story.Journal(store, story.PROJECT, story.MODULE)
        sid = j.open_session(ev.SessionStarted(at=t(), lopen_version="0.1.0"), today=story.DAY)
        invoker = Invoker(j, None, Settings(), root)  # type: ignore[arg-type]  # converts, never invokes here
        j.record(
            ev.InvocationStarted(at=t(), invocation_id="inv-r", step=6, kind="task", component="core", task="core/2")
        )
        j.record(*(e for s in streamed if (e := invoker._event_for("inv-r", s)) is not None))  # type: ignore[arg-type]
        j.record(ev.InvocationFinished(at=t(), invocation_id="inv-r", outcome="ok"))
        j.close()
        reasoned = [r.event for r in store.read_all() if isinstance(r.event, ev.ModelReasoned)]
    assert [(e.text, e.agent_id, e.invocation_id) for e in reasoned] == [
        (thought, "", "inv-r"),
        ("Look in core.py only.", "explore-1", "inv-r"),
    ]

    text = ok(lopen(root, "replay", sid, "--transcript", columns=100))
    lines = text.splitlines()
    heading = next(i for i, line in enumerate(lines) if "the model's reasoning (a summary)" in line)
    assert lines[heading + 1 : heading + 3] == thought.splitlines()
    assert any("the model's reasoning (a summary) (sub-agent explore-1)" in line for line in lines)
    said = next(i for i, line in enumerate(lines) if "the model said" in line)
    assert lines[said + 1] == asked

    flat = " ".join(ok(lopen(root, "log", "core/2", columns=200)).split())
    assert f"in the model's words: {asked}" in flat  # its reasoning is not taken for what it said
