"""User-facing errors: every failure says what failed, why, and how to fix it."""

from __future__ import annotations

from events.errors import Problem


class LopenError(Problem):
    """An error a user can act on. The CLI prints it without a traceback.

    ``exit_code`` is 1 for failures and 2 when a person must intervene.
    """

    exit_code: int = 1

    def __init__(self, what: str, why: str = "", how: str = "", *, exit_code: int | None = None) -> None:
        super().__init__(what, why, how)
        if exit_code is not None:
            self.exit_code = exit_code


class InterventionRequired(LopenError):
    """The run stopped because a person must decide (exit code 2)."""

    exit_code = 2
