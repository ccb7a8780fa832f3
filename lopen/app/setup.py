"""``lopen setup``: make this machine ready to drive Copilot — the Copilot CLI the pinned SDK expects,
installed with npm where Lopen looks for it (``lopen.copilot.install``) — and ``lopen --version``'s
figures. Installed from a wheel (``pipx install``, ``pip install``), this is the one step after it."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from lopen import __version__
from lopen.copilot.install import cache_home, install, install_dir, reinstall_hint
from lopen.copilot.locate import binary_in, pinned_cli_version
from lopen.errors import LopenError

__all__ = ["install_copilot_cli", "reinstall_hint", "versions"]


def install_copilot_cli(say: Callable[[str], None] = print) -> Path:
    """Install the Copilot CLI of the pinned version unless it is installed; returns its binary."""
    pinned = pinned_cli_version()
    if not pinned:
        raise LopenError(
            "the Copilot SDK does not say which Copilot CLI it needs",
            "github-copilot-sdk is missing from Lopen's environment, or is a development build",
            reinstall_hint(),
        )
    return install(pinned, binary_in, say)


def versions() -> str:
    """``lopen 0.1.0 · github-copilot-sdk 1.0.25 · Copilot CLI 1.0.102 (installed)`` — from files only."""
    try:
        sdk = version("github-copilot-sdk")
    except PackageNotFoundError:
        sdk = "not installed"
    pinned = pinned_cli_version() or "unknown"
    there = pinned != "unknown" and binary_in(install_dir(pinned)).is_file()
    where = "installed" if there else "not installed by Lopen: run `lopen setup`"
    return f"lopen {__version__} · github-copilot-sdk {sdk} · Copilot CLI {pinned} ({where})"


def doctor_home() -> Path:
    """The Copilot CLI's home for `lopen doctor`'s ping: one folder of Lopen's user cache, the same each
    time (``~/.cache/lopen/doctor``). A temporary one was left behind: the CLI writes its log there after it
    has been stopped."""
    home = cache_home() / "lopen" / "doctor"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home
