"""Authentication is Copilot's own: Lopen asks the Copilot CLI (through the SDK) and stores nothing.

Credentials, in the SDK's order: `COPILOT_GITHUB_TOKEN`, `GH_TOKEN`, `GITHUB_TOKEN`, then a stored
login (`copilot login`, or the GitHub CLI's `gh auth login`). With a bring-your-own-model provider
configured (`provider.base_url`) GitHub is not used at all, so the provider is checked instead.

The SDK is imported inside the functions that talk to the CLI, never at module import.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from lopen.config import Provider, Settings
from lopen.errors import LopenError

TOKEN_VARS = ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")
CHECK_TIMEOUT = 20.0  # seconds for the whole CLI round trip (start, ask, stop)
PROVIDER_TIMEOUT = 5.0  # seconds for GET <base_url>/models

TOKEN_KIND = 'a fine-grained personal access token that has the "Copilot Requests" permission'
THREE_WAYS = (
    "three ways to get a model:\n"
    "    1. GitHub Copilot: `lopen auth login` (or `gh auth login`), or export GH_TOKEN=<token> "
    f"({TOKEN_KIND}); COPILOT_GITHUB_TOKEN, GH_TOKEN and GITHUB_TOKEN are checked in that order\n"
    "    2. your own provider (OpenAI-compatible such as Ollama or vLLM, Azure, Anthropic): "
    "export LOPEN_PROVIDER__TYPE=openai LOPEN_PROVIDER__BASE_URL=http://localhost:11434/v1 "
    "LOPEN_MODELS__PLANNING=<model> LOPEN_MODELS__BUILDING=<model> LOPEN_MODELS__ORACLE=<model> "
    "(and LOPEN_PROVIDER__API_KEY=<key> if it needs one; see docs/configuration.md)\n"
    "    3. the scripted model, offline, no account: `lopen demo` shows it; "
    "`python -m lopen.scripted_model --playbook <playbook.toml>` serves your own playbook, "
    "then set the provider as in 2 (docs/your-own-playbook.md)"
)
FIX_LOGIN = THREE_WAYS
FIX_NETWORK = (
    "check the network connection or proxy (HTTPS_PROXY), then run `lopen auth status` again; "
    "to work offline, configure a local model provider (provider.base_url)"
)
_NETWORK = re.compile(r"network|error sending request|timed? ?out|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|dns", re.I)
_SOURCES = {"user": "Copilot CLI login", "gh-cli": "GitHub CLI (gh) login", "token": "github_token"}

Kind = Literal["authenticated", "not-authenticated", "invalid", "unreachable", "cli-error"]
T = TypeVar("T")


class AuthStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to "can Lopen reach a model?"; `headline` is the one-line summary."""

    ok: bool
    kind: Kind
    headline: str
    user: str = ""
    source: str = ""  # "GH_TOKEN", "Copilot CLI login", "openai provider at http://…"
    detail: str = ""
    fix: str = ""
    models: tuple[str, ...] = ()  # the model ids offered (the SDK's list, or the provider's /models); () = unknown


class LogoutResult(msgspec.Struct, frozen=True, kw_only=True):
    cleared: tuple[str, ...]  # "octocat on https://github.com"
    env_token: str  # the env var that still authenticates, or ""


def env_token(env: Mapping[str, str]) -> tuple[str, str] | None:
    """The (variable, token) the SDK uses first, or None."""
    for var in TOKEN_VARS:
        if env.get(var):
            return var, env[var]
    return None


def auth_status(settings: Settings, env: Mapping[str, str] | None = None) -> AuthStatus:
    """Check the credentials the workflow would use: the provider's when BYOK, else GitHub's."""
    env = os.environ if env is None else env
    if settings.provider.byok:
        return provider_status(settings.provider)
    return github_status(settings, env)


def preflight(
    settings: Settings, env: Mapping[str, str] | None = None, *, drafting: bool = False, root: Path | None = None
) -> list[str]:
    """Stop before any work when no model can be reached, or a configured model is not offered:
    raise LopenError (exit 1) with the fix. Returns warnings (a model that will fall back). The models
    offered are remembered for the project at ``root`` (``remember_models``)."""
    status = auth_status(settings, env)
    if not status.ok:
        raise LopenError(status.headline, status.detail, status.fix, exit_code=1)
    if root is not None:
        remember_models(root, status)
    errors, warnings = check_models(settings, status, drafting=drafting)
    if errors:
        raise errors[0]
    return warnings


ROLES = ("planning", "building", "research", "oracle")


