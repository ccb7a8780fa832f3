"""The Copilot CLI's environment, built from an allowlist — and the secrets Lopen knows.

Every command the model runs inherits the CLI's environment, so the CLI must not get Lopen's:
a ``GITHUB_TOKEN``, a BYOK key or a cloud credential in Lopen's environment would be one
``echo $GITHUB_TOKEN`` away from the model. :func:`cli_environment` starts from nothing and
adds only:

- what programs need to run: ``PATH`` (Lopen's own Python first, so the model's shell finds
  the same interpreter and test runner), ``HOME``, ``USER``/``LOGNAME``, ``SHELL``, ``TERM``,
  ``TZ``, ``LANG``/``LANGUAGE``/``LC_*``, ``NO_COLOR``, the ``XDG_*_HOME`` folders (the CLI
  keeps its unpacked code in ``$XDG_CACHE_HOME``);
- what the CLI needs to reach its model endpoint: the proxy and CA-certificate variables;
- ``TMPDIR`` (and ``TMP``/``TEMP``): the model's private temp folder;
- the ``COPILOT_*`` switches Lopen sets itself (``COPILOT_HOME``, and for a BYOK provider
  ``COPILOT_OFFLINE``, ``COPILOT_PROVIDER_BASE_URL``, ``COPILOT_PROVIDER_TYPE``,
  ``COPILOT_MODEL``);
- the GitHub token variable (:data:`AUTH_VARIABLES`) only when the CLI uses GitHub's model
  routing, which needs it; with a BYOK provider it is left out (the provider's key travels in
  the session's configuration over the SDK's pipe, never in the environment).

:func:`known_secrets` lists the exact secret values Lopen knows, for
:func:`events.redaction.register_secrets`: a token echoed by the model is then redacted from
the store and the logs whatever its length or shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

AUTH_VARIABLES: tuple[str, ...] = ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")
"""The variables the Copilot CLI reads a GitHub token from, in its order of preference."""

PASSED: tuple[str, ...] = (
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TZ",
    "LANG",
    "LANGUAGE",
    "NO_COLOR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
)
"""Variables passed through unchanged when Lopen has them (besides ``LC_*``)."""

_NAMED_MIN = 8  # a variable merely *named* like a secret must look like one ("true" is not)
_SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|API_?KEY|SECRET(?:_ACCESS)?_KEY|SECRET|PASSWORD|PASSWD)$")


def cli_environment(
    source: Mapping[str, str],
    *,
    python_dir: str,
    temp_dir: str = "",
    copilot_home: str = "",
    provider_base_url: str = "",
    provider_type: str = "openai",
    model: str = "",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for the Copilot CLI, from Lopen's (``source``) through the allowlist.

    ``extra`` (``GatewayConfig.env``) is added last, as given: it is what the caller chose to
    pass on purpose.
    """
    env = {name: source[name] for name in PASSED if name in source}
    env.update({name: value for name, value in source.items() if name.startswith("LC_")})
    env["PATH"] = ":".join(p for p in (python_dir, source.get("PATH", "/usr/local/bin:/usr/bin:/bin")) if p)
    if temp_dir:
        env.update(TMPDIR=temp_dir, TMP=temp_dir, TEMP=temp_dir)
    if copilot_home:
        env["COPILOT_HOME"] = copilot_home
    if provider_base_url:
        env["COPILOT_OFFLINE"] = "true"
        env["COPILOT_PROVIDER_BASE_URL"] = provider_base_url
        env["COPILOT_PROVIDER_TYPE"] = provider_type or "openai"
        if model:
            env["COPILOT_MODEL"] = model
    else:
        token = next(((name, source[name]) for name in AUTH_VARIABLES if source.get(name)), None)
        if token:
            env[token[0]] = token[1]
    env.update(extra or {})
    return env


def known_secrets(source: Mapping[str, str], also: Iterable[str] = ()) -> list[str]:
    """The secret values in Lopen's environment (the GitHub token variables, and any variable
    named like a token, key, secret or password when at least 8 characters long) and ``also``
    (e.g. the provider's API key)."""
    values = [source[name] for name in AUTH_VARIABLES if source.get(name)]
    values += [v for name, v in source.items() if _SECRET_NAME.search(name.upper()) and len(v) >= _NAMED_MIN]
    values += [v for v in also if v]
    return list(dict.fromkeys(values))
