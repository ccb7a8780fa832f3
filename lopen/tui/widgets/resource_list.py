"""The numbered resources (context pane): press 1–9 to open one in the viewer."""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from lopen.tui.resources import Resource


class ResourceList(Static):
    DEFAULT_CSS = """
    ResourceList { height: auto; max-height: 11; padding: 0 1; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.border_title = "Resources"
        self.items: list[Resource] = []

    def show(self, items: Sequence[Resource]) -> None:
        if list(items) != self.items:
            self.items = list(items)
            lines = [Content.assemble((f"{n} ", "bold $accent"), r.label) for n, r in enumerate(self.items, 1)]
            self.update(Content("\n").join(lines) if lines else Content.styled("none", "dim"))
