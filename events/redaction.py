"""Secrets never enter the store (S7), and nothing else is rewritten: events are redacted before
they are encoded, and only what is a secret is replaced with ``[REDACTED]`` — the model's code,
commands and edits are kept byte for byte, whatever names they use (``password``, ``token``, …).

What is a secret:

- the exact values Lopen knows are secrets (``register_secrets``: the provider's API key, the GitHub
  token in the environment, …), whatever their length or shape;
- credential formats no ordinary text has: GitHub tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``,
  ``ghr_``, ``github_pat_``), ``sk-…`` API keys (OpenAI, Anthropic), AWS access key ids
  (``AKIA…``/``ASIA…``), Slack tokens (``xox…-``), Google API keys (``AIza…``), JSON web tokens
  (``eyJ….eyJ….…``), PEM private key blocks, and the credentials of ``Bearer …`` and ``Basic …``
  (a Basic credential is the base64 of ``user:password``; a Bearer one is not a plain word);
- a value assigned to a secret-like name (``api_key``, ``secret``, ``password``, ``token``, …) when
  it is a *value*, not code: a quoted string literal of 8 or more characters, without spaces, that
  holds a digit or a symbol (``"hunter2x"``); an unquoted value in an environment or ``.env`` line
  (``API_KEY=…``, ``export TOKEN=…``); any other unquoted value only when it looks random (12 or more
  characters mixing letters and digits, no call, index or attribute). An identifier, a type hint, a
  function call (``password: str``, ``token = secrets.token_urlsafe(32)``,
  ``password = hash_password(token)``) and a ``$VARIABLE`` are never secrets;
- any value stored under a mapping key named like a secret (``api_key``, ``GITHUB_TOKEN``,
  ``password``, ``authorization``, …).

Lopen's own structural data is never rewritten: an event type lists such fields in its
``redaction_exempt`` (section names and hashes of an approval, a commit's sha and tree).

``redact_text`` is public so that logs and spans use the same rules.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Iterable
from typing import Any

import msgspec

REDACTED = "[REDACTED]"

_VALUE = re.compile(
    r"(?:gh[pousr]_[A-Za-z0-9]{16,}"
    r"|github_pat_[A-Za-z0-9_]{16,}"
    r"|\bsk-[A-Za-z0-9_-]{12,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
_PEM = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)", re.DOTALL)
_BEARER = re.compile(r"\b(Bearer|Basic)(\s+)([A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
_NAME = r"(?:api[_-]?key|access[_-]?key|secret|password|passwd|token)(?:_[A-Za-z]+)*"
# A secret-like name, what assigns to it, and the value: a quoted literal, or the unquoted rest.
_ASSIGNMENT = re.compile(
    rf"((?<![A-Za-z0-9_$])(?:export\s+)?[A-Za-z0-9_]*?{_NAME}[\"']?\s*[=:]\s*)"
    r"(?:([\"'])([^\"'\s]*)\2|(?![\"'])([^\s\"'&,;]+))",
    re.IGNORECASE,
)
_ENV_LINE = re.compile(r"^(?:export\s+)?[A-Z][A-Z0-9_]*=$")
_RANDOM_CHARS = re.compile(r"[A-Za-z0-9+/=_~.-]+")
_SECRET_KEY = re.compile(
    r"api_?key|secret|passw(?:or)?d|private_?key|access_?key|authorization|credential|cookie"
    r"|(?:^|_)(?:token|auth|pwd)(?:_|$)"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Every rule above needs one of these words (lower-cased) in the text: a cheap test first.
_WORDS = (
    r"gh[pousr]_|github_pat_|sk-|akia|asia|xox|aiza|eyj|bearer|basic|token|secret|passw|pwd|key|auth|credential"
    r"|cookie"
)
_QUICK = re.compile(_WORDS)
_VALUE_HINT = re.compile("gh[pousr]_|github_pat_|sk-|akia|asia|xox|aiza|eyj")
# Every match of ``_ASSIGNMENT`` holds one of the names right before its ``=``/``:`` (lower-cased): a prompt or a
# result that only *mentions* a token (``an expired token is refused``) is not run through the rule, whose
# lazy scan costs ~0.4 ms on 5 kB of text.
_ASSIGNMENT_HINT = re.compile(r"(?:key|secret|passw(?:or)?d|token)(?:_[a-z]+)*[\"']?\s*[=:]")
_QUICK_BYTES = re.compile(_WORDS.encode())


MIN_KNOWN_SECRET = 4  # shorter "secrets" would redact ordinary words
_known: set[str] = set()
_known_lock = threading.Lock()
_known_re: re.Pattern[str] | None = None
_known_bytes: tuple[bytes, ...] = ()


def register_secrets(values: Iterable[str]) -> None:
    """Remember exact secret values (from the configuration and the environment) to redact wherever
    they appear; values shorter than ``MIN_KNOWN_SECRET`` characters are ignored."""
    global _known_re, _known_bytes
    with _known_lock:
        fresh = {v for v in values if v and len(v) >= MIN_KNOWN_SECRET and v != REDACTED} - _known
        if not fresh:
            return
        _known.update(fresh)
        ordered = sorted(_known, key=len, reverse=True)  # longest first: a secret inside another
        _known_re = re.compile("|".join(re.escape(v) for v in ordered))
        _known_bytes = tuple(v.encode() for v in ordered)


def forget_secrets() -> None:
    """Forget every registered secret (tests)."""
    global _known_re, _known_bytes
    with _known_lock:
        _known.clear()
        _known_re, _known_bytes = None, ()


def is_secret_key(key: str) -> bool:
    """True for mapping keys whose values are secrets: ``api_key``, ``GITHUB_TOKEN``, ``apiKey``…"""
    if not _QUICK.search(key.lower()):
        return False
    return bool(_SECRET_KEY.search(_CAMEL.sub("_", key).lower().replace("-", "_")))


def _credential(scheme: str, value: str) -> bool:
    """Whether ``value`` after ``Bearer``/``Basic`` is a credential rather than a word of prose."""
    if scheme.lower() == "basic":
        try:
            return b":" in base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except (binascii.Error, ValueError):
            return False
    return not value.isalpha() or not (value.islower() or value.istitle())


def _is_secret_value(lead: str, quote: str, value: str) -> bool:
    """Whether ``value``, assigned by ``lead`` (``API_KEY=``, ``password: ``…), is a secret."""
    if len(value) < MIN_KNOWN_SECRET or value.startswith("$") or value == REDACTED:
        return False  # a $VARIABLE names a secret, it is not one
    if quote:  # a string literal: a password, a key — not a word
        return len(value) >= 8 and not value.isalpha() and not value.startswith(("<", "{", "%"))
    if _ENV_LINE.match(lead):  # API_KEY=… in a shell or a .env file
        return True
    return (
        len(value) >= 12
        and _RANDOM_CHARS.fullmatch(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and "." not in value.strip(".")
        and not re.fullmatch(r"[a-z]+(?:_[a-z0-9]+)+", value)  # a snake_case identifier
    )


def _assignment(m: re.Match[str]) -> str:
    lead, quote = m.group(1), m.group(2) or ""
    value = m.group(3) if quote else m.group(4)
    if not _is_secret_value(lead, quote, value):
        return m.group(0)
    return f"{lead}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """Replace the secrets in ``text`` with ``[REDACTED]`` (see the module's docstring).

    Each rule runs only when the words it needs are in the text (plain substring tests are
    far cheaper than the rules' regular expressions on long tool output).
    """
    if _known_re is not None:
        text = _known_re.sub(REDACTED, text)
    low = text.lower()
    if "private key-----" in low:
        text = _PEM.sub(REDACTED, text)
    if _VALUE_HINT.search(low):
        text = _VALUE.sub(REDACTED, text)
    if "bearer" in low or "basic" in low:
        text = _BEARER.sub(
            lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}" if _credential(m.group(1), m.group(3)) else m.group(0), text
        )
    if ("=" in text or ":" in text) and _ASSIGNMENT_HINT.search(low):
        text = _ASSIGNMENT.sub(_assignment, text)
    return text


def might_hold_secret(encoded: bytes, start: int = 0) -> bool:
    """Fast pre-check on an encoded event from ``start`` (past its type tag, which would match
    ``TokensUsed``); false means it certainly holds no secret."""
    if _known_bytes and any(secret in encoded for secret in _known_bytes):
        return True
    return _QUICK_BYTES.search(encoded.lower(), start) is not None


def redact(value: Any) -> Any:
    """Return ``value`` with secrets redacted; structs are rebuilt only when something changed."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, msgspec.Struct):
        changes = {}
        exempt: frozenset[str] = getattr(type(value), "redaction_exempt", frozenset())
        for name in value.__struct_fields__:
            if name in exempt:
                continue
            old = getattr(value, name)
            new = redact(old)
            if new is not old and new != old:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and is_secret_key(k) else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    return value
