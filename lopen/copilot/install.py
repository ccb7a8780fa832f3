"""Installing the Copilot CLI Lopen talks to: the npm package ``@github/copilot`` at exactly the version
the pinned SDK expects (``locate.pinned_cli_version``), with npm.

Where it goes:

- run from a checkout of Lopen (``bin/setup`` made it): ``<checkout>/.copilot-cli/``, the place
  ``bin/setup`` uses;
- installed as Python tools are (a wheel: ``pipx install``, ``pip install``): the user's cache,
  ``$XDG_CACHE_HOME/lopen/copilot-cli/<version>/`` (``~/.cache/…``), one folder per version, so an
  upgrade of Lopen that pins another CLI installs that one next to the old.

``lopen setup`` (``lopen.app.setup``) calls ``install``; ``locate.find_cli`` looks in ``install_dir()``.
No SDK import here: ``lopen --version`` reads these paths.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from lopen.errors import LopenError

PACKAGE = "@github/copilot"
CHECKOUT = Path(__file__).resolve().parents[2]


def from_checkout(root: Path = CHECKOUT) -> bool:
    """Whether Lopen runs from a checkout of its repository (``bin/setup`` there), not from a wheel."""
    return (root / "pyproject.toml").is_file() and (root / "bin" / "setup").is_file()


def cache_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    xdg = env.get("XDG_CACHE_HOME", "")
    return Path(xdg) if xdg else Path(env.get("HOME") or Path.home()) / ".cache"


def install_dir(version: str, env: Mapping[str, str] | None = None) -> Path:
    """Where Lopen's own copy of the CLI of ``version`` is (or goes)."""
    if from_checkout():
        return CHECKOUT / ".copilot-cli"
    return cache_home(env) / "lopen" / "copilot-cli" / version


def installed_version(folder: Path) -> str:
    """The version of ``@github/copilot`` installed in ``folder`` ("" when none is)."""
    import json

    try:
        manifest = json.loads((folder / "node_modules" / "@github" / "copilot" / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return ""
    return str(manifest.get("version", ""))


def npm_line(folder: Path, version: str) -> str:
    return f"npm install --prefix {folder} --no-audit --no-fund {PACKAGE}@{version}"


def install(
    version: str,
    binary: Callable[[Path], Path],
    say: Callable[[str], None] = print,
    env: Mapping[str, str] | None = None,
) -> Path:
    """Install the CLI of ``version`` with npm into ``install_dir(version)`` unless it is there; returns the
    binary (``binary(folder)`` says where the package leaves it). Raises a LopenError naming the exact
    npm line to run by hand when npm is missing or fails."""
    folder = install_dir(version, env)
    found = binary(folder)
    if installed_version(folder) == version and found.is_file():
        say(f"the Copilot CLI {version} is installed: {found}")
        return found
    npm = shutil.which("npm", path=(env or os.environ).get("PATH"))
    if npm is None:
        raise LopenError(
            f"npm is not installed, so the Copilot CLI {version} cannot be installed",
            f"Lopen drives Copilot through the Copilot CLI, the npm package {PACKAGE}",
            f"install Node.js 20 or newer with npm (e.g. `apt-get install nodejs npm`), then run `lopen setup` "
            f"again — or install it yourself: `{npm_line(folder, version)}`",
        )
    say(f"installing the Copilot CLI {version} with npm into {folder} …")
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "package.json"
    if not manifest.exists():
        manifest.write_text('{"name": "lopen-copilot-cli", "private": true}\n', encoding="utf-8")
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(folder),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            f"{PACKAGE}@{version}",
        ],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        check=False,
    )
    if done.returncode != 0 or not found.is_file():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise LopenError(
            f"npm could not install {PACKAGE}@{version}" + (f": {tail}" if tail else ""),
            "the Copilot CLI comes from the npm registry",
            f"check that the npm registry is reachable (`npm ping`), then run `lopen setup` again — or run "
            f"`{npm_line(folder, version)}` yourself",
        )
    say(f"the Copilot CLI {version} is installed: {found}")
    return found


def reinstall_hint() -> str:
    """How to repair Lopen's own environment, said for how it was installed."""
    if from_checkout():
        return "run bin/setup in Lopen's folder"
    return "reinstall Lopen (`pipx reinstall lopen`, or `pip install --force-reinstall lopen`)"
