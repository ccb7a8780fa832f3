"""The TUI on a real run (issue 13): `lopen demo` in a real terminal (tmux), and the same event stream
with and without the TUI.

`lopen demo` in a terminal opens the TUI. These drive the real CLI, the real Copilot CLI and the
scripted model, and watch a real terminal: the only waiting is for what the screen shows, with a
deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e.terminal import Tmux
from events.store import EventStore

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]

LOPEN = str(Path(sys.executable).with_name("lopen"))
DEADLINE = 240.0


class Terminal:
    """A tmux session running one command: type into it, read what it shows."""

    def __init__(self, name: str, command: str, cwd: Path, width: int = 160, height: int = 48) -> None:
        self.name = name
        self.tmux = Tmux("tui")
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "TMUX")}
        env["TERM"] = "xterm-256color"
        size = ("-x", str(width), "-y", str(height))
        self.tmux("new-session", "-d", "-s", name, *size, "-c", str(cwd), command, env=env)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name, check=False).stdout

    def press(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        """Type ``text`` literally, as a person would (no key names)."""
        self.tmux("send-keys", "-t", self.name, "-l", text)

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", self.name, check=False).returncode == 0

    def wait_for(self, seen: Callable[[str], bool], what: str, deadline: float = DEADLINE) -> str:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            text = self.screen()
            if seen(text):
                return text
            time.sleep(0.2)  # polling a real terminal for a condition; the deadline is the failure
        raise AssertionError(f"never saw {what}; the screen:\n{self.screen()}")

    def close(self) -> None:
        self.tmux.kill()


@pytest.fixture
def terminal(cli_path: str) -> Iterator[Callable[..., Terminal]]:
    opened: list[Terminal] = []

    def open_(command: str, cwd: Path) -> Terminal:
        term = Terminal(f"lopen-tui-{os.getpid()}-{len(opened)}", command, cwd)
        opened.append(term)
        return term

    yield open_
    for term in opened:
        term.close()


def lopen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LOPEN, *args], cwd=cwd, capture_output=True, text=True, check=False)


def run_processes(root: Path) -> list[int]:
    """The pids of the run processes (``lopen.app.run_child``) working in ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except (OSError, ValueError):
            continue
        if b"lopen.app.run_child" in command and Path(cwd) == root:
            found.append(int(entry.name))
    return found