def check_models(
    settings: Settings, status: AuthStatus, *, drafting: bool = False
) -> tuple[list[LopenError], list[str]]:
    """Are the configured models offered (``status.models``: the SDK's list or the provider's)?

    A role's model missing is an error, unless one of ``models.fallback`` is offered (then a warning:
    the run will fall back); a fallback model missing is a warning. Nothing is checked when the list
    is unknown (a provider that does not list its models)."""
    offered = set(status.models)
    if not offered:
        return [], []
    where = status.source if settings.provider.byok else "GitHub Copilot for this account"
    shown = ", ".join(sorted(offered)[:12]) + (" …" if len(offered) > 12 else "")
    roles = ("requirement_gathering", *ROLES) if drafting else ROLES
    fallbacks = [m for m in settings.models.fallback if m in offered]
    errors: list[LopenError] = []
    warnings: list[str] = []
    for role in roles:
        model = getattr(settings.models, role)
        if model in offered:
            continue
        var = f"LOPEN_MODELS__{role.upper()}"
        if fallbacks and role != "oracle":
            warnings.append(f"model {model} (models.{role}) is not offered by {where}; the run will use {fallbacks[0]}")
            continue
        errors.append(
            LopenError(
                f"model {model} (models.{role}) is not offered by {where}",
                f"the models offered are: {shown}",
                f"set models.{role} to one of them: export {var}=<model>, `lopen config set models.{role} <model>`, "
                "or `--model <model>` for every phase",
            )
        )
    for model in settings.models.fallback:
        if model not in offered:
            warnings.append(f"fallback model {model} (models.fallback) is not offered by {where}; it is skipped")
    return errors, warnings


class OfferedModels(msgspec.Struct, frozen=True):
    """The models a provider offered at the last check (``.lopen/cache/models.json``)."""

    source: str
    models: tuple[str, ...]


def _models_file(root: Path) -> Path:
    return root / ".lopen" / "cache" / "models.json"


def remember_models(root: Path, status: AuthStatus) -> None:
    """Keep the list of models offered, so ``lopen config set models.*`` can check a name without
    credentials or a network (only where ``.lopen/`` exists: nothing is created for it)."""
    if not status.models or not (root / ".lopen").is_dir():
        return
    where = status.source if "provider" in status.source else "GitHub Copilot"  # BYOK: "openai provider at …"
    path = _models_file(root)
    try:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(msgspec.json.encode(OfferedModels(source=where, models=tuple(sorted(status.models)))))
    except OSError:
        return  # a cache: the check runs again before every run


def model_name_warning(root: Path | None, setting: str, name: str) -> str:
    """Why ``name`` (set as ``setting``) may not be a model, or "": checked against the models the
    provider offered at the last check, else against the models of Lopen's price table."""
    import difflib

    from lopen.workflow.prices import DEFAULT_PRICES

    try:
        offered = msgspec.json.decode(_models_file(root).read_bytes(), type=OfferedModels) if root else None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        offered = None
    if offered is not None:
        known, where = set(offered.models), f"the models {offered.source} offered at the last check"
    else:
        known = set(DEFAULT_PRICES)
        where = "the models Lopen knows (its price table; `lopen doctor` reads your provider's list)"
    if not name or name in known or name.lower() in known:
        return ""
    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    hint = f" Did you mean {near[0]}?" if near else ""
    return (
        f"{setting}: {name} is not one of {where}.{hint} "
        "Every run checks its models against the provider before it starts."
    )


# -- GitHub, through the Copilot CLI -----------------------------------------------------------


def github_status(settings: Settings, env: Mapping[str, str], timeout: float = CHECK_TIMEOUT) -> AuthStatus:
    token = env_token(env)
    try:
        status, current, models = _with_cli(settings, env, _ask_status, timeout)
    except TimeoutError:
        return AuthStatus(
            ok=False,
            kind="unreachable",
            headline="could not check authentication: no answer from GitHub",
            source=token[0] if token else "",
            detail=f"the Copilot CLI did not answer within {timeout:g} s",
            fix=FIX_NETWORK,
        )
    except LopenError as exc:
        return AuthStatus(ok=False, kind="cli-error", headline=exc.what, detail=exc.why, fix=exc.how)
    except Exception as exc:  # the CLI died or answered nonsense
        return AuthStatus(
            ok=False,
            kind="cli-error",
            headline="the Copilot CLI could not check authentication",
            detail=(str(exc).splitlines() or [type(exc).__name__])[0],
            fix="run `lopen doctor` to check the Copilot CLI",
        )
    if status.isAuthenticated:
        kind = status.authType or ""
        source = _env_var(current) or (token[0] if token and kind == "env" else _SOURCES.get(kind, kind))
        user = status.login or ""
        return AuthStatus(
            ok=True,
            kind="authenticated",
            headline=f"authenticated as {user or 'an unnamed account'} via {source}",
            user=user,
            source=source,
            models=tuple(models),
        )
    errors = list(getattr(current, "auth_errors", None) or [])
    return _classify_failure(token, errors, status.statusMessage or "")


