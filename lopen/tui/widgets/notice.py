"""A one-line fact in the activity pane: a step entered, a task's new state, a commit, a warning."""

from __future__ import annotations

from textual.content import Content

from lopen.tui.widgets.entry import LEVEL_MARK, LEVEL_STYLE, EntryView


class NoticeView(EntryView):
    DEFAULT_CSS = """
    NoticeView { color: $text-muted; }
    NoticeView.-warn { color: $text-warning; }
    """

    def draw(self) -> Content:
        entry = self.entry
        self.set_class(entry.level == "warn", "-warn")
        mark = getattr(self.symbols, LEVEL_MARK.get(entry.level, "mid"))
        parts: list[str | tuple[str, str]] = [(mark, LEVEL_STYLE.get(entry.level, "")), " ", (entry.title, "")]
        if entry.detail:
            parts += [("  " + " ".join(entry.detail.split()), "dim")]
        return Content.assemble(*parts)
