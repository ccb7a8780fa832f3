"""Summaries of spec sections that do not fit a prompt (issue 24 item 8, L7): a section the budget cuts
whole is sent as a summary made once per section content by a tool-less invocation on the oracle's
model, recorded like any invocation and cached under .lopen/cache/summaries/; when it cannot be made
the section is cut as before. A stand-in gateway answers; the journal, the store and the files are real."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from events import catalogue as ev
from events.journal import Journal
from events.store import EventStore
from lopen.config import Settings
from lopen.config.model import Context
from lopen.copilot.results import ContextWindow, ErrorKind, InvocationError, InvocationResult, Usage, UsageReported
from lopen.documents.context import assemble_context
from lopen.documents.summaries import SUMMARY_DIR, Summaries, SummaryFailed, SummaryWanted, section_digest
from lopen.workflow.invoke import Invoker
from lopen.workflow.steps import Kind

# One-line paragraphs (as soft-wrapping editors write them): a cut keeps no useful head of them.
HASHING = "Passwords are hashed with argon2id, memory 64 MiB, 3 iterations, parallelism 4. " * 30
NOTES = "The session store keeps refresh tokens for 30 days and rotates them on every use. " * 30
SPEC = f"""---
name: auth
description: Tokens.
---

# Auth

## Overview

Signs tokens.

## Acceptance Criteria

- [ ] [AUTH-01] Tokens are signed.

## Password Hashing Component

{HASHING}

## Notes

