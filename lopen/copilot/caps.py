"""What one invocation may spend before Lopen stops it (issues 21 and 23): its tool calls, its tokens,
and what is left of the budgets.

A model that loops — the same failing command 120 times — would otherwise spend until the
invocation's timeout. ``InvocationCap`` counts as the session streams (every tool call, a
sub-agent's too; every model call's input and output tokens, as the budgets count them) and says,
once, when a limit is reached; the gateway then aborts the session cleanly — the worktree is kept
and the task stays resumable. A cap of its own ends the invocation with a ``capped`` error (the run
counts a failed attempt of the task); a budget ends it with a ``budget`` error (no failure: the run
pauses with the figures).

The budgets are the caller's: ``budget()`` is asked after every model call's usage was handed to the
caller (who has recorded it by then) and answers the figures of a budget reached, or "". The
gateway knows nothing of prices or premium requests; the run does (``lopen.workflow.budgets``).

    cap = InvocationCap(max_turns=100, max_tokens=0)   # 0 = no limit
    cap.tool_call()          # "" while under the limits …
    cap.tokens(1200, 30)     # … the reason, the first time one is reached
"""

from __future__ import annotations

from collections.abc import Callable


class InvocationCap:
    def __init__(self, max_turns: int = 0, max_tokens: int = 0, budget: Callable[[], str] | None = None) -> None:
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.budget = budget
        self.turns = 0
        self.spent = 0
        self.reached = ""  # why the invocation was stopped ("" = it was not)
        self.by_budget = False  # a budget stopped it, not a cap of its own

    def tool_call(self) -> str:
        """Count one tool call; the reason to stop, the first time a limit is reached ("" otherwise)."""
        self.turns += 1
        if self.max_turns and self.turns >= self.max_turns:
            return self._reach(
                f"the invocation made {self.turns} tool calls, the most one may make "
                "(copilot.max_turns_per_invocation): it was stopped"
            )
        return ""

    def tokens(self, input: int, output: int) -> str:
        """Count one model call's tokens; the reason to stop, the first time a limit or budget is reached."""
        self.spent += input + output
        if self.max_tokens and self.spent >= self.max_tokens:
            return self._reach(
                f"the invocation used {self.spent:,} tokens, the most one may use "
                "(copilot.max_tokens_per_invocation): it was stopped"
            )
        figures = self.budget() if self.budget is not None and not self.reached else ""
        if figures:
            self.by_budget = True
            return self._reach(figures)
        return ""

    def _reach(self, why: str) -> str:
        if self.reached:
            return ""
        self.reached = why
        return why
