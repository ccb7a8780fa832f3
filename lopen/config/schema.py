"""What each setting is: its key, type, default, env var, allowed values and meaning.

Derived from the model in :mod:`lopen.config.model`, so validation messages, `lopen config`
and the configuration reference can never disagree with it.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import msgspec.inspect as mi

from lopen.config.model import SECRETS, Settings

ENV_PREFIX = "LOPEN_"
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


class FieldSpec(msgspec.Struct, frozen=True):
    """One setting, e.g. key `budget.warning_threshold`."""

    key: str
    annotation: Any
    info: mi.Type
    default: Any
    description: str
    allowed_text: str = ""

    @property
    def section(self) -> str:
        return self.key.split(".")[0]

    @property
    def name(self) -> str:
        return self.key.split(".")[1]

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.key.replace(".", "__").upper()

    @property
    def secret(self) -> bool:
        return self.key in SECRETS

    @property
    def type_name(self) -> str:
        return _type_name(self.info)

    @property
    def allowed(self) -> str:
        """What a valid value looks like, in words."""
        return self.allowed_text or _allowed(self.info)

    def convert(self, value: object) -> object:
        """Validate a JSON-typed value; raise ValueError saying what is allowed."""
        try:
            return msgspec.convert(value, self.annotation)
        except msgspec.ValidationError as exc:
            if isinstance(self.info, mi.DictType) and isinstance(self.info.value_type, mi.StructType):
                # a table of entries: say which entry is wrong and how (msgspec names the path, never a value)
                raise ValueError(f"{_failing_entry(value, self.annotation) or exc}; expected {self.allowed}") from exc
            raise ValueError(f"expected {self.allowed}") from exc

    def parse(self, text: str) -> object:
        """Convert a string from the environment, a flag or `lopen config set`, and validate it."""
        info = self.info
        stripped = text.strip()
        value: object = text
        try:
            if isinstance(info, mi.BoolType):
                lowered = stripped.lower()
                if lowered not in _TRUE | _FALSE:
                    raise ValueError
                value = lowered in _TRUE
            elif isinstance(info, mi.IntType):
                value = int(stripped)
            elif isinstance(info, mi.FloatType):
                value = float(stripped)
            elif isinstance(info, mi.VarTupleType):
                value = json.loads(stripped) if stripped.startswith("[") else _split_list(stripped)
            elif isinstance(info, mi.DictType):
                value = json.loads(stripped or "{}")
        except ValueError as exc:
            raise ValueError(f"expected {self.allowed}") from exc
        return self.convert(value)

    def format(self, value: object) -> str:
        """A value as a person would type it (strings bare, "" for empty, lists as JSON)."""
        if isinstance(value, str):
            return value if value else '""'
        return json.dumps(msgspec.to_builtins(value))


def _failing_entry(value: object, annotation: Any) -> str:
    """Which entry of a table fails and why, e.g. ``docs: Object missing required field `tools``` ("" if none alone)."""
    if not isinstance(value, dict):
        return ""
    for key, entry in value.items():
        try:
            msgspec.convert({key: entry}, annotation)
        except msgspec.ValidationError as exc:
            return f"{key}: {str(exc).replace(' - at `$[...]`', '').replace('$[...]', '$')}"
    return ""


def _split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _unwrap(info: mi.Type) -> tuple[mi.Type, dict[str, Any]]:
    if isinstance(info, mi.Metadata):
        return info.type, {**(info.extra_json_schema or {}), **(info.extra or {})}
    return info, {}


def _type_name(info: mi.Type) -> str:
    if isinstance(info, mi.BoolType):
        return "boolean"
    if isinstance(info, mi.IntType):
        return "integer"
    if isinstance(info, mi.FloatType):
        return "number"
    if isinstance(info, mi.LiteralType):
        return "choice"
    if isinstance(info, mi.VarTupleType):
        return "list of strings"
    if isinstance(info, mi.DictType):
        return "table"
    return "string"


def _bounds(info: mi.IntType | mi.FloatType) -> str:
    if info.ge is not None and info.le is not None:
        return f" from {info.ge} to {info.le}"
    if info.gt is not None:
        return f" above {info.gt}"
    if info.ge is not None:
        return f", {info.ge} or more"
    return ""


def _allowed(info: mi.Type) -> str:
    if isinstance(info, mi.BoolType):
        return "true or false"
    if isinstance(info, mi.IntType):
        return f"a whole number{_bounds(info)}"
    if isinstance(info, mi.FloatType):
        return f"a number{_bounds(info)}"
    if isinstance(info, mi.LiteralType):
        return "one of " + ", ".join(json.dumps(value) for value in info.values)
    if isinstance(info, mi.VarTupleType):
        return "a list of non-empty strings (JSON array, or comma-separated in env vars and flags)"
    if isinstance(info, mi.StrType) and info.min_length:
        return "a non-empty string"
    return "a string"


def _field_specs() -> dict[str, FieldSpec]:
    specs: dict[str, FieldSpec] = {}
    defaults = Settings()
    for section in msgspec.structs.fields(Settings):
        section_type = section.type
        annotations = {f.name: f.type for f in msgspec.structs.fields(section_type)}
        for field in mi.type_info(section_type).fields:
            info, extra = _unwrap(field.type)
            key = f"{section.name}.{field.name}"
            specs[key] = FieldSpec(
                key=key,
                annotation=annotations[field.name],
                info=info,
                default=getattr(getattr(defaults, section.name), field.name),
                description=extra.get("description", ""),
                allowed_text=extra.get("allowed", ""),
            )
    return specs


FIELDS: dict[str, FieldSpec] = _field_specs()
SECTIONS: tuple[str, ...] = tuple(f.name for f in msgspec.structs.fields(Settings))
