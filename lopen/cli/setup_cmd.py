"""`lopen setup`: install the Copilot CLI Lopen needs (after `pipx install lopen`, or any wheel install)."""

from __future__ import annotations

import typer


def setup() -> None:
    """Install the Copilot CLI this Lopen needs (with npm; once per version).

    Installed as a Python tool (`pipx install`, `pip install`), Lopen needs this one step; in a checkout,
    `bin/setup` does it. Then `lopen doctor` checks the machine and `lopen demo` runs offline.
    """
    from lopen.app.setup import install_copilot_cli

    install_copilot_cli(typer.echo)
    typer.echo("next: `lopen demo` (offline, on the scripted model), `lopen doctor` (credentials and sandbox)")
