"""`lopen playbook <session>` (issue 22, item 6): how a recorded conversation becomes rules and turns, and
what a session that cannot be converted says. The demo's session played again offline is in
tests/e2e/test_workflow.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import story

from events import catalogue as ev
from events.recorded import Recorded
from lopen.app.playbook_export import playbook_of, to_toml
from lopen.scripted_model import RequestView, parse_playbook

WORKTREE = "/home/ada/shop/.lopen/worktrees/cart"
HEADER = "[lopen] module=cart phase=building step=6 component=core task=core/1 kind=task"
ORACLE = "[lopen] module=cart phase=building step=6 component=core task=core/1 kind=oracle scope=task target=core/1"
PROMPTS = {"u-task": f"{HEADER}\n\nImplement task core/1.", "u-oracle": f"{ORACLE}\n\nReview the task."}
VERDICT = '{"passed": false, "summary": "no test for an empty cart", "findings": []}'


def records(*events: ev.Event) -> list[Recorded]:
    return [Recorded(seq=n, stream_id="module:p/cart", version=n, event=e) for n, e in enumerate(events, 1)]


def started(invocation: str, prompt: str, kind: str = "task") -> ev.InvocationStarted:
    return ev.InvocationStarted(invocation_id=invocation, kind=kind, task="core/1", prompt={"user": prompt})


def used(invocation: str, input: int, output: int, cache_read: int = 0, agent: str = "") -> ev.TokensUsed:
    return ev.TokensUsed(invocation_id=invocation, input=input, output=output, cache_read=cache_read, agent_id=agent)


def said(invocation: str, text: str, agent: str = "") -> ev.ModelSaid:
    return ev.ModelSaid(invocation_id=invocation, text=text, agent_id=agent)


def tool(invocation: str, name: str, agent: str = "", **arguments: object) -> ev.ToolCalled:
    return ev.ToolCalled(invocation_id=invocation, tool=name, arguments=arguments, agent_id=agent)


def request(user: str, turn: int) -> RequestView:
    return RequestView(
        system="", user=f"<current_datetime>now</current_datetime>\n\n{user}", tools=frozenset(), model="m",
        tool_results=(), turn=turn,
    )  # fmt: skip


def test_each_model_call_becomes_a_turn_whichever_comes_first_its_usage_or_its_message() -> None:
    """A real model's session: the message may be recorded before its usage; the tools it called follow
    both. A sub-agent's events are left out (its requests are not Lopen's); the folder the model worked in
    becomes {{cwd}} wherever it appears in the arguments."""
    recording = playbook_of(
        records(
            ev.SessionStarted(worktree=WORKTREE + "/", models={"building": "claude-x", "oracle": "gpt-y"}),
            started("t1", "u-task"),
            said("t1", "Reading the cart first."),
            used("t1", 9000, 80),
            tool("t1", "view", path=f"{WORKTREE}/cart/core.py"),
            tool("t1", "bash", command=f"cd {WORKTREE} && python -m pytest -q", description="tests"),
            used("t1", 9500, 400, cache_read=12000),  # a provider that counts cache reads outside the input
            used("t1", 100, 10, agent="sub-1"),
            tool("t1", "view", agent="sub-1", path=f"{WORKTREE}/README.md"),
            tool("t1", "task", prompt="look around"),  # recorded when it ends, after its sub-agent's calls
            tool("t1", "edit", path=f"{WORKTREE}/cart/core.py", old_str="a", new_str="b"),
            used("t1", 9900, 30),
            said("t1", "Done."),
        ),
        PROMPTS.get,
        name="cart-20261127-1",
    )
    book = recording.playbook
    assert book.models == ["claude-x", "gpt-y"]
    (rule,) = book.rules
    assert rule.max_uses == 3 and [t.text for t in rule.turns] == ["Reading the cart first.", "", "Done."]
    assert [[(c.name, c.arguments) for c in t.tool_calls] for t in rule.turns] == [
        [
            ("view", {"path": "{{cwd}}/cart/core.py"}),
            ("bash", {"command": "cd {{cwd}} && python -m pytest -q", "description": "tests"}),
        ],
        [
            ("task", {"prompt": "look around"}),
            ("edit", {"path": "{{cwd}}/cart/core.py", "old_str": "a", "new_str": "b"}),
        ],
        [],
    ]
    usages = [(u.prompt_tokens, u.completion_tokens, u.cached_tokens) for t in rule.turns if (u := t.usage)]
    assert usages == [(9000, 80, 0), (9500, 400, 9500), (9900, 30, 0)]
    assert recording.notes == ("2 events of sub-agents left out: their requests are not Lopen's",)
    assert WORKTREE not in to_toml(recording, source="a test")


def test_invocations_with_the_same_header_answer_in_the_order_they_happened() -> None:
    """The oracle rejects, the model fixes, the oracle passes: two oracle invocations with one header line,
    each a rule used as many times as it had model calls; the file written loads and plays them in order."""
    recording = playbook_of(
        records(
            started("t1", "u-task"),
            used("t1", 1000, 10),
            tool("t1", "verify_task_completion", task_id="core/1"),
            started("o1", "u-oracle", kind="oracle"),
            used("o1", 500, 50),
            said("o1", VERDICT),
            started("o2", "u-oracle", kind="oracle"),
            used("o2", 500, 50),
            said("o2", VERDICT.replace("false", "true")),
            used("t1", 1100, 10),
            said("t1", "Verified."),
        ),
        PROMPTS.get,
        name="cart-20261127-1",
    )
    book = parse_playbook(to_toml(recording, source="a test"))
    assert [(r.name, r.max_uses) for r in book.rules] == [
        ("task-core/1", 2),
        ("oracle-task-core/1", 1),
        ("oracle-task-core/1-2", 1),
    ]
    uses: dict[str, int] = {}
    answers = [book.choose(request(PROMPTS["u-oracle"], 0), uses) for _ in range(2)]
    assert [a.turn.text for a in answers if a] == [VERDICT, VERDICT.replace("false", "true")]
    task = book.choose(request(PROMPTS["u-task"], 1), uses)
    assert task is not None and task.turn.text == "Verified."
    assert book.choose(request(HEADER.replace("core/1", "core/10"), 0), uses) is None  # values match whole


def lopen(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOPEN_")} | {"HOME": str(root)}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def old_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/story.py: a session recorded before Lopen kept prompts and what the model said."""
    root = story.make_project(tmp_path_factory.mktemp("old") / "project")
    story.write_story(root)
    return root


