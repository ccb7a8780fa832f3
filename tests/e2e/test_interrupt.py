"""Ctrl+C and SIGTERM (issue 10, item 7): in a real terminal (tmux), Lopen stops the invocation in
flight, records the session paused (``interrupted``), stops the Copilot CLI and exits 130 (143 for
SIGTERM); nothing recorded is lost, no child outlives it, and the next run resumes and finishes.

The model's second turn of core/1 hangs (a scripted `slow` fault), so the signal always arrives in
the middle of an invocation."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e.scenario import (
    LOPEN_RUN,
    alive,
    approved_project,
    descendants,
    lopen_env,
    playbook,
    rule,
    story,
    wait_for,
)
from e2e.terminal import Tmux
from events import catalogue as ev
from lopen.scripted_model import Turn

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux; bin/setup does)"),
]

HANGS = rule(
    "core-1-hangs",
    [Turn(text="(never delivered: Lopen is interrupted while waiting)", fault="slow", delay=120)],
    max_uses=1,
    from_turn=1,
    kind="task",
    task="core/1",
)
GUARD = 60  # seconds before a step counts as hung (a failure), never an assertion on speed


WRAPPER = """
import signal, subprocess, sys
child = subprocess.Popen(sys.argv[3:])
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl+C is for lopen; this only reports
open(sys.argv[1], "w").write(str(child.pid))
code = child.wait()
open(sys.argv[2], "w").write(str(code))
"""


class Pane:
    """`lopen run` in a tmux window: a real terminal, lopen in its foreground process group. A tiny
    wrapper reports lopen's pid and exit code (tmux's own `pane_dead_status` is not reliable)."""

    def __init__(self, name: str, root: Path, env: dict[str, str], command: list[str], where: Path) -> None:
        self.name = name
        self.pid_file, self.status_file = where / "lopen.pid", where / "lopen.status"
        wrapper = where / "wrapper.py"
        wrapper.write_text(WRAPPER)
        argv = [sys.executable, str(wrapper), str(self.pid_file), str(self.status_file), *command]
        script = " ".join(shlex.quote(part) for part in argv)
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.server = Tmux("interrupt")
        self.tmux(
            "new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", str(root), f"env -i {exports} {script}"
        )
        self.tmux("set-option", "-t", name, "remain-on-exit", "on")

    def tmux(self, *args: str) -> str:
        return self.server(*args).stdout

    def pid(self) -> int:
        assert wait_for(self.pid_file.exists, GUARD)
        return int(self.pid_file.read_text())

    def dead(self) -> bool:
        return self.status_file.exists() and bool(self.status_file.read_text())

    def status(self) -> int:
        return int(self.status_file.read_text())

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", self.name)

    def close(self) -> None:
        self.server.kill()


@pytest.fixture
def interrupted_run(tmp_path, cli_path, scripted, request):
    """Start `lopen run` in tmux, wait until the model hangs mid-task, deliver the signal."""
    how: str = request.param
    server = scripted(playbook(HANGS))
    root = approved_project(tmp_path)
    env = lopen_env(cli_path, server.url)
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    command = LOPEN_RUN  # the line output (--headless) in a real terminal; the TUI's Ctrl+C is its own test
    pane = Pane(f"lopen-{how}-{time.monotonic_ns()}", root, env, command, tmp_path)
    try:
        assert wait_for(lambda: server.uses("core-1-hangs") == 1 or pane.dead(), GUARD), pane.text()
        assert not pane.dead(), pane.text()
        lopen = pane.pid()
        children = descendants(lopen)
        assert children, "the Copilot CLI runs as a child of lopen"
        if how == "ctrl-c":
            pane.tmux("send-keys", "-t", pane.name, "C-c")  # the terminal's SIGINT, to the foreground group
        else:
            os.kill(lopen, signal.SIGTERM)  # to lopen alone, as a service manager would
        assert wait_for(pane.dead, GUARD), pane.text()
        yield root, server, env, pane, children
    finally:
        pane.close()


@pytest.mark.parametrize(("interrupted_run", "code"), [("ctrl-c", 130), ("sigterm", 143)], indirect=["interrupted_run"])
def test_a_signal_mid_task_pauses_the_session_stops_the_cli_and_the_next_run_finishes(interrupted_run, code):
    root, server, env, pane, children = interrupted_run
    shown = pane.text()
    assert pane.status() == code, shown
    assert "interrupted" in shown and "Traceback" not in shown
    assert "to go on where it stopped: lopen run slugify" in shown  # the command that resumes it
    assert wait_for(lambda: not any(alive(pid) for pid in children), 10), "a child of lopen outlived it"

    before = story(root)
    assert before.status == "paused"
    paused = before.events[-1]
    assert isinstance(paused, ev.SessionPaused) and paused.error_kind == "interrupted"
    (cut,) = before.invocations(task="core/1")
    assert before.finish_of(cut).outcome == "interrupted"
    assert not [e for e in before.of(ev.TaskStatusChanged) if e.to_state == "failed"]  # not the model's failure

    again = subprocess.run(LOPEN_RUN, cwd=root, env=env, capture_output=True, text=True, timeout=300)

    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    after = story(root)
    assert after.session_id == before.session_id and after.status == "completed"
    (resumed,) = after.of(ev.SessionResumed)
    assert resumed.reason.startswith("lopen run by cli") and resumed.reason.endswith("the module's unfinished session")
    assert [e.task for e in after.invocations(kind="task")] == ["core/1", "core/1", "core/2", "cli/1"]
    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    assert after.totals.input == sum(r.usage.prompt_tokens for r in answered)
