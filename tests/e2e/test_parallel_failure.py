"""A failure blocks only its dependents (P1, issue 24), end to end: the real `lopen run --parallel 2`,
the real Copilot CLI, real git and store, the scripted model playing a generated module of three
components — ``a`` and ``b`` independent, ``c`` after ``a``.

The model never finishes ``a``'s task: after ``workflow.failure_threshold`` failures its lane gives up,
while ``b`` is built, verified and merged; ``c`` is never started, and the run ends paused (exit 2) saying
that ``a`` needs a person and that ``c`` waits for it. Run again with a model that now finishes ``a``:
``a`` and ``c`` are built, ``b`` is not touched again, and the module is complete.

The same run checks the lines changed (P2): each task commit's figures are ``git diff --numstat`` of its
verified tree against its parent, and `lopen session show`, `lopen log` and `lopen replay` show them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import msgspec
import pytest

from e2e.parallel import MODULE, generated, history, of, task_invocations
from e2e.scenario import git, header, lopen_env, user
from events import catalogue as ev
from lopen.scripted_model import Match, Rule, Turn
from lopen.scripted_model.generate import Part, playbook

pytestmark = pytest.mark.e2e

PARTS = [Part("a", 1), Part("b", 1), Part("c", 1, depends_on=("a",))]
THRESHOLD = 2


def run(root, cli_path: str, url: str) -> subprocess.CompletedProcess[str]:
    env = lopen_env(cli_path, url, workflow__failure_threshold=str(THRESHOLD))
    return subprocess.run(
        [sys.executable, "-m", "lopen", "run", MODULE, "--headless", "--parallel", "2"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_a_failing_component_blocks_only_its_dependent_and_a_rerun_finishes_just_those(tmp_path, cli_path, scripted):
    book = playbook(MODULE, PARTS)
    gives_up = Rule(
        name="a-never-finishes",
        match=Match(user_regex=header(kind="task", task="a/1")),
        turns=[Turn(text="I could not make a/1 work; I stop here without completing it.")],
    )
    failing = scripted(msgspec.structs.replace(book, rules=[gives_up, *book.rules]))
    root = generated(tmp_path, PARTS)

    first = run(root, cli_path, failing.url)

    out = first.stdout + first.stderr
    assert first.returncode == 2, out[-4000:]
    records = history(root)
    # a: tried exactly failure_threshold times, then given up; nothing of it committed or merged
    assert [e.task for e, _ in task_invocations(records, "a")] == ["a/1"] * THRESHOLD
    assert failing.uses("a-never-finishes") == THRESHOLD
    # b: built, verified and merged while a failed
    assert [e.task for e, _ in task_invocations(records, "b")] == ["b/1"]
    assert {e.component for e in of(records, ev.ComponentMerged)} == {"b"}
    assert any(e.scope == "component" and e.target == "b" and e.passed for e in of(records, ev.OracleVerdictRecorded))
    assert git(root, "log", "--no-merges", "--format=%s", f"main..lopen/{MODULE}").splitlines() == [
        f"feat({MODULE}): Value b/1 in b"
    ]
    # c: never planned nor started, and the run says it waits for a
    assert not task_invocations(records, "c")
    assert not [e for e in of(records, ev.ComponentSelected) if e.component == "c"]
    (paused,) = of(records, ev.SessionPaused)
    assert paused.error_kind == "churn"
    assert "a/1 failed 2 times" in paused.reason and "c is blocked by a" in paused.reason, paused.reason
    assert "\n! a: a/1 failed 2 times" in out and "c is blocked by a" in out, out[-4000:]  # its last line

    # the model now finishes a: the rerun builds a and c only
    before = len(records)
    fixed = scripted(book)
    second = run(root, cli_path, fixed.url)

    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    records = history(root)
    rerun = records[before:]  # the paused session resumed
    assert of(rerun, ev.SessionResumed)
    assert [e.task for e in of(rerun, ev.InvocationStarted) if e.kind == "task"] == ["a/1", "c/1"]
    assert not [e for e in of(rerun, ev.TaskStatusChanged) if e.task_id.startswith("b/")]
    assert not [r for r in fixed.chat_requests if re.search(header(task="b/1"), user(r))]  # b never asked about
    assert sorted(e.component for e in of(records, ev.ComponentMerged)) == ["a", "b", "c"]
    assert sorted(git(root, "log", "--no-merges", "--format=%s", f"main..lopen/{MODULE}").splitlines()) == [
        f"feat({MODULE}): Value {c}/1 in {c}" for c in "abc"
    ]
    (module,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "module"]
    assert module.passed
    assert of(records, ev.SessionCompleted)
    lines_changed_are_gits(root, records, cli_path, fixed.url)


def numstat(root, parent: str, tree: str) -> tuple[int, int, int]:
    """``git diff --numstat`` as a person would run it: (added, removed, files); a binary file is a file."""
    rows = [line.split("\t") for line in git(root, "diff", "--numstat", parent, tree).splitlines()]
    return (
        sum(int(a) for a, _, _ in rows if a != "-"),
        sum(int(r) for _, r, _ in rows if r != "-"),
        len(rows),
    )


def lines_changed_are_gits(root, records, cli_path: str, url: str) -> None:
    """P2 on the same run: each task commit records what git says its verified tree changed, and
    `lopen session show`, `lopen log` and `lopen replay` show those figures (per task, per component,
    the module's sum) with each task's tokens, premium requests and time."""
    commits = {e.task_id: e for e in of(records, ev.CommitRecorded) if e.task_id}
    assert sorted(commits) == ["a/1", "b/1", "c/1"]
    for commit in commits.values():
        assert commit.tree == git(root, "rev-parse", f"{commit.sha}^{{tree}}")
        assert (commit.added, commit.removed, commit.files) == numstat(root, commit.parent, commit.tree)
        assert commit.files == 2 and commit.added > 0  # value() and its test
    env = lopen_env(cli_path, url)

    def lopen(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    report = json.loads(lopen("session", "show", "--format", "json"))
    tasks = {t["id"]: t for c in report["components"] for t in c["tasks"]}
    for task_id, commit in commits.items():
        figures = tasks[task_id]
        assert (figures["lines_added"], figures["lines_removed"], figures["files_changed"]) == (
            commit.added,
            commit.removed,
            commit.files,
        )
        assert figures["tokens"] > 0 and figures["seconds"] > 0
    assert report["changes"] == {
        "lines_added": sum(c.added for c in commits.values()),
        "lines_removed": sum(c.removed for c in commits.values()),
        "files_changed": 6,
    }
    a = commits["a/1"]
    table = lopen("session", "show")
    assert "## Tasks" in table and "| task | state | tokens | premium requests | time | lines changed |" in table
    (row,) = [line for line in table.splitlines() if line.startswith("| a/1 |")]
    assert row.endswith(f"| +{a.added} −{a.removed} in 2 files |"), row
    assert f"changed: +{a.added} −{a.removed} in 2 files ({a.sha[:8]})" in lopen("log", "a/1")
    assert f"{a.sha[:12]} +{a.added} −{a.removed} in 2 files" in lopen("replay", "--type", "CommitRecorded")
