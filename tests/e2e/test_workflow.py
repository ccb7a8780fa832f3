"""The whole workflow end to end: real CLI, real git, real store, the scripted model."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from events import catalogue as ev
from events import chain
from events.selection import session_records
from lopen.app.demo import PLAYBOOK, prepare_project, run_demo
from lopen.project import open_store
from lopen.scripted_model import ScriptedModelServer, load_playbook
from lopen.workflow.approval import approve_spec

pytestmark = pytest.mark.e2e
FALSE_CLAIM = Path(__file__).parents[1] / "playbooks" / "slugify_false_claim.toml"


def build(tmp_path: Path, cli_path: str, playbook: Path = PLAYBOOK):
    os.environ.setdefault("COPILOT_CLI_PATH", cli_path)
    server = ScriptedModelServer(load_playbook(playbook))
    lines: list[str] = []
    root = tmp_path / "project"
    code = run_demo(root, lines.append, playbook, server=server)
    store, project = open_store(root)
    store.projections.catch_up()
    (session,) = store.projections.sessions.all()
    events = [r.event for r in session_records(store, project, session.id)]
    return code, root, server, store, session, events, lines


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, cli_path):
    """One demo build shared by the tests that only read what it did."""
    return build(tmp_path_factory.mktemp("demo"), cli_path)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def test_the_example_is_planned_built_verified_and_committed(demo_run):
    code, root, server, store, session, events, lines = demo_run

    assert code == 0, "\n".join(lines)
    store.projections.catch_up()
    assert store.projections.sessions.get(session.id).status == "completed"
    done = {e.task_id for e in events if isinstance(e, ev.TaskStatusChanged) and e.to_state == "complete"}
    assert done == {"core/1", "core/2", "cli/1"}
    commits = git(root, "log", "--format=%s", "main..lopen/slugify").splitlines()
    assert commits == [
        "feat(slugify): Command-line entry point in cli",
        "feat(slugify): Join words with a separator in core",
        "feat(slugify): Normalize text in core",
    ]
    # the user's checkout is untouched (no .gitignore entry needed either); the work is in Lopen's worktree
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(root, "branch", "--show-current") == "main" and not (root / "slugify" / "core.py").exists()
    built_in = root / ".lopen" / "worktrees" / "slugify"
    assert git(built_in, "status", "--porcelain") == "" and git(built_in, "branch", "--show-current") == "lopen/slugify"
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q"], cwd=built_in, capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout[-2000:]
    built = subprocess.run(
        [sys.executable, "-m", "slugify", "Héllo Wörld"], cwd=built_in, capture_output=True, text=True
    )
    assert built.stdout.strip() == "hello-world"
    # each task's commit is exactly the tree its passing verdict judged
    for task in ("core/1", "core/2", "cli/1"):
        (commit,) = [e for e in events if isinstance(e, ev.CommitRecorded) and e.task_id == task]
        judged = [e for e in events if isinstance(e, ev.OracleVerdictRecorded) and e.target == task and e.passed]
        assert git(root, "rev-parse", f"{commit.sha}^{{tree}}") == commit.tree == judged[-1].tree
    listed = subprocess.run([sys.executable, "-m", "lopen", "modules"], cwd=root, capture_output=True, text=True)
    assert listed.stdout.splitlines()[1].split()[:2] == ["slugify", "complete"], listed.stdout + listed.stderr

    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    totals = store.projections.tokens.session(session.id)
    assert totals.input == sum(r.usage.prompt_tokens for r in answered)
    assert totals.output == sum(r.usage.completion_tokens for r in answered)
    main_invocations = [e for e in events if isinstance(e, ev.InvocationStarted) and e.kind != "oracle"]
    assert totals.invocations == len(main_invocations) == 5  # two plannings, three tasks
    assert totals.premium == 5  # one premium request per invocation on the main model; the oracle's is free
    # a component's and the module's verification is Lopen's own call to the oracle, not an invocation
    assert {e.kind for e in main_invocations} == {"planning", "task"}
    boundaries = [
        (e.scope, e.target, e.passed, e.parent_invocation)
        for e in events
        if isinstance(e, ev.OracleVerdictRecorded) and e.scope != "task"
    ]
    assert boundaries == [
        ("component", "core", True, ""),
        ("component", "cli", True, ""),
        ("module", "slugify", True, ""),
    ]
    assert totals.calls == len(answered)  # one TokensUsed per model call


def test_lopens_record_is_the_one_copy_of_the_conversation_and_its_owners_alone(demo_run):
    """The CLI keeps its own unredacted record of every conversation in its home: a run's home is its
    alone and gone when the run ends; `.lopen/` (the store, the worktrees) is readable by its owner only."""
    code, root, *_ = demo_run
    assert code == 0
    assert (root / ".lopen").stat().st_mode & 0o777 == 0o700
    left = sorted(p.name for p in (root / ".lopen" / "copilot").iterdir())
    assert left == [], left  # no run-<pid>, no session-store.db, no session-state


def test_the_oracle_rejects_first_and_the_model_fixes_it_in_the_same_invocation(demo_run):
    code, _, _, _, _, events, _ = demo_run
    assert code == 0
    verdicts = [
        (e.passed, e.attempt) for e in events if isinstance(e, ev.OracleVerdictRecorded) and e.target == "core/2"
    ]
    assert verdicts == [(False, 1), (True, 2)]
    core2 = [e for e in events if isinstance(e, ev.InvocationStarted) and e.task == "core/2" and e.kind == "task"]
    assert len(core2) == 1


def test_a_completion_claim_before_verifying_is_refused_then_the_proper_path_succeeds(tmp_path, cli_path):
    code, _, _, _, _, events, lines = build(tmp_path, cli_path, FALSE_CLAIM)
    assert code == 0, "\n".join(lines)
    refused = [e for e in events if isinstance(e, ev.CompletionRefused)]
    assert [(e.scope, e.target) for e in refused] == [("task", "core/1")]
    changes = [(e.task_id, e.to_state) for e in events if isinstance(e, ev.TaskStatusChanged)]
    assert ("core/1", "complete") in changes
    first_complete = changes.index(("core/1", "complete"))
    seq_refused = events.index(refused[0])
    assert seq_refused < [i for i, e in enumerate(events) if isinstance(e, ev.TaskStatusChanged)][first_complete]


def test_each_step_gets_its_own_tools_and_a_task_only_its_sections(demo_run):
    code, root, server, *_ = demo_run
    assert code == 0

    def tools(request) -> set[str]:
        return {t["function"]["name"] for t in request.body.get("tools", [])}

    def user(request) -> str:
        return next(m["content"] for m in request.body["messages"] if m["role"] == "user")

    planning = [r for r in server.chat_requests if "kind=planning" in user(r)]
    tasks = [r for r in server.chat_requests if "kind=task" in user(r)]
    oracle = [r for r in server.chat_requests if "kind=oracle" in user(r)]
    assert planning and tasks and oracle
    assert all("update_task_status" not in tools(r) and "record_components" in tools(r) for r in planning)
    assert all("update_task_status" in tools(r) and "record_components" not in tools(r) for r in tasks)
    assert all(tools(r) == set() for r in oracle)  # the oracle judges, it cannot act: no tool at all

    spec = (root / "docs/requirements/slugify/SPECIFICATION.md").read_text()
    cli_prompt = user(next(r for r in tasks if "task=cli/1" in user(r)))
    assert "Task cli/1: Command-line entry point" in cli_prompt
    assert len(cli_prompt) < len(spec)
    assert "## References" not in cli_prompt


def test_run_before_the_spec_is_approved_stops_with_exit_2(tmp_path, cli_path, scripted):
    server = scripted(load_playbook(PLAYBOOK))
    root = prepare_project(tmp_path / "project")
    env = lopen_env(cli_path, server.url)
    done = subprocess.run(
        [sys.executable, "-m", "lopen", "run", "slugify", "--headless"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "lopen spec approve slugify" in done.stderr
    assert server.chat_requests == []


DRAFT_PLAYBOOK = '''
[playbook]
name = "draft"
models = ["scripted-opus", "scripted-mini"]

[[rule]]
name = "draft-greet"
match = { user_regex = '\\[lopen\\][^\\n]* kind=spec(?!\\S)' }
  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "bash"
    arguments = { command = "mkdir -p docs/requirements/greet", description = "make the folder" }
  [[rule.turn]]
    [[rule.turn.tool_calls]]
    name = "create"
    [rule.turn.tool_calls.arguments]
    path = "{{cwd}}/docs/requirements/greet/SPECIFICATION.md"
    file_text = """---
