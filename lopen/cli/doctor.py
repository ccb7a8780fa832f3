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
    from lopen.auth import AuthStatus
    from lopen.cli.output import Console
    from lopen.config import Settings
    from lopen.sandbox.kernel import Protection


SETUP = "run `lopen setup` (it installs the version Lopen needs)"


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

    from lopen.app.setup import reinstall_hint

    try:
        return Check("copilot sdk", True, f"github-copilot-sdk {version('github-copilot-sdk')}")
    except PackageNotFoundError:
        return Check("copilot sdk", False, "github-copilot-sdk is not installed", reinstall_hint())


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
        return Check("copilot cli", False, f"{location.path} does not run: {exc}", SETUP)
    import asyncio

    try:
        protocol = asyncio.run(_ping(location.path))
    except Exception as exc:
        return Check("copilot cli", False, f"{cli_version}; SDK ping failed: {exc}", SETUP)
    pinned = pinned_cli_version()
    detail = f"{cli_version} at {location.path} ({location.source}); protocol {protocol}"
    if pinned and pinned not in cli_version:
        return Check("copilot cli", False, f"{detail}; the SDK expects {pinned}", SETUP)
    return Check("copilot cli", True, detail)


async def _ping(path: str) -> int | None:
    """The CLI's protocol version, from an SDK ping, its state kept in ``doctor_home()``."""
    from copilot import CopilotClient, RuntimeConnection

    from lopen.app.setup import doctor_home

    connection = RuntimeConnection.for_stdio(path=path)
    connection.env = {**os.environ, "COPILOT_HOME": str(doctor_home())}
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


def check_credentials(settings: Settings) -> tuple[Check, AuthStatus]:
    """Can a model be reached? When not, the fix lists every way to get one (GitHub Copilot, your own
    provider, the scripted model)."""
    from lopen.auth import THREE_WAYS, auth_status

    status = auth_status(settings)
    fix = status.fix
    if not status.ok and THREE_WAYS not in fix:
        fix = f"{fix}\nor another way: {THREE_WAYS}" if fix else THREE_WAYS
    return Check("credentials", status.ok, status.detail or status.headline, fix), status


def check_models(settings: Settings, status: AuthStatus) -> Check | None:
    """Are the configured models offered (the SDK's list, or the provider's /models)? None (nothing
    to say) when no model can be reached: the credentials check says why."""
    from lopen.auth import check_models as missing

    if not status.ok:
        return None
    errors, warnings = missing(settings, status)
    m = settings.models
    configured = f"planning {m.planning}, building {m.building}, research {m.research}, oracle {m.oracle}"
    if errors:
        return Check("models", False, f"{errors[0].what}; {errors[0].why}", errors[0].how)
    if not status.models:
        return Check("models", True, f"{configured} (not checked: the list of models offered is not available)")
    return Check("models", True, configured + "".join(f"; note: {w}" for w in warnings))


def check_repository(root: Path | None) -> Check:
    """A git repository with a commit and an identity (Lopen branches and commits in it)."""
    from lopen.readiness import git_identity, git_problems

    if root is None:
        return Check("project", False, f"no project at {Path.cwd()}", "cd into your project, or `git init` one")
    problems = git_problems(root)
    if problems:
        return Check("project", False, f"{root}: {problems[0].what}; {problems[0].why}", problems[0].how)
    return Check("project", True, f"{root}: a git repository with commits; commits as {git_identity(root)}")


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
    """A protection as a doctor line: ✓ for bubblewrap, ! for anything weaker — the fallback to the
    policy alone, and any mode that leaves the network open (Landlock before ABI 4, the policy by choice)."""
    from lopen.sandbox.kernel import INSTALL_BWRAP

    warnings = [w for w in (protection.warning, protection.network_warning) if w]
    if warnings:
        return Check("sandbox", True, f"{protection.detail} — {'; '.join(warnings)}", INSTALL_BWRAP, warning=True)
    return Check("sandbox", True, protection.detail)


def show(result: Check, out: Console | None = None) -> None:
    """Print one check: its mark, name and detail, and the fix for a ✗ or a !."""
    if out is None:
        from lopen.cli.output import Console

        out = Console.for_settings()
    if not result.ok:
        mark = out.style(out.symbol("fail"), fg="red")
    elif result.warning:
        mark = out.style("!", fg="yellow")
    else:
        mark = out.style(out.symbol("ok"), fg="green")
    out.echo(f"{mark} {result.name}: {result.detail}")
    if (not result.ok or result.warning) and result.fix:
        out.echo("    fix: " + result.fix.replace("\n", "\n         "))


def doctor() -> None:
    """Check whether Lopen can work here: Python, SDK, Copilot CLI, git, the project's repository,
    credentials (with every way to get a model), the configured models, .lopen/, the sandbox."""
    from lopen.cli.output import Console
    from lopen.config import load_settings
    from lopen.project import find_root

    settings = load_settings()
    root = find_root(Path.cwd(), required=False)
    status: list[AuthStatus] = []

    def credentials() -> Check:
        from lopen.auth import remember_models

        check, found = check_credentials(settings)
        status.append(found)
        if root is not None:
            remember_models(root, found)  # `lopen config set models.*` checks names against it
        return check

    checks: list[Callable[[], Check | None]] = [
        check_python,
        check_sdk,
        lambda: check_cli(settings.copilot.cli_path),
        check_git,
        lambda: check_repository(root),
        credentials,
        lambda: check_models(settings, status[0]),
        lambda: check_writable(root or Path.cwd()),
        lambda: check_sandbox(settings.sandbox.mode),
    ]
    out = Console.for_settings(settings)
    failed = False
    for run in checks:
        result = run()
        if result is None:
            continue
        show(result, out)
        failed = failed or not result.ok
    raise typer.Exit(1 if failed else 0)
