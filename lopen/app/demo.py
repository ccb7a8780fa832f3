"""`lopen demo`: the bundled example module built offline against the bundled scripted model.

Everything but the model is real: the Copilot CLI and SDK, Lopen's tools, git, the event store.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import lopen
from lopen.app.engine import run_module
from lopen.app.scripted import scripted_overrides
from lopen.config import Settings, load_settings
from lopen.project import open_store
from lopen.scripted_model import ScriptedModelServer, load_playbook
from lopen.text import number, plural
from lopen.workflow.approval import approve_spec

PACKAGE = Path(lopen.__file__).parent
EXAMPLE = PACKAGE / "examples" / "slugify"
PLAYBOOK = PACKAGE / "playbooks" / "slugify.toml"
MODULE = "slugify"
MAIN_MODEL, ORACLE_MODEL = "scripted-opus", "scripted-mini"


def prepare_project(target: Path) -> Path:
    """Copy the example into ``target`` and make it a git repository with one commit, with a git identity
    of its own (the demo works on a machine where git has none: a fresh container, an empty HOME)."""
    target.mkdir(parents=True, exist_ok=True)
    if any(target.iterdir()):
        raise lopen.errors.LopenError(
            f"{target} is not empty",
            "the demo builds the example from scratch there",
            "pass an empty or new folder to --dir, or leave --dir out",
        )
    shutil.copytree(EXAMPLE, target, dirs_exist_ok=True)
    (target / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "Lopen Demo"],
        ["config", "user.email", "demo@lopen.invalid"],
        ["add", "-A"],
        # a project of its own: its first commit (which names the project in the store) is unique
        ["commit", "-q", "-m", f"chore: the example project\n\nLopen-Demo: {uuid.uuid4()}"],
    ):
        subprocess.run(["git", *args], cwd=target, check=True, capture_output=True)
    return target


def demo_settings(root: Path, url: str, extra: dict[str, object] | None = None):
    """Every session on the scripted model at ``url``; ``extra`` settings on top (tests use it)."""
    overrides = {**scripted_overrides(url, (MAIN_MODEL, ORACLE_MODEL)), **(extra or {})}
    return load_settings(root, overrides, flag_names=dict.fromkeys(overrides, "lopen demo"))


def run_demo(
    directory: Path | None,
    say: Callable[[str], None],
    playbook: Path = PLAYBOOK,
    server: ScriptedModelServer | None = None,
    *,
    show: Callable[[Path, Settings], tuple[int, str, str]] | None = None,
) -> int:
    """Build the example in ``directory``; ``server`` lets a caller watch the scripted model's log;
    ``show(root, settings)``, when given, runs the module instead of ``run_module`` — the terminal UI
    (``lopen demo`` in a terminal) — and returns (exit code, session id, detail)."""
    root = prepare_project(directory or Path(tempfile.mkdtemp(prefix="lopen-demo-")))
    say(f"Lopen demo — the example module `{MODULE}` in {root}")
    say(f"SCRIPTED MODEL: answers come from {playbook.name}, not from a real model. The Copilot CLI, git and")
    say("the event store are real.")
    with server or ScriptedModelServer(load_playbook(playbook)) as server:
        settings = demo_settings(root, server.url)
        store, project = open_store(root, settings.store.url, settings.project.id)
        with store:
            approve_spec(root, MODULE, store, project)
        say(f"✓ approved docs/requirements/{MODULE}/SPECIFICATION.md")
        if show is not None:
            code, session_id, detail = show(root, settings)
        else:
            code, session_id, detail = run_module(root, MODULE, settings, say, no_resume=True)
    say(("✓ " if code == 0 else "✗ ") + detail)
    log = subprocess.run(
        ["git", "log", "--format=%h %s", f"main..lopen/{MODULE}"], cwd=root, capture_output=True, text=True, check=False
    ).stdout.strip()
    say(f"commits on lopen/{MODULE}:\n" + "\n".join(f"  {line}" for line in log.splitlines()))
    say(
        f"the module was built in its own worktree, {root / settings.git.worktree_dir / MODULE}; your checkout is "
        f"untouched. Look at it with `git log -p main..lopen/{MODULE}`, take it with `git merge lopen/{MODULE}`"
    )
    store, _ = open_store(root, settings.store.url, settings.project.id)
    with store:
        store.projections.catch_up()
        totals = store.projections.tokens.session(session_id)
    if totals is not None:
        say(
            f"tokens: {number(totals.input)} in, {number(totals.output)} out, "
            f"{number(totals.premium)} premium request{'' if totals.premium == 1 else 's'}, "
            f"{plural(totals.invocations, 'invocation')} "
            f"(and {plural(totals.oracle_invocations, 'oracle verification')})"
        )
    say(f"session {session_id} — tell its story with: cd {root} && lopen replay {session_id}")
    return code