name: greet
description: Greets people by name.
---

# Greet

## Overview

A `greet(name)` function returning `Hello, <name>!`.

## Acceptance Criteria

- [ ] [GREET-01] `greet("Ada")` returns `Hello, Ada!`

## Dependencies

None.

## Skills & Hooks

- verify-tests: `python -m pytest -q`

## Notes

None.

## References

None.
"""
  [[rule.turn]]
  text = "I drafted docs/requirements/greet/SPECIFICATION.md."
'''


def test_run_with_a_prompt_and_no_spec_drafts_one_and_stops_at_the_human_gate(tmp_path, cli_path, scripted):
    from lopen.scripted_model import parse_playbook

    server = scripted(parse_playbook(DRAFT_PLAYBOOK))
    root = tmp_path / "project"
    root.mkdir()
    for args in (["init", "-q"], ["config", "user.name", "Ada"], ["config", "user.email", "ada@example.com"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "first"], cwd=root, check=True)
    env = lopen_env(cli_path, server.url)
    done = subprocess.run(
        [sys.executable, "-m", "lopen", "run", "greet", "--prompt", "a greeting library"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert done.returncode == 2, done.stdout + done.stderr
    assert "lopen spec approve greet" in done.stdout
    assert (root / "docs/requirements/greet/SPECIFICATION.md").is_file()
    user = next(m["content"] for m in server.chat_requests[0].body["messages"] if m["role"] == "user")
    assert "kind=spec" in user and "a greeting library" in user
    check = subprocess.run(
        [sys.executable, "-m", "lopen", "spec", "check", "greet"], cwd=root, env=env, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    store, project = open_store(root)
    with store:
        store.projections.catch_up()
        (session,) = store.projections.sessions.all()
        kinds = [type(r.event).__name__ for r in session_records(store, project, session.id)]
    assert kinds[:3] == ["SessionStarted", "StepEntered", "InvocationStarted"]
    assert kinds[-1] == "SessionPaused"
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout == (
        "?? docs/\n"  # the drafted spec, copied into the checkout for the person to review; nothing else
    )


def lopen_env(cli_path: str, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOPEN_")}
    env.update(
        {
            "COPILOT_CLI_PATH": cli_path,
            "LOPEN_PROVIDER__BASE_URL": url,
            "LOPEN_MODELS__REQUIREMENT_GATHERING": "scripted-opus",
            "LOPEN_MODELS__PLANNING": "scripted-opus",
            "LOPEN_MODELS__BUILDING": "scripted-opus",
            "LOPEN_MODELS__RESEARCH": "scripted-opus",
            "LOPEN_MODELS__ORACLE": "scripted-mini",
            "LOPEN_MODELS__FALLBACK": "[]",
        }
    )
    return env


def lopen(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=240
    )


def test_a_finished_module_run_again_is_complete_at_once_and_replan_keeps_one_history(demo_run, cli_path, scripted):
    """Issue 15: a second `lopen run` of a finished module makes no model call and every command still
    works; `--replan` plans into the same history — done work stays done, nothing is committed twice."""
    code, root, _, _, session, _, _ = demo_run
    assert code == 0
    server = scripted(load_playbook(PLAYBOOK))
    env = lopen_env(cli_path, server.url)
    commits = git(root, "log", "--format=%H %s", "main..lopen/slugify")

    again = lopen(root, env, "run", "slugify", "--headless")

    assert again.returncode == 0, again.stdout + again.stderr
    assert "module slugify is complete" in again.stdout and session.id in again.stdout
    assert server.chat_requests == []
    for command in (
        ("session", "list"),
        ("session", "show"),
        ("modules",),
        ("replay", session.id),
        ("revert", "slugify"),
    ):
        done = lopen(root, env, *command)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stdout, done.stderr)

    replanned = lopen(root, env, "run", "slugify", "--headless", "--replan")

    assert replanned.returncode == 0, replanned.stdout + replanned.stderr
    assert server.chat_requests, "re-planning asks the model"
    assert git(root, "log", "--format=%H %s", "main..lopen/slugify") == commits  # no task redone
    rebuilt = lopen(root, env, "projections", "rebuild")
    assert rebuilt.returncode == 0 and "identical to the projections kept incrementally: yes" in rebuilt.stdout
    listed = lopen(root, env, "session", "list", "--json")
    sessions = json.loads(listed.stdout)
    assert [s["status"] for s in sessions] == ["completed", "completed"]
    store, project = open_store(root)
    with store:
        store.projections.catch_up()
        plan = store.projections.plan.get("slugify")
        replan_session = sessions[1]["id"]
        kinds = [type(r.event).__name__ for r in session_records(store, project, replan_session)]
    assert plan.complete and [t.state for t in plan.ordered_tasks()] == ["complete"] * 3
    assert "ReplanRequested" in kinds and "TaskStatusChanged" not in kinds  # nothing re-opened or redone


def test_after_a_revert_a_planning_invocation_that_cannot_help_is_a_failure_not_a_loop(demo_run, cli_path, scripted):
    """A planning invocation that leaves the plan where it was (here: the scripted model selects `cli`,
    which depends on the re-opened `core`) counts as a failed step: the run pauses at the churn
    threshold instead of planning until max_iterations (100 premium requests with a real model)."""
    code, root, *_ = demo_run
    assert code == 0
    server = scripted(load_playbook(PLAYBOOK))
    env = lopen_env(cli_path, server.url)
    reverted = lopen(root, env, "revert", "slugify", "--to", "core/1")
    assert reverted.returncode == 0, reverted.stdout + reverted.stderr

    again = lopen(root, env, "run", "slugify", "--headless")

    assert again.returncode == 2, again.stdout + again.stderr
    store, project = open_store(root)
    with store:
        store.projections.catch_up()
        latest = store.projections.sessions.latest("slugify")
        started = [r.event for r in session_records(store, project, latest.id)]
    planning = [e for e in started if isinstance(e, ev.InvocationStarted) and e.kind == "planning"]
    assert len(planning) == 3  # the churn threshold, not workflow.max_iterations
    assert "failed 3 times" in again.stdout and "waits for core" in again.stdout


def test_what_the_model_said_is_recorded_and_replayed(demo_run):
    """Issue 22: no event carried the assistant's messages; `replay` could not show why a model stopped."""
    from lopen.app.views.replay import TextView

    _, _, _, store, session, events, _ = demo_run
    rules = {rule.name: rule for rule in load_playbook(PLAYBOOK).rules}
    said = [e for e in events if isinstance(e, ev.ModelSaid)]
    started = {e.invocation_id: e for e in events if isinstance(e, ev.InvocationStarted)}
    assert said and all(e.invocation_id in started for e in said)
    core1 = {
        e.text for e in said if started[e.invocation_id].task == "core/1" and started[e.invocation_id].kind == "task"
    }
    scripted = {t.text for t in rules["task-core-1"].turns if t.text}
    assert scripted and scripted <= core1  # every message of the scripted conversation, verbatim
    view = TextView(width=200, full=True)
    shown = [line for rec in session_records(store, store.projections.project, session.id) for line in view.render(rec)]
    assert any(next(iter(scripted)) in line for line in shown)