{NOTES}
"""
SUMMARY = (
    "- Every password is hashed with argon2id: memory 64 MiB, 3 iterations, parallelism 4.\n"
    "- The parameters are fixed by the specification; a change needs a new revision of it.\n"
    "- Hashes are stored with their parameters, so a later change can rehash on the next login.\n"
    "- Plain passwords are never logged, stored or compared directly; comparison is constant-time."
)
MARKER = (
    "==== Summary of § Password Hashing Component (the section is longer than this prompt's budget; "
    'ask with read_spec("auth", "Password Hashing Component") for the whole) ===='
)


def result(text: str, error: InvocationError | None = None) -> InvocationResult:
    return InvocationResult(
        model="m", final_message=text, tool_calls=[], usage=Usage(), context=ContextWindow(), duration=0.1,
        attempts=[], error=error,
    )  # fmt: skip


class Gateway:
    """Answers a summary request with SUMMARY (or ``summary_error``), any other with "done"; one model
    call each; keeps the requests and the tools each got."""

    def __init__(self, summary_error: InvocationError | None = None) -> None:
        self.requests: list = []
        self.tools: list = []
        self.summary_error = summary_error

    def summaries(self) -> list:
        return [r for r in self.requests if " kind=summary " in r.prompt.split("\n")[0]]

    def __call__(self, request, tools, emit) -> InvocationResult:
        self.requests.append(request)
        self.tools.append(tools)
        emit(UsageReported(request.models[0], 900, 40, 0, 0, call_id=f"c{len(self.requests)}", first_of_attempt=True))
        if " kind=summary " in request.prompt.split("\n")[0]:
            return result("", self.summary_error) if self.summary_error else result(SUMMARY)
        return result("done")


@pytest.fixture
def journal(tmp_path: Path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    spec = tmp_path / "docs" / "requirements" / "auth" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text(SPEC)
    store = EventStore.open(tmp_path)
    journal = Journal(store, "p1", "auth")
    journal.open_session(ev.SessionStarted())
    yield journal
    store.close()


def events(journal: Journal, kind: type) -> list:
    return [r.event for r in journal.store.read_stream(journal.stream) if isinstance(r.event, kind)]


def settings(budget: int = 300, **context: object) -> Settings:
    return Settings(context=Context(token_budget=budget, **context))


def test_a_section_cut_whole_is_sent_as_a_summary_made_once_and_recorded(journal: Journal) -> None:
    root = journal.store.root
    gateway = Gateway()
    invoker = Invoker(journal, gateway, settings(), root, project_root=root)

    first = invoker.invoke(Kind.PLANNING, 2)
    second = invoker.invoke(Kind.PLANNING, 2)

    # one summary request, on the oracle's model, with no tools at all, of the whole section
    (asked,) = gateway.summaries()
    assert asked.models[0] == Settings().models.oracle
    assert asked.cli_tools == () and gateway.tools[0] == [] and asked.system_mode == "replace"
    assert HASHING.strip() in asked.prompt
    # both planning prompts carry the summary, marked, in place of the section
    planning = [r for r in gateway.requests if r not in gateway.summaries()]
    for request in planning:
        assert f"{MARKER}\n{SUMMARY}\n" in request.prompt
        assert HASHING[:200] not in request.prompt
    # the section's content hash names the cached summary
    cached = root / SUMMARY_DIR / f"{section_digest(section_text(root))}.md"
    assert cached.read_text() == SUMMARY + "\n"
    # recorded like any invocation, under the invocation whose prompt it went into
    started = {e.invocation_id: e for e in events(journal, ev.InvocationStarted)}
    (summary,) = [e for e in started.values() if e.kind == "summary"]
    assert summary.parent_invocation == first.invocation_id
    assert (summary.model, summary.sections_sent, summary.cli_tools) == (
        Settings().models.oracle,
        ("Password Hashing Component",),
        (),
    )
    used = [e for e in events(journal, ev.TokensUsed) if e.invocation_id == summary.invocation_id]
    assert [(e.input, e.output) for e in used] == [(900, 40)]
    finished = [e for e in events(journal, ev.InvocationFinished) if e.invocation_id == summary.invocation_id]
    assert [e.outcome for e in finished] == ["ok"]
    for outcome in (first, second):
        main = started[outcome.invocation_id]
        assert main.sections_summarised == ("Password Hashing Component",)
        assert "Password Hashing Component" not in main.sections_cut + main.sections_sent
        assert "Notes" in main.sections_cut  # no room left for a second summary: cut, and none made


def test_a_summary_that_cannot_be_made_leaves_the_cut_and_is_recorded(journal: Journal) -> None:
    root = journal.store.root
    gateway = Gateway(summary_error=InvocationError(ErrorKind.BUDGET, "token budget reached"))
    invoker = Invoker(journal, gateway, settings(), root, project_root=root)

    outcome = invoker.invoke(Kind.PLANNING, 2)

    assert outcome.ok
    (planning,) = [r for r in gateway.requests if r not in gateway.summaries()]
    assert "==== cut to fit the context budget: Password Hashing Component" in planning.prompt
    assert "Summary of §" not in planning.prompt
    started = {e.invocation_id: e for e in events(journal, ev.InvocationStarted)}
    assert started[outcome.invocation_id].sections_summarised == ()
    assert "Password Hashing Component" in started[outcome.invocation_id].sections_cut
    (summary,) = [e for e in started.values() if e.kind == "summary"]
    finished = [e for e in events(journal, ev.InvocationFinished) if e.invocation_id == summary.invocation_id]
    assert [(e.outcome, e.error_kind) for e in finished] == [("error", "budget")]
    assert not (root / SUMMARY_DIR).exists() or not list((root / SUMMARY_DIR).glob("*.md"))


def test_summaries_can_be_turned_off(journal: Journal) -> None:
    root = journal.store.root
    gateway = Gateway()
    Invoker(journal, gateway, settings(summaries=False), root, project_root=root).invoke(Kind.PLANNING, 2)

    assert gateway.summaries() == []
    assert "==== cut to fit the context budget: Password Hashing Component" in gateway.requests[0].prompt


def test_which_sections_are_summarised(journal: Journal) -> None:
    """Only whole sections cut whole, most important first, while there is room; a section that keeps
    a head, or fits, is not summarised; a cached summary is used without asking again."""
    root = journal.store.root
    asked: list[SummaryWanted] = []

    def make(wanted: SummaryWanted) -> str:
        asked.append(wanted)
        return f"short summary of {wanted.key}"

    summaries = Summaries(root, make)
    roomy = assemble_context(root, "auth", "planning", budget_tokens=400, summaries=summaries)
    assert roomy.summarised == ["Password Hashing Component", "Notes"]  # both cut whole, both fit as summaries
    assert [w.key for w in asked] == ["Password Hashing Component", "Notes"]
    assert "short summary of Notes" in roomy.text and NOTES[:100] not in roomy.text
    assert roomy.tokens_estimate <= 400

    again = assemble_context(
        root, "auth", "task", "Password Hashing", "Hash the passwords", budget_tokens=400, summaries=summaries
    )
    assert again.summarised == ["Password Hashing Component"]  # the component's own section
    assert len(asked) == 2  # from the cache

    fits = assemble_context(root, "auth", "planning", budget_tokens=3000, summaries=summaries)
    assert fits.summarised == [] and HASHING.strip() in fits.text  # the section fits whole: no summary

    def failing(wanted: SummaryWanted) -> str:
        raise SummaryFailed("model_unavailable: no model")

    (root / SUMMARY_DIR).joinpath(f"{section_digest(section_text(root))}.md").unlink()
    failed = assemble_context(root, "auth", "planning", budget_tokens=400, summaries=Summaries(root, failing))
    assert failed.summarised == ["Notes"]  # still cached
    assert failed.unsummarised == ["Password Hashing Component: model_unavailable: no model"]
    assert "==== cut to fit the context budget: Password Hashing Component" in failed.text


def section_text(root: Path) -> str:
    """The text of the Password Hashing Component section as the context sends it."""
    source = (root / "docs" / "requirements" / "auth" / "SPECIFICATION.md").read_text()
    start = source.index("## Password Hashing Component")
    return source[start : source.index("## Notes")]


def test_a_section_cut_before_a_bigger_one_comes_back_whole_when_that_cut_left_room(journal: Journal) -> None:
    root = journal.store.root
    notes = "Refresh tokens rotate on every use. " * 10
    spec = root / "docs" / "requirements" / "short" / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text(SPEC.replace("name: auth", "name: short").replace(NOTES, notes))

    context = assemble_context(
        root, "short", "planning", budget_tokens=300, summaries=Summaries(root, lambda wanted: "argon2id, 64 MiB.")
    )

    # the more important section first: its summary; then the room left takes the smaller one whole
    assert context.summarised == ["Password Hashing Component"] and context.cut == []
    assert notes.strip() in context.text and "Notes" in context.sections_sent  # cut first, then back
    assert context.tokens_estimate <= 300
