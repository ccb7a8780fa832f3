"""A spec section too long for the prompt's budget is sent as a summary (issue 24 item 8, L7), through
`lopen run`, the real Copilot CLI and the scripted model: with a small `context.token_budget`, the
component's long section is summarised once by the oracle's model, and the prompts that need it — the
first task's, and the next task's from the cache — get the summary, marked, instead of nothing."""

from __future__ import annotations

import subprocess

from events import catalogue as ev
from lopen.app.demo import prepare_project
from lopen.documents.summaries import SUMMARY_DIR
from tests.e2e.scenario import (
    LOPEN_RUN,
    MODULE,
    ORACLE_MODEL,
    SPEC,
    about,
    approve,
    git,
    lopen_env,
    playbook,
    rule,
    story,
    turn,
    user,
)

SECTION = "Core Component Notes"
# one paragraph on one line, as soft-wrapping editors write it: a cut keeps no useful head of it
PARAGRAPH = (
    "The core keeps normalize() and slugify() free of global state: normalize uses unicodedata.normalize('NFKD') "
    "and drops every character whose encoding to ASCII fails, then lowercases and strips; slugify finds the words "
    "with one compiled regular expression, joins them with the separator, and when max_length is set keeps whole "
    "leading words while they fit, cutting a first word that is longer than the limit. "
) * 8
SUMMARY = (
    "- normalize(): NFKD, drop what has no ASCII form, lowercase, strip; no global state.\n"
    "- slugify(): words by one compiled regex, joined with the separator; max_length keeps whole leading "
    "words, a too-long first word is cut."
)
MARKER = (
    f"==== Summary of § {SECTION} (the section is longer than this prompt's budget; "
    f'ask with read_spec("{MODULE}", "{SECTION}") for the whole) ===='
)
BUDGET = "1000"  # the planning prompt has no room for a summary; a task's and the oracle's have


def test_a_section_over_the_budget_is_summarised_once_and_sent_marked_in_later_prompts(tmp_path, cli_path, scripted):
    root = prepare_project(tmp_path / "project")
    spec = root / SPEC
    spec.write_text(spec.read_text().replace("## Notes", f"## {SECTION}\n\n{PARAGRAPH.strip()}\n\n## Notes", 1))
    git(root, "commit", "-qam", "docs(slugify): notes on the core")
    approve(root)
    server = scripted(playbook(rule("summary", [turn(SUMMARY)], kind="summary")))
    env = lopen_env(cli_path, server.url, context__token_budget=BUDGET)

    ran = subprocess.run(LOPEN_RUN, cwd=root, env=env, capture_output=True, text=True, timeout=300)

    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    # one summary request, on the oracle's model, of the whole section
    (asked,) = [r for r in server.chat_requests if about(r, kind="summary")]
    assert asked.body["model"] == ORACLE_MODEL and PARAGRAPH.strip() in user(asked)
    assert not asked.body.get("tools")  # no tools at all
    # the first task's prompt carries it, marked, in place of the section; so does the next task's
    for task in ("core/1", "core/2"):
        prompt = user(next(r for r in server.chat_requests if about(r, kind="task", task=task)))
        assert f"{MARKER}\n{SUMMARY}\n" in prompt and PARAGRAPH[:300] not in prompt

    told = story(root)
    assert told.status == "completed"
    (summary,) = told.invocations(kind="summary")
    (task,) = [e for e in told.invocations(kind="task") if e.invocation_id == summary.parent_invocation]
    assert (task.task, summary.model, summary.sections_sent) == ("core/1", ORACLE_MODEL, (SECTION,))
    assert told.index(summary) < told.index(task)  # made for the prompt, before it was sent
    assert told.finish_of(summary).outcome == "ok"
    used = [e for e in told.of(ev.TokensUsed) if e.invocation_id == summary.invocation_id]
    assert len(used) == 1 and used[0].input > 0  # counted like any invocation
    summarised = [e for e in told.invocations(kind="task") if SECTION in e.sections_summarised]
    assert [e.task for e in summarised][:2] == ["core/1", "core/2"]  # the second from the cache
    (planning,) = told.invocations(kind="planning")[:1]
    assert SECTION in planning.sections_cut and not planning.sections_summarised  # no room there: cut
    (cached,) = (root / SUMMARY_DIR).glob("*.md")
    assert cached.read_text() == SUMMARY + "\n"
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""  # the cache stays out of git
