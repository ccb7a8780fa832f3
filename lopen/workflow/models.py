"""Premium-request accounting by model tier (L5).

A Copilot user prompt costs premium requests on premium models (times the model's multiplier)
and none on the included standard models. BYOK models are billed by their provider, but Lopen
still counts them by name so budgets behave the same offline.
"""

from __future__ import annotations

STANDARD_MODELS = frozenset({"gpt-5-mini", "gpt-4.1", "gpt-4o", "gpt-4o-mini", "raptor-mini"})
MULTIPLIERS = {"claude-opus-4.6": 3.0, "claude-opus-4.5": 3.0, "claude-haiku-4.5": 0.33}


def premium_requests(model: str) -> float:
    """Premium requests one invocation (one user prompt) on ``model`` costs."""
    name = model.lower()
    if name in STANDARD_MODELS or name.endswith("-mini"):
        return 0.0
    return MULTIPLIERS.get(name, 1.0)
