"""When the TUI opens, and how it looks: colour, symbols, the landing screen.

``use_tui`` is the one rule for "TUI or plain lines" (issue 13): the TUI is the default when
interactive; ``--headless/-q``, a non-terminal stdin or stdout, ``CI=true`` or ``display.tui=false``
keep the line output. ``TuiOptions.resolve`` turns settings, flags and the environment into what
the app needs. Neither imports Textual.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from lopen.term import unicode_ok

MIN_WIDTH, MIN_HEIGHT = 80, 24


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


@dataclass(frozen=True)
class TuiOptions:
    """How the app looks and what it may do.

    ``color``: False draws in monochrome (``NO_COLOR``, ``--no-color``, ``display.color=never``).
    ``ascii``: ASCII symbols. ``landing``: show the landing screen first. ``read_only``: watch
    only (no pause, no messages). ``who``: recorded as the author of pauses and messages.
    ``animate``: spinners and live durations tick (off in snapshots, so screens are stable).
    """

    color: bool = True
    ascii: bool = False
    landing: bool = True
    read_only: bool = False
    who: str = "tui"
    animate: bool = True

    @classmethod
    def resolve(
        cls,
        settings: object | None = None,
        *,
        no_color: bool = False,
        env: Mapping[str, str] | None = None,
        stdout: TextIO | None = None,
        read_only: bool = False,
    ) -> TuiOptions:
        """From ``settings.display`` (color, ascii, landing), the ``--no-color`` flag and ``NO_COLOR``."""
        env = os.environ if env is None else env
        display = getattr(settings, "display", None)
        mode = getattr(display, "color", "auto")
        color = not (no_color or "NO_COLOR" in env or mode == "never")
        ascii = bool(getattr(display, "ascii", False)) or not unicode_ok(stdout or sys.stdout)
        landing = bool(getattr(display, "landing", True))
        return cls(color=color, ascii=ascii, landing=landing, read_only=read_only, who=_who(env))


def _who(env: Mapping[str, str]) -> str:
    user = env.get("USER") or env.get("USERNAME") or ""
    return f"tui:{user}" if user else "tui"
