"""Resolving settings from their five layers, and writing one setting to a config file.

Layers, highest first: flags (`overrides`), `LOPEN_` environment variables, the project's
`.lopen/config.json`, the user's `$XDG_CONFIG_HOME/lopen/config.json`, built-in defaults.
Every layer is validated on its own so an error names the file or variable it came from.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from lopen.config.model import SECRETS, Settings, mask_url_password
from lopen.config.schema import ENV_PREFIX, FIELDS, SECTIONS, FieldSpec
from lopen.errors import LopenError
from lopen.project import LOPEN_DIR, ensure_lopen_dir, find_root, nearest_root

CONFIG_FILE = "config.json"


class ResolvedValue(msgspec.Struct, frozen=True):
    """One setting's winning value and where it came from, e.g. `env LOPEN_MODELS__BUILDING`."""

    key: str
    value: object
    source: str

    @property
    def shown(self) -> object:
        """The value safe to display (secrets masked)."""
        mask = SECRETS.get(self.key)
        if mask is None:
            return self.value
        return mask(self.value if isinstance(self.value, str) else msgspec.to_builtins(self.value))


class _Layer(msgspec.Struct, frozen=True):
    source: str  # how `config show` names it
    values: dict[str, object]  # dotted key -> validated value
    origins: dict[str, str]  # dotted key -> where exactly (file path, env var, flag)


