"""`lopen config show|set`: every setting's value and where it came from; write one setting."""

from __future__ import annotations

import json

import typer

from lopen.cli.group import WholeHelpGroup

config_app = typer.Typer(
    cls=WholeHelpGroup,
    name="config",
    help=(
        "Show and change settings. Layers, highest first: flags, LOPEN_<SECTION>__<KEY> env vars, "
        ".lopen/config.json, ~/.config/lopen/config.json, defaults. Reference: docs/configuration.md."
    ),
    short_help="Show and change settings (models, budgets, provider, …).",
    no_args_is_help=True,
)


def _complete_key(incomplete: str) -> list[str]:
    from lopen.config import FIELDS

    return [key for key in FIELDS if key.startswith(incomplete)]


@config_app.command("show")
def show(as_json: bool = typer.Option(False, "--json", help="Print JSON: {key: {value, source}}.")) -> None:
    """Show every setting's value and its source (flag, env, project, user or default); secrets masked."""
    from lopen.cli.output import Console
    from lopen.config import FIELDS, resolve_settings

    resolved = resolve_settings()
    if as_json:
        data = {r.key: {"value": r.shown, "source": r.source} for r in resolved}
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    out = Console.for_settings()
    rows = [(r.key, FIELDS[r.key].format(r.shown), r.source) for r in resolved]
    key_width = max(len(key) for key, _, _ in rows)
    value_width = min(max(len(value) for _, value, _ in rows), 40)
    for key, value, source in rows:
        styled_source = out.style(source, dim=source == "default", fg=None if source == "default" else "cyan")
        out.echo(f"{key:<{key_width}}  {value:<{value_width}}  {styled_source}")


@config_app.command("set")
def set_(
    key: str = typer.Argument(
        ..., help="Dotted key, e.g. models.building (`lopen config show` lists them).", autocompletion=_complete_key
    ),
    value: str = typer.Argument(..., help="New value: true/false, a number, text, or a list as a,b or a JSON array."),
    user: bool = typer.Option(
        False, "--global", help="Write the user file (~/.config/lopen/config.json) instead of .lopen/config.json."
    ),
) -> None:
    """Validate a value and write it to the project's (or with --global the user's) config file.

    Secrets are refused: set provider.api_key with the LOPEN_PROVIDER__API_KEY env var.
    """
    from lopen.cli.output import Console
    from lopen.config import FIELDS, ResolvedValue, resolve_settings, set_value

    path, stored = set_value(key, value, user=user)
    out = Console.for_settings()
    shown = ResolvedValue(key, stored, "").shown  # a secret it holds (an MCP server's env) stays masked
    out.ok(f"{key} = {FIELDS[key].format(shown)} written to {path}")
    from lopen.app.commands import model_warnings
    from lopen.project import nearest_root

    for warning in model_warnings(nearest_root(), key, stored):
        out.warn(warning)
    winner = next(r for r in resolve_settings() if r.key == key)
    if not winner.source.startswith("user" if user else "project"):
        out.warn(f"{key} is still {FIELDS[key].format(winner.shown)}: {winner.source} takes precedence")
