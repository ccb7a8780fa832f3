"""Fixtures every test folder shares."""

from __future__ import annotations

import os

import pytest

from lopen.copilot.locate import find_cli
from lopen.errors import LopenError


@pytest.fixture(scope="session")
def cli_path() -> str:
    """The Copilot CLI bin/setup installed. In CI its absence is a failure, not a skip."""
    try:
        return find_cli().path
    except LopenError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the Copilot CLI is required in CI: {exc.what}")
        pytest.skip(f"these tests need the Copilot CLI: {exc.what} — run bin/setup")


@pytest.fixture
def otlp_receiver():
    """A real OTLP/HTTP receiver on a loopback port (tests/otlp_receiver.py)."""
    from otlp_receiver import OtlpReceiver

    with OtlpReceiver() as receiver:
        yield receiver
