"""The TUI's widgets, one module each. Every widget draws from plain data (``lopen.tui.state``) and
finds its glyphs (Unicode or ASCII) through :func:`glyphs`."""

from __future__ import annotations

from textual.dom import DOMNode

from lopen.tui.symbols import Symbols

_DEFAULT = Symbols()


def glyphs(node: DOMNode) -> Symbols:
    """The app's symbols (``LopenApp.symbols``), or Unicode ones outside a Lopen app."""
    try:
        return getattr(node.app, "symbols", _DEFAULT)
    except Exception:  # not mounted yet: no app
        return _DEFAULT


def human(n: float) -> str:
    """12 → "12", 12_345 → "12.3k", 2_500_000 → "2.5M"."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return f"{n:g}" if isinstance(n, float) else str(n)


def seconds(value: float | None) -> str:
    """0.42 → "0.4s", 75 → "1m15s"."""
    if value is None:
        return ""
    if value < 60:
        return f"{value:.1f}s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes}m{rest:02d}s"


def markdown_view(text: str) -> str:
    """Markdown ready for Textual's ``Markdown`` widget: a leading front-matter block (which it would
    render as a rule and a paragraph) is shown as a fenced YAML block instead."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            close = text.find("\n", end + 4)
            rest = text[close + 1 :] if close != -1 else ""
            return f"```yaml\n{text[4:end]}\n```\n\n{rest}"
    return text
