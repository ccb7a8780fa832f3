"""Small helpers for the words Lopen prints (they live in ``lopen.term``, shared by every face)."""

from __future__ import annotations

from lopen.term import duration, lines_changed, number, plural

__all__ = ["duration", "lines_changed", "number", "plural"]
