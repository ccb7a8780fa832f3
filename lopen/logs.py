"""Where the Copilot SDK's log lines go: to ``.lopen/logs/copilot-sdk.log``, never to the terminal.

The SDK logs through Python's ``logging`` (``copilot.*``) — the Copilot CLI's own stderr lines among
them (``[CLI] …`` warnings, e.g. for a model the provider does not know). With no handler configured,
Python prints warnings on stderr, in the middle of Lopen's output. Lopen reports what matters itself,
classified (what/why/fix), so ``quiet_sdk_logs`` sends the SDK's records to a file in the project
(created only when something is logged; secrets redacted), or nowhere outside a project.
``LOPEN_DEBUG=1`` (``lopen --debug``) leaves them on the terminal.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

SDK_LOGGERS = ("copilot",)
LOG_FILE = Path(".lopen") / "logs" / "copilot-sdk.log"


class _Redact(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        from events.redaction import redact_text

        record.msg = redact_text(record.getMessage())
        record.args = ()
        if record.exc_info:
            import traceback

            record.msg += "\n" + redact_text("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        return True


class _LazyFile(logging.FileHandler):
    """A file handler that creates its folder on the first record and never complains on stderr."""

    def _open(self):  # type: ignore[no-untyped-def]
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()

    def handleError(self, record: logging.LogRecord) -> None:  # a log we cannot write is not an error
        pass


def quiet_sdk_logs(root: Path | None) -> Path | None:
    """Route the SDK's log records away from the terminal; return the file they go to (None: nowhere)."""
    if os.environ.get("LOPEN_DEBUG"):
        return None
    path = root / LOG_FILE if root is not None else None
    handler: logging.Handler = _LazyFile(path, encoding="utf-8", delay=True) if path else logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_Redact())
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.propagate = False
    return path
