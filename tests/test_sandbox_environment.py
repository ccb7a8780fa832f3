"""The Copilot CLI's environment is an allowlist of Lopen's; the secrets Lopen knows are listed
for redaction."""

from __future__ import annotations

from lopen.sandbox.environment import cli_environment, known_secrets

LOPEN_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/ada",
    "USER": "ada",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm",
    "TZ": "Europe/Amsterdam",
    "HTTPS_PROXY": "http://proxy:3128",
    "GITHUB_TOKEN": "ghp_lopens_own_token_0123456789",
    "GH_TOKEN": "gho_second_token_0123456789",
    "LOPEN_PROVIDER__API_KEY": "sk-byok-key-0123456789",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-0123456789",
    "OPENAI_API_KEY": "sk-openai-0123456789",
    "DATABASE_URL": "postgresql://u:pw@db/x",
    "PYTHONPATH": "/somewhere",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "FEATURE_TOKEN": "true",
    "TMPDIR": "/var/tmp",
}


def test_byok_environment_holds_only_the_allowlist_and_lopens_switches():
    env = cli_environment(
        LOPEN_ENV,
        python_dir="/opt/lopen/.venv/bin",
        temp_dir="/tmp/lopen-model-1",
        copilot_home="/p/.lopen/copilot",
        provider_base_url="http://127.0.0.1:9999/v1",
        provider_type="openai",
        model="scripted-main",
    )
    assert env == {
        "PATH": "/opt/lopen/.venv/bin:/usr/bin:/bin",
        "HOME": "/home/ada",
        "USER": "ada",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm",
        "TZ": "Europe/Amsterdam",
        "HTTPS_PROXY": "http://proxy:3128",
        "TMPDIR": "/tmp/lopen-model-1",
        "TMP": "/tmp/lopen-model-1",
        "TEMP": "/tmp/lopen-model-1",
        "COPILOT_HOME": "/p/.lopen/copilot",
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:9999/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_MODEL": "scripted-main",
    }


def test_githubs_routing_gets_the_first_token_variable_the_cli_reads_and_no_other():
    source = {**LOPEN_ENV, "COPILOT_GITHUB_TOKEN": "ghu_copilot_token_0123456789"}
    env = cli_environment(source, python_dir="/py")
    assert env["COPILOT_GITHUB_TOKEN"] == "ghu_copilot_token_0123456789"
    assert "GITHUB_TOKEN" not in env and "GH_TOKEN" not in env
    assert not any(name.startswith("COPILOT_PROVIDER") or name == "COPILOT_OFFLINE" for name in env)
    plain = cli_environment(LOPEN_ENV, python_dir="/py")  # GH_TOKEN wins over GITHUB_TOKEN, as in the CLI
    assert plain["GH_TOKEN"] == LOPEN_ENV["GH_TOKEN"] and "GITHUB_TOKEN" not in plain


def test_no_secret_of_lopens_environment_reaches_a_byok_cli():
    env = cli_environment(LOPEN_ENV, python_dir="/py", provider_base_url="http://x/v1")
    values = set(env.values())
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "LOPEN_PROVIDER__API_KEY", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"):
        assert LOPEN_ENV[name] not in values, name
    assert "DATABASE_URL" not in env and "PYTHONPATH" not in env and "SSH_AUTH_SOCK" not in env


def test_explicit_extra_variables_are_added_last():
    env = cli_environment(LOPEN_ENV, python_dir="/py", extra={"COPILOT_LOG": "debug", "TZ": "UTC"})
    assert env["COPILOT_LOG"] == "debug" and env["TZ"] == "UTC"


def test_known_secrets_are_the_token_variables_secret_named_values_and_the_provider_key():
    secrets = known_secrets(LOPEN_ENV, ["sk-from-config-0123"])
    assert set(secrets) == {
        LOPEN_ENV["GITHUB_TOKEN"],
        LOPEN_ENV["GH_TOKEN"],
        LOPEN_ENV["LOPEN_PROVIDER__API_KEY"],
        LOPEN_ENV["AWS_SECRET_ACCESS_KEY"],
        LOPEN_ENV["OPENAI_API_KEY"],
        "sk-from-config-0123",
    }
    # a short token in a token variable still counts (redaction ignores values under 4 characters)
    assert known_secrets({"GH_TOKEN": "abc123"}) == ["abc123"]
