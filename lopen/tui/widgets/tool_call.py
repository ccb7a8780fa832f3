"""One tool call, one line: ``✓ bash  pytest -q  0.8s``; Enter expands it.

While the call runs (the current one) it shows a spinner and its elapsed time, and stays expanded so
the person sees what it does; once finished it collapses to one line unless the person expanded it.
Expanded: the full arguments, the change it makes as a diff with line numbers (``create``/``edit``)
and the last lines of its result.
"""

from __future__ import annotations

import json
import time

from textual.content import Content

from lopen.tui.widgets import seconds
from lopen.tui.widgets.diff_view import render_diff
from lopen.tui.widgets.entry import EntryView

RESULT_LINES = 12


class ToolCallView(EntryView):
    """Not focusable itself (Tab would walk through every call): the activity pane selects one with
    Up/Down and toggles it with Enter; a click toggles it too."""

    DEFAULT_CSS = """
    ToolCallView { color: $foreground; }
    ToolCallView.-selected { background: $boost; text-style: bold; }
    ToolCallView.-running { color: $text-accent; }
    ToolCallView.-open { border-left: thick $primary 50%; margin: 0 0 0 1; }
    """

    def toggle(self) -> None:
        self.expanded = not self.expanded
        self.redraw()

    def on_click(self) -> None:
        self.toggle()

    @property
    def running(self) -> bool:
        return self.entry.status == "running"

    def tick(self) -> None:
        """Redraw a running call (its elapsed time); the pane calls it a few times a second."""
        if self.running:
            self.redraw()

    def draw(self) -> Content:
        entry, symbols = self.entry, self.symbols
        animate = getattr(self.app, "animate", True)
        open_ = self.expanded or self.running
        self.set_class(self.running, "-running")
        self.set_class(open_, "-open")
        if self.running:
            tick = int(time.monotonic() * 2) if animate else 0  # one step per tick of the pane
            mark, style = symbols.spinner(tick), "$text-accent"
            when = seconds(time.monotonic() - entry.started) if animate and entry.started else "running"
        elif entry.status == "ok":
            mark, style, when = symbols.ok, "$text-success", seconds(entry.duration)
        else:
            mark, style, when = symbols.fail, "$text-error", seconds(entry.duration)
        fold = symbols.expanded if open_ else symbols.collapsed
        head = Content.assemble(
            (f"{mark} ", f"bold {style}"),
            (entry.tool, "bold"),
            "  ",
            (entry.args, ""),
            ("  " + when if when else "", "dim"),
            (f"  {fold}", "dim"),
        )
        if not open_:
            return head
        parts = [head]
        arguments = _arguments(entry.arguments)
        said = isinstance(entry.arguments, dict) and len(entry.arguments) == 1 and not entry.args.endswith("…")
        if arguments and not entry.diff and not said:
            parts.append(Content.styled(arguments, "dim"))
        if entry.diff:
            parts.append(render_diff(entry.diff))
        if entry.result and not self.running:
            lines = entry.result.rstrip().splitlines()
            shown = lines[-RESULT_LINES:]
            if len(lines) > RESULT_LINES:
                shown = [f"… {len(lines) - RESULT_LINES} lines above", *shown]
            parts.append(Content.styled("\n".join(shown), "$text-error" if entry.status == "failed" else "dim"))
        return Content("\n").join(parts)


def _arguments(arguments: object) -> str:
    if arguments in (None, "", {}):
        return ""
    if isinstance(arguments, str):
        return arguments
    text = json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    lines = text.splitlines()
    return "\n".join(lines[:30] + (["…"] if len(lines) > 30 else []))
