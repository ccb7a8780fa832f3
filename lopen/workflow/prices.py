"""What a model call costs in money, and the premium requests a prompt costs (issue 23).

Each model call is priced once, the moment its usage is recorded: ``TokensUsed.cost`` holds the US
dollars it cost at the prices then in force (like ``premium``), so the token fold
(``events.folds.tokens.TokenTotals``) only sums, a price change never rewrites history, and every
view shows the same figure. A model with no price costs 0 and its call is counted ``unpriced``.

The price of a call, per million tokens: input tokens not read from the cache at ``input``, cached
ones at ``cached_input`` (the provider reports ``cache_read`` as part of ``input``, OpenAI's way),
output tokens at ``output``:

>>> price = Price(input=3.0, cached_input=0.3, output=15.0)
>>> round(call_cost(price, input=10_000, output=1_000, cache_read=4_000), 6)
0.0342

``DEFAULT_PRICES`` are **defaults to check against the provider's current list prices**, not a
quote: the public per-token list prices of each model's maker when this table was written, and
GitHub Copilot's premium-request multipliers. ``budget.prices`` entries replace a model's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

from lopen.config.model import Price

__all__ = ["DEFAULT_PRICES", "Price", "call_cost", "price_of", "prices"]

PER = 1_000_000

DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4.6": Price(input=5.0, cached_input=0.5, output=25.0, premium=3.0),
    "claude-opus-4.5": Price(input=5.0, cached_input=0.5, output=25.0, premium=3.0),
    "claude-sonnet-4.5": Price(input=3.0, cached_input=0.3, output=15.0, premium=1.0),
    "claude-haiku-4.5": Price(input=1.0, cached_input=0.1, output=5.0, premium=0.33),
    "gpt-5": Price(input=1.25, cached_input=0.125, output=10.0, premium=1.0),
    "gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.0, premium=0.0),
    "gpt-4.1": Price(input=2.0, cached_input=0.5, output=8.0, premium=0.0),
    "gpt-4o": Price(input=2.5, cached_input=1.25, output=10.0, premium=0.0),
}


def prices(configured: Mapping[str, Price]) -> dict[str, Price]:
    """The table in force: ``budget.prices`` over the defaults."""
    return {**DEFAULT_PRICES, **configured}


def price_of(table: Mapping[str, Price], model: str) -> Price | None:
    """A model's price (its name compared case-blind), or None: unpriced."""
    return table.get(model) or table.get(model.lower())


def call_cost(price: Price, *, input: int, output: int, cache_read: int = 0) -> float:
    """US dollars one model call costs at ``price``."""
    cached = min(cache_read, input)
    return ((input - cached) * price.input + cached * price.cached_input + output * price.output) / PER
