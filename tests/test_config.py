"""Settings: five layers, conversion of env/flag strings, validation messages, secrets, writing."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from lopen.config import (
    FIELDS,
    Settings,
    load_settings,
    mask_secret,
    mask_url_password,
    project_config_path,
    resolve_settings,
    set_value,
    user_config_path,
)
from lopen.errors import LopenError


@pytest.fixture(autouse=True)
def outside_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a folder that is no project, so root=None really means "no project layer"."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    return project


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty home and no LOPEN_ variables."""
    return {"HOME": str(tmp_path / "home")}


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def source_of(key: str, root: Path, env: dict[str, str], **kwargs: object) -> tuple[object, str]:
    found = next(r for r in resolve_settings(root, env=env, **kwargs) if r.key == key)  # type: ignore[arg-type]
    return found.value, found.source


# -- layers ----------------------------------------------------------------------------------

LAYERS = ("user", "project", "env", "flag")  # lowest to highest
SOURCES = {
    "default": "default",
    "user": "user (~/.config/lopen/config.json)",
    "project": "project (.lopen/config.json)",
    "env": "env LOPEN_MODELS__BUILDING",
    "flag": "flag --model",
}


@pytest.mark.parametrize(
    "present",
    [combo for size in range(len(LAYERS) + 1) for combo in itertools.combinations(LAYERS, size)],
    ids=lambda combo: "+".join(combo) or "none",
)
def test_highest_layer_wins(present: tuple[str, ...], root: Path, env: dict[str, str]) -> None:
    overrides: dict[str, object] = {}
    if "user" in present:
        write(user_config_path(env), {"models": {"building": "user-model"}})
    if "project" in present:
        write(project_config_path(root), {"models": {"building": "project-model"}})
    if "env" in present:
        env["LOPEN_MODELS__BUILDING"] = "env-model"
    if "flag" in present:
        overrides["models.building"] = "flag-model"
    winner = present[-1] if present else "default"

    settings = load_settings(root, overrides, env)
    value, source = source_of(
        "models.building", root, env, overrides=overrides, flag_names={"models.building": "--model"}
    )

    expected = "claude-opus-4.6" if winner == "default" else f"{winner}-model"
    assert settings.models.building == value == expected
    assert source == SOURCES[winner]


def test_layers_merge_key_by_key(root: Path, env: dict[str, str]) -> None:
    write(user_config_path(env), {"budget": {"token_budget_per_module": 500}, "display": {"color": "never"}})
    write(project_config_path(root), {"budget": {"premium_budget_per_module": 7}})
    env["LOPEN_DISPLAY__ASCII"] = "yes"
    settings = load_settings(root, {"workflow.max_iterations": 5, "models.planning": None}, env)
    assert settings.budget.token_budget_per_module == 500
    assert settings.budget.premium_budget_per_module == 7
    assert settings.display.color == "never" and settings.display.ascii is True
    assert settings.workflow.max_iterations == 5
    assert settings.models.planning == "claude-opus-4.6"  # a None override is a flag not given
    assert settings.budget.warning_threshold == 0.8


def test_defaults_without_any_configuration(env: dict[str, str]) -> None:
    assert load_settings(None, None, env) == Settings()
    assert all(r.source == "default" for r in resolve_settings(None, None, env))
    assert len(resolve_settings(None, None, env)) == len(FIELDS)


def test_xdg_config_home_is_respected(root: Path, env: dict[str, str], tmp_path: Path) -> None:
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    write(tmp_path / "xdg" / "lopen" / "config.json", {"models": {"oracle": "xdg-mini"}})
    assert load_settings(root, None, env).models.oracle == "xdg-mini"
    env["XDG_CONFIG_HOME"] = "relative/path"  # not absolute: ignored, as the XDG spec says
    assert user_config_path(env) == Path(env["HOME"]) / ".config" / "lopen" / "config.json"


