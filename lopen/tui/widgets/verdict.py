"""An oracle verdict: passed or not, its confidence, its summary and every finding."""

from __future__ import annotations

from textual.content import Content

from lopen.tui.widgets.entry import EntryView


class VerdictView(EntryView):
    DEFAULT_CSS = """
    VerdictView { border-left: thick $success; margin: 0 0 0 1; }
    VerdictView.-failed { border-left: thick $error; }
    """

    def draw(self) -> Content:
        entry = self.entry
        passed = entry.status == "ok"
        self.set_class(not passed, "-failed")
        mark = self.symbols.ok if passed else self.symbols.fail
        style = "bold $text-success" if passed else "bold $text-error"
        parts: list[str | tuple[str, str]] = [(f"{mark} {entry.title}", style)]
        if entry.result:
            parts += [(f"  {entry.result}", "dim")]
        if entry.detail:
            parts += ["\n", entry.detail]
        for finding in entry.findings:
            parts += ["\n", (f"  {self.symbols.mid} ", "dim"), finding]
        return Content.assemble(*parts)
