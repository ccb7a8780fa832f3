"""Finding the Copilot CLI binary Lopen talks to.

Order: the `copilot.cli_path` setting, `COPILOT_CLI_PATH`, Lopen's own install (`lopen setup`, or
`bin/setup` in a checkout: `lopen.copilot.install.install_dir`), then the SDK's downloaded runtime.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import sys
from pathlib import Path

import msgspec

from lopen.errors import LopenError

OWN = "Lopen's own install (lopen setup)"


class CliLocation(msgspec.Struct, frozen=True):
    path: str
    source: str


def _platform_package() -> str:
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)
    return f"copilot-{system}-{machine}"


def binary_in(folder: Path) -> Path:
    """Where an npm install of `@github/copilot` into ``folder`` leaves the native CLI binary."""
    binary = "copilot.exe" if sys.platform == "win32" else "copilot"
    return folder / "node_modules" / "@github" / _platform_package() / binary


def project_install_path(env: dict[str, str] | None = None) -> Path:
    """Where `lopen setup` (and `bin/setup` in a checkout) leaves the CLI the pinned SDK expects."""
    from lopen.copilot.install import install_dir

    return binary_in(install_dir(pinned_cli_version() or "unknown", env))


def find_cli(cli_path: str = "", env: dict[str, str] | None = None) -> CliLocation:
    """Return the Copilot CLI to use, or raise a LopenError saying how to get one."""
    env = dict(os.environ if env is None else env)
    candidates = [
        (cli_path, "config copilot.cli_path"),
        (env.get("COPILOT_CLI_PATH", ""), "env COPILOT_CLI_PATH"),
        (str(project_install_path(env)), OWN),
    ]
    for path, source in candidates:
        if not path:
            continue
        if Path(path).is_file() and os.access(path, os.X_OK):
            return CliLocation(path=path, source=source)
        if source != OWN:
            raise LopenError(
                f"the Copilot CLI at {path} (from {source}) is missing or not executable",
                "Lopen talks to GitHub Copilot through the Copilot CLI binary",
                "point it at an existing binary, or unset it and run `lopen setup` to install one",
            )
    downloaded = _sdk_cached_runtime()
    if downloaded:
        return CliLocation(path=downloaded, source="SDK download cache")
    raise LopenError(
        "the Copilot CLI is not installed",
        "Lopen drives Copilot through the Copilot CLI (npm package @github/copilot)",
        "run `lopen setup` (it installs the version Lopen needs with npm), or set COPILOT_CLI_PATH to a copilot binary",
    )


def _sdk_cached_runtime() -> str | None:
    try:
        from copilot._cli_download import get_cached_cli_path
    except ImportError:
        return None
    return get_cached_cli_path()


def pinned_cli_version() -> str | None:
    """The CLI version the installed SDK pins, read from its source so the SDK is not imported."""
    spec = importlib.util.find_spec("copilot")
    if spec is None or spec.origin is None:
        return None
    source = Path(spec.origin).with_name("_cli_version.py").read_text(encoding="utf-8")
    found = re.search(r'^CLI_VERSION[^=]*=\s*"([^"]+)"', source, re.MULTILINE)
    return found.group(1) if found else None
