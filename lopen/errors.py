"""User-facing errors: every failure says what failed, why, and how to fix it."""

from __future__ import annotations


class LopenError(Exception):
    """An error a user can act on. The CLI prints it without a traceback.

    ``exit_code`` is 1 for failures and 2 when a person must intervene.
    """

    exit_code: int = 1

    def __init__(self, what: str, why: str = "", how: str = "", *, exit_code: int | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.how = how
        if exit_code is not None:
            self.exit_code = exit_code

    def render(self) -> str:
        lines = [f"error: {self.what}"]
        if self.why:
            lines.append(f"  why: {self.why}")
        if self.how:
            lines.append(f"  fix: {self.how}")
        return "\n".join(lines)


class InterventionRequired(LopenError):
    """The run stopped because a person must decide (exit code 2)."""

    exit_code = 2
