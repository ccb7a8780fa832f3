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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``needs_engine`` drive a whole run through the workflow engine, which is being
    rewritten: they are skipped until it lands. Run them with LOPEN_ENGINE_READY=1; at integration,
    remove the marker (and this hook once no test carries it)."""
    if os.environ.get("LOPEN_ENGINE_READY"):
        return
    skip = pytest.mark.skip(reason="ENGINE: needs the rewritten workflow engine (LOPEN_ENGINE_READY=1 runs it)")
    for item in items:
        if "needs_engine" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def otlp_receiver():
    """A real OTLP/HTTP receiver on a loopback port (tests/otlp_receiver.py)."""
    from otlp_receiver import OtlpReceiver

    with OtlpReceiver() as receiver:
        yield receiver
