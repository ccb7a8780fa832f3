"""Secrets never enter the store (S7): redact events before they are encoded.

Two rules:
- values shaped like secrets, anywhere in any string: GitHub tokens (``ghp_``,
  ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), ``sk-…`` API keys,
  AWS access key ids, ``Bearer …`` credentials, and ``token=…``/``api_key: …``
  style assignments;
- any value stored under a mapping key named like a secret (``api_key``,
  ``token``, ``secret``, ``password``, ``authorization``, …);
- the exact values Lopen knows are secrets (``register_secrets``: the provider's API key, the
  GitHub token in the environment, …), whatever their length or shape.

Lopen's own structural data is never rewritten: an event type lists such fields in its
``redaction_exempt`` (section names and hashes of an approval, a commit's sha and tree).

``redact_text`` is public so that logs can use the same rules.
"""

from __future__ import annotations

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
    r"|\bAKIA[0-9A-Z]{16}\b)"
)
_BEARER = re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_ASSIGNMENT = re.compile(
    r"((?:api[_-]?key|access[_-]?key|secret|password|passwd|token)(?:_[A-Za-z]+)*[\"']?\s*[=:]\s*[\"']?)"
    r"(?!\[REDACTED\])(?!\$)([^\s\"'&,;]{4,})",  # a $VARIABLE names a secret, it is not one
    re.IGNORECASE,
)
_SECRET_KEY = re.compile(
    r"api_?key|secret|passw(?:or)?d|private_?key|access_?key|authorization|credential|cookie"
    r"|(?:^|_)(?:token|auth|pwd)(?:_|$)"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Every rule above needs one of these words (lower-cased) in the text: a cheap test first.
_WORDS = r"gh[pousr]_|github_pat_|sk-|akia|bearer|basic|token|secret|passw|pwd|key|auth|credential|cookie"
_QUICK = re.compile(_WORDS)
_VALUE_HINT = re.compile("gh[pousr]_|github_pat_|sk-|akia")
_ASSIGNMENT_HINT = re.compile("key|secret|passw|token")
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


def redact_text(text: str) -> str:
    """Replace secret-shaped substrings of ``text`` with ``[REDACTED]``.

    Each rule runs only when the words it needs are in the text (plain substring tests are
    far cheaper than the rules' regular expressions on long tool output).
    """
    if _known_re is not None:
        text = _known_re.sub(REDACTED, text)
    low = text.lower()
    if _VALUE_HINT.search(low):
        text = _VALUE.sub(REDACTED, text)
    if "bearer" in low or "basic" in low:
        text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    if ("=" in text or ":" in text) and _ASSIGNMENT_HINT.search(low):
        text = _ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, text)
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
