"""Back-pressure and recovery end to end (issue 6): budgets, churn, false completion, tool
discipline, spec drift, crash resume, rate limits and model fallback.

Real Copilot CLI, real git, real event store; only the model is scripted. Each playbook is the
demo's (lopen/playbooks/slugify.toml) with a few rules put first or replaced: a rule placed first
with ``max_uses`` takes precedence, and its uses running out hands the requests back to the demo.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time

import pytest

from e2e.scenario import (
    DEMO,
    DEMO_RULES,
    LOPEN_RUN,
    MAIN_MODEL,
    MODULE,
    ORACLE_MODEL,
    SPEC,
    TEST_COMMAND,
    about,
    alive,
    approve,
    approved_project,
    descendants,
    git,
    lopen_env,
    playbook,
    rule,
    run_here,
    story,
    system,
    tokens_of,
    turn,
    wait_for,
    worktree,
)
from events import catalogue as ev
from lopen.errors import LopenError
from lopen.scripted_model import Rule, ScriptedModelServer, Turn, Usage

pytestmark = pytest.mark.e2e


# -- 1. budgets (B1) -----------------------------------------------------------------------------

PLANNING_TOKENS = tokens_of("plan-slugify")
CORE_1_TOKENS = tokens_of("task-core-1") + tokens_of("oracle-core-1")
FIRST_USAGE = next(t.usage for t in DEMO_RULES["task-core-1"].turns if t.usage)
FIRST_CALL = FIRST_USAGE.prompt_tokens + FIRST_USAGE.completion_tokens
BUDGET = 90_000
# the main model's price (USD per million input, cached input, output tokens): cost = this × what was served
PRICE = {"input": 5.0, "cached_input": 0.5, "output": 25.0}


def served_cost(*usages: Usage) -> float:
    """What the scripted model's answers cost at PRICE: uncached input, cached input, output."""
    return (
        sum(
            (u.prompt_tokens - u.cached_tokens) * PRICE["input"]
            + u.cached_tokens * PRICE["cached_input"]
            + u.completion_tokens * PRICE["output"]
            for u in usages
        )
        / 1_000_000
    )


