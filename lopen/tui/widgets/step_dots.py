"""The step indicator: ``●●●○○○○ Step 3/7`` (ASCII ``***.... Step 3/7``)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from lopen.tui.symbols import Symbols
from lopen.tui.widgets import glyphs

STEPS = 7


def step_dots(step: int, symbols: Symbols, phase: str = "") -> Content:
    """Filled dots up to ``step``, hollow after it, then ``Step n/7``; ``phase`` is put in front."""
    step = max(0, min(step, STEPS))
    done = symbols.dot_on * step
    todo = symbols.dot_off * (STEPS - step)
    parts: list[str | tuple[str, str]] = []
    if phase:
        parts += [(phase, "bold"), " "]
    parts += [(done, "$accent"), (todo, "dim"), " ", (f"Step {step}/{STEPS}" if step else "Step -/7", "bold")]
    return Content.assemble(*parts)


class StepDots(Static):
    """A standalone step indicator (the top bar draws the same content inline)."""

    def __init__(self, step: int = 0, phase: str = "", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.step = step
        self.phase = phase

    def on_mount(self) -> None:
        self.show(self.step, self.phase)

    def show(self, step: int, phase: str = "") -> None:
        self.step, self.phase = step, phase
        self.update(step_dots(step, glyphs(self), phase))
