"""`lopen doctor` says which protection confines the model, and warns when it is the policy alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from lopen.cli.doctor import check_sandbox, sandbox_check, show
from lopen.sandbox import kernel
from lopen.sandbox.kernel import choose


def test_a_working_kernel_sandbox_is_a_check_mark_naming_it(capsys):
    protection = kernel.detect("auto")
    if protection.kind == "policy":
        pytest.skip("no kernel sandbox here")
    show(check_sandbox("auto"))
    line = capsys.readouterr().out
    assert line.startswith("✓ sandbox: ")
    assert ("bubblewrap" if protection.kind == "bwrap" else "Landlock") in line
    assert "writes only in the worktree" in line and "fix:" not in line


def test_the_fallback_to_the_policy_alone_is_a_warning_with_the_fix(capsys):
    result = sandbox_check(choose("auto", ("", "bwrap is not installed"), (0, "this kernel has no Landlock")))
    show(result)
    out = capsys.readouterr().out.splitlines()
    assert result.ok and result.warning  # Lopen still works: doctor does not fail for it
    assert out[0].startswith("! sandbox: the permission policy alone — no kernel sandbox here (bwrap is not installed;")
    assert out[1] == "    fix: install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap)"


def test_the_policy_by_choice_warns_only_that_the_network_is_open(capsys):
    show(check_sandbox("policy"))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "! sandbox: the permission policy alone (sandbox.mode = policy) — the network is not confined with the "
        "permission policy alone: the model's shell can reach any address, this machine's loopback included "
        "(a local MCP server, databases); install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap) "
        "to give it a network of its own that reaches only the model provider"
    )


def test_landlock_before_abi_4_says_plainly_that_the_network_is_not_confined_and_bubblewrap_that_it_is(capsys):
    landlock = sandbox_check(choose("landlock", ("", "bwrap is not installed"), (3, "")))
    assert landlock.warning and "the network is not confined under Landlock ABI 3" in landlock.detail
    bwrap = sandbox_check(choose("bwrap", ("bubblewrap 0.8.0", ""), (0, "")))
    assert not bwrap.warning and "network reaches only the model provider and sandbox.allow_network" in bwrap.detail


def test_an_explicit_bwrap_without_bwrap_fails_with_what_why_and_fix(tmp_path):
    """A real run of the check with `bwrap` missing from PATH (a fresh interpreter: detection is cached)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    code = "from lopen.cli.doctor import check_sandbox, show; show(check_sandbox('bwrap'))"
    env = {**os.environ, "PATH": str(bin_dir), "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "✗ sandbox: sandbox.mode is bwrap but bubblewrap cannot confine the Copilot CLI here: bwrap is not installed",
        "    fix: install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap), "
        "or set sandbox.mode to auto (or landlock)",
    ]


def test_landlock_from_abi_4_confines_the_network_and_says_how(capsys):
    protection = choose("landlock", ("", "bwrap is not installed"), (4, ""))
    assert protection.confines_network and not protection.network_warning
    show(sandbox_check(protection))
    line = capsys.readouterr().out
    assert line.startswith("✓ sandbox: Landlock (ABI 4) confines the Copilot CLI")
    assert "TCP connections reach only Lopen's proxy" in line and "bind no TCP port" in line and "fix:" not in line
