"""`lopen auth status|login|logout`: GitHub Copilot authentication, which Lopen never stores."""

from __future__ import annotations

import os
import shutil

import typer

from lopen.cli.group import WholeHelpGroup

auth_app = typer.Typer(
    cls=WholeHelpGroup,
    name="auth",
    help=(
        "Check, start or clear GitHub Copilot authentication. Credentials, in order: COPILOT_GITHUB_TOKEN, "
        "GH_TOKEN, GITHUB_TOKEN, then a stored `copilot login` / `gh auth login`. Lopen stores none."
    ),
    short_help="Check, start or clear GitHub Copilot authentication.",
    no_args_is_help=True,
)


@auth_app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="Print the status as JSON.")) -> None:
    """Show who Lopen is authenticated as and how; exit 1 with the fix when it is not.

    With a model provider configured (provider.base_url) the provider is checked instead.
    """
    import msgspec

    from lopen.auth import auth_status
    from lopen.cli.output import Console
    from lopen.config import load_settings

    settings = load_settings()
    result = auth_status(settings)
    if as_json:
        typer.echo(msgspec.json.encode(result).decode())
    else:
        out = Console.for_settings(settings)
        (out.ok if result.ok else out.fail)(result.headline)
        if result.detail:
            out.detail("detail" if result.ok else "why", result.detail)
        if result.fix:
            out.detail("fix", result.fix)
        if settings.provider.byok:
            out.detail("note", "GitHub authentication is not used: every session goes to this provider")
    raise typer.Exit(0 if result.ok else 1)


@auth_app.command("login")
def login(
    headless: bool = typer.Option(
        False, "--headless", "-q", help="Non-interactive run: refused, with how to use GH_TOKEN instead."
    ),
    gh: bool = typer.Option(False, "--gh", help="Use the GitHub CLI's `gh auth login` instead of `copilot login`."),
) -> None:
    """Log in interactively with the Copilot CLI (browser or device code); the CLI stores the login."""
    from lopen.auth import auth_status, env_token
    from lopen.auth import login as run_login
    from lopen.cli.output import Console
    from lopen.config import load_settings

    settings = load_settings()
    run_login(settings, headless=headless, gh=gh)
    out = Console.for_settings(settings)
    token = env_token(os.environ)
    if token:
        out.warn(f"{token[0]} is set and takes precedence over the stored login; unset it to use the login")
    result = auth_status(settings)
    (out.ok if result.ok else out.fail)(result.headline)
    if not result.ok and result.fix:
        out.detail("fix", result.fix)


@auth_app.command("logout")
def logout() -> None:
    """Clear the Copilot CLI's stored login; warn when an env token still authenticates."""
    from lopen.auth import logout as run_logout
    from lopen.cli.output import Console
    from lopen.config import load_settings

    settings = load_settings()
    result = run_logout(settings)
    out = Console.for_settings(settings)
    for account in result.cleared:
        out.ok(f"logged out {account}")
    if not result.cleared:
        out.ok("no stored Copilot login to clear")
    if result.env_token:
        out.warn(f"{result.env_token} is still set and authenticates Lopen; unset it to log out completely")
    if shutil.which("gh"):
        out.detail("note", "Copilot also uses the GitHub CLI's login: clear it with `gh auth logout`")
