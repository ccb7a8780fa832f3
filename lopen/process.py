"""Child processes that never outlive Lopen.

Every program Lopen runs itself (git, the spec's verify commands) goes through ``run``: it gets its own
process group, and the groups still running are killed by ``kill_children()`` — what an interrupted
run calls before it exits. A program that may run long (a verify command) is also asked to die with
Lopen (``PR_SET_PDEATHSIG``), so a Lopen killed with SIGKILL takes it along. Git's own commands skip
that (``die_with_parent=False``): asking needs Python code in the child between fork and exec, which
makes every spawn a full fork of Lopen's process (about 5 ms instead of 1), and a git command outlives
a killed Lopen by milliseconds at most.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_running: set[subprocess.Popen[str]] = set()
_lock = threading.Lock()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def run(
    args: Sequence[str] | str,
    cwd: Path | str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    shell: bool = False,
    input: str | None = None,
    die_with_parent: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a program to completion (output captured as text, stdin closed unless ``input``)."""
    process = subprocess.Popen(
        args,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        shell=shell,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's Ctrl+C reaches Lopen, which stops its children itself
        preexec_fn=_die_with_parent if die_with_parent else None,
    )
    with _lock:
        _running.add(process)
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        out, err = process.communicate()
        raise subprocess.TimeoutExpired(args, timeout or 0, out, err) from None
    except BaseException:
        _kill(process)
        process.wait()
        raise
    finally:
        with _lock:
            _running.discard(process)
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def _kill(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def kill_children() -> int:
    """Kill every child (and its process group) still running; return how many there were."""
    with _lock:
        running = list(_running)
    for process in running:
        _kill(process)
    return len(running)
