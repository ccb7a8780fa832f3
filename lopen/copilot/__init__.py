"""The Copilot gateway: the one Copilot client of the process and fresh sessions on it.

Importing this package is cheap; the Copilot SDK is imported only when a gateway starts.
"""

from lopen.copilot.results import (
    ContextWindow,
    ErrorKind,
    InvocationError,
    InvocationRequest,
    InvocationResult,
    ToolCallRecord,
    Usage,
)
from lopen.copilot.tools import LopenTool, NoArguments

__all__ = [
    "ContextWindow",
    "ErrorKind",
    "InvocationError",
    "InvocationRequest",
    "InvocationResult",
    "LopenTool",
    "NoArguments",
    "ToolCallRecord",
    "Usage",
]
