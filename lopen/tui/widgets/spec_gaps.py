"""The spec check's gaps (D2), live: what the draft still lacks, errors first."""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from lopen.tui.widgets import glyphs


class SpecGaps(Static):
    DEFAULT_CSS = """
    SpecGaps { height: auto; max-height: 12; padding: 0 1; border: round $warning 50%; }
    SpecGaps.-clean { border: round $success 50%; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "Spec check"

    def show(self, gaps: Sequence[object], drafted: bool = True) -> None:
        """``gaps`` are ``lopen.documents.Gap``s (part, problem, severity)."""
        symbols = glyphs(self)
        self.set_class(drafted and not gaps, "-clean")
        if not drafted:
            self.update(Content.styled("nothing drafted yet", "dim"))
            return
        if not gaps:
            self.update(Content.assemble((f"{symbols.ok} ", "bold $text-success"), "follows the spec pattern"))
            return
        ordered = sorted(gaps, key=lambda g: getattr(g, "severity", "") != "error")
        lines = []
        for gap in ordered:
            error = getattr(gap, "severity", "error") == "error"
            mark = symbols.fail if error else symbols.warn
            lines.append(
                Content.assemble(
                    (f"{mark} ", "bold $text-error" if error else "bold $text-warning"),
                    (f"{getattr(gap, 'part', '')}: ", "bold"),
                    getattr(gap, "problem", ""),
                )
            )
        self.update(Content("\n").join(lines))