def rewrite_bundle(bundle: Path, out: Path, change: Callable[[str, bytes], bytes]) -> None:
    """A copy of ``bundle`` whose members went through ``change(name, data)``."""
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            target.writestr(name, change(name, source.read(name)))


def test_an_auditors_export_verifies_without_the_repository_and_names_what_was_changed(demo_run, tmp_path):
    """Issue 22, items 3 and 5: every commit carries the chain head, `lopen verify` says git witnesses the
    log; `lopen export` of the session verifies on its own after the repository is gone, with every blob its
    events name, and a byte of an event, a consistently rewritten history, a commit's rewritten trailer, a
    blob's text rewritten with its chain head or a blob left out is named."""
    code, root, _, _, session, events, _ = demo_run
    assert code == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOPEN_")}
    copy = tmp_path / "project"
    shutil.copytree(root, copy, symlinks=True)  # the shared run's checkout stays for the other tests

    verified = lopen(copy, env, "verify", "--full")
    commits = [e for e in events if isinstance(e, ev.CommitRecorded)]
    assert len(commits) >= 3 and all(e.chain for e in commits)
    assert verified.returncode == 0 and f"{len(commits)} commits witnessed by git" in verified.stdout, verified
    assert "not witnessed" not in verified.stdout
    bodies = [git(copy, "log", "-1", "--format=%B", e.sha) for e in commits]
    assert all(
        f"Lopen-Session: {session.id}\nLopen-Chain: {e.chain}" in b for e, b in zip(commits, bodies, strict=True)
    )

    bundle = tmp_path / "audit.zip"
    exported = lopen(copy, env, "export", session.id, "--out", str(bundle))
    assert exported.returncode == 0 and f"check it anywhere with `lopen verify --bundle {bundle}`" in exported.stdout
    shutil.rmtree(copy)  # the auditor's machine: the bundle and nothing else
    auditor = tmp_path / "auditor"
    auditor.mkdir()
    checked = lopen(auditor, env, "verify", "--bundle", str(bundle))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("bundle intact: ") and f"of session {session.id}" in checked.stdout
    assert f"{len(commits)} commits witnessed, 1 approved spec matching its approval" in checked.stdout

    with zipfile.ZipFile(bundle) as z:
        lines = [json.loads(line) for line in z.read("events.jsonl").splitlines()]
    project = lines[0]["stream"].removeprefix("module:").partition("/")[0]
    keys = {e.result_blob for e in events if isinstance(e, ev.ToolCalled) and e.result_blob}
    keys |= {key for e in events if isinstance(e, ev.InvocationStarted) for key in e.prompt.values()}
    assert len(keys) > 10  # every whole result and prompt part the session's events name travels with them
    assert {e["stream"] for e in lines if e["topic"].startswith("BlobStored@")} == {f"blob:{project}:{k}" for k in keys}
    target = [e for e in lines if e["topic"].startswith("TokensUsed@")][2]  # an event mid-stream
    named = f"event #{target['seq']} of {target['stream']} (version {target['version']}, TokensUsed)"

    def flip(name: str, data: bytes) -> bytes:  # one byte of one event's stored bytes
        if name != "events.jsonl":
            return data
        changed = [dict(e, state=e["state"].replace('"input":', '"input":9', 1)) if e is target else e for e in lines]
        return b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in changed)

    flipped = tmp_path / "flipped.zip"
    rewrite_bundle(bundle, flipped, flip)
    failed = lopen(auditor, env, "verify", "--bundle", str(flipped))
    assert failed.returncode == 1 and f"{named} does not match the hash chain" in failed.stderr, failed.stderr

    def forge(name: str, data: bytes) -> bytes:  # the event and every link after it, and the head, rewritten
        if name not in ("events.jsonl", "manifest.json"):
            return data
        link, head = chain.genesis(target["stream"]), [0, ""]
        forged = []
        for e in lines:
            if e["stream"] != target["stream"]:  # the blobs' streams are chains of their own
                forged.append(e)
                continue
            state = e["state"].replace('"input":', '"input":9', 1) if e is target else e["state"]
            state = chain.with_link(state.encode()[: -chain.TAIL] + b"}", link).decode()
            link = chain.digest(e["topic"], state.encode())
            head = [e["version"], link.decode()]
            forged.append(dict(e, state=state))
        if name == "manifest.json":
            manifest = json.loads(data)
            manifest["streams"][target["stream"]]["head"] = head
            return json.dumps(manifest).encode()
        return b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in forged)

    forged = tmp_path / "forged.zip"
    rewrite_bundle(bundle, forged, forge)
    failed = lopen(auditor, env, "verify", "--bundle", str(forged))
    witness = next(e for e in commits if int(e.chain.split()[0]) >= target["version"])
    assert failed.returncode == 1, failed.stdout
    assert f"the history before commit {witness.sha[:12]} is not the one the commit witnessed" in failed.stderr

    def retrailer(name: str, data: bytes) -> bytes:  # a commit's trailer edited in its bundled object
        if name != "commits.jsonl":
            return data
        first, *rest = data.splitlines()
        commit = json.loads(first)
        raw = base64.b64decode(commit["object"]).replace(b"Lopen-Chain: ", b"Lopen-Chain: 1", 1)
        commit["object"] = base64.b64encode(raw).decode()
        return b"\n".join([json.dumps(commit).encode(), *rest]) + b"\n"

    retrailed = tmp_path / "retrailed.zip"
    rewrite_bundle(bundle, retrailed, retrailer)
    failed = lopen(auditor, env, "verify", "--bundle", str(retrailed))
    first = json.loads(zipfile.ZipFile(bundle).read("commits.jsonl").splitlines()[0])["sha"]
    assert failed.returncode == 1 and f"the bundled commit {first[:12]} does not hash to its id" in failed.stderr

    # a blob stored packed (zlib), rewritten with its chain head: its text no longer hashes to its key
    blob = next(e for e in lines if e["topic"].startswith("BlobStored@") and '"packing":"zlib"' in e["state"])
    packed = json.loads(blob["state"])["packed"]
    text = zlib.decompress(base64.b64decode(packed))
    assert len(text) >= 1024 and len(blob["state"]) < len(text), text  # a prompt part or a whole result, packed
    state = blob["state"].replace(packed, base64.b64encode(zlib.compress(text + b"\n(rewritten)")).decode())

    def reblob(name: str, data: bytes) -> bytes:
        if name == "manifest.json":
            manifest = json.loads(data)
            manifest["streams"][blob["stream"]]["head"] = [1, chain.digest(blob["topic"], state.encode()).decode()]
            return json.dumps(manifest).encode()
        if name != "events.jsonl":
            return data
        changed = [dict(e, state=state) if e is blob else e for e in lines]
        return b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in changed)

    reblobbed = tmp_path / "reblobbed.zip"
    rewrite_bundle(bundle, reblobbed, reblob)
    failed = lopen(auditor, env, "verify", "--bundle", str(reblobbed))
    assert failed.returncode == 1, failed.stdout
    assert f"of {blob['stream']} (version 1, BlobStored) is not the blob its key names" in failed.stderr

    # a blob left out, with its line in the manifest: a blob has no head, the event naming it says it is missing
    def unblob(name: str, data: bytes) -> bytes:
        if name == "manifest.json":
            manifest = json.loads(data)
            del manifest["streams"][blob["stream"]]
            return json.dumps(manifest).encode()
        if name != "events.jsonl":
            return data
        return b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in lines if e is not blob)

    unblobbed = tmp_path / "unblobbed.zip"
    rewrite_bundle(bundle, unblobbed, unblob)
    failed = lopen(auditor, env, "verify", "--bundle", str(unblobbed))
    key = blob["stream"].rpartition(":")[2]
    assert failed.returncode == 1, failed.stdout
    assert f"names the blob {key}, which is not in the bundle" in failed.stderr, failed.stderr


