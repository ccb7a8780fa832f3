"""Classifying what went wrong in a model call into the kinds Lopen acts on.

The evidence comes from the SDK's session events (final model-call result, failure details,
the session error) and from exceptions; the CLI has already retried transient failures itself.
"""

from __future__ import annotations

import re

from lopen.copilot.results import ErrorKind, InvocationError

_AUTH = re.compile(r"not authenticated|unauthori[sz]ed|authentication|invalid token|bad credentials|forbidden", re.I)
_MODEL = re.compile(
    r"model[^.]{0,60}(not (found|available|supported)|does not exist|unavailable)|model_not_found", re.I
)
_TRANSIENT = re.compile(r"timed? ?out|connection|transport|temporar|unavailable|overloaded|reset by peer", re.I)


class ErrorEvidence:
    """Failure details gathered while a session runs."""

    def __init__(self) -> None:
        self.final_result: str | None = None
        self.status_code: int | None = None
        self.error_type: str | None = None
        self.error_code: str | None = None
        self.message: str = ""

    def classify(self, model: str, exc: BaseException | None = None) -> InvocationError:
        message = self.message or (str(exc) if exc else "the model call failed")
        return InvocationError(kind=self.kind(message, exc), message=message, model=model)

    def kind(self, message: str, exc: BaseException | None) -> ErrorKind:
        status = self.status_code
        result = self.final_result or ""
        if status in (401, 403) or self.error_type == "authentication" or _AUTH.search(message):
            return ErrorKind.AUTH
        if self.error_code == "model_not_found" or _MODEL.search(message):
            return ErrorKind.MODEL_UNAVAILABLE
        if status == 404 and "model" in message.lower():
            return ErrorKind.MODEL_UNAVAILABLE
        if status == 429 or result == "http_429" or self.error_type == "rate_limit":
            return ErrorKind.RATE_LIMITED
        if result in ("http_5xx", "transport_error") or (status is not None and status >= 500):
            return ErrorKind.TRANSIENT
        if isinstance(exc, TimeoutError | ConnectionError) or _TRANSIENT.search(message):
            return ErrorKind.TRANSIENT
        return ErrorKind.FATAL
