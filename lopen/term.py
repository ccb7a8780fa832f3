"""What every face shares about the terminal: the symbols with their ASCII fallbacks, whether a stream
can print them, and whether to colour it. The CLI's ``Console`` and the TUI's ``Symbols`` both read
this table, so ``✓`` means the same everywhere; no face imports another for it.

``use_tui`` is the one rule for "TUI or plain lines" (issue 13): the TUI is the default when
interactive; ``--headless/-q``, a non-terminal stdin or stdout, ``CI=true`` or ``display.tui=false``
keep the line output.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

# name: (unicode, ascii)
SYMBOLS: dict[str, tuple[str, str]] = {
    "ok": ("✓", "+"),
    "fail": ("✗", "x"),
    "warn": ("!", "!"),
    "current": ("▶", ">"),
    "pending": ("○", "o"),
}


def color_enabled(mode: str, stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Whether to colour `stream`: NO_COLOR (non-empty) wins, then `mode` auto|always|never."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR") or mode == "never":
        return False
    if mode == "always":
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and env.get("TERM") != "dumb"


def unicode_ok(stream: TextIO) -> bool:
    """Whether `stream` can print ✓ ✗ ▶ ○ (its encoding is UTF-8)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    return encoding == "utf8"


def use_tui(
    *,
    headless: bool = False,
    setting: bool = True,
    env: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> bool:
    """True when a command should open the TUI rather than print lines."""
    env = os.environ if env is None else env
    if headless or not setting:
        return False
    if env.get("CI", "").lower() in ("true", "1", "yes") or env.get("TERM") == "dumb":
        return False
    streams = (stdin or sys.stdin, stdout or sys.stdout)
    return all(bool(getattr(s, "isatty", lambda: False)()) for s in streams)


def number(value: float) -> str:
    """A figure as people write it: ``1,000,000`` (never ``1e+06``), ``2.5``, ``0.33``, ``12``."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``plural(1, "task")`` → ``"1 task"``; ``plural(3, "task")`` → ``"3 tasks"``;
    ``plural(2, "criterion", "criteria")`` → ``"2 criteria"``. Thousands are separated: ``"12,000 events"``."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"


def lines_changed(added: int, removed: int, files: int) -> str:
    """Lines changed as ``git diff --stat`` puts them: ``+12 −3 in 2 files`` (P2)."""
    return f"+{added:,} −{removed:,} in {plural(files, 'file')}"


def duration(seconds: float) -> str:
    """A span of time as people write it: ``0.4s``, ``12s``, ``3m 05s``, ``1h 02m``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"
