"""The landing screen: the logo, the version, what Lopen is — any key goes on.

Turned off with ``display.landing = false`` (``LOPEN_DISPLAY__LANDING=false``). When the app
animates, it also goes on by itself after ``LANDING_SECONDS``.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Center, Middle
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static

import lopen

LANDING_SECONDS = 1.5

LOGO = r"""
 _
| |    ___  _ __   ___ _ __
| |   / _ \| '_ \ / _ \ '_ \
| |__| (_) | |_) |  __/ | | |
|_____\___/| .__/ \___|_| |_|
           |_|
""".strip("\n")


def landing_content(module: str = "") -> Content:
    lines = [
        Content.styled(LOGO, "bold $accent"),
        Content(""),
        Content.assemble(("Lopen ", "bold"), lopen.__version__),
        Content.styled("builds a module from its specification by driving GitHub Copilot", "dim"),
        Content(""),
    ]
    if module:
        lines.append(Content.assemble("module ", (module, "bold $accent")))
    lines.append(Content.styled("press any key", "dim italic"))
    return Content("\n").join(lines)


class LandingScreen(Screen[None]):
    DEFAULT_CSS = """
    LandingScreen { align: center middle; }
    LandingScreen Static { width: auto; text-align: center; }
    """

    def __init__(self, module: str = "") -> None:
        super().__init__()
        self.module = module

    def compose(self) -> ComposeResult:
        with Middle(), Center():
            yield Static(landing_content(self.module), id="landing")

    def on_mount(self) -> None:
        if getattr(self.app, "animate", True):
            self.set_timer(LANDING_SECONDS, self._go_on)

    def on_key(self, event: events.Key) -> None:
        event.stop()
        self._go_on()

    def on_click(self) -> None:
        self._go_on()

    def _go_on(self) -> None:
        if self.is_current:
            self.dismiss(None)
