"""A small used/limit gauge: ``ctx 12.3k/128k ███░░░░░`` (ASCII ``###-----``).

The bar turns to the warning colour from ``warn`` (default 80 %) and to the error colour from
``alarm`` (90 %): the same thresholds as the budget settings.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from lopen.tui.symbols import Symbols
from lopen.tui.widgets import glyphs, human


def gauge(
    label: str, used: float, limit: float, symbols: Symbols, width: int = 8, warn: float = 0.8, alarm: float = 0.9
) -> Content:
    """``label used/limit`` and a bar; a limit of 0 means unlimited (no bar, ``/∞`` or ``/-``)."""
    if limit <= 0:
        return Content.assemble((f"{label} ", "dim"), human(used), (f"/{symbols.infinity}", "dim"))
    share = max(0.0, min(used / limit, 1.0))
    filled = round(share * width)
    style = "$error" if share >= alarm else "$warning" if share >= warn else "$success"
    return Content.assemble(
        (f"{label} ", "dim"),
        f"{human(used)}/{human(limit)} ",
        (symbols.bar_full * filled, style),
        (symbols.bar_empty * (width - filled), "dim"),
    )


class Gauge(Static):
    """A gauge as a widget (the gallery shows it; the top bar draws the content inline)."""

    def __init__(self, label: str, used: float = 0, limit: float = 0, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.label, self.used, self.limit = label, used, limit

    def on_mount(self) -> None:
        self.show(self.used, self.limit)

    def show(self, used: float, limit: float) -> None:
        self.used, self.limit = used, limit
        self.update(gauge(self.label, used, limit, glyphs(self)))
