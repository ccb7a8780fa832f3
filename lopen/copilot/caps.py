"""What one invocation may spend before Lopen stops it (issue 21): its tool calls and its tokens.

A model that loops — the same failing command 120 times — would otherwise spend until the
invocation's timeout. ``InvocationCap`` counts as the session streams (every tool call, a
sub-agent's too; every model call's input and output tokens, as the budgets count them) and says,
once, when a limit is reached; the gateway then aborts the session cleanly — the worktree is kept
and the task stays resumable — and the invocation ends with a ``capped`` error, which the run counts
as a failed attempt of the task.

    cap = InvocationCap(max_turns=100, max_tokens=0)   # 0 = no limit
    cap.tool_call()          # "" while under the limits …
    cap.tokens(1200, 30)     # … the reason, the first time one is reached
"""

from __future__ import annotations


class InvocationCap:
    def __init__(self, max_turns: int = 0, max_tokens: int = 0, tokens_why: str = "") -> None:
        """``tokens_why`` names where ``max_tokens`` comes from (default: the configuration's cap; the run
        passes the module's token budget when less of it is left)."""
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.tokens_why = tokens_why or "copilot.max_tokens_per_invocation"
        self.turns = 0
        self.spent = 0
        self.reached = ""  # why the invocation was stopped ("" = it was not)

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
        """Count one model call's tokens; the reason to stop, the first time the limit is reached."""
        self.spent += input + output
        if self.max_tokens and self.spent >= self.max_tokens:
            return self._reach(
                f"the invocation used {self.spent:,} tokens, the most it could use ({self.tokens_why}): it was stopped"
            )
        return ""

    def _reach(self, why: str) -> str:
        if self.reached:
            return ""
        self.reached = why
        return why