def _classify_failure(token: tuple[str, str] | None, errors: list[str], message: str) -> AuthStatus:
    detail = "; ".join(errors) or message
    network = [error for error in errors if _NETWORK.search(error)]
    if network:
        source = token[0] if token else ("stored login" if any("OAuth" in e for e in errors) else "")
        subject = f"the token in {source}" if token else "the stored login"
        return AuthStatus(
            ok=False,
            kind="unreachable",
            headline=f"could not reach GitHub to check {subject}",
            source=source,
            detail=network[0],
            fix=FIX_NETWORK,
        )
    if token:
        var, value = token
        if value.startswith("ghp_"):
            detail = "classic personal access tokens (ghp_…) are not accepted by Copilot"
        return AuthStatus(
            ok=False,
            kind="invalid",
            headline=f"invalid or expired token in {var}",
            source=var,
            detail=detail or "the Copilot CLI did not accept it",
            fix=(
                f"replace {var} with {TOKEN_KIND} (classic ghp_ tokens are not accepted), "
                "or unset it and run `lopen auth login`"
            ),
        )
    return AuthStatus(
        ok=False,
        kind="not-authenticated",
        headline="not authenticated",
        detail=detail if errors else "no token in COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN, and no stored login",
        fix=FIX_LOGIN,
    )


def _env_var(current: Any) -> str:
    info = getattr(current, "auth_info", None)
    return str(getattr(info, "env_var", "") or "")


async def _ask_status(client: Any) -> tuple[Any, Any, list[str]]:
    """The auth status, the current login's details, and (when signed in) the ids of the models
    GitHub offers this account — the SDK's own list ([] when it cannot be had)."""
    status = await client.get_auth_status()
    try:
        current = await client.rpc.account.get_current_auth()
    except Exception:  # an experimental API: the status alone still answers
        current = None
    models: list[str] = []
    if status.isAuthenticated:
        try:
            models = [m.id for m in await client.list_models()]
        except Exception:  # the list is a check on top; without it nothing is checked
            models = []
    return status, current, models


def _with_cli(settings: Settings, env: Mapping[str, str], action: Callable[[Any], Awaitable[T]], timeout: float) -> T:
    """Start a short-lived Copilot CLI, run `action(client)` within `timeout` seconds, stop it."""
    from lopen.copilot.locate import find_cli

    cli = find_cli(settings.copilot.cli_path, dict(env))
    session = _cli_session(cli.path, dict(env), action, timeout)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(session)
    with ThreadPoolExecutor(1) as pool:  # called from async code (e.g. a TUI): use a loop of its own
        return pool.submit(asyncio.run, session).result()


async def _cli_session(path: str, env: dict[str, str], action: Callable[[Any], Awaitable[T]], timeout: float) -> T:
    from copilot import CopilotClient, RuntimeConnection

    sdk_logger = logging.getLogger("copilot")
    if not sdk_logger.handlers:  # failures are reported by Lopen, classified; no SDK tracebacks
        sdk_logger.addHandler(logging.NullHandler())
    connection = RuntimeConnection.for_stdio(path=path)
    connection.env = env
    client = CopilotClient(connection=connection, log_level="error")

    async def run() -> T:
        try:
            await client.start()
        except Exception as exc:
            raise LopenError(
                f"the Copilot CLI at {path} did not start",
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                "run `lopen setup` to reinstall it, or `lopen doctor` to diagnose",
            ) from exc
        return await action(client)

    try:
        result = await asyncio.wait_for(run(), timeout)
    except BaseException:
        with contextlib.suppress(Exception):  # a hung CLI is killed, not waited for
            await asyncio.wait_for(client.force_stop(), 5)
        raise
    try:
        await asyncio.wait_for(client.stop(), 5)
    except Exception:
        with contextlib.suppress(Exception):
            await client.force_stop()
    return result


# -- a bring-your-own-model provider ---------------------------------------------------------


