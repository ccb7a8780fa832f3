"""Lopen: builds a software module from its specification by driving GitHub Copilot."""

__version__ = "0.1.0"