# -- paths -----------------------------------------------------------------------------------


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/lopen/config.json`, by default `~/.config/lopen/config.json`."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else _home(env) / ".config"
    return base / "lopen" / CONFIG_FILE


def project_config_path(root: Path) -> Path:
    return root / LOPEN_DIR / CONFIG_FILE


def _home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def _tilde(path: Path, env: Mapping[str, str]) -> str:
    try:
        return "~/" + path.relative_to(_home(env)).as_posix()
    except ValueError:
        return str(path)


# -- layers ----------------------------------------------------------------------------------


def _unknown(key: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(key, candidates, n=1)
    return f"did you mean {close[0]}?" if close else "known settings: " + ", ".join(candidates)


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LopenError(f"cannot read {path}", str(exc), f"fix the file's permissions or remove {path}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LopenError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno})",
            exc.msg,
            f"fix the JSON at line {exc.lineno}, column {exc.colno} of {path}",
        ) from exc
    if not isinstance(data, dict):
        raise LopenError(
            f"{path} must hold a JSON object",
            f"it holds a JSON {type(data).__name__}",
            'write settings as {"section": {"key": value}}, e.g. {"models": {"building": "gpt-5"}}',
        )
    return data


def _invalid(where: str, spec: FieldSpec, value: object, problem: str, how: str) -> LopenError:
    if spec.secret:
        value = SECRETS[spec.key](value) if isinstance(value, str) or spec.key == "mcp.servers" else "***"
    shown = spec.format(value)
    return LopenError(f"invalid value for {spec.key} in {where}: {shown}", problem, how)


def _file_layer(path: Path, source: str, data: Mapping[str, object]) -> _Layer:
    values: dict[str, object] = {}
    for section, entries in data.items():
        if section not in SECTIONS:
            raise LopenError(
                f"unknown section {section!r} in {path}",
                _unknown(section, list(SECTIONS)),
                f"remove or rename it in {path}",
            )
        if not isinstance(entries, dict):
            raise LopenError(
                f"{section} in {path} must be a JSON object",
                f"it is {json.dumps(entries)}",
                f'write it as "{section}": {{"key": value}}',
            )
        for name, value in entries.items():
            key = f"{section}.{name}"
            spec = FIELDS.get(key)
            if spec is None:
                known = [k for k in FIELDS if k.startswith(section + ".")]
                raise LopenError(f"unknown setting {key} in {path}", _unknown(key, known), f"fix it in {path}")
            try:
                values[key] = spec.convert(value)
            except ValueError as exc:
                raise _invalid(
                    str(path), spec, value, str(exc), f"change it in {path}, or `lopen config set {key} <value>`"
                ) from exc
    return _Layer(source, values, dict.fromkeys(values, str(path)))


def _env_layer(env: Mapping[str, str]) -> _Layer:
    by_var = {spec.env_var: spec for spec in FIELDS.values()}
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    for var in sorted(env):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or "__" not in upper:
            continue  # LOPEN_DEBUG and the like are not settings
        spec = by_var.get(upper)
        if spec is None:
            raise LopenError(
                f"unknown setting in environment variable {var}",
                _unknown(upper, list(by_var)),
                f"unset {var} or fix its name (LOPEN_<SECTION>__<KEY>, e.g. LOPEN_MODELS__BUILDING)",
            )
        try:
            values[spec.key] = spec.parse(env[var])
        except ValueError as exc:
            raise _invalid(
                f"environment variable {var}", spec, env[var], str(exc), f"set {var} to {spec.allowed}, or unset it"
            ) from exc
        origins[spec.key] = var
    return _Layer("env", values, origins)


def _flag_layer(overrides: Mapping[str, object], flag_names: Mapping[str, str]) -> _Layer:
    values: dict[str, object] = {}
    for key, value in overrides.items():
        if value is None:
            continue  # a flag that was not given
        spec = FIELDS.get(key)
        if spec is None:
            raise LopenError(f"unknown setting {key}", _unknown(key, list(FIELDS)), "check the flag's setting name")
        flag = flag_names.get(key, key)
        try:
            values[key] = spec.parse(value) if isinstance(value, str) else spec.convert(value)
        except ValueError as exc:
            raise _invalid(f"flag {flag}", spec, value, str(exc), f"pass {flag} {spec.allowed}") from exc
    return _Layer("flag", values, {key: flag_names.get(key, key) for key in values})


def _layers(
    root: Path | None,
    overrides: Mapping[str, object],
    env: Mapping[str, str],
    flag_names: Mapping[str, str],
    replace: tuple[Path, Mapping[str, object]] | None = None,
) -> list[_Layer]:
    """The layers, lowest first. `replace` substitutes one file's content (to validate a write)."""
    layers: list[_Layer] = []
    files = [(user_config_path(env), "user")]
    if root is not None:
        files.append((project_config_path(root), "project"))
    for path, kind in files:
        data = replace[1] if replace and replace[0] == path else _read_json(path)
        if data is not None:
            label = _tilde(path, env) if kind == "user" else f"{LOPEN_DIR}/{CONFIG_FILE}"
            layers.append(_file_layer(path, f"{kind} ({label})", data))
    layers.append(_env_layer(env))
    layers.append(_flag_layer(overrides, flag_names))
    return layers


def _source(layer: _Layer, key: str) -> str:
    if layer.source in ("env", "flag"):
        return f"{layer.source} {layer.origins[key]}"
    return layer.source


def _merge(layers: list[_Layer]) -> tuple[Settings, list[ResolvedValue]]:
    winners: dict[str, tuple[object, str, str]] = {
        key: (spec.default, "default", "the default") for key, spec in FIELDS.items()
    }
    for layer in layers:
        for key, value in layer.values.items():
            where = layer.origins[key]
            winners[key] = (value, _source(layer, key), where if layer.source != "env" else f"env {where}")
    nested: dict[str, dict[str, object]] = {section: {} for section in SECTIONS}
    for key, (value, _, _) in winners.items():
        section, name = key.split(".")
        nested[section][name] = value
    settings = msgspec.convert(nested, Settings)
    _check_consistency(settings, {key: where for key, (_, _, where) in winners.items()})
    return settings, [ResolvedValue(key, value, source) for key, (value, source, _) in winners.items()]


def _check_consistency(settings: Settings, where: Mapping[str, str]) -> None:
    """Rules across settings, each naming where both values came from."""

    def pair(low: str, high: str, low_value: float, high_value: float) -> None:
        if low_value > high_value:
            raise LopenError(
                f"{low} ({low_value}, from {where[low]}) is above {high} ({high_value}, from {where[high]})",
                f"{low} must not exceed {high}",
                f"lower {low} or raise {high}",
            )

    budget, copilot, provider = settings.budget, settings.copilot, settings.provider
    pair(
        "budget.warning_threshold",
        "budget.confirmation_threshold",
        budget.warning_threshold,
        budget.confirmation_threshold,
    )
    pair("copilot.retry_base_delay", "copilot.retry_max_delay", copilot.retry_base_delay, copilot.retry_max_delay)
    if provider.type and not provider.base_url:
        raise LopenError(
            f"provider.type is {provider.type!r} (from {where['provider.type']}) but provider.base_url is empty",
            "a bring-your-own-model provider needs its endpoint",
            "set provider.base_url (LOPEN_PROVIDER__BASE_URL), or clear provider.type to use GitHub Copilot",
        )


# -- public API ------------------------------------------------------------------------------


def _resolve(
    root: Path | None,
    overrides: Mapping[str, object] | None,
    env: Mapping[str, str] | None,
    flag_names: Mapping[str, str] | None,
) -> tuple[Settings, list[ResolvedValue]]:
    env = os.environ if env is None else env
    if root is None:
        root = nearest_root()
    return _merge(_layers(root, overrides or {}, env, flag_names or {}))


def load_settings(
    root: Path | None = None,
    overrides: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    flag_names: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting; raise LopenError naming the file/variable, key, value and what is allowed.

    `root`: the project root (default: discovered from the working directory; none = no project
    layer). `overrides`: flag values by dotted key, e.g. {"models.building": "gpt-5"}; None values
    are ignored. `env`: the environment (default os.environ). `flag_names`: the flag each override
    came from, for messages and `config show`, e.g. {"models.building": "--model"}.
    """
    return _resolve(root, overrides, env, flag_names)[0]


def resolve_settings(
    root: Path | None = None,
    overrides: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    flag_names: Mapping[str, str] | None = None,
) -> list[ResolvedValue]:
    """Every setting's winning value with its source, in model order (see :func:`load_settings`)."""
    return _resolve(root, overrides, env, flag_names)[1]


def set_value(
    key: str, text: str, *, user: bool = False, start: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, object]:
    """Validate `text` for `key` and write it to the project's (or with `user` the user's) config
    file, creating it. Returns the file and the stored value. Secrets are refused."""
    env = os.environ if env is None else env
    spec = FIELDS.get(key)
    if spec is None:
        raise LopenError(f"unknown setting {key}", _unknown(key, list(FIELDS)), "`lopen config show` lists them all")
    try:
        value = spec.parse(text)
    except ValueError as exc:
        raise _invalid("the command line", spec, text, str(exc), f"give {key} {spec.allowed}") from exc
    _refuse_secret(spec, value)
    if user:
        root, path = nearest_root(start), user_config_path(env)
    else:
        root = find_root(start)
        path = project_config_path(root)
    data = _read_json(path) or {}
    section = data.setdefault(spec.section, {})
    if not isinstance(section, dict):
        raise LopenError(
            f"{spec.section} in {path} must be a JSON object", f"it is {json.dumps(section)}", f"fix {path} first"
        )
    section[spec.name] = msgspec.to_builtins(value)
    _merge(_layers(root, {}, env, {}, replace=(path, data)))  # refuse what would not load
    temporary = path.with_name(path.name + ".tmp")
    try:
        if user:
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            ensure_lopen_dir(path.parent.parent)
        temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise LopenError(
            f"cannot write {key} to {path}",
            f"{exc.strerror or exc} (errno {exc.errno})" + (f": {exc.filename}" if exc.filename else ""),
            f"make {path.parent} writable, or set it for this shell only: export {spec.env_var}={text}",
        ) from None
    return path, value


def _refuse_secret(spec: FieldSpec, value: object) -> None:
    if spec.key == "provider.api_key" and value:
        raise LopenError(
            "refusing to write provider.api_key to a config file",
            "a key in a file can end up committed or shared; Lopen stores no credential",
            f"export {spec.env_var}=<key> in your shell profile or CI secret store instead",
        )
    if spec.key == "store.url" and isinstance(value, str) and mask_url_password(value) != value:
        raise LopenError(
            "refusing to write a store.url that holds a password to a config file",
            "a password in a file can end up committed or shared; Lopen stores no credential",
            f"export {spec.env_var}=<url> instead, or keep the password in ~/.pgpass or PGPASSWORD",
        )
