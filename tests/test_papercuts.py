"""Issue 12's papercuts: bin/ scripts without an activated venv, `store.url = sqlite:///…`, no
traceback from `config set`, plurals."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from events import catalogue as ev
from events.recorded import module_stream
from events.store import EventStore
from lopen.config import load_settings
from lopen.errors import LopenError
from lopen.text import plural

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
PYTHON_SCRIPTS = sorted(
    p.name
    for p in (REPO / "bin").iterdir()
    if p.is_file() and p.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3")
)


def lopen(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "HOME": str(root), "NO_COLOR": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=full, capture_output=True, text=True, timeout=120
    )


# -- bin/ -------------------------------------------------------------------------------------------


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to run the scripts with")
@pytest.mark.parametrize("script", PYTHON_SCRIPTS)
def test_bin_scripts_run_with_the_projects_venv_without_activation(script: str) -> None:
    """`bin/<script>` started by any python3 (here the system's, which lacks Lopen's dependencies)
    re-runs itself with .venv's interpreter."""
    assert SYSTEM_PYTHON is not None
    done = subprocess.run(
        [SYSTEM_PYTHON, str(REPO / "bin" / script), "--help"],
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "No module named" not in done.stderr and done.stdout.startswith("usage: ")


def test_every_python_script_in_bin_is_covered() -> None:
    assert {"bench-store", "bench-gateway", "bench-documents", "bench-workflow", "scripted-model"} <= set(
        PYTHON_SCRIPTS
    )


# -- store.url ------------------------------------------------------------------------------------


def test_store_url_accepts_sqlite_paths(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    out = lopen(tmp_path, "config", "set", "store.url", "sqlite:///data/lopen.sqlite")
    assert out.returncode == 0, out.stderr
    assert load_settings(tmp_path, env={}).store.url == "sqlite:///data/lopen.sqlite"
    listed = lopen(tmp_path, "session", "list")
    assert listed.returncode == 0, listed.stderr
    assert (tmp_path / "data" / "lopen.sqlite").is_file()  # a relative path is from the project root
    absolute = tmp_path / "elsewhere.sqlite"
    assert load_settings(tmp_path, env={"LOPEN_STORE__URL": f"sqlite:///{absolute}"}).store.url.endswith(
        "elsewhere.sqlite"
    )
    with pytest.raises(LopenError) as caught:
        load_settings(tmp_path, env={"LOPEN_STORE__URL": "mysql://db/lopen"})
    assert "sqlite:///<path>" in caught.value.how


def test_a_relative_sqlite_url_is_the_same_store_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    with EventStore.open(tmp_path, "sqlite:///data/lopen.sqlite") as store:
        store.append(module_stream("p", "m"), [ev.SessionStarted(session_id="m-20261126-1")])
    with EventStore.open(tmp_path, "sqlite:///data/lopen.sqlite") as store:
        assert store.last_seq() == 1
    assert (tmp_path / "data" / "lopen.sqlite").is_file()


# -- config set --------------------------------------------------------------------------------------


def test_config_set_that_cannot_write_says_why_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".lopen" / "config.json.tmp").mkdir(parents=True)  # where the new file would be written
    out = lopen(tmp_path, "config", "set", "models.building", "gpt-5")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"error: cannot write models.building to {tmp_path}/.lopen/config.json")
    assert "Is a directory" in out.stderr
    assert "fix: make" in out.stderr and "export LOPEN_MODELS__BUILDING=gpt-5" in out.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_config_set_in_a_read_only_folder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".lopen").mkdir()
    (tmp_path / ".lopen").chmod(0o555)
    try:
        out = lopen(tmp_path, "config", "set", "models.building", "gpt-5")
    finally:
        (tmp_path / ".lopen").chmod(0o755)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "Permission denied" in out.stderr


# -- plurals ---------------------------------------------------------------------------------------------


def test_plural() -> None:
    assert plural(1, "task") == "1 task"
    assert plural(0, "task") == "0 tasks"
    assert plural(12_000, "event") == "12,000 events"
    assert plural(2, "criterion", "criteria") == "2 criteria"


def test_numbers_as_people_write_them() -> None:
    from lopen.term import number

    assert [number(v) for v in (1_000_000, 1e6, 2.5, 1 / 3, 12, 0.0, 1234.5)] == [
        "1,000,000",
        "1,000,000",
        "2.5",
        "0.33",
        "12",
        "0",
        "1,234.5",
    ]


def test_cli_messages_count_in_the_singular(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".lopen").mkdir()
    (tmp_path / ".lopen" / "project-id").write_text("p\n")
    with EventStore.open(tmp_path) as store:
        for n in (1, 2):
            sid = f"m-20261126-{n}"
            store.append(
                module_stream("p", "m"), [ev.SessionStarted(session_id=sid), ev.SessionCompleted(session_id=sid)]
            )
    pruned = lopen(tmp_path, "session", "prune", "--keep", "1")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines()[-1] == "pruned 1 session; kept the newest 1 completed one of each module"
    rebuilt = lopen(tmp_path, "projections", "rebuild")
    lines = rebuilt.stdout.splitlines()
    assert lines[0].startswith("rebuilt 3 projections from 6 events")  # 4, a deletion and who asked for it
    assert [line.split() for line in lines[1:4]] == [
        ["sessions", "2", "rows"],
        ["tokens", "0", "rows"],
        ["plan", "1", "row"],
    ]
