"""The symbols the TUI draws, each with an ASCII fallback (U3).

``Symbols(ascii=True)`` is used with ``display.ascii``, or when the terminal's encoding is not UTF-8.
The names extend the command line's table (``lopen.term.SYMBOLS``), so ``✓`` means the same
everywhere::

    glyph = Symbols(ascii=False)
    glyph.ok, glyph.task("in-progress")    # "✓", "▶"
"""

from __future__ import annotations

from lopen.term import SYMBOLS as CLI_SYMBOLS

# name: (unicode, ascii)
TABLE: dict[str, tuple[str, str]] = {
    **CLI_SYMBOLS,
    "dot_on": ("●", "*"),
    "dot_off": ("○", "."),
    "sep": ("│", "|"),
    "branch": ("⎇", "br"),
    "bar_full": ("█", "#"),
    "bar_empty": ("░", "-"),
    "ellipsis": ("…", "..."),
    "arrow": ("→", "->"),
    "collapsed": ("▸", "+"),
    "expanded": ("▾", "-"),
    "user": ("❯", ">"),
    "paused": ("⏸", "||"),
    "mid": ("·", "/"),
    "logo": ("◆", "*"),
    "infinity": ("∞", "-"),
}

SPINNER = ("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏", "-\\|/")

TASK_MARKS = {"complete": "ok", "in-progress": "current", "pending": "pending", "failed": "fail"}


class Symbols:
    """Glyphs by name: ``Symbols(ascii).ok``; ``task(state)`` maps a W5 state to ✓ ▶ ○ ✗."""

    def __init__(self, ascii: bool = False) -> None:
        self.ascii = ascii

    def __getattr__(self, name: str) -> str:
        try:
            unicode, plain = TABLE[name]
        except KeyError:
            raise AttributeError(name) from None
        return plain if self.ascii else unicode

    def task(self, state: str) -> str:
        return getattr(self, TASK_MARKS.get(state, "pending"))

    def spinner(self, tick: int) -> str:
        frames = SPINNER[1 if self.ascii else 0]
        return frames[tick % len(frames)]