def test_a_session_recorded_before_prompts_were_kept_is_refused_saying_why(old_project: Path) -> None:
    out = lopen(old_project, "playbook", story.SESSION_1, "--out", "old.toml")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"error: session {story.SESSION_1} cannot be made a playbook: 5 of its invocations" in out.stderr
    assert "why: it was recorded before Lopen kept each invocation's exact prompt" in out.stderr
    assert "fix: record it again with this Lopen" in out.stderr
    assert not (old_project / "old.toml").exists()


def test_an_unknown_or_malformed_session_says_what_why_and_fix(old_project: Path) -> None:
    unknown = lopen(old_project, "playbook", "slugify-20991231-7")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "error: no session slugify-20991231-7" in unknown.stderr and "lopen session list" in unknown.stderr
    malformed = lopen(old_project, "playbook", "yesterday")
    assert malformed.returncode != 0 and "Traceback" not in malformed.stderr and "yesterday" in malformed.stderr


def test_an_invocation_started_again_after_a_provider_error_is_named_in_a_note() -> None:
    """Each attempt's first call is charged as a prompt: a second one means the provider failed and the
    invocation began again, which a playbook without the error does not reproduce — the note says so."""
    first = msgspec.structs.replace(used("t1", 1000, 10), premium=1.0)
    recording = playbook_of(
        records(started("t1", "u-task"), first, tool("t1", "bash", command="ls"), first, said("t1", "Done.")),
        PROMPTS.get,
        name="cart-20261127-1",
    )
    assert recording.notes == (
        "1 invocation (t1) started again after a provider error: the playbook plays the attempts as one "
        "conversation, without the error, so the replay differs there",
    )