def test_the_transcript_shows_the_prompt_the_model_received_what_it_said_and_each_whole_result(demo_run):
    """Issue 22: the prompts Lopen sent were stored as a size and section names, and tool results were cut
    to 300 characters; `replay --transcript` now tells the conversation whole, from the store alone."""
    from tests.e2e.scenario import about, user

    code, root, server, store, session, events, _ = demo_run
    assert code == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOPEN_")}
    shown = lopen(root, env, "replay", session.id, "--transcript")
    as_json = lopen(root, env, "replay", session.id, "--transcript", "--json")

    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr + as_json.stderr
    text = shown.stdout
    # the prompt of task core/1's first turn, as the scripted model received it, is in the transcript whole
    received = user(next(r for r in server.chat_requests if about(r, task="core/1", kind="task")))
    (started,) = [e for e in events if isinstance(e, ev.InvocationStarted) and e.task == "core/1" and e.kind == "task"]
    prompt = store.blob(store.projections.project, started.prompt["user"])
    assert prompt and prompt.strip() in received and len(prompt) > 1000 and prompt in text
    assert "## From the specification" in prompt and "[SLUG-01]" in prompt  # the sections sent, as sent
    # what the model said, verbatim
    said = [e.text for e in events if isinstance(e, ev.ModelSaid)]
    assert said and all(s in text for s in said)
    # the model's reasoning (the playbook gives one turn of core/1 a `reasoning`: the CLI reports it as
    # assistant.reasoning), recorded with its invocation and shown apart from what it said
    (reasoned,) = [e for e in events if isinstance(e, ev.ModelReasoned)]
    thought = "SLUG-01 asks for NFKD normalization and lowercase.\nFirst, see what the project holds"
    assert reasoned.text.startswith(thought) and reasoned.invocation_id == started.invocation_id
    rows = text.splitlines()
    heading = next(i for i, row in enumerate(rows) if "the model's reasoning (a summary)" in row)
    assert rows[heading + 1 : heading + 3] == reasoned.text.splitlines()
    # a tool result longer than the old 300-character cut, whole — exactly what the model got back
    long_calls = [e for e in events if isinstance(e, ev.ToolCalled) and e.result_blob]
    assert long_calls
    results = [r for entry in server.chat_requests for r in entry.tool_results()]
    for call in long_calls:
        whole = store.blob(store.projections.project, call.result_blob)
        assert whole is not None and len(whole) > 300 and whole.startswith(call.result_summary)
        assert whole in text and whole in results
    # the same conversation as JSON: the blobs' texts inlined, in order
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [line["seq"] for line in lines] == sorted(line["seq"] for line in lines)
    assert any(line.get("prompt_text", {}).get("user") == prompt for line in lines)
    assert {line["result"] for line in lines if line.get("result_blob")} >= {
        store.blob(store.projections.project, c.result_blob) for c in long_calls
    }
    verdicts = [line for line in lines if line["type"] == "OracleVerdictRecorded"]
    assert any(not v["passed"] for v in verdicts) and "REJECTED" in text  # the oracle's rejection, in its place


