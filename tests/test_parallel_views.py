"""The views of parallel work (issue 14): `lopen session show` lists the components side by side with
their worker, lease, state and branch; `lopen replay` names the component on every line of interleaved
lanes. A module history written through the journal into a real SQLite store, then the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest
from story import make_project

from events import catalogue as ev
from events.journal import Journal
from events.store import EventStore

PROJECT, MODULE = "story", "slugify"
NOW = time.time()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    with EventStore.open(root) as store:
        j = Journal(store, PROJECT, MODULE)
        j.record(ev.SpecApproved(spec_hash="ab" * 16, approver="Ann"))
        j.open_session(ev.SessionStarted(lopen_version="0.1.0", command="run"), today=date(2026, 11, 26))
        j.record(
            ev.BranchEnsured(branch="lopen/slugify", base="b" * 40, worktree="/w/slugify"),
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="core"), ev.ComponentSpec(name="cli"))),
            ev.TasksRecorded(component="core", tasks=(ev.TaskSpec(id="core/1", name="Normalize"),)),
            ev.TasksRecorded(component="cli", tasks=(ev.TaskSpec(id="cli/1", name="Entry point"),)),
        )
        for lane, component in ((1, "core"), (2, "cli")):
            j.record(
                ev.ComponentClaimed(component=component, worker=f"vm:42/{lane}", lease_until=NOW + 600),
                ev.BranchEnsured(
                    branch=f"lopen/slugify--{component}", base="b" * 40, component=component, created=True
                ),
            )
        for component in ("core", "cli"):  # interleaved: both lanes at work
            j.record(
                ev.InvocationStarted(
                    invocation_id=f"inv-{component}", kind="task", component=component, task=f"{component}/1"
                ),
                ev.TaskStatusChanged(task_id=f"{component}/1", from_state="pending", to_state="in-progress"),
            )
        j.record(
            ev.ToolCalled(invocation_id="inv-cli", tool="bash", arguments={"command": "python -m pytest -q"}),
            ev.ToolCalled(invocation_id="inv-core", tool="create", arguments={"path": "core.py"}),
            ev.ComponentLeaseRenewed(component="core", worker="vm:42/1", lease_until=NOW + 900),
        )
    return root


def lopen(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, capture_output=True, text=True, timeout=60, check=False
    )


def test_session_show_puts_the_components_side_by_side_with_worker_lease_and_state(project: Path) -> None:
    shown = lopen(project, "session", "show")
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| component | state | worker | lease | branch | lines changed |"
    core = next(r for r in rows if r.startswith("| core |"))
    cli = next(r for r in rows if r.startswith("| cli |"))
    assert "| in-progress | vm:42/1 |" in core and "(live)" in core and "lopen/slugify--core" in core
    assert "| in-progress | vm:42/2 |" in cli and "lopen/slugify--cli" in cli
    data = json.loads(lopen(project, "session", "show", "-f", "json").stdout)
    by_slug = {c["slug"]: c for c in data["components"]}
    assert by_slug["core"]["worker"] == "vm:42/1" and by_slug["core"]["lease_until"] == pytest.approx(NOW + 900)
    assert by_slug["cli"]["branch"] == "lopen/slugify--cli"


def test_replay_names_the_component_on_each_line_of_interleaved_work(project: Path) -> None:
    replayed = lopen(project, "replay", "slugify-20261126-1")
    assert replayed.returncode == 0, replayed.stderr
    lines = replayed.stdout.splitlines()

    def line(kind: str, *words: str) -> str:
        return next(x for x in lines if kind in x and all(w in x for w in words))

    assert "[core] ComponentClaimed" in line("ComponentClaimed", "vm:42/1")
    assert "[cli] ComponentClaimed" in line("ComponentClaimed", "vm:42/2")
    assert "[cli] ToolCalled" in line("ToolCalled", "bash")  # by its invocation
    assert "[core] ToolCalled" in line("ToolCalled", "create")
    assert "[core] TaskStatusChanged" in line("TaskStatusChanged", "core/1")
    assert "[cli] InvocationStarted" in line("InvocationStarted", "inv-cli")
    assert "[core] ComponentLeaseRenewed" in line("ComponentLeaseRenewed")
    assert "] ComponentsRecorded" not in line("ComponentsRecorded")  # module-wide: no component
