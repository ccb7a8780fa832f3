"""Step 1 as a conversation in the TUI (issue 13, item 4): `lopen run <module>` in a terminal, with no
spec and no --prompt, opens the requirement-gathering conversation. The model asks (its `ask_user`
tool), the person answers in the prompt area, the model drafts the spec, and the person approves at
the gate — every question and answer recorded. Real terminal (tmux), real Copilot CLI, scripted model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e.scenario import wait_for
from e2e.terminal import Tmux
from events import catalogue as ev
from lopen.project import open_store
from lopen.scripted_model import ScriptedModelServer, parse_playbook

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]

SPEC = """---
name: greet
description: Greets people by name.
---

# Greet

## Overview

A `greet(name)` function returning `Hello, <name>!`.

## Acceptance Criteria

- [ ] [GREET-01] `greet("Ada")` returns `Hello, Ada!`

## Dependencies

None.

## Skills & Hooks

- verify-tests: `python -m pytest -q`

## Notes

None.

## References

None.
"""

PLAYBOOK = f'''
[playbook]
name = "conversation"
models = ["scripted-opus", "scripted-mini"]

[[rule]]
name = "draft-greet"
match = {{ user_regex = '\\[lopen\\][^\\n]* kind=spec(?!\\S)' }}
  [[rule.turn]]
  text = "A few questions first."
  tool_calls = [ {{ name = "ask_user", arguments = {{ question = "Whom does it greet?" }} }} ]
  [[rule.turn]]
  tool_calls = [ {{ name = "ask_user", arguments = {{ question = "Any punctuation at the end?" }} }} ]
  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "bash"
    arguments = {{ command = "mkdir -p docs/requirements/greet", description = "folder" }}
  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "create"
    [rule.turn.tool_calls.arguments]
    path = "{{{{cwd}}}}/docs/requirements/greet/SPECIFICATION.md"
    file_text = """{SPEC}"""
  [[rule.turn]]
  text = "I drafted the specification from your answers."
'''


def test_the_model_asks_the_person_answers_and_approves_at_the_gate(tmp_path: Path, cli_path: str) -> None:
    root = tmp_path / "project"
    root.mkdir()
    for args in (["init", "-q"], ["config", "user.name", "Ada"], ["config", "user.email", "ada@example.com"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "first"], cwd=root, check=True)
    with ScriptedModelServer(parse_playbook(PLAYBOOK)) as server:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "TERM": "xterm-256color",
            "COPILOT_CLI_PATH": cli_path,
            "LOPEN_PROVIDER__BASE_URL": server.url,
            **{
                f"LOPEN_MODELS__{m}": "scripted-opus"
                for m in ("REQUIREMENT_GATHERING", "PLANNING", "BUILDING", "RESEARCH")
            },
            "LOPEN_MODELS__ORACLE": "scripted-mini",
            "LOPEN_MODELS__FALLBACK": "[]",
            "LOPEN_DISPLAY__LANDING": "false",
            # the copy under test, not the one the venv's editable install points at
            **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},
        }
        exports = " ".join(f"{k}={json.dumps(v)}" for k, v in env.items())
        name = f"lopen-conversation-{time.monotonic_ns()}"
        lopen = Path(sys.executable).with_name("lopen")
        tmux = Tmux("conversation")
        tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "48", "-c", str(root),
             f"env -i {exports} {lopen} run greet; sleep 600")  # fmt: skip

        def screen() -> str:
            return tmux("capture-pane", "-p", "-t", name, check=False).stdout

        def type_line(text: str) -> None:
            tmux("send-keys", "-t", name, "-l", text)
            tmux("send-keys", "-t", name, "Enter")

        try:
            assert wait_for(lambda: "What should the module greet do" in screen(), 60), screen()
            type_line("greet people by their name")
            assert wait_for(lambda: "Whom does it greet?" in screen(), 60), screen()
            type_line("anyone, given their name")
            assert wait_for(lambda: "Any punctuation at the end?" in screen(), 60), screen()
            type_line("an exclamation mark")
            assert wait_for(lambda: "Approve the specification of greet" in screen(), 60), screen()  # the gate
            assert "GREET-01" in screen() and "no gaps" in screen()  # the draft and its spec check
            tmux("send-keys", "-t", name, "a")  # approve
            store_file = root / ".lopen" / "store.sqlite"

            def approved() -> bool:
                if not store_file.exists():
                    return False
                store, _ = open_store(root)
                with store:
                    store.projections.catch_up()
                    plan = store.projections.plan.get("greet")
                    return plan is not None and plan.approval is not None

            assert wait_for(approved, 60), screen()
        finally:
            tmux.kill()

    store, project = open_store(root)
    with store:
        store.projections.catch_up()
        (session,) = store.projections.sessions.all()
        from events.selection import session_records

        events = [r.event for r in session_records(store, project, session.id)]
    asked = [e for e in events if isinstance(e, ev.ToolCalled) and e.tool == "ask_user"]
    assert [(e.arguments["question"], e.result_summary) for e in asked] == [
        ("Whom does it greet?", "User responded: anyone, given their name"),  # the CLI's own tool, answered
        ("Any punctuation at the end?", "User responded: an exclamation mark"),
    ]
    (started,) = [e for e in events if isinstance(e, ev.InvocationStarted)]
    assert started.kind == "spec"
    approvals = [e for e in events if isinstance(e, ev.SpecApproved)]
    assert len(approvals) == 1 and approvals[0].approver.startswith("Ada")
    assert (root / "docs" / "requirements" / "greet" / "SPECIFICATION.md").read_text() == SPEC
    first = next(r for r in server.chat_requests if r.turn == 0)
    assert "greet people by their name" in json.dumps(first.body["messages"])  # the first answer is the brief
