"""The one error type of the documents package."""

from __future__ import annotations


class DocumentError(Exception):
    """A document problem stated so a person or the model can act on it.

    Tool handlers raise it; the gateway turns it into a failed tool result whose text is the message.
    """