def conversation_of(events: list[ev.Event], folder: str) -> dict[str, list]:
    """What a session's model did, in a form two runs in two folders can be compared by: per invocation in
    order (kind, task, component), per model call its usage, what the model said, its reasoning and its tool
    calls (names and arguments, the folder written as <cwd>, sorted within the call: the CLI runs them in parallel);
    the oracle's verdicts; the commits' messages and trees."""

    def portable(arguments: dict) -> str:
        return json.dumps(arguments, sort_keys=True).replace(folder, "<cwd>")

    invocations: dict[str, list] = {}
    calls: dict[str, list[dict]] = {}
    for e in events:
        if isinstance(e, ev.InvocationStarted):
            invocations[e.invocation_id] = [e.kind, e.task, e.component]
            calls[e.invocation_id] = []
        elif isinstance(e, ev.TokensUsed):
            calls[e.invocation_id].append(
                {"usage": (e.input, e.output, e.cache_read), "said": "", "reasoning": "", "tools": []}
            )
        elif isinstance(e, ev.ModelSaid):
            calls[e.invocation_id][-1]["said"] = e.text
        elif isinstance(e, ev.ModelReasoned):
            calls[e.invocation_id][-1]["reasoning"] = e.text
        elif isinstance(e, ev.ToolCalled):
            calls[e.invocation_id][-1]["tools"].append((e.tool, portable(e.arguments)))
    for made in calls.values():
        for call in made:
            call["tools"].sort()
    return {
        "invocations": [[*invocations[i], calls[i]] for i in invocations],
        "verdicts": [
            (v.scope, v.target, v.passed, v.confidence, v.summary, v.criteria, v.findings)
            for v in events
            if isinstance(v, ev.OracleVerdictRecorded)
        ],
        "commits": [(c.task_id, c.message, c.tree) for c in events if isinstance(c, ev.CommitRecorded)],
    }


