"""Premium-request accounting by model tier (L5).

A Copilot user prompt costs premium requests on premium models (times the model's multiplier)
and none on the included standard models. BYOK models are billed by their provider, but Lopen
still counts them by name so budgets behave the same offline.
"""

from __future__ import annotations

from collections.abc import Mapping

from lopen.config.model import Price

STANDARD_MODELS = frozenset({"gpt-5-mini", "gpt-4.1", "gpt-4o", "gpt-4o-mini", "raptor-mini"})
MULTIPLIERS = {"claude-opus-4.6": 3.0, "claude-opus-4.5": 3.0, "claude-haiku-4.5": 0.33}


def premium_requests(model: str, prices: Mapping[str, Price] | None = None) -> float:
    """Premium requests one invocation (one user prompt) on ``model`` costs: the multiplier of its
    price (``lopen.workflow.prices``) when it has one, else the rule below."""
    price = (prices or {}).get(model) or (prices or {}).get(model.lower())
    if price is not None and price.premium is not None:
        return price.premium
    name = model.lower()
    if name in STANDARD_MODELS or name.endswith("-mini"):
        return 0.0
    return MULTIPLIERS.get(name, 1.0)


def premium_for_call(
    model: str, *, first_of_attempt: bool, agent_id: str = "", prices: Mapping[str, Price] | None = None
) -> float:
    """The one premium rule, applied per model call: the first call of a session attempt (the user
    prompt) costs ``premium_requests(model)``; the calls the model makes on its own while it works
    (tool turns, sub-agents) cost nothing. A retried attempt is a new prompt and costs again."""
    if not first_of_attempt or agent_id:
        return 0.0
    return premium_requests(model, prices)
