"""Two `lopen worker` processes on two clones ("machines") sharing one real PostgreSQL store and a git
remote split one module between them (issue 14): neither ever holds a component the other holds, each
builds some, every branch goes through the remote, and the module is verified once. Needs
LOPEN_TEST_POSTGRES_URL (`bin/postgres-for-tests`; CI sets it)."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid

import pytest

from e2e.parallel import MODULE, clones, history, module_tokens, of, overlapping_claims, worker
from e2e.scenario import git
from events import catalogue as ev
from lopen.scripted_model.generate import four_and_one, playbook

URL = os.environ.get("LOPEN_TEST_POSTGRES_URL", "")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not URL and not os.environ.get("CI"),
        reason="LOPEN_TEST_POSTGRES_URL is not set: run `bin/postgres-for-tests` (as root), export what it prints",
    ),
]


def test_two_machines_sharing_a_postgres_store_and_a_remote_split_one_module(tmp_path, cli_path, scripted):
    assert URL, "CI must provide LOPEN_TEST_POSTGRES_URL"
    store_url = f"{URL}{'&' if '?' in URL else '?'}schema=lopen_{uuid.uuid4().hex[:10]}"
    parts = four_and_one(tasks=1)
    server = scripted(playbook(MODULE, parts))
    roots = clones(tmp_path, parts, store_url)
    outs = [tmp_path / f"machine-{i}.out" for i in (1, 2)]

    workers = [
        worker(root, cli_path, server.url, out, workflow__parallelism="2")
        for root, out in zip(roots, outs, strict=True)
    ]
    try:
        codes = [w.wait(timeout=400) for w in workers]
    finally:
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(w.pid, signal.SIGKILL)
    assert codes == [0, 0], "\n\n".join(out.read_text()[-3000:] for out in outs)

    records = history(roots[0])
    assert not overlapping_claims(records)
    builders: dict[str, set[str]] = {}
    for e in of(records, ev.ComponentClaimed):
        if e.component in "abcde":
            builders.setdefault(e.component, set()).add(e.worker.split("/")[0])
    assert set(builders) == set("abcde") and all(len(w) == 1 for w in builders.values())
    assert len({w for ws in builders.values() for w in ws}) == 2  # both machines built components
    assert sorted(e.task_id for e in of(records, ev.CommitRecorded) if e.task_id) == [f"{c}/1" for c in "abcde"]
    verified = [e for e in of(records, ev.OracleVerdictRecorded) if e.scope == "module"]
    assert len(verified) == 1 and verified[0].passed
    # the module branch went through the remote: both machines and the remote agree on it, with every task
    tip = git(roots[0], "ls-remote", "origin", f"refs/heads/lopen/{MODULE}").split()[0]
    assert tip == of(records, ev.ComponentMerged)[-1].sha
    for root in roots:
        git(root, "fetch", "-q", "origin")
        subjects = git(root, "log", "--no-merges", "--format=%s", f"origin/main..{tip}").splitlines()
        assert sorted(subjects) == sorted(f"feat({MODULE}): Value {c}/1 in {c}" for c in "abcde")
    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    assert module_tokens(roots[1]) == (
        sum(r.usage.prompt_tokens for r in answered),
        sum(r.usage.completion_tokens for r in answered),
    )