def test_a_token_budget_stops_the_invocation_inside_and_pauses_headless_with_the_figures(tmp_path, cli_path, scripted):
    # the warning (0.8) is crossed by the planning invocation alone; core/1's first model call crosses the
    # pause (0.9), so its invocation is stopped right after that call (issue 23: budgets hold inside a call)
    assert 0.8 <= PLANNING_TOKENS / BUDGET < 0.9 <= (PLANNING_TOKENS + FIRST_CALL) / BUDGET
    assert PLANNING_TOKENS + CORE_1_TOKENS > PLANNING_TOKENS + FIRST_CALL  # core/1 would have gone on
    server = scripted(playbook())
    root = approved_project(tmp_path)
    prices = json.dumps({MAIN_MODEL: PRICE})  # the oracle's scripted-mini stays unpriced
    env = lopen_env(
        cli_path, server.url, BUDGET__TOKEN_BUDGET_PER_MODULE=str(BUDGET), BUDGET__PRICES=prices, DISPLAY__TUI="false"
    )
    terminal, stdin = os.openpty()  # a terminal on stdin: --headless must still never ask
    try:
        done = subprocess.run(
            [*LOPEN_RUN, "--unattended"],  # --unattended does not skip a budget pause either
            cwd=root,
            env=env,
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        os.close(stdin)
        os.close(terminal)

    assert done.returncode == 2, done.stdout + done.stderr
    assert "Continue?" not in done.stdout + done.stderr
    paused_at = PLANNING_TOKENS + FIRST_CALL
    assert paused_at <= 0.9 * BUDGET + FIRST_CALL  # overshot by one model call at most
    figures = f"budget.token_budget_per_module: {paused_at:,} of {BUDGET:,} ({paused_at / BUDGET:.0%})"
    inside = f"{figures} — stopped inside the invocation"
    last = done.stdout.strip().splitlines()[-2]
    assert last.startswith(f"! {inside}"), done.stdout
    assert "lopen config set budget.token_budget_per_module" in last
    warned = f"budget.token_budget_per_module: {PLANNING_TOKENS:,} of {BUDGET:,} ({PLANNING_TOKENS / BUDGET:.0%})"
    assert done.stdout.count(f"! budget: {warned}") == 1  # the warning line, once
    assert "max_iterations" not in last

    run = story(root)
    started = run.invocations()
    assert [(e.kind, e.task) for e in started] == [("planning", ""), ("task", "core/1")]
    assert run.totals.total == paused_at  # what the model served, to the call
    trips = [e for e in run.of(ev.GuardrailTripped) if e.category == "budget"]
    assert [(e.level, e.detail) for e in trips] == [("warn", warned), ("pause", inside)]
    warn, pause = trips
    assert run.index(run.finish_of(started[0])) < run.index(warn) < run.index(started[1])
    assert run.index(run.finish_of(started[1])) < run.index(pause)
    stopped = run.finish_of(started[1])
    assert (stopped.outcome, stopped.error_kind) == ("error", "budget")
    core_1 = [e.to_state for e in run.of(ev.TaskStatusChanged) if e.task_id == "core/1"]
    assert core_1 == ["in-progress"]  # not failed: resumable
    assert isinstance(run.events[-1], ev.SessionPaused) and inside in run.events[-1].reason
    assert run.status == "paused"
    assert not any(about(r, task="core/2") for r in server.chat_requests)

    # cost in money: the price table × the tokens the scripted model served, the same in every view
    plan_usages = [t.usage or DEMO.default_usage for t in DEMO_RULES["plan-slugify"].turns]
    cost = served_cost(*plan_usages, FIRST_USAGE)
    assert run.totals.cost == pytest.approx(cost) and run.totals.unpriced == 0
    shown = subprocess.run(
        [*LOPEN_RUN[:3], "session", "show", run.session_id], cwd=root, env=env, capture_output=True, text=True
    )
    assert f"- cost: ${cost:,.2f}" in shown.stdout, shown.stdout + shown.stderr
    logged = subprocess.run([*LOPEN_RUN[:3], "log", "core/1"], cwd=root, env=env, capture_output=True, text=True)
    spent = f"spent: {FIRST_CALL:,} tokens, 1 premium request, ${served_cost(FIRST_USAGE):,.2f} in 1 model call"
    assert spent in logged.stdout, logged.stdout + logged.stderr


def test_a_premium_budget_stops_the_invocation_after_the_call_that_reaches_it(tmp_path, cli_path, scripted):
    """The main model priced at 3 premium requests a prompt: planning costs 3 (50% of 6), core/1's first
    call 3 more (100%): its invocation is stopped right after that call, not after its last."""
    server = scripted(playbook())
    root = approved_project(tmp_path)
    extra = {
        "budget.premium_budget_per_module": 6,
        "budget.prices": {MAIN_MODEL: {**PRICE, "premium": 3}},
        "workflow.unattended": True,
    }

    ran = run_here(root, server, cli_path, extra)

    assert ran.code == 2, "\n".join(ran.lines)
    figures = "budget.premium_budget_per_module: 6 of 6 (100%) — stopped inside the invocation"
    assert figures in ran.detail and "lopen config set budget.premium_budget_per_module" in ran.detail
    run = story(root)
    assert run.totals.premium == 6 <= 0.9 * 6 + 3  # overshot by one model call at most
    assert [e.premium for e in run.of(ev.TokensUsed) if e.premium] == [3, 3]  # each invocation's first call
    assert sum(about(r, task="core/1") for r in server.chat_requests) == 1  # stopped after its first call
    (stopped,) = [run.finish_of(e) for e in run.invocations(task="core/1")]
    assert stopped.error_kind == "budget"
    assert [e.to_state for e in run.of(ev.TaskStatusChanged) if e.task_id == "core/1"] == ["in-progress"]
    assert run.status == "paused"


def test_an_interactive_run_asks_at_the_budget_pause_and_goes_on_when_told(tmp_path, cli_path, scripted):
    """Without --headless and with a terminal, the pause is a question; "y" lets the run finish."""
    server = scripted(playbook())
    root = approved_project(tmp_path)
    env = lopen_env(cli_path, server.url, BUDGET__TOKEN_BUDGET_PER_MODULE=str(BUDGET), DISPLAY__TUI="false")
    command = [arg for arg in LOPEN_RUN if arg != "--headless"]
    terminal, tty = os.openpty()  # Lopen gets the terminal's side; the test types on the other
    child = subprocess.Popen(command, cwd=root, env=env, stdin=tty, stdout=tty, stderr=tty)
    os.close(tty)
    seen = b""
    try:
        while b"Continue?" not in seen and child.poll() is None:
            ready, _, _ = select.select([terminal], [], [], 60)
            assert ready, seen.decode(errors="replace")
            seen += os.read(terminal, 4096)
        os.write(terminal, b"y\n")
        deadline = time.monotonic() + 180
        while child.poll() is None and time.monotonic() < deadline:
            if select.select([terminal], [], [], 1)[0]:
                with contextlib.suppress(OSError):
                    seen += os.read(terminal, 4096)
    finally:
        os.close(terminal)
        if child.poll() is None:
            child.kill()

    assert child.returncode == 0, seen.decode(errors="replace")[-3000:]
    run = story(root)
    budget = [(e.level, e.detail) for e in run.of(ev.GuardrailTripped) if e.category == "budget"]
    assert budget[-1][0] == "warn" and budget[-1][1].endswith("the user chose to continue")
    assert ("pause", budget[-1][1].removesuffix("; the user chose to continue")) in budget
    assert run.status == "completed"


# -- 2. churn (B3, W7) ---------------------------------------------------------------------------

CHURN_REASONS = [
    "normalize() drops the digits of '№5'; I could not find out why",
    "the NFKD table of this Python build lacks the ligature 'ﬁ'",
    "still failing on '№5' after a third approach",
]


def failing_attempt(n: int) -> Rule:
    """One invocation of core/1 (two requests) that gives up with its own reason."""
    fail = ("update_task_status", {"task_id": "core/1", "status": "failed", "reason": CHURN_REASONS[n]})
    return rule(
        f"core-1-fails-{n + 1}",
        [turn("I cannot get this to work.", fail), turn("Marked core/1 failed.")],
        max_uses=2,
        kind="task",
        task="core/1",
    )


def test_a_task_failing_three_times_pauses_a_headless_run_with_each_reason(tmp_path, cli_path, scripted):
    never = rule("core-1-fourth-attempt", [turn("A fourth attempt.")], kind="task", task="core/1")
    server = scripted(playbook(*(failing_attempt(n) for n in range(3)), replace={"task-core-1": never}))
    root = approved_project(tmp_path)

    ran = run_here(root, server, cli_path, {"workflow.failure_threshold": 3, "workflow.unattended": True})

    assert ran.code == 2, "\n".join(ran.lines)
    assert "core/1 failed 3 times" in ran.detail and "workflow.failure_threshold=3" in ran.detail
    assert all(reason in ran.detail for reason in CHURN_REASONS)
    run = story(root)
    assert len(run.invocations(task="core/1")) == 3
    assert server.uses("core-1-fourth-attempt") == 0
    failures = [e.reason for e in run.of(ev.TaskStatusChanged) if e.task_id == "core/1" and e.to_state == "failed"]
    assert failures == CHURN_REASONS
    (churn,) = [e for e in run.of(ev.GuardrailTripped) if e.category == "churn"]
    assert churn.level == "pause"
    assert run.index(run.finish_of(run.invocations(task="core/1")[-1])) < run.index(churn)
    assert isinstance(run.events[-1], ev.SessionPaused)
    assert run.status == "paused"


# -- 3 and 4. false completion (B4) and tool discipline (B5): one shared run ----------------------

CORE_1 = DEMO_RULES["task-core-1"].turns
VIEW_NORMALIZE = ("view", {"path": "{{cwd}}/slugify/normalize.py"})
COMPLETE_CORE_1 = ("update_task_status", {"task_id": "core/1", "status": "complete", "reason": "verified"})
UNDISCIPLINED_CORE_1 = [
    *CORE_1[:3],  # context, mkdir, create the package, normalize() and its tests
    *(turn(f"Reading normalize.py again ({n}/5).", VIEW_NORMALIZE) for n in range(1, 6)),
    CORE_1[4],  # verify_task_completion — without ever running the tests
    turn("Verified, so complete.", COMPLETE_CORE_1),  # refused: the tests never ran
    CORE_1[3],  # bash: python -m pytest -q
    turn("The tests pass; complete now.", COMPLETE_CORE_1),
    CORE_1[6],
]


@pytest.fixture(scope="module")
def undisciplined_run(tmp_path_factory, cli_path):
    """core/1 reads normalize.py five times and claims completion before running the tests; core/2
    ends at once; Lopen pauses after three invocations (workflow.max_iterations)."""
    book = playbook(
        replace={
            "task-core-1": rule("task-core-1", UNDISCIPLINED_CORE_1, kind="task", task="core/1"),
            "task-core-2": rule("task-core-2", [turn("Stopping here.")], kind="task", task="core/2"),
        }
    )
    with ScriptedModelServer(book) as server:
        root = approved_project(tmp_path_factory.mktemp("undisciplined"))
        ran = run_here(root, server, cli_path, {"workflow.max_iterations": 3})
    return ran, story(root), server


def test_a_completion_claim_without_running_the_tests_is_refused(undisciplined_run):
    ran, run, server = undisciplined_run
    assert ran.code == 2, "\n".join(ran.lines)  # max_iterations, after core/2

    (refused,) = run.of(ev.CompletionRefused)
    assert (refused.scope, refused.target) == ("task", "core/1")
    assert TEST_COMMAND in refused.why and "never run" in refused.why
    assert any(line.strip().startswith("! refused completion of task core/1") for line in ran.lines)

    # the verification passed before the claim: only the missing test run made Lopen refuse
    passed = [e for e in run.of(ev.OracleVerdictRecorded) if e.target == "core/1"]
    assert [e.passed for e in passed] == [True] and run.index(passed[0]) < run.index(refused)
    # the task is not complete after the refused call, until the tests ran and it was claimed again
    assert not [
        e for e in run.events[: run.index(refused)] if isinstance(e, ev.TaskStatusChanged) and e.to_state == "complete"
    ]
    after = run.events[run.index(refused) :]
    test_run = next(
        i for i, e in enumerate(after) if isinstance(e, ev.ToolCalled) and e.arguments.get("command") == TEST_COMMAND
    )
    completed = [i for i, e in enumerate(after) if isinstance(e, ev.TaskStatusChanged) and e.to_state == "complete"]
    assert completed and min(completed) > test_run
    claims = [e for e in run.of(ev.ToolCalled) if e.tool == "update_task_status"]
    assert [c.success for c in claims] == [False, True]
    told = next(r for r in server.chat_requests if any("never run" in t for t in r.tool_results()))
    assert TEST_COMMAND in told.tool_results()[-1]


def test_re_reading_a_file_five_times_puts_a_corrective_instruction_in_the_next_prompt(undisciplined_run):
    ran, run, server = undisciplined_run
    core_1, core_2 = run.invocations(task="core/1")[0], run.invocations(task="core/2")[0]
    views = [e for e in run.of(ev.ToolCalled) if e.invocation_id == core_1.invocation_id and e.tool == "view"]
    assert len(views) == 5

    (issued,) = run.of(ev.CorrectiveInstructionIssued)
    assert (issued.invocation_id, issued.category) == (core_1.invocation_id, "file-reads")
    assert "slugify/normalize.py 5 times" in issued.instruction
    assert run.index(views[-1]) < run.index(issued) < run.index(core_2)
    # the next invocation's prompt carries it, and only that invocation's
    with_note = [r for r in server.chat_requests if issued.instruction in system(r)]
    assert with_note and all(about(r, kind="task", task="core/2") for r in with_note)
    first_core_2 = next(r for r in server.chat_requests if about(r, kind="task", task="core/2"))
    assert first_core_2 in with_note and "Notes from Lopen" in system(first_core_2)
    assert ran.code == 2  # soft: nothing was refused or paused for it (the pause is max_iterations)
    assert "max_iterations" in ran.detail


# -- 5. spec drift (W8) --------------------------------------------------------------------------

SLUG_04 = (
    '- [ ] [SLUG-04] A text without any word gives the empty slug: `slugify("")` and\n  `slugify("!!! ???")` are `""`.'
)
SLUG_04_EDITED = (
    '- [ ] [SLUG-04] A text without any word gives the empty slug: `slugify("")`,\n'
    '  `slugify("   ")` and `slugify("!!! ???")` are `""`.'
)


def test_an_acceptance_criterion_edited_after_planning_stops_for_approval_then_replans_from_step_3(
    tmp_path, cli_path, scripted
):
    server = scripted(playbook())
    root = approved_project(tmp_path)
    planned = run_here(root, server, cli_path, stop_before="building", no_resume=True)  # `lopen plan slugify`
    assert planned.code == 0, "\n".join(planned.lines)
    spec = root / SPEC
    assert SLUG_04 in spec.read_text()
    spec.write_text(spec.read_text().replace(SLUG_04, SLUG_04_EDITED))
    seen = len(server.chat_requests)

    # an edit nobody approved is never built from: the run stops for a person before any model call
    with pytest.raises(LopenError) as stopped:
        run_here(root, server, cli_path)
    assert stopped.value.exit_code == 2 and "changed since it was approved (Acceptance Criteria)" in stopped.value.what
    assert f"lopen spec approve {MODULE}" in stopped.value.how
    assert len(server.chat_requests) == seen
    approve(root)

    ran = run_here(root, server, cli_path)

    assert ran.code == 0, "\n".join(ran.lines)
    run = story(root)
    assert len(run.of(ev.SessionResumed)) == 1
    (drift,) = run.of(ev.SpecDriftDetected)
    assert drift.changed_sections == ("Acceptance Criteria",) and drift.reentry_step == 3
    assert "  ! spec changed: Acceptance Criteria" in ran.lines
    assert run.index(run.of(ev.SessionResumed)[0]) < run.index(drift)
    steps = [(e.step, e.why) for e in run.of(ev.StepEntered)]
    assert (3, "the approved specification changed: re-planning") in steps
    replanned = run.invocations(kind="planning", step=3)
    assert len(replanned) == 1 and run.index(drift) < run.index(replanned[0])
    first = next(r for r in server.chat_requests[seen:] if about(r, kind="planning", step="3") and r.turn == 0)
    assert "specification was changed and approved again" in system(first) and "Acceptance Criteria" in system(first)

    core_lists = [tuple(t.id for t in e.tasks) for e in run.of(ev.TasksRecorded) if e.component == "core"]
    assert core_lists == [("core/1", "core/2"), ("core/1", "core/2")]  # the first plan, then the re-plan
    done = [e.task_id for e in run.of(ev.TaskStatusChanged) if e.to_state == "complete"]
    assert done == ["core/1", "core/2", "cli/1"]
    assert run.status == "completed"


# -- 6. crash resume (S6, W3) --------------------------------------------------------------------

SLOW = 20.0
# core/2's second request (after it viewed normalize.py, before it writes anything) hangs once
SLOW_CORE_2 = rule(
    "core-2-hangs",
    [Turn(text="(never delivered: Lopen is killed while waiting)", fault="slow", delay=SLOW)],
    max_uses=1,
    from_turn=1,
    kind="task",
    task="core/2",
)


def test_a_killed_run_resumes_at_the_cut_off_task_without_redoing_losing_or_double_counting(
    tmp_path, cli_path, scripted
):
    server = scripted(playbook(SLOW_CORE_2))
    root = approved_project(tmp_path)
    env = lopen_env(cli_path, server.url)
    with (tmp_path / "first.out").open("w") as out:
        first = subprocess.Popen(
            LOPEN_RUN, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            hung = wait_for(lambda: server.uses("core-2-hangs") == 1 or first.poll() is not None, 150)
            assert hung and first.poll() is None, (tmp_path / "first.out").read_text()
            children = descendants(first.pid)
            assert children, "the Copilot CLI runs as a child of lopen"
            killed_at = time.time()
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            cli_gone = wait_for(lambda: not any(alive(pid) for pid in children), 10)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first.pid, signal.SIGKILL)  # whatever is left of the first run's process group
            first.wait()
    assert cli_gone, "the Copilot CLI outlived the lopen process that was killed"
    before = story(root)
    assert before.status == "running"
    assert [e.task for e in before.invocations(kind="task")] == ["core/1", "core/2"]
    cut_off = before.invocations(task="core/2")[0]
    assert before.finish_of(cut_off) is None  # it was killed mid-way: no finish recorded…
    cut_usage = [e for e in before.of(ev.TokensUsed) if e.invocation_id == cut_off.invocation_id]
    assert len(cut_usage) == 1  # …but the model call it made before the kill was counted as it arrived
    (worktree(root) / "slugify" / "draft_core.py").write_text("# what the cut-off invocation had written\n")

    again = subprocess.run(LOPEN_RUN, cwd=root, env=env, capture_output=True, text=True, timeout=240)

    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"session {before.session_id}" in again.stdout
    run = story(root)
    assert run.session_id == before.session_id and run.status == "completed"
    (resumed,) = run.of(ev.SessionResumed)
    after_resume = [e for e in run.events[run.index(resumed) :] if isinstance(e, ev.InvocationStarted)]
    assert (after_resume[0].kind, after_resume[0].task) == ("task", "core/2")
    rerun = next(r for r in server.chat_requests if r.received_at > killed_at and about(r, task="core/2"))
    system = next(m["content"] for m in rerun.body["messages"] if m["role"] == "system")
    assert "did not finish it" in system and "slugify/draft_core.py" in system  # told what the kill left behind
    assert [e.task for e in run.invocations(kind="task")] == ["core/1", "core/2", "core/2", "cli/1"]

    core_1 = [r.received_at for r in server.chat_requests if about(r, task="core/1")]
    assert core_1 and max(core_1) < killed_at  # core/1 and its oracle: the first run's requests only
    assert server.uses("core-2-hangs") == 1  # the hanging turn was not replayed
    done = [e.task_id for e in run.of(ev.TaskStatusChanged) if e.to_state == "complete"]
    assert done == ["core/1", "core/2", "cli/1"]
    assert len(git(root, "log", "--format=%s", "main..lopen/slugify").splitlines()) == 3

    used = run.of(ev.TokensUsed)
    assert run.totals.input == sum(e.input for e in used)
    assert run.totals.output == sum(e.output for e in used)
    # ...which is every call the model answered, the cut-off invocation's included: nothing lost, nothing twice
    answered = [r for r in server.chat_requests if r.response_kind == "ok"]
    assert len(used) == len(answered) and len({e.call_id for e in used}) == len(used)
    assert run.totals.input == sum(r.usage.prompt_tokens for r in answered)
    assert run.totals.output == sum(r.usage.completion_tokens for r in answered)


# -- 7. rate limits (L6) -------------------------------------------------------------------------


def test_a_model_rate_limited_twice_is_waited_for_and_the_run_completes(tmp_path, cli_path, scripted):
    limited = rule("planning-rate-limited", [Turn(fault="rate_limit", retry_after=1)], max_uses=2, kind="planning")
    server = scripted(playbook(limited))
    root = approved_project(tmp_path)

    ran = run_here(root, server, cli_path, no_resume=True)

    assert ran.code == 0, "\n".join(ran.lines)
    first_turn = [r for r in server.chat_requests if about(r, kind="planning", step="2") and r.turn == 0]
    assert [r.response_kind for r in first_turn] == ["rate_limit", "rate_limit", "ok"]
    assert first_turn[2].received_at - first_turn[1].answered_at >= 0.9  # Retry-After: 1 was honoured

    run = story(root)
    (planning,) = run.invocations(kind="planning", step=2)
    assert run.finish_of(planning).outcome == "ok"
    retries = [e for e in run.of(ev.GuardrailTripped) if e.category == "retry"]
    assert len(retries) == 2 and all(e.level == "warn" and "rate_limit" in e.detail for e in retries)
    assert all(run.index(planning) < run.index(e) < run.index(run.finish_of(planning)) for e in retries)
    shown = [line.strip() for line in ran.lines if line.strip().startswith("! retry:")]
    assert shown == [f"! retry: {e.detail}" for e in retries]
    assert not any("0.0 s" in line for line in shown)  # the CLI's own wait is not known: no fake countdown
    assert run.status == "completed"


# -- 7b. credentials refused mid-run (A4) --------------------------------------------------------


def test_a_key_revoked_mid_run_pauses_it_with_the_work_kept_and_a_new_key_goes_on(tmp_path, cli_path, scripted):
    """The provider answers 401: once during planning (a token the CLI refreshes: its own retry goes on),
    then to every try of core/2 (the key is gone). The run pauses saying how to log in, core/1's commit
    and core/2's place are kept, no attempt of core/2 is counted as failed; with the key back, the next
    run finishes core/2 and cli/1 only."""
    refreshed = rule("planning-key-expired", [Turn(fault="unauthorized")], max_uses=1, kind="planning")
    revoked = rule("core-2-key-revoked", [Turn(fault="unauthorized")], max_uses=3, kind="task", task="core/2")
    server = scripted(playbook(refreshed, revoked))
    root = approved_project(tmp_path)

    ran = run_here(root, server, cli_path, no_resume=True)

    assert ran.code == 2, "\n".join(ran.lines)
    assert ran.detail.startswith("authentication failed: core/2: Authentication failed with provider")
    assert "`lopen auth login`" in ran.detail and "LOPEN_PROVIDER__API_KEY" in ran.detail
    assert server.uses("planning-key-expired") == 1 and server.uses("core-2-key-revoked") == 3  # the CLI retried
    run = story(root)
    assert run.status == "paused" and isinstance(run.events[-1], ev.SessionPaused)
    retried = [e.detail for e in run.of(ev.GuardrailTripped) if e.category == "retry"]
    assert any("transient_auth_error" in d for d in retried)
    (planning,) = run.invocations(kind="planning", step=2)
    assert run.finish_of(planning).outcome == "ok"
    states = [(e.task_id, e.to_state) for e in run.of(ev.TaskStatusChanged)]
    assert ("core/1", "complete") in states and ("core/2", "in-progress") in states
    assert ("core/2", "failed") not in states  # the provider's refusal is no failed attempt of the task
    assert "Lopen-Task: core/1" in git(root, "log", "--format=%B", f"lopen/{MODULE}")  # the verified work kept

    again = run_here(root, server, cli_path)

    assert again.code == 0, "\n".join(again.lines)
    run = story(root)
    assert run.status == "completed"
    assert len(run.invocations(task="core/1")) == 1  # not built again
    assert len(run.invocations(task="core/2")) == 2  # the refused one, and the one that built it
    done = {e.task_id for e in run.of(ev.TaskStatusChanged) if e.to_state == "complete"}
    assert done == {"core/1", "core/2", "cli/1"}
    assert not any(e.to_state == "failed" for e in run.of(ev.TaskStatusChanged))


# -- 8. model fallback (L4) ----------------------------------------------------------------------


def test_an_unavailable_model_falls_back_once_for_the_rest_of_the_session(tmp_path, cli_path, scripted):
    server = scripted(playbook())
    root = approved_project(tmp_path)
    gone = "scripted-retired"
    extra = {"models.planning": gone, "models.building": gone, "models.fallback": [MAIN_MODEL]}

    ran = run_here(root, server, cli_path, extra, no_resume=True)

    assert ran.code == 0, "\n".join(ran.lines)
    run = story(root)
    (fell,) = run.of(ev.ModelFellBack)
    assert (fell.from_model, fell.to_model) == (gone, MAIN_MODEL)
    assert f"  ! model {gone} unavailable, falling back to {MAIN_MODEL}" in ran.lines
    started = run.invocations()
    assert started[0].model == gone and run.index(started[0]) < run.index(fell)
    assert len(started) == 5 and all(e.model == MAIN_MODEL for e in started[1:])

    asked = [r.body["model"] for r in server.chat_requests if r.body["model"] != ORACLE_MODEL]
    assert asked[0] == gone and gone not in asked[1:]  # never requested again
    assert server.chat_requests[0].response_kind == "unknown_model"
    assert run.status == "completed"
