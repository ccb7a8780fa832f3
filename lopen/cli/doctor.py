"""`lopen doctor`: can Lopen work here? One line per check, ✓ or ✗ with the fix."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import typer

if TYPE_CHECKING:
    from lopen.sandbox.kernel import Protection


class Check(NamedTuple):
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # works, but not as well as it could: shown with "!"


def check_python() -> Check:
    current = ".".join(map(str, sys.version_info[:3]))
    return Check("python", sys.version_info >= (3, 11), current, "install Python 3.11 or newer")


def check_sdk() -> Check:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return Check("copilot sdk", True, f"github-copilot-sdk {version('github-copilot-sdk')}")
    except PackageNotFoundError:
        return Check("copilot sdk", False, "github-copilot-sdk is not installed", "run bin/setup")


def check_cli(cli_path: str) -> Check:
    import subprocess

    from lopen.copilot.locate import find_cli, pinned_cli_version
    from lopen.errors import LopenError

    try:
        location = find_cli(cli_path)
    except LopenError as exc:
        return Check("copilot cli", False, exc.what, exc.how)
    try:
        answered = subprocess.run([location.path, "--version"], capture_output=True, text=True, timeout=30)
        cli_version = answered.stdout.strip().splitlines()[0] if answered.stdout.strip() else "no answer"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("copilot cli", False, f"{location.path} does not run: {exc}", "rm -rf .copilot-cli && bin/setup")
    import asyncio

    try:
        protocol = asyncio.run(_ping(location.path))
    except Exception as exc:
        return Check("copilot cli", False, f"{cli_version}; SDK ping failed: {exc}", "rm -rf .copilot-cli && bin/setup")
    pinned = pinned_cli_version()
    detail = f"{cli_version} at {location.path} ({location.source}); protocol {protocol}"
    if pinned and pinned not in cli_version:
        return Check("copilot cli", False, f"{detail}; the SDK expects {pinned}", "rm -rf .copilot-cli && bin/setup")
    return Check("copilot cli", True, detail)


async def _ping(path: str) -> int | None:
    import tempfile

    from copilot import CopilotClient, RuntimeConnection

    connection = RuntimeConnection.for_stdio(path=path)
    connection.env = {**os.environ, "COPILOT_HOME": tempfile.mkdtemp(prefix="lopen-doctor-")}
    client = CopilotClient(connection=connection)
    await client.start()
    try:
        return (await client.ping("lopen doctor")).protocol_version
    finally:
        await client.stop()


def check_git() -> Check:
    import subprocess

    git = shutil.which("git")
    if not git:
        return Check("git", False, "git is not on PATH", "apt-get install git")
    out = subprocess.run([git, "--version"], capture_output=True, text=True).stdout.strip()
    return Check("git", True, out)


def check_credentials() -> Check:
    from lopen.auth import auth_status
    from lopen.config import load_settings

    status = auth_status(load_settings())
    return Check("credentials", status.ok, status.detail or status.headline, status.fix)


def check_writable(root: Path) -> Check:
    import tempfile

    target = root / ".lopen"
    try:
        target.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check(".lopen writable", False, f"{target}: {exc.strerror}", f"make {target} writable")
    return Check(".lopen writable", True, str(target))


def check_sandbox(mode: str) -> Check:
    """Which protection confines the model here: bubblewrap, Landlock, or the policy alone."""
    from lopen.errors import LopenError
    from lopen.sandbox.kernel import detect

    try:
        protection = detect(mode)  # type: ignore[arg-type]
    except LopenError as exc:
        return Check("sandbox", False, f"{exc.what}: {exc.why}", exc.how)
    return sandbox_check(protection)


def sandbox_check(protection: Protection) -> Check:
    """A protection as a doctor line: ✓ for a kernel sandbox or the policy by choice, ! for the
    fallback to the policy alone."""
    from lopen.sandbox.kernel import INSTALL_BWRAP

    if protection.warning:
        return Check("sandbox", True, f"{protection.detail} — {protection.warning}", INSTALL_BWRAP, warning=True)
    return Check("sandbox", True, protection.detail)


def show(result: Check) -> None:
    """Print one check: its mark, name and detail, and the fix for a ✗ or a !."""
    if not result.ok:
        mark = typer.style("✗", fg="red")
    elif result.warning:
        mark = typer.style("!", fg="yellow")
    else:
        mark = typer.style("✓", fg="green")
    typer.echo(f"{mark} {result.name}: {result.detail}")
    if (not result.ok or result.warning) and result.fix:
        typer.echo(f"    fix: {result.fix}")


def doctor() -> None:
    """Check whether Lopen can work here: Python, SDK, Copilot CLI, git, credentials, .lopen/, sandbox."""
    from lopen.config import load_settings
    from lopen.project import find_root

    settings = load_settings()
    checks: list[Callable[[], Check]] = [
        check_python,
        check_sdk,
        lambda: check_cli(settings.copilot.cli_path),
        check_git,
        check_credentials,
        lambda: check_writable(find_root(Path.cwd(), required=False) or Path.cwd()),
        lambda: check_sandbox(settings.sandbox.mode),
    ]
    failed = False
    for run in checks:
        result = run()
        show(result)
        failed = failed or not result.ok
    raise typer.Exit(1 if failed else 0)