def provider_status(provider: Provider, timeout: float = PROVIDER_TIMEOUT) -> AuthStatus:
    """GET `<base_url>/models` with the provider's key: reachable and key accepted?"""
    kind = provider.type or "openai"
    source = f"{kind} provider at {provider.base_url}"
    url = provider.base_url.rstrip("/") + "/models"
    request = urllib.request.Request(url, headers=_provider_headers(provider))
    key_fix = "set LOPEN_PROVIDER__API_KEY to a key the provider accepts"
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(1_000_000)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return AuthStatus(
                ok=False,
                kind="invalid",
                headline=f"the {source} refused the API key (HTTP {exc.code})",
                source=source,
                detail="no API key is set" if not provider.api_key else f"GET {url} answered {exc.code} {exc.reason}",
                fix=key_fix,
            )
        if exc.code in (404, 405):
            return AuthStatus(
                ok=True,
                kind="authenticated",
                headline=f"{source} answers",
                source=source,
                detail=f"it does not list models at {url} (HTTP {exc.code}), so model names are not checked",
            )
        return AuthStatus(
            ok=False,
            kind="unreachable",
            headline=f"the {source} is failing (HTTP {exc.code})",
            source=source,
            detail=f"GET {url} answered {exc.code} {exc.reason}",
            fix="check the provider's logs, or wait and try again",
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return AuthStatus(
            ok=False,
            kind="unreachable",
            headline=f"could not reach the {source}",
            source=source,
            detail=f"GET {url}: {reason}",
            fix="start the provider, or correct provider.base_url (LOPEN_PROVIDER__BASE_URL)",
        )
    models = _model_ids(body)
    return AuthStatus(
        ok=True,
        kind="authenticated",
        headline=f"{source} answers",
        source=source,
        detail=("models: " + ", ".join(models[:8]) + (" …" if len(models) > 8 else "")) if models else "",
        models=tuple(models),
    )


def _provider_headers(provider: Provider) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "lopen"}
    if provider.type == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if provider.api_key:
            headers["x-api-key"] = provider.api_key
    elif provider.type == "azure" and provider.api_key:
        headers["api-key"] = provider.api_key
    elif provider.api_key:
        headers["Authorization"] = f"Bearer {provider.api_key}"
    return headers


def _model_ids(body: bytes) -> list[str]:
    try:
        data = json.loads(body)
    except ValueError:
        return []
    entries = data.get("data", []) if isinstance(data, dict) else []
    return [str(entry["id"]) for entry in entries if isinstance(entry, dict) and "id" in entry]


# -- login and logout ------------------------------------------------------------------------


def login(
    settings: Settings, env: Mapping[str, str] | None = None, *, headless: bool = False, gh: bool = False
) -> None:
    """Run the Copilot CLI's interactive `login` (or `gh auth login`); it stores the credential."""
    env = os.environ if env is None else env
    if headless:
        raise LopenError(
            "`lopen auth login` is interactive and cannot run headless",
            "the login opens a browser or shows a device code that a person must confirm",
            f"for headless runs and CI export GH_TOKEN=<token> ({TOKEN_KIND}) instead",
        )
    if gh:
        program = shutil.which("gh")
        if program is None:
            raise LopenError(
                "the GitHub CLI (gh) is not installed",
                "`lopen auth login --gh` runs `gh auth login`",
                "install gh (https://cli.github.com), or run `lopen auth login` for the Copilot CLI's own login",
            )
        command = [program, "auth", "login"]
    else:
        from lopen.copilot.locate import find_cli

        command = [find_cli(settings.copilot.cli_path, dict(env)).path, "login"]
    code = subprocess.call(command, env=dict(env))
    if code != 0:
        shown = "gh auth login" if gh else "copilot login"
        raise LopenError(
            f"the login did not complete ({shown} exited with {code})",
            "its own message is above",
            f"run `lopen auth login` again, or export GH_TOKEN=<token> ({TOKEN_KIND})",
        )


def logout(settings: Settings, env: Mapping[str, str] | None = None, timeout: float = CHECK_TIMEOUT) -> LogoutResult:
    """Clear the Copilot CLI's stored logins; report an env token that still authenticates."""
    env = os.environ if env is None else env
    try:
        cleared = _with_cli(settings, env, _clear_logins, timeout)
    except TimeoutError as exc:
        raise LopenError(
            "could not clear the stored login: no answer from the Copilot CLI",
            f"it did not answer within {timeout:g} s",
            FIX_NETWORK,
        ) from exc
    token = env_token(env)
    return LogoutResult(cleared=tuple(cleared), env_token=token[0] if token else "")


async def _clear_logins(client: Any) -> list[str]:
    from copilot.generated.rpc import AccountLogoutRequest

    cleared: list[str] = []
    try:
        users = await client.rpc.account.get_all_users()
        for entry in users:
            info = entry.get("authInfo") or {}
            if info.get("type") != "user":
                continue  # env tokens are not stored; a gh login belongs to gh (`gh auth logout`)
            await client.rpc.account.logout(AccountLogoutRequest(selection_id=entry.get("selectionId")))
            cleared.append(f"{info.get('login', '?')} on {info.get('host', '?')}")
        if not users:
            current = await client.rpc.account.get_current_auth()
            errors = [e for e in current.auth_errors or [] if "OAuth" in e and _NETWORK.search(e)]
            if errors:
                raise LopenError("could not reach GitHub to clear the stored login", errors[0], FIX_NETWORK)
    except LopenError:
        raise
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc)
        raise LopenError(
            "the Copilot CLI could not clear the stored login",
            message,
            "start `copilot` and type /logout, or remove the GitHub Copilot entry from your system keychain",
        ) from exc
    return cleared