def test_root_is_discovered_from_the_working_directory(
    root: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project_config_path(root), {"models": {"building": "found"}})
    (root / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(root / "src" / "deep")
    assert load_settings(env=env).models.building == "found"


# -- strings from env vars and flags ---------------------------------------------------------


@pytest.mark.parametrize(
    ("var", "text", "key", "expected"),
    [
        ("LOPEN_BUDGET__TOKEN_BUDGET_PER_MODULE", "250000", "budget.token_budget_per_module", 250000),
        ("LOPEN_BUDGET__WARNING_THRESHOLD", "0.5", "budget.warning_threshold", 0.5),
        ("LOPEN_BUDGET__WARNING_THRESHOLD", "0", "budget.warning_threshold", 0.0),
        ("LOPEN_WORKFLOW__UNATTENDED", "true", "workflow.unattended", True),
        ("LOPEN_WORKFLOW__UNATTENDED", "YES", "workflow.unattended", True),
        ("LOPEN_WORKFLOW__UNATTENDED", "1", "workflow.unattended", True),
        ("LOPEN_GIT__ENABLED", "no", "git.enabled", False),
        ("LOPEN_GIT__ENABLED", "0", "git.enabled", False),
        ("LOPEN_GIT__ENABLED", "False", "git.enabled", False),
        ("LOPEN_MODELS__FALLBACK", "a, b ,c", "models.fallback", ("a", "b", "c")),
        ("LOPEN_MODELS__FALLBACK", '["x", "y"]', "models.fallback", ("x", "y")),
        ("LOPEN_MODELS__FALLBACK", "", "models.fallback", ()),
        ("lopen_models__building", "lower-case-var", "models.building", "lower-case-var"),
        ("LOPEN_PROVIDER__BASE_URL", "http://127.0.0.1:8080/v1", "provider.base_url", "http://127.0.0.1:8080/v1"),
        ("LOPEN_COPILOT__INVOCATION_TIMEOUT", "60", "copilot.invocation_timeout", 60.0),
    ],
)
def test_env_strings_are_converted(var: str, text: str, key: str, expected: object, env: dict[str, str]) -> None:
    env[var] = text
    value, source = source_of(key, Path("/nonexistent-root"), env)
    assert value == expected
    assert source == f"env {var}"


def test_env_vars_without_a_level_separator_are_not_settings(env: dict[str, str]) -> None:
    env.update(LOPEN_DEBUG="1", LOPEN_SOMETHING="x", OTHER__VAR="y")
    assert load_settings(None, None, env) == Settings()


def test_flag_strings_and_typed_values(env: dict[str, str]) -> None:
    settings = load_settings(None, {"workflow.max_iterations": "7", "workflow.unattended": True}, env)
    assert settings.workflow.max_iterations == 7 and settings.workflow.unattended is True


# -- invalid values --------------------------------------------------------------------------

INVALID_FILE_VALUES = [
    ({"budget": {"warning_threshold": 1.5}}, "budget.warning_threshold", "1.5", "a number from 0 to 1"),
    ({"budget": {"confirmation_threshold": -0.1}}, "budget.confirmation_threshold", "-0.1", "from 0 to 1"),
    ({"budget": {"token_budget_per_module": -1}}, "budget.token_budget_per_module", "-1", "0 or more"),
    ({"budget": {"premium_budget_per_module": "lots"}}, "budget.premium_budget_per_module", "lots", "whole number"),
    ({"workflow": {"max_iterations": 0}}, "workflow.max_iterations", "0", "1 or more"),
    ({"workflow": {"unattended": "yes"}}, "workflow.unattended", "yes", "true or false"),
    ({"workflow": {"failure_threshold": 2.5}}, "workflow.failure_threshold", "2.5", "whole number"),
    ({"provider": {"type": "ollama"}}, "provider.type", "ollama", '"openai"'),
    ({"display": {"color": "rainbow"}}, "display.color", "rainbow", '"auto"'),
    ({"models": {"fallback": "gpt-5"}}, "models.fallback", "gpt-5", "a list of non-empty strings"),
    ({"models": {"fallback": ["ok", ""]}}, "models.fallback", '["ok", ""]', "non-empty"),
    ({"models": {"building": ""}}, "models.building", '""', "a non-empty string"),
    ({"provider": {"base_url": "localhost:11434"}}, "provider.base_url", "localhost:11434", "http://"),
    ({"store": {"url": "mysql://db"}}, "store.url", "mysql://db", "postgresql://"),
    ({"copilot": {"retry_base_delay": 0}}, "copilot.retry_base_delay", "0", "above 0"),
]


@pytest.mark.parametrize(("data", "key", "shown", "allowed"), INVALID_FILE_VALUES, ids=lambda v: str(v)[:40])
def test_invalid_file_value_names_file_key_value_and_allowed(
    data: dict, key: str, shown: str, allowed: str, root: Path, env: dict[str, str]
) -> None:
    path = write(project_config_path(root), data)
    with pytest.raises(LopenError) as caught:
        load_settings(root, None, env)
    error = caught.value
    assert str(path) in error.what and key in error.what and shown in error.what
    assert allowed in error.why
    assert error.exit_code == 1


@pytest.mark.parametrize(
    ("var", "text", "allowed"),
    [
        ("LOPEN_BUDGET__WARNING_THRESHOLD", "1.5", "from 0 to 1"),
        ("LOPEN_BUDGET__TOKEN_BUDGET_PER_MODULE", "-5", "0 or more"),
        ("LOPEN_BUDGET__TOKEN_BUDGET_PER_MODULE", "ten", "whole number"),
        ("LOPEN_WORKFLOW__UNATTENDED", "maybe", "true or false"),
        ("LOPEN_WORKFLOW__MAX_ITERATIONS", "0", "1 or more"),
        ("LOPEN_PROVIDER__TYPE", "bedrock", '"anthropic"'),
        ("LOPEN_DISPLAY__COLOR", "sometimes", '"never"'),
        ("LOPEN_MODELS__FALLBACK", "[1, 2]", "list of non-empty strings"),
        ("LOPEN_MODELS__FALLBACK", "[not json", "list of non-empty strings"),
    ],
)
def test_invalid_env_value_names_variable(var: str, text: str, allowed: str, env: dict[str, str]) -> None:
    env[var] = text
    with pytest.raises(LopenError) as caught:
        load_settings(None, None, env)
    assert var in caught.value.what and text in caught.value.what
    assert allowed in caught.value.why
    assert var in caught.value.how


def test_unknown_keys_are_refused_with_a_suggestion(root: Path, env: dict[str, str]) -> None:
    path = write(project_config_path(root), {"models": {"buildng": "x"}})
    with pytest.raises(LopenError) as caught:
        load_settings(root, None, env)
    assert "models.buildng" in caught.value.what and str(path) in caught.value.what
    assert "did you mean models.building?" in caught.value.why

    write(project_config_path(root), {"budjet": {}})
    with pytest.raises(LopenError, match="unknown section 'budjet'") as caught:
        load_settings(root, None, env)
    assert "budget" in caught.value.why

    write(project_config_path(root), {"models": "gpt-5"})
    with pytest.raises(LopenError, match="must be a JSON object"):
        load_settings(root, None, env)


def test_unknown_env_setting_is_refused(env: dict[str, str]) -> None:
    env["LOPEN_MODELS__BUILDNG"] = "gpt-5"
    with pytest.raises(LopenError) as caught:
        load_settings(None, None, env)
    assert "LOPEN_MODELS__BUILDNG" in caught.value.what
    assert "LOPEN_MODELS__BUILDING" in caught.value.why


def test_unknown_or_invalid_flag_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(LopenError, match=r"unknown setting models\.nope"):
        load_settings(None, {"models.nope": "x"}, env)
    with pytest.raises(LopenError) as caught:
        load_settings(
            None, {"workflow.max_iterations": 0}, env, flag_names={"workflow.max_iterations": "--max-iterations"}
        )
    assert "--max-iterations" in caught.value.what and "1 or more" in caught.value.why


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ({"budget": {"warning_threshold": 0.95}}, "budget.warning_threshold (0.95, from"),
        (
            {"budget": {"warning_threshold": 0.5, "confirmation_threshold": 0.4}},
            "is above budget.confirmation_threshold",
        ),
        ({"copilot": {"retry_base_delay": 60}}, "copilot.retry_base_delay (60.0, from"),
        ({"provider": {"type": "openai"}}, "provider.base_url is empty"),
    ],
)
def test_inconsistent_settings_name_both_sources(layers: dict, message: str, root: Path, env: dict[str, str]) -> None:
    path = write(project_config_path(root), layers)
    with pytest.raises(LopenError) as caught:
        load_settings(root, None, env)
    assert message in caught.value.what
    assert str(path) in caught.value.what


