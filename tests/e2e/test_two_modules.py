"""Two modules of one project built at once by two `lopen run` processes (issue 10): each in its own
worktree on its own branch, one commit per task on each branch and none elsewhere, each run telling
only its own story, the user's checkout untouched."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from e2e.scenario import DEMO, MODULE, approve_module, git, lopen_env, story_of
from lopen.app.demo import prepare_project
from lopen.scripted_model import Playbook, ScriptedModelServer

pytestmark = pytest.mark.e2e
OTHER = "other"


def for_module(book: Playbook, module: str) -> Playbook:
    """The demo's playbook for a copy of the example under another module name."""

    def arguments(value: object) -> object:
        if isinstance(value, dict):
            return {k: (module if k == "module" and v == MODULE else arguments(v)) for k, v in value.items()}
        return value

    rules = []
    for rule in book.rules:
        turns = [
            msgspec.structs.replace(
                t, tool_calls=[msgspec.structs.replace(c, arguments=arguments(c.arguments)) for c in t.tool_calls]
            )
            for t in rule.turns
        ]
        regex = (rule.match.user_regex or "").replace(f"target={MODULE}(", f"target={module}(")
        rules.append(
            msgspec.structs.replace(rule, turns=turns, match=msgspec.structs.replace(rule.match, user_regex=regex))
        )
    return msgspec.structs.replace(book, name=f"{book.name}-{module}", rules=rules)


def test_two_modules_run_at_once_each_on_its_own_branch(tmp_path, cli_path):
    root = prepare_project(tmp_path / "project")
    spec = root / "docs" / "requirements" / MODULE / "SPECIFICATION.md"
    other = root / "docs" / "requirements" / OTHER / "SPECIFICATION.md"
    other.parent.mkdir(parents=True)
    other.write_text(spec.read_text().replace(f"name: {MODULE}", f"name: {OTHER}"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a second module")
    main = git(root, "rev-parse", "main")
    approve_module(root, MODULE)
    approve_module(root, OTHER)

    with ScriptedModelServer(DEMO) as first, ScriptedModelServer(for_module(DEMO, OTHER)) as second:
        runs = {
            module: subprocess.Popen(
                [sys.executable, "-m", "lopen", "run", module, "--headless"],
                cwd=root,
                env=lopen_env(cli_path, server.url),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for module, server in ((MODULE, first), (OTHER, second))
        }
        outputs = {module: process.communicate(timeout=300)[0] for module, process in runs.items()}
    for module, process in runs.items():
        assert process.returncode == 0, outputs[module]

    for module in (MODULE, OTHER):
        subjects = git(root, "log", "--format=%s", f"main..lopen/{module}").splitlines()
        assert subjects == [
            f"feat({module}): Command-line entry point in cli",
            f"feat({module}): Join words with a separator in core",
            f"feat({module}): Normalize text in core",
        ]
        run = story_of(root, module)
        assert run.status == "completed"
        assert {e.module for e in run.events} == {module}
        mine, theirs = (MODULE, OTHER) if module == MODULE else (OTHER, MODULE)
        assert f"oracle on module {mine}" in outputs[module] and f"module {theirs}" not in outputs[module]

    a, b = story_of(root, MODULE), story_of(root, OTHER)
    assert a.events[0].at < b.events[-1].at and b.events[0].at < a.events[-1].at  # they overlapped in time
    assert git(root, "rev-parse", "main") == main and git(root, "branch", "--show-current") == "main"
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout == ""
