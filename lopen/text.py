"""Small helpers for the words Lopen prints."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``plural(1, "task")`` → ``"1 task"``; ``plural(3, "task")`` → ``"3 tasks"``;
    ``plural(2, "criterion", "criteria")`` → ``"2 criteria"``. Thousands are separated: ``"12,000 events"``."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