def test_a_session_made_a_playbook_plays_again_offline_with_the_same_calls_verdicts_and_commits(
    demo_run, tmp_path, cli_path
):
    """Issue 22, item 6: `lopen playbook <session>` writes a playbook that, run with `lopen run --playbook` in
    a fresh copy of the project (another folder), makes the same tool calls, gets the same verdicts and
    commits the same trees."""
    _, root, _, _, session, events, _ = demo_run
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOPEN_")} | {"COPILOT_CLI_PATH": cli_path}
    book = tmp_path / "recorded.toml"
    made = lopen(root, env, "playbook", session.id, "--out", str(book))
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"wrote {book}: 12 invocations, 38 model calls, 33 tool calls")
    text = book.read_text()
    assert str(root) not in text and "{{cwd}}/slugify/core.py" in text  # it runs in any folder

    again = prepare_project(tmp_path / "again")
    store, project = open_store(again)
    with store:
        approve_spec(again, "slugify", store, project)
    ran = lopen(again, env, "run", "slugify", "--playbook", str(book), "--headless")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    store, project = open_store(again)
    with store:
        store.projections.catch_up()
        (replayed,) = store.projections.sessions.all()
        replayed_events = [r.event for r in session_records(store, project, replayed.id)]
    first, second = (
        conversation_of(events, str(root / ".lopen" / "worktrees" / "slugify")),
        conversation_of(replayed_events, str(again / ".lopen" / "worktrees" / "slugify")),
    )
    assert [len(i[3]) for i in second["invocations"]] == [6, 7, 1, 9, 1, 1, 1, 4, 5, 1, 1, 1]
    assert second["invocations"] == first["invocations"]
    assert [v[:3] for v in second["verdicts"]] == [
        ("task", "core/1", True),
        ("task", "core/2", False),
        ("task", "core/2", True),
        ("component", "core", True),
        ("task", "cli/1", True),
        ("component", "cli", True),
        ("module", "slugify", True),
    ]
    assert second["verdicts"] == first["verdicts"]
    assert len(second["commits"]) == 3 and second["commits"] == first["commits"]
