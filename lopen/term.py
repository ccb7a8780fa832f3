"""What every face shares about the terminal: the symbols with their ASCII fallbacks, whether a stream
can print them, and whether to colour it. The CLI's ``Console`` and the TUI's ``Symbols`` both read
this table, so ``✓`` means the same everywhere; no face imports another for it.
"""

from __future__ import annotations

import os
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
