"""What a face needs to draw a module live: the one fold's types and its per-concern folds (tokens,
session status), re-exported so that a face depends on ``lopen.app`` alone and never on ``events``'
internals. The folds themselves live in ``events`` (one fold per truth); nothing here decides anything.
"""

from __future__ import annotations

from events.fold import ComponentNode, ModuleState, TaskNode
from events.folds.sessions import LIFECYCLE
from events.folds.tokens import TokenTotals, dollars

__all__ = ["LIFECYCLE", "ComponentNode", "ModuleState", "TaskNode", "TokenTotals", "dollars"]
