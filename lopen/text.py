"""Small helpers for the words Lopen prints (they live in ``lopen.term``, shared by every face)."""

from __future__ import annotations

from lopen.term import number, plural

__all__ = ["number", "plural"]
