"""Installed as Python tools are installed (issue 23): a wheel built from this working tree, installed
into a fresh virtual environment with an empty HOME, sets itself up with `lopen setup` (the Copilot
CLI with npm, into the user's cache) and runs its own demo — no checkout, no `bin/setup`.

The fresh environment gets Lopen from the wheel only; its dependencies are borrowed from the test's
environment (a path line), so nothing but the Copilot CLI is downloaded. npm is pointed at the real
npm cache, which `bin/setup` filled, so the install is offline where it can be.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from lopen.copilot.locate import pinned_cli_version

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def run(
    *command: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in command], env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def build_wheel(into: Path) -> Path:
    """The wheel of the working tree as it is (tracked and new files), built as pip builds one."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO).stdout
    source = into / "source"
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", into / "dist", source)
    assert built.returncode == 0, built.stderr
    (wheel,) = (into / "dist").glob("lopen-*.whl")
    return wheel


def fresh_environment(into: Path, wheel: Path) -> Path:
    venv = into / "venv"
    made = run(getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    clean = {"PATH": "/usr/bin:/bin"}  # no PYTHONPATH, and run outside the checkout: only what is installed
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", env=clean).stdout.strip()
    Path(purelib, "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    installed = run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel)
    assert installed.returncode == 0, installed.stderr
    where = run(python, "-c", "import lopen; print(lopen.__file__)", env=clean, cwd=into).stdout.strip()
    assert where.startswith(str(venv)), f"lopen was imported from {where}, not from the wheel"
    return venv / "bin" / "lopen"


def test_a_wheel_in_a_fresh_environment_with_an_empty_home_sets_itself_up_and_runs_the_demo(tmp_path: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (bin/setup needs it too)")
    lopen = fresh_environment(tmp_path, build_wheel(tmp_path))
    home = tmp_path / "home"
    home.mkdir()
    cache = run(npm, "config", "get", "cache").stdout.strip()
    env = {
        "PATH": f"{Path(npm).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "npm_config_cache": cache,  # the tarball bin/setup fetched: offline where it can be
        "npm_config_prefer_offline": "true",
    }
    pinned = pinned_cli_version()

    before = run(lopen, "demo", env=env, cwd=tmp_path)
    assert before.returncode != 0
    assert "the Copilot CLI is not installed" in before.stderr and "lopen setup" in before.stderr
    assert not any(word in (before.stdout + before.stderr) for word in ("checkout", "bin/setup", "Traceback"))
    version = run(lopen, "--version", env=env).stdout
    assert f"Copilot CLI {pinned} (not installed by Lopen: run `lopen setup`)" in version

    setup = run(lopen, "setup", env=env, cwd=tmp_path)
    assert setup.returncode == 0, setup.stderr
    folder = home / ".cache" / "lopen" / "copilot-cli" / str(pinned)
    assert f"the Copilot CLI {pinned} is installed: {folder}" in setup.stdout
    again = run(lopen, "setup", env=env, cwd=tmp_path)
    assert again.returncode == 0 and "installing" not in again.stdout  # once per version
    assert run(lopen, "--version", env=env).stdout.endswith(f"Copilot CLI {pinned} (installed)\n")

    demo = run(lopen, "demo", env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "git log -p main..lopen/slugify" in demo.stdout
    # figures as people write them (issue 24): "tokens: 364,976 in", never "364976"
    assert re.search(
        r"^tokens: \d{1,3}(,\d{3})+ in, [\d,]+ out, \d+ premium requests?, \d+ invocations? ", demo.stdout, re.M
    )
    assert not any(word in demo.stdout + demo.stderr for word in ("bin/setup", "Traceback"))
    assert os.access(folder, os.R_OK)