def wait_until(holds: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not holds():
        assert time.monotonic() < end, f"never saw {what}"
        time.sleep(0.2)  # polling the process table for a condition; the deadline is the failure


def queued(root: Path) -> list[str]:
    """The messages the person queued, in order (the store's own record)."""
    with EventStore.open(root) as store:
        return [rec.event.text for rec in store.read_all() if type(rec.event).__name__ == "UserMessageQueued"]


def session_ends(root: Path) -> list[str]:
    """How each session of the demo's module ended so far, in order (the store's own record)."""
    with EventStore.open(root) as store:
        return [
            f"{type(rec.event).__name__}:{getattr(rec.event, 'reason', '')}"
            for rec in store.read_all()
            if type(rec.event).__name__ in ("SessionPaused", "SessionCompleted", "SessionFailed")
        ]


def test_the_demo_in_a_terminal_shows_the_run_and_ctrl_p_pauses_it(terminal, tmp_path: Path) -> None:
    """The run is a process of its own, the TUI follows its store: C-p pauses it; `r` resumes it; Ctrl+C
    stops it cleanly (the session recorded paused, exit 130) and leaves no run process behind."""
    demo = tmp_path / "demo"
    term = terminal(f"{LOPEN} demo --dir {demo}; echo EXIT=$?; sleep 600", tmp_path)
    term.press("Enter")  # past the landing screen
    screen = term.wait_for(
        lambda s: "Plan" in s and "core" in s and ("✓ bash" in s or "✓ create" in s),
        "the task tree and a finished tool-call line",
    )
    assert "Step" in screen and "Activity" in screen
    (child,) = run_processes(demo)  # the run draws nothing: it is not the TUI's process
    assert child != os.getpid()
    during = "Please keep functions under 30 lines, c q r ?"  # r resumes, 3 a resource, c, q, ? … as keys
    term.type(during)
    term.press("Enter")
    term.press("C-p")
    term.wait_for(lambda s: "paused" in s.lower(), "the run paused")
    paused = "Now rename core.py, 1 2 r"
    term.type(paused)
    term.press("Enter")
    wait_until(lambda: len(queued(demo)) == 2, "both sentences queued")
    assert queued(demo) == [during, paused]  # verbatim: no key fired from the prompt
    assert len(session_ends(demo)) == 1  # still paused: the r typed resumed nothing
    sessions = lopen("session", "list", "--json", cwd=demo)
    assert sessions.returncode == 0, sessions.stderr
    session_id = json.loads(sessions.stdout)[0]["id"]
    shown = lopen("session", "show", session_id, cwd=demo)
    assert "paused" in shown.stdout, shown.stdout
    wait_until(lambda: not run_processes(demo), "the paused run's process end")

    term.press("C-r")  # resume: a new run process on the same session
    wait_until(lambda: len(session_ends(demo)) == 1 and bool(run_processes(demo)), "the resumed run")
    term.wait_for(lambda s: "running" in s, "the run running again")
    term.press("C-c")
    screen = term.wait_for(lambda s: "EXIT=" in s, "lopen demo to end after Ctrl+C")
    assert "EXIT=130" in screen, screen
    assert session_ends(demo)[-1] == "SessionPaused:interrupted"
    assert run_processes(demo) == []


def test_killing_the_tui_stops_its_run_cleanly(terminal, tmp_path: Path) -> None:
    """The terminal closed or the TUI killed: its run process hears its pipe close and stops as on
    Ctrl+C — the session recorded paused, not left running, and no process left behind."""
    demo = tmp_path / "demo"
    term = terminal(f"{LOPEN} demo --dir {demo}; sleep 600", tmp_path)
    term.press("Enter")
    term.wait_for(lambda s: "✓ bash" in s or "✓ create" in s, "a finished tool-call line")
    (child,) = run_processes(demo)
    tui = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])  # its parent: the TUI
    os.kill(tui, signal.SIGKILL)
    wait_until(lambda: not run_processes(demo), "the run process to stop after its TUI was killed")
    ends = session_ends(demo)
    assert len(ends) == 1 and ends[0].startswith("SessionPaused:"), ends


def _story(root: Path) -> list[tuple[str, str]]:
    """The event stream of a demo, without times, ids and the person's own commands."""
    with EventStore.open(root) as store:
        out = []
        for rec in store.read_all():
            event = rec.event
            name = type(event).__name__
            if name in ("PauseRequested", "UserMessageQueued", "ControlRequested"):
                continue
            detail = getattr(event, "tool", "") or getattr(event, "task_id", "") or getattr(event, "step", "")
            out.append((name, str(detail)))
        return out


def test_tui_and_headless_produce_the_same_event_stream(terminal, tmp_path: Path) -> None:
    headless = tmp_path / "headless"
    done = subprocess.run(
        [LOPEN, "demo", "--dir", str(headless)], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )  # not a terminal: the line output
    assert done.returncode == 0, done.stderr
    with_tui = tmp_path / "tui"
    term = terminal(f"{LOPEN} demo --dir {with_tui}; sleep 600", tmp_path)
    term.press("Enter")
    term.wait_for(lambda s: "session complete" in s, "the demo complete in the TUI")
    term.press("q")
    # The same events. Their order may differ between any two runs, TUI or not: the Git actor commits
    # on the bus while the invocation records its last events, and tool calls the model makes in one
    # turn finish in any order.
    assert Counter(_story(with_tui)) == Counter(_story(headless))
