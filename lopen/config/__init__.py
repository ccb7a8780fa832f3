"""Lopen's settings: one typed model resolved from flags, `LOPEN_` env, project and user files.

settings = load_settings()            # or load_settings(root, {"models.building": "gpt-5"})
settings.models.building, settings.budget.warning_threshold, settings.provider.byok
"""

from lopen.config.loader import (
    ResolvedValue,
    load_settings,
    project_config_path,
    resolve_settings,
    set_value,
    user_config_path,
)
from lopen.config.model import (
    SECRETS,
    Budget,
    Context,
    Copilot,
    Display,
    Git,
    Models,
    Provider,
    Sandbox,
    Session,
    Settings,
    Store,
    ToolDiscipline,
    Workflow,
    mask_secret,
    mask_url_password,
)
from lopen.config.schema import FIELDS, FieldSpec

__all__ = [
    "FIELDS",
    "SECRETS",
    "Budget",
    "Context",
    "Copilot",
    "Display",
    "FieldSpec",
    "Git",
    "Models",
    "Provider",
    "ResolvedValue",
    "Sandbox",
    "Session",
    "Settings",
    "Store",
    "ToolDiscipline",
    "Workflow",
    "load_settings",
    "mask_secret",
    "mask_url_password",
    "project_config_path",
    "resolve_settings",
    "set_value",
    "user_config_path",
]
