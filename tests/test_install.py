"""`lopen setup` (lopen.copilot.install): where the Copilot CLI goes and what a user without npm is told.
The install itself, with npm, runs in tests/e2e/test_wheel.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lopen.copilot import install
from lopen.copilot.locate import binary_in, find_cli
from lopen.errors import LopenError


def test_a_checkout_keeps_the_cli_where_bin_setup_puts_it() -> None:
    assert install.from_checkout()  # the tests run from a checkout
    assert install.install_dir("1.0.102") == install.CHECKOUT / ".copilot-cli"


def test_a_wheel_install_keeps_one_cli_per_version_in_the_users_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(install, "from_checkout", lambda root=install.CHECKOUT: False)
    env = {"HOME": str(tmp_path)}
    assert install.install_dir("1.0.102", env) == tmp_path / ".cache" / "lopen" / "copilot-cli" / "1.0.102"
    xdg = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert install.install_dir("2.0.0", xdg) == tmp_path / "xdg" / "lopen" / "copilot-cli" / "2.0.0"


def test_without_npm_the_user_is_told_the_exact_npm_line(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(install, "from_checkout", lambda root=install.CHECKOUT: False)
    env = {"HOME": str(tmp_path), "PATH": str(tmp_path / "no-bin")}
    with pytest.raises(LopenError) as caught:
        install.install("1.0.102", binary_in, say=lambda line: None, env=env)
    folder = tmp_path / ".cache" / "lopen" / "copilot-cli" / "1.0.102"
    assert caught.value.what == "npm is not installed, so the Copilot CLI 1.0.102 cannot be installed"
    assert f"npm install --prefix {folder} --no-audit --no-fund @github/copilot@1.0.102" in caught.value.how
    assert "checkout" not in str(caught.value.how) and "bin/setup" not in str(caught.value.how)
    assert not folder.exists()  # nothing half made


def test_without_any_cli_find_cli_says_to_run_lopen_setup(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(install, "from_checkout", lambda root=install.CHECKOUT: False)
    monkeypatch.setenv("COPILOT_CLI_EXTRACT_DIR", str(tmp_path / "sdk-cache"))  # the SDK's own download cache: empty
    with pytest.raises(LopenError) as caught:
        find_cli("", {"HOME": str(tmp_path)})
    assert caught.value.what == "the Copilot CLI is not installed"
    assert "`lopen setup`" in caught.value.how and "checkout" not in caught.value.how
