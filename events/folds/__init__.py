"""The folds: each truth of a module's history is folded once, here, and read everywhere else.

- ``tokens``: ``TokenTotals``, the one sum of ``TokensUsed`` (the tokens projection, the Metrics
  actor, telemetry's metrics and spans, the gateway's tally and the TUI all add through it).
- ``sessions``: a session's status (running | paused | completed | failed | deleted), read by
  ``ModuleState``, the sessions projection and the TUI.
- ``plan``, ``approval``, ``scopes``, ``git``, ``claims``, ``messages``, ``invocations``: the
  concerns of ``events.fold.ModuleState``. Each module holds, per event type, the ``Rule`` that gives
  the event its meaning for that concern: its *check* (why it would contradict the state) beside its
  *effect* (how it changes it). ``events.fold`` composes them into one dispatcher (``rules.compose``).

This package imports nothing of ``events.fold`` at run time (only for type hints), so the fold can
import every concern without a cycle.
"""
