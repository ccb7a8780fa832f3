"""Parallel building end to end (issue 14): real Copilot CLI, real git, real store, the scripted model
playing a generated module (``lopen.scripted_model.generate``).

- four independent components are built at once and the one that depends on two of them starts only
  after both were merged; one commit per task; the module verified on the merged result;
- a merge conflict gets one resolution task, verified like any task, committed as a merge;
- two `lopen worker` processes on one SQLite store never hold the same component at once;
- a worker killed mid-component: its lease runs out and a worker on another clone finishes it, with
  exact token totals;
- a verify command runs once per tree: reused on an unchanged tree, run again on a changed one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.parallel import (
    MODULE,
    clones,
    generated,
    history,
    module_tokens,
    of,
    overlapping_claims,
    run_here,
    task_invocations,
    worker,
)
from e2e.scenario import git, wait_for
from events import catalogue as ev
from events.recorded import Recorded
from lopen.app import integrity
from lopen.app.context import Project
from lopen.scripted_model import Match, Rule, Turn
from lopen.scripted_model.generate import Part, four_and_one, playbook

pytestmark = pytest.mark.e2e


def evidence_runs_once_per_tree(records: list[Recorded]) -> None:
    """Every verify command ran exactly once per tree: reused when that tree was seen before, run when not."""
    seen: set[tuple[str, str]] = set()
    for e in of(records, ev.VerificationEvidenceRecorded):
        key = (e.tree, e.command)
        assert e.reused == (key in seen), (e.scope, e.target, e.tree[:10], e.reused)
        seen.add(key)


def test_independent_components_are_built_at_once_and_the_dependent_one_after_both_merged(tmp_path, cli_path, scripted):
    parts = four_and_one(tasks=2)
    server = scripted(playbook(MODULE, parts))
    root = generated(tmp_path, parts)

    ran = run_here(root, server, cli_path, parallel=4, no_resume=True)

    assert ran.code == 0, "\n".join(ran.lines)
    records = history(root)
    # the four independent components overlap in time: there is a moment when all four are being built
    spans = {c: task_invocations(records, c) for c in "abcd"}
    starts = [runs[0][0].at for runs in spans.values()]
    ends = [runs[-1][1] for runs in spans.values()]
    assert all(runs and all(done for _, done in runs) for runs in spans.values())
    assert max(starts) < min(ends), list(zip("abcd", starts, ends, strict=True))
    # each in a lane of its own: its own branch, claimed by one lane of this process, released once merged
    lanes = {e.component: e for e in of(records, ev.BranchEnsured) if e.component}
    assert {c: lanes[c].branch for c in "abcde"} == {c: f"lopen/{MODULE}--{c}" for c in "abcde"}
    claims = [e for e in of(records, ev.ComponentClaimed) if e.component in "abcde"]
    assert sorted(e.component for e in claims) == list("abcde") and not overlapping_claims(records)
    released = {e.component: e.reason for e in of(records, ev.ComponentReleased) if e.component in "abcde"}
    assert released == dict.fromkeys("abcde", "merged")
    # the dependent one starts only after both of its dependencies were merged onto the module branch
    merged = {e.component: e for e in of(records, ev.ComponentMerged)}
    assert set(merged) == set("abcde")
    first_e = task_invocations(records, "e")[0][0]
    assert merged["a"].at < first_e.at and merged["b"].at < first_e.at
    assert lanes["e"].base in {merged["a"].sha, merged["b"].sha, merged["c"].sha, merged["d"].sha}
    # one commit per task on the merged branch, each exactly the tree its passing verdict judged
    subjects = git(root, "log", "--no-merges", "--format=%s", f"main..lopen/{MODULE}").splitlines()
    expected = [f"feat({MODULE}): Value {p.name}/{n} in {p.name}" for p in parts for n in (1, 2)]
    assert sorted(subjects) == sorted(expected)
    verdicts = {e.target: e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "task" and e.passed}
    for commit in (e for e in of(records, ev.CommitRecorded) if e.task_id):
        assert git(root, "rev-parse", f"{commit.sha}^{{tree}}") == commit.tree == verdicts[commit.task_id].tree
        git(root, "merge-base", "--is-ancestor", commit.sha, f"lopen/{MODULE}")
    # the module verified on the merged result, whose tests pass; the user's checkout untouched
    (module,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "module"]
    assert module.passed and module.tree == git(root, "rev-parse", f"lopen/{MODULE}^{{tree}}")
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    # the spare worktrees checked out while the model planned were taken by lanes or removed: none is left
    assert ".spares" not in git(root, "worktree", "list", "--porcelain")
    evidence_runs_once_per_tree(records)
    # every commit — the lanes' task commits, the merge commits — carries the module stream's chain head
    # when it was made, while the other lanes appended to the same stream: git witnesses the whole history
    made = [*of(records, ev.CommitRecorded), *(e for e in of(records, ev.ComponentMerged) if not e.fast_forward)]
    assert made and all(e.chain for e in made)
    verified = integrity.verify(Project(root), full=True)
    assert (verified["witnessed"], verified["not_witnessed"]) == (len(made), [])
    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    assert module_tokens(root) == (
        sum(r.usage.prompt_tokens for r in answered),
        sum(r.usage.completion_tokens for r in answered),
    )


def test_a_merge_conflict_gets_one_resolution_task_verified_and_committed_as_a_merge(tmp_path, cli_path, scripted):
    parts = [Part("p", 1, shared="registry.txt"), Part("q", 1, shared="registry.txt")]
    server = scripted(playbook(MODULE, parts))
    root = generated(tmp_path, parts)

    ran = run_here(root, server, cli_path, parallel=2, no_resume=True)

    assert ran.code == 0, "\n".join(ran.lines)
    records = history(root)
    (conflict,) = of(records, ev.ComponentMergeConflicted)
    second = conflict.component  # whichever was merged second
    first = "q" if second == "p" else "p"
    assert conflict.files == ("registry.txt",) and not conflict.redo and conflict.task_id == f"{second}/2"
    merged = {e.component: e for e in of(records, ev.ComponentMerged)}
    assert merged[first].fast_forward and conflict.into == merged[first].sha
    # the resolution task: one invocation, verified by the oracle, committed with the module tip as 2nd parent
    resolution = [e for e, _ in task_invocations(records, second) if e.task == conflict.task_id]
    assert len(resolution) == 1
    (commit,) = [e for e in of(records, ev.CommitRecorded) if e.task_id == conflict.task_id]
    (verdict,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.target == conflict.task_id and e.passed]
    assert commit.tree == verdict.tree and commit.merge_parent == conflict.into
    parents = git(root, "rev-list", "--parents", "-n", "1", commit.sha).split()[1:]
    assert parents == [commit.parent, conflict.into]
    assert merged[second].fast_forward and merged[second].sha == commit.sha
    assert git(root, "show", f"lopen/{MODULE}:registry.txt") == "p\nq"
    assert commit.chain and integrity.verify(Project(root), full=True)["not_witnessed"] == []  # the resolution too
    (module,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "module"]
    assert module.passed and module.tree == git(root, "rev-parse", f"lopen/{MODULE}^{{tree}}")


def test_two_workers_on_one_sqlite_store_never_hold_the_same_component(tmp_path, cli_path, scripted):
    parts = four_and_one(tasks=1)
    server = scripted(playbook(MODULE, parts))
    root = generated(tmp_path, parts)
    outs = [tmp_path / f"worker-{i}.out" for i in (1, 2)]

    workers = [worker(root, cli_path, server.url, out, workflow__parallelism="2") for out in outs]
    try:
        codes = [w.wait(timeout=400) for w in workers]
    finally:
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(w.pid, signal.SIGKILL)
    assert codes == [0, 0], "\n\n".join(out.read_text()[-3000:] for out in outs)

    records = history(root)
    assert not overlapping_claims(records)
    sessions = of(records, ev.SessionStarted)
    assert len(sessions) == 2 and {s.command for s in sessions} == {"worker"}
    builders = {}  # component → the worker processes whose lanes built it
    for e in of(records, ev.ComponentClaimed):
        if e.component in "abcde":
            builders.setdefault(e.component, set()).add(e.worker.split("/")[0])
    assert set(builders) == set("abcde") and all(len(w) == 1 for w in builders.values())
    assert len({w for ws in builders.values() for w in ws}) == 2  # both workers built components
    built = [e.task_id for e in of(records, ev.TaskStatusChanged) if e.to_state == "complete"]
    assert sorted(built) == [f"{c}/1" for c in "abcde"]  # every task once
    assert len(of(records, ev.ComponentMerged)) == 5
    (module,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "module"]
    assert module.passed
    assert [s.status for s in _sessions(root)] == ["completed", "completed"]


def _sessions(root: Path) -> list[Any]:
    from e2e.scenario import project_store

    store, _ = project_store(root)
    with store:
        store.projections.catch_up()
        return store.projections.sessions.all()


LEASE = "4"


def hang(task: str) -> Rule:
    """The task's second answer never comes: its worker is killed while waiting for it."""
    from e2e.scenario import header

    return Rule(
        name="hang",
        match=Match(user_regex=header(kind="task", task=task), from_turn=1),
        turns=[Turn(text="(never delivered)", fault="slow", delay=120)],
        max_uses=1,
    )