def test_warning_above_confirmation_across_layers(root: Path, env: dict[str, str]) -> None:
    write(user_config_path(env), {"budget": {"confirmation_threshold": 0.7}})
    env["LOPEN_BUDGET__WARNING_THRESHOLD"] = "0.75"
    with pytest.raises(LopenError) as caught:
        load_settings(root, None, env)
    assert "env LOPEN_BUDGET__WARNING_THRESHOLD" in caught.value.what
    assert str(user_config_path(env)) in caught.value.what


def test_malformed_json_reports_line_and_column(root: Path, env: dict[str, str]) -> None:
    path = write(project_config_path(root), '{\n  "models": {\n    "building": "x",\n  }\n}\n')
    with pytest.raises(LopenError) as caught:
        load_settings(root, None, env)
    assert str(path) in caught.value.what
    assert "line 4, column 3" in caught.value.what


def test_non_object_and_empty_files(root: Path, env: dict[str, str]) -> None:
    write(project_config_path(root), "[1, 2]")
    with pytest.raises(LopenError, match="must hold a JSON object"):
        load_settings(root, None, env)
    write(project_config_path(root), "\n")
    assert load_settings(root, None, env) == Settings()


# -- secrets and digest ----------------------------------------------------------------------


def test_secrets_are_masked_everywhere_they_are_shown(env: dict[str, str]) -> None:
    env["LOPEN_PROVIDER__BASE_URL"] = "http://127.0.0.1:1/v1"
    env["LOPEN_PROVIDER__API_KEY"] = "sk-abcdefghijklmnop1234"
    env["LOPEN_STORE__URL"] = "postgresql://lopen:hunter2@db.example/lopen"
    resolved = {r.key: r for r in resolve_settings(None, None, env)}
    assert resolved["provider.api_key"].shown == "sk-...1234"
    assert resolved["store.url"].shown == "postgresql://lopen:***@db.example/lopen"
    settings = load_settings(None, None, env)
    assert settings.provider.api_key == "sk-abcdefghijklmnop1234"  # the real value for the gateway
    public = json.dumps(settings.public())
    assert "abcdefghijklmnop" not in public and "hunter2" not in public


