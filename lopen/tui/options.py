"""When the TUI opens, and how it looks: colour, symbols, the landing screen.

``use_tui`` (``lopen.term``, shared with the CLI, re-exported here) is the one rule for "TUI or plain
lines". ``TuiOptions.resolve`` turns settings, flags and the environment into what
the app needs. Neither imports Textual.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from lopen.term import unicode_ok, use_tui

MIN_WIDTH, MIN_HEIGHT = 80, 24
__all__ = ["MIN_HEIGHT", "MIN_WIDTH", "TuiOptions", "use_tui"]


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
