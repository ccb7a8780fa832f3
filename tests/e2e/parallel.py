"""What the end-to-end tests of parallel work share (issue 14): a generated module
(``lopen.scripted_model.generate``) approved in a fresh repository — or in clones of one sharing a bare
remote and a store — a run in this process, `lopen worker` processes, and the module's whole history."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from e2e.scenario import Ran, approve_module, git, lopen_env
from events import catalogue as ev
from events.recorded import Recorded
from lopen.app.demo import demo_settings
from lopen.app.engine import run_module
from lopen.scripted_model import ScriptedModelServer
from lopen.scripted_model.generate import Part, prepare

MODULE = "gen"


def generated(tmp_path: Path, parts: list[Part], name: str = "project") -> Path:
    root = prepare(tmp_path / name, MODULE, parts)
    approve_module(root, MODULE)
    return root


def clones(tmp_path: Path, parts: list[Part], store_url: str, n: int = 2) -> list[Path]:
    """``n`` clones of one generated repository ("machines"), sharing a bare remote (``git.remote =
    origin``) and the store at ``store_url``; the spec approved once, in the shared store."""
    origin = prepare(tmp_path / "origin-work", MODULE, parts)
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(bare)], check=True)
    roots = []
    for i in range(n):
        root = tmp_path / f"machine-{i + 1}"
        subprocess.run(["git", "clone", "-q", str(bare), str(root)], check=True)
        for key, value in (("user.name", f"Machine {i + 1}"), ("user.email", f"m{i + 1}@lopen.invalid")):
            git(root, "config", key, value)
        (root / ".lopen").mkdir(exist_ok=True)
        (root / ".lopen" / "config.json").write_text(
            f'{{"store": {{"url": "{store_url}"}}, "git": {{"remote": "origin"}}}}', encoding="utf-8"
        )
        roots.append(root)
    approve_module(roots[0], MODULE)
    return roots


def run_here(root: Path, server: ScriptedModelServer, cli_path: str, parallel: int, **kwargs: Any) -> Ran:
    """One `lopen run gen --parallel N` in this process, headless."""
    os.environ.setdefault("COPILOT_CLI_PATH", cli_path)
    lines: list[str] = []
    settings = demo_settings(root, server.url, {"workflow.parallelism": parallel})
    code, _, detail = run_module(root, MODULE, settings, lines.append, **kwargs)
    return Ran(code, detail, lines)


WORKER = [sys.executable, "-m", "lopen", "worker", MODULE, "--headless"]


def worker(root: Path, cli_path: str, url: str, out: Path, **settings: str) -> subprocess.Popen[bytes]:
    """A `lopen worker gen` process (its own process group), its output in ``out``."""
    env = lopen_env(cli_path, url, **settings)
    with out.open("w") as sink:
        return subprocess.Popen(
            WORKER, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def history(root: Path) -> list[Recorded]:
    """The module's whole history (every session, every worker), in order."""
    from e2e.scenario import project_store
    from events.recorded import module_stream

    store, project = project_store(root)
    with store:
        return list(store.read_stream(module_stream(project, MODULE)))


def of(records: list[Recorded], kind: type) -> list[Any]:
    return [r.event for r in records if isinstance(r.event, kind)]


def task_invocations(records: list[Recorded], component: str) -> list[tuple[ev.InvocationStarted, float]]:
    """The component's task invocations with the time each finished."""
    finished = {e.invocation_id: e.at for e in of(records, ev.InvocationFinished)}
    return [
        (e, finished.get(e.invocation_id, 0.0))
        for e in of(records, ev.InvocationStarted)
        if e.kind == "task" and e.component == component
    ]


def overlapping_claims(records: list[Recorded]) -> list[str]:
    """Claims of one component by two workers at once (a live lease held by another): never expected."""
    held: dict[str, tuple[str, float]] = {}
    wrong = []
    for rec in records:
        e = rec.event
        if isinstance(e, ev.ComponentClaimed):
            holder = held.get(e.component)
            if holder is not None and holder[0] != e.worker and holder[1] > e.at:
                wrong.append(f"{e.component}: {e.worker} while {holder[0]} held it")
            held[e.component] = (e.worker, e.lease_until)
        elif isinstance(e, ev.ComponentLeaseRenewed):
            held[e.component] = (e.worker, e.lease_until)
        elif isinstance(e, ev.ComponentReleased):
            held.pop(e.component, None)
    return wrong


def module_tokens(root: Path) -> tuple[int, int]:
    """(input, output) tokens of the module across every session and worker, from the projection."""
    from e2e.scenario import project_store

    store, project = project_store(root)
    with store:
        store.projections.catch_up()
        row = store.projections.tokens.module(MODULE, project)
        return (row.input, row.output) if row else (0, 0)