def test_masks() -> None:
    assert mask_secret("") == ""
    assert mask_secret("short") == "***"
    assert mask_secret("sk-0123456789abcdef") == "sk-...cdef"
    assert mask_url_password("postgresql://db/lopen") == "postgresql://db/lopen"
    assert mask_url_password("postgresql://u:p@h:5432/d") == "postgresql://u:***@h:5432/d"


def test_digest_is_stable_and_tracks_non_secret_settings(env: dict[str, str]) -> None:
    base = load_settings(None, None, env)
    assert base.digest() == Settings().digest()
    assert len(base.digest()) == 16
    changed = load_settings(None, {"models.building": "gpt-5"}, env)
    assert changed.digest() != base.digest()


# -- config set ------------------------------------------------------------------------------


def test_set_writes_the_project_file_and_leaves_gitignore_alone(root: Path, env: dict[str, str]) -> None:
    (root / ".gitignore").write_text("node_modules", encoding="utf-8")
    path, value = set_value("models.building", "gpt-5", start=root / ".", env=env)
    assert path == project_config_path(root) and value == "gpt-5"
    set_value("models.fallback", "a,b", start=root, env=env)
    set_value("budget.warning_threshold", "0.5", start=root, env=env)
    assert json.loads(path.read_text()) == {
        "models": {"building": "gpt-5", "fallback": ["a", "b"]},
        "budget": {"warning_threshold": 0.5},
    }
    assert (root / ".gitignore").read_text() == "node_modules"
    assert load_settings(root, None, env).models.fallback == ("a", "b")


def test_set_global_writes_the_user_file(root: Path, env: dict[str, str]) -> None:
    path, _ = set_value("display.color", "never", user=True, start=root, env=env)
    assert path == user_config_path(env)
    assert json.loads(path.read_text()) == {"display": {"color": "never"}}
    assert not (root / ".lopen").exists()


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("models.nope", "x", "unknown setting models.nope"),
        ("budget.warning_threshold", "2", "invalid value for budget.warning_threshold"),
        ("budget.warning_threshold", "0.95", "is above budget.confirmation_threshold"),
        ("provider.api_key", "sk-0123456789abcdef", "refusing to write provider.api_key"),
        ("store.url", "postgresql://u:secret@h/db", "refusing to write a store.url that holds a password"),
    ],
)
def test_set_refuses_without_writing(key: str, text: str, message: str, root: Path, env: dict[str, str]) -> None:
    with pytest.raises(LopenError, match=message) as caught:
        set_value(key, text, start=root, env=env)
    assert not project_config_path(root).exists()
    if key == "provider.api_key":
        assert "LOPEN_PROVIDER__API_KEY" in caught.value.how
        assert "sk-0123456789abcdef" not in caught.value.render()


def test_set_outside_a_project_says_how(tmp_path: Path, env: dict[str, str]) -> None:
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    with pytest.raises(LopenError, match="no project found") as caught:
        set_value("models.building", "gpt-5", start=lonely, env=env)
    assert "git init" in caught.value.how
