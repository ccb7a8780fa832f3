"""Fixtures for end-to-end tests: the real Copilot CLI, the scripted model, a gateway on both."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from lopen.copilot.gateway import Gateway, GatewayConfig, ProviderConfig
from lopen.scripted_model import Playbook, ScriptedModelServer, parse_playbook


@pytest.fixture
def scripted() -> Iterator[Callable[[str | Playbook], ScriptedModelServer]]:
    """Start a scripted model server for a playbook (TOML text or a Playbook)."""
    servers: list[ScriptedModelServer] = []

    def start(playbook: str | Playbook) -> ScriptedModelServer:
        book = parse_playbook(playbook) if isinstance(playbook, str) else playbook
        server = ScriptedModelServer(book).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def gateway_for(cli_path: str, tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    """Start a gateway whose sessions all go to a scripted model server."""
    gateways: list[Gateway] = []

    def start(server: ScriptedModelServer, **overrides: object) -> Gateway:
        config = GatewayConfig(
            cli_path=cli_path,
            default_model=server.playbook.models[0],
            provider=ProviderConfig(base_url=server.url, api_key="sk-scripted-test"),
            copilot_home=str(tmp_path / "copilot-home"),
            retry_base_delay=0.1,
            retry_max_delay=0.5,
        )
        config = msgspec.structs.replace(config, **overrides)
        gateway = Gateway(config).start()
        gateways.append(gateway)
        return gateway

    yield start
    for gateway in gateways:
        gateway.close()
