"""An error, always expanded: what failed, why, and (when known) how to fix it."""

from __future__ import annotations

from textual.content import Content

from lopen.tui.widgets.entry import EntryView


def error_content(what: str, why: str = "", fix: str = "", mark: str = "✗") -> Content:
    parts: list[str | tuple[str, str]] = [(f"{mark} {what}", "bold $text-error")]
    if why:
        parts += ["\n", ("why: ", "dim"), why]
    if fix:
        parts += ["\n", ("fix: ", "dim"), fix]
    return Content.assemble(*parts)


class ErrorView(EntryView):
    DEFAULT_CSS = """
    ErrorView { border: round $error; padding: 0 1; margin: 0 1; }
    ErrorView.-warn { border: round $warning; }
    """

    def draw(self) -> Content:
        entry = self.entry
        self.set_class(entry.level == "warn", "-warn")
        why = entry.detail
        if entry.status:
            why = f"{why} ({entry.status})" if why else entry.status
        mark = self.symbols.warn if entry.level == "warn" else self.symbols.fail
        return error_content(entry.title, why, mark=mark)
