"""Terminal output for commands: results on stdout, errors and warnings on stderr.

Colour follows `display.color` (auto = only on a terminal) and is always off when `NO_COLOR`
is set; symbols fall back to ASCII with `display.ascii` or when stdout cannot encode them.

    out = Console.for_settings(settings)
    out.ok("authenticated as octocat via GH_TOKEN")      # ✓ authenticated …
    out.fail("not authenticated")                          # ✗ not authenticated
    out.warn("GH_TOKEN is still set")                      # warning: … (stderr)
    out.error(exc)                                         # error/why/fix (stderr)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import typer

from events.errors import Problem
from lopen.config import Settings, load_settings
from lopen.errors import LopenError
from lopen.term import SYMBOLS, color_enabled, unicode_ok


class Console:
    """Prints a command's results and problems. Streams are looked up at print time."""

    def __init__(self, *, color: bool = False, ascii: bool = False) -> None:
        self.color = color
        self.ascii = ascii

    @classmethod
    def for_display(cls, color: str = "auto", ascii: bool = False, env: Mapping[str, str] | None = None) -> Console:
        return cls(color=color_enabled(color, sys.stdout, env), ascii=ascii or not unicode_ok(sys.stdout))

    @classmethod
    def for_settings(cls, settings: Settings | None = None, env: Mapping[str, str] | None = None) -> Console:
        """From `settings.display`; without settings, loads them and falls back to defaults if they
        are broken (so a configuration error can still be printed)."""
        if settings is None:
            try:
                settings = load_settings(env=env)
            except LopenError:
                return cls.for_display(env=env)
        return cls.for_display(settings.display.color, settings.display.ascii, env)

    def symbol(self, name: str) -> str:
        unicode, ascii = SYMBOLS[name]
        return ascii if self.ascii else unicode

    def style(self, text: str, fg: str | None = None, *, bold: bool = False, dim: bool = False) -> str:
        return typer.style(text, fg=fg, bold=bold, dim=dim) if self.color else text

    def echo(self, text: str = "", *, err: bool = False) -> None:
        typer.echo(text, err=err, color=self.color)

    def ok(self, message: str) -> None:
        self.echo(f"{self.style(self.symbol('ok'), fg='green', bold=True)} {message}")

    def fail(self, message: str) -> None:
        self.echo(f"{self.style(self.symbol('fail'), fg='red', bold=True)} {message}")

    def detail(self, label: str, text: str, *, err: bool = False) -> None:
        """An indented `label: text` line under a result."""
        self.echo(f"  {self.style(label + ':', dim=True)} {text}", err=err)

    def warn(self, message: str) -> None:
        self.echo(f"{self.style('warning:', fg='yellow', bold=True)} {message}", err=True)

    def error(self, exc: Problem) -> None:
        """What failed, why and how to fix it, on stderr."""
        self.echo(f"{self.style('error:', fg='red', bold=True)} {exc.what}", err=True)
        if exc.why:
            self.detail("why", exc.why, err=True)
        if exc.how:
            self.detail("fix", exc.how, err=True)
