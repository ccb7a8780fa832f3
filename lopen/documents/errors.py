"""The one error type of the documents package."""

from __future__ import annotations

from lopen.errors import LopenError


class DocumentError(LopenError):
    """A document problem stated so a person or the model can act on it.

    Tool handlers raise it; the gateway turns it into a failed tool result whose text is the message.
    On the command line it prints like every other user error.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, how="check the module name and its files under docs/requirements/<module>/")
