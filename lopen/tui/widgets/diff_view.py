"""Diffs with line numbers: ``  12 + added`` / ``   9 - removed`` (from ``lopen.tui.state.DiffLine``)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from lopen.tui.state import DiffLine

SIGN_STYLE = {"+": "$text-success", "-": "$text-error", " ": "dim", "@": "$text-accent"}


def render_diff(lines: Sequence[DiffLine], limit: int = 40) -> Content:
    """Old and new line numbers, the sign, the text; at most ``limit`` lines, then a count of the rest."""
    width = max((len(str(n)) for d in lines for n in (d.old, d.new) if n), default=1)
    out: list[Content] = []
    for d in lines[:limit]:
        old = str(d.old) if d.old else ""
        new = str(d.new) if d.new else ""
        style = SIGN_STYLE.get(d.sign, "")
        out.append(Content.assemble((f"{old:>{width}} {new:>{width}} ", "dim"), (f"{d.sign} {d.text}", style)))
    if len(lines) > limit:
        out.append(Content.styled(f"… {len(lines) - limit} more lines", "dim"))
    return Content("\n").join(out)


class DiffView(Static):
    """A diff as a widget (the gallery; tool-call entries draw the same content when expanded)."""

    DEFAULT_CSS = """
    DiffView { height: auto; padding: 0 1; }
    """

    def __init__(self, lines: Sequence[DiffLine], **kwargs: object) -> None:
        super().__init__(render_diff(lines), **kwargs)  # type: ignore[arg-type]