def test_a_killed_worker_s_component_is_taken_over_when_its_lease_runs_out(tmp_path, cli_path, scripted):
    parts = [Part("a", 2)]
    book = playbook(MODULE, parts)
    server = scripted(type(book)(name=book.name, models=book.models, default_usage=book.default_usage,
                                 rules=[hang("a/2"), *book.rules]))  # fmt: skip
    store = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    first_root, second_root = clones(tmp_path, parts, store)

    first = worker(first_root, cli_path, server.url, tmp_path / "first.out", workflow__lease=LEASE)
    try:
        hung = wait_for(lambda: server.uses("hang") == 1 or first.poll() is not None, 200)
        assert hung and first.poll() is None, (tmp_path / "first.out").read_text()[-3000:]
        killed_at = time.time()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
    before = history(first_root)
    (claim,) = [e for e in of(before, ev.ComponentClaimed) if e.component == "a"]
    assert [e.task_id for e in of(before, ev.CommitRecorded) if e.task_id] == ["a/1"]  # pushed to the remote

    second = worker(second_root, cli_path, server.url, tmp_path / "second.out", workflow__lease=LEASE)
    try:
        code = second.wait(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(second.pid, signal.SIGKILL)
    assert code == 0, (tmp_path / "second.out").read_text()[-3000:]

    records = history(second_root)
    taken = [e for e in of(records, ev.ComponentClaimed) if e.component == "a" and e.worker != claim.worker]
    assert taken and taken[0].at >= claim.lease_until  # only once the dead worker's lease had run out
    assert not [e for e in of(records, ev.ComponentReleased) if e.worker == claim.worker and e.by]  # not its mark
    # it resumed the component from its events: a/1 was not built again, a/2 was finished on top of it
    started = [e.task for e, _ in task_invocations(records, "a")]
    assert started == ["a/1", "a/2", "a/2"]
    assert sorted(e.task_id for e in of(records, ev.CommitRecorded) if e.task_id) == ["a/1", "a/2"]
    subjects = git(second_root, "log", "--no-merges", "--format=%s", f"origin/main..lopen/{MODULE}").splitlines()
    assert sorted(subjects) == [f"feat({MODULE}): Value a/1 in a", f"feat({MODULE}): Value a/2 in a"]
    git(second_root, "fetch", "-q", "origin")
    assert git(second_root, "rev-parse", f"origin/lopen/{MODULE}") == git(second_root, "rev-parse", f"lopen/{MODULE}")
    (module,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "module"]
    assert module.passed
    # exact tokens: every call the model answered, the killed worker's included; the hung one never came
    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    used = of(records, ev.TokensUsed)
    assert len(used) == len(answered) and len({e.call_id for e in used}) == len(used)
    assert module_tokens(second_root) == (
        sum(r.usage.prompt_tokens for r in answered),
        sum(r.usage.completion_tokens for r in answered),
    )
    assert any(r.received_at < killed_at for r in answered) and any(r.received_at > killed_at for r in answered)


def test_a_verify_command_runs_once_on_an_unchanged_tree_and_again_on_a_changed_one(tmp_path, cli_path, scripted):
    parts = [Part("a", 2), Part("b", 1, depends_on=("a",))]
    server = scripted(playbook(MODULE, parts))
    root = generated(tmp_path, parts)

    ran = run_here(root, server, cli_path, parallel=1, no_resume=True)

    assert ran.code == 0, "\n".join(ran.lines)
    records = history(root)
    evidence = of(records, ev.VerificationEvidenceRecorded)
    assert [(e.scope, e.target, e.reused) for e in evidence] == [
        ("task", "a/1", False),  # a new tree each task: the suite runs
        ("task", "a/2", False),
        ("component", "a", True),  # a/2's tree, unchanged: its result is reused
        ("task", "b/1", False),
        ("component", "b", True),
        ("module", MODULE, True),  # the module's tree is b/1's
    ]
    assert len({e.tree for e in evidence if not e.reused}) == 3
    evidence_runs_once_per_tree(records)


FENCE_LEASE = "5"


def held(task: str, name: str) -> Rule:
    """The task's second answer (its files are written; now: run the tests), once, held by the server
    until the test releases ``name`` — its worker waits on it as on a slow model. The answers after it
    are the task's own rule's (verify, complete)."""
    from e2e.scenario import header

    book = playbook(MODULE, [Part("a", 1)])
    (rule,) = [r for r in book.rules if r.name == "task-a-1"]
    return Rule(
        name=name,
        match=Match(user_regex=header(kind="task", task=task), from_turn=1),
        turns=[rule.turns[1]],
        max_uses=1,
    )


def test_a_worker_paused_past_its_lease_and_taken_over_touches_nothing_of_the_component(tmp_path, cli_path, scripted):
    """Issue 21: worker A is paused (SIGSTOP) during a task past its lease; worker B takes the component
    over and writes its files; A continues (SIGCONT) and its model answers. A records nothing more for
    the component and touches nothing — B's uncommitted files survive — and the module is completed."""
    parts = [Part("a", 1)]
    book = playbook(MODULE, parts)
    server = scripted(type(book)(name=book.name, models=book.models, default_usage=book.default_usage,
                                 rules=[held("a/1", "first"), held("a/1", "second"), *book.rules]))  # fmt: skip
    server.hold("first")
    server.hold("second")
    root = generated(tmp_path, parts)
    outs = {name: tmp_path / f"{name}.out" for name in ("a", "b")}

    def said(name: str, text: str) -> bool:
        return text in outs[name].read_text(errors="replace")

    first = worker(root, cli_path, server.url, outs["a"], workflow__lease=FENCE_LEASE)
    second: Any = None
    try:
        assert wait_for(lambda: server.uses("first") == 1 or first.poll() is not None, 200), outs["a"].read_text()
        os.killpg(first.pid, signal.SIGSTOP)  # A (and its CLI) paused in the middle of a/1
        stopped_at = time.time()
        second = worker(root, cli_path, server.url, outs["b"], workflow__lease=FENCE_LEASE)
        assert wait_for(lambda: server.uses("second") == 1 or second.poll() is not None, 200), outs["b"].read_text()
        (folder_b,) = root.glob(f".lopen/worktrees/{MODULE}.components/a@*-{second.pid}")
        written = {name: (folder_b / name).read_text() for name in ("a_1.py", "tests/test_a_1.py")}  # uncommitted

        os.killpg(first.pid, signal.SIGCONT)  # A goes on, and so does its model: its answer comes
        server.release("first")
        assert wait_for(lambda: said("a", "this lane stopped and left a alone"), 60), outs["a"].read_text()[-3000:]
        assert {name: (folder_b / name).read_text() for name in written} == written  # B's work is untouched
        assert git(folder_b, "status", "--porcelain", "--untracked-files=all").splitlines() == [
            "?? a_1.py",
            "?? tests/test_a_1.py",
        ]

        server.release("second")
        codes = [second.wait(timeout=200), first.wait(timeout=60)]
    finally:
        for process in (first, second):
            if process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGCONT)
                    os.killpg(process.pid, signal.SIGKILL)
    assert codes == [0, 0], "\n\n".join(out.read_text()[-3000:] for out in outs.values())

    records = history(root)
    claims = [r for r in records if isinstance(r.event, ev.ComponentClaimed) and r.event.component == "a"]
    assert [c.event.worker.split("/")[0].rsplit(":", 1)[1] for c in claims] == [str(first.pid), str(second.pid)]
    taken = claims[1]
    assert taken.event.at >= claims[0].event.lease_until >= stopped_at  # only once A's lease had run out
    session_a = {e.session_id for e in of(records, ev.SessionStarted) if e.worker.endswith(f":{first.pid}")}
    runs_a = {e.invocation_id for e in of(records, ev.InvocationStarted) if e.session_id in session_a}

    def about_a(e: ev.Event) -> bool:
        fields = {k: getattr(e, k, "") for k in ("component", "task_id", "task", "target", "invocation_id")}
        return (
            fields["component"] == "a"
            or fields["target"] == "a"
            or str(fields["task_id"]).startswith("a/")
            or str(fields["task"]).startswith("a/")
            or fields["invocation_id"] in runs_a
        )

    late = [r.event for r in records if r.version > taken.version and r.event.session_id in session_a]
    assert not [type(e).__name__ for e in late if about_a(e)]  # A recorded nothing for a after the takeover
    assert [e.task_id for e in of(records, ev.CommitRecorded) if e.task_id] == ["a/1"]
    (commit,) = [e for e in of(records, ev.CommitRecorded) if e.task_id]
    assert commit.session_id not in session_a
    assert len(of(records, ev.ComponentMerged)) == 1
    (module,) = [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "module"]
    assert module.passed
