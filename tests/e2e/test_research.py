"""Research before planning (W9, L3), through the real Copilot CLI and the scripted model: a spec whose
References name topics gets one research invocation on ``models.research``, whose notes the planning
prompt cites and `lopen replay` shows; a spec without references gets none; a resumed run does not
research again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

from events import catalogue as ev
from lopen.app.demo import prepare_project
from lopen.scripted_model import Playbook
from tests.e2e.scenario import (
    DEMO,
    MODULE,
    SPEC,
    about,
    approve,
    git,
    lopen_env,
    playbook,
    rule,
    run_here,
    story,
    turn,
    user,
)

RESEARCH_MODEL = "scripted-research"  # neither the planning nor the building model: the request names it
REFERENCES = """## References

- [Unicode Standard Annex #15: Unicode Normalization Forms](https://unicode.org/reports/tr15/) — what NFKD does
- Python's `unicodedata` module
"""
NOTE = "# Unicode NFKD\n\nNFKD splits accented letters into a base letter and combining marks; drop the marks."
RESEARCH = rule(
    "research",
    [
        turn(
            "Reading what the references say about NFKD.",
            ("log_research", {"module": MODULE, "topic": "Unicode NFKD", "content": NOTE}),
        ),
        turn("One note recorded: unicode-nfkd."),
    ],
    kind="research",
)
SETTINGS: dict[str, object] = {"models.research": RESEARCH_MODEL}


def research_playbook(*first) -> Playbook:
    """The demo's playbook with the research rule (and ``first``) before its rules, serving the research model."""
    book = playbook(*first, RESEARCH)
    return msgspec.structs.replace(book, models=[*DEMO.models, RESEARCH_MODEL])


def with_references(tmp_path: Path) -> Path:
    """The example project, its spec naming two topics to research, approved."""
    root = prepare_project(tmp_path / "project")
    spec = root / SPEC
    text = spec.read_text()
    spec.write_text(text[: text.index("## References")] + REFERENCES)
    git(root, "commit", "-qam", "docs(slugify): topics to research")
    approve(root)
    return root


def test_references_get_one_research_invocation_on_the_research_model_cited_by_planning(tmp_path, cli_path, scripted):
    root = with_references(tmp_path)
    server = scripted(research_playbook())

    ran = run_here(root, server, cli_path, SETTINGS, stop_before="building")

    assert ran.code == 0, "\n".join(ran.lines)
    researched = [r for r in server.chat_requests if about(r, kind="research")]
    assert researched and {r.body["model"] for r in researched} == {RESEARCH_MODEL}
    assert "what NFKD does" in user(researched[0])  # the topics, in the prompt
    planning = [r for r in server.chat_requests if about(r, kind="planning")]
    assert planning and {r.body["model"] for r in planning} == {"scripted-opus"}
    assert "- unicode-nfkd: Unicode NFKD" in user(planning[0])  # the note, cited by topic and title
    assert server.chat_requests.index(researched[-1]) < server.chat_requests.index(planning[0])

    told = story(root)
    (invocation,) = told.invocations(kind="research")
    assert (invocation.model, invocation.step, invocation.phase) == (RESEARCH_MODEL, 2, "planning")
    assert told.finish_of(invocation).outcome == "ok"
    (done,) = told.of(ev.ResearchCompleted)
    assert len(done.topics) == 2 and done.invocation_id == invocation.invocation_id
    assert [(n.topic, n.title) for n in done.notes] == [("unicode-nfkd", "Unicode NFKD")]
    steps = [(e.step, e.why) for e in told.of(ev.StepEntered)]
    assert steps[0] == (2, "the specification names 2 topics to research before planning")
    assert steps[1] == (2, "no components recorded yet")  # the phase change: research, then planning
    note = git(root, "show", f"lopen/{MODULE}:docs/requirements/{MODULE}/RESEARCH-unicode-nfkd.md")
    assert note == NOTE  # committed on the module's branch: every later worktree, a lane's too, starts with it
    assert "unicode-nfkd" in git(root, "show", f"lopen/{MODULE}:docs/requirements/{MODULE}/RESEARCH.md")
    assert git(root, "log", "-1", "--format=%s", f"lopen/{MODULE}") == f"docs({MODULE}): research notes"
    headless = "\n".join(ran.lines)
    assert (
        "  ✓ research on 2 topics: 1 note for planning and the tasks\n"
        "    - unicode-nfkd: Unicode NFKD — NFKD splits accented letters into a base letter and combining marks; "
        "drop the marks.\n"
        "✓ researched 2 topics: unicode-nfkd\n"
        "→ step 2/7 Determine Dependencies (planning): no components recorded yet"
    ) in headless

    replay = subprocess.run(
        [sys.executable, "-m", "lopen", "replay", told.session_id],
        cwd=root,
        env=lopen_env(cli_path, server.url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replay.returncode == 0, replay.stderr
    assert "ResearchCompleted" in replay.stdout and "research on 2 topics: 1 note" in replay.stdout
    assert "note unicode-nfkd: Unicode NFKD" in replay.stdout


def test_a_spec_without_references_runs_no_research(tmp_path, cli_path, scripted):
    root = prepare_project(tmp_path / "project")  # the example's References say "None"
    approve(root)
    server = scripted(research_playbook())

    ran = run_here(root, server, cli_path, SETTINGS, stop_before="building")

    assert ran.code == 0, "\n".join(ran.lines)
    assert server.uses("research") == 0
    assert not any(about(r, kind="research") for r in server.chat_requests)
    told = story(root)
    assert told.invocations(kind="research") == [] and told.of(ev.ResearchCompleted) == []


def test_a_resumed_run_does_not_research_again(tmp_path, cli_path, scripted):
    root = with_references(tmp_path)
    stuck = rule("plan-nothing", [turn("I cannot plan yet.")], max_uses=1, kind="planning")
    server = scripted(research_playbook(stuck))

    first = run_here(root, server, cli_path, {**SETTINGS, "workflow.failure_threshold": 1}, stop_before="building")
    assert first.code == 2, "\n".join(first.lines)  # researched, then planning failed: paused for a person
    assert server.uses("research") == 2  # one invocation: its two turns
    before = len(server.chat_requests)

    second = run_here(root, server, cli_path, SETTINGS)  # resumed: plans, builds, verifies

    assert second.code == 0, "\n".join(second.lines)
    later = server.chat_requests[before:]
    assert later and not any(about(r, kind="research") for r in later)
    assert any(about(r, kind="planning") for r in later)
    tasks = [r for r in later if about(r, kind="task")]
    assert tasks and all("- unicode-nfkd: Unicode NFKD\n" in user(r) for r in tasks)  # every task cites the note
    told = story(root)  # one session, resumed, complete
    assert told.status == "completed"
    assert len(told.invocations(kind="research")) == 1 and len(told.of(ev.ResearchCompleted)) == 1
    commits = git(root, "log", "--format=%s", f"main..lopen/{MODULE}").splitlines()
    assert commits[-1] == f"docs({MODULE}): research notes" and len(commits) == 4  # the notes first, then 3 tasks
