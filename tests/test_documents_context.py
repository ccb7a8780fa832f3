"""Context assembly: the sections each step needs, in priority order, within the budget."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lopen.documents import DocumentError, assemble_context, estimate_tokens, write_research

SPEC = """---
name: auth
description: Sign-in and sessions for the web app
---

# Auth Specification

## Overview

Users sign in with a password. The token service issues signed session tokens.

The audit log records every sign-in attempt.

## Components

### Token Service

Issues and verifies session tokens signed with EdDSA keys; keys rotate yearly.

### Password Store

Stores argon2 password hashes.

## Acceptance Criteria

- [ ] [AUTH-01] A user signs in with a correct password
- [ ] [AUTH-02] The token service issues a token that expires after one hour
- [ ] [AUTH-03] Password hashes use argon2id
- [ ] [AUTH-04] Every sign-in attempt appears in the audit log

## Dependencies

- argon2-cffi, pynacl

## Skills & Hooks

- verify-tests: `python -m pytest -q`

## Notes

Tokens are opaque to clients. Expiry is checked on every request, and a token past its expiry is
refused with 401 even when its signature is valid; clocks may drift by up to a minute.

## References

- RFC 8037
"""

TASK = "token-service/1: Implement token expiry: tokens expire after one hour (AUTH-02)."


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs/requirements/auth"
    folder.mkdir(parents=True)
    (folder / "SPECIFICATION.md").write_text(SPEC)
    return tmp_path


def labels(text: str) -> list[str]:
    return re.findall(r"^==== (.*?) ====$", text, flags=re.MULTILINE)


def test_task_context_holds_the_task_its_criteria_and_the_components_sections(root: Path) -> None:
    ctx = assemble_context(root, "auth", "task", component="token-service", task=TASK)
    assert ctx.sections_sent[:3] == ["task", "Acceptance Criteria", "Components > Token Service"]
    assert ctx.text.startswith(f"==== task ====\n{TASK}\n")
    assert "[AUTH-02] The token service issues" in ctx.text
    assert "[AUTH-01]" not in ctx.text
    reread = 'read_spec("auth", "Acceptance Criteria")'
    assert f"Other criteria: AUTH-01, AUTH-03, AUTH-04 (read them with {reread})" in ctx.text
    assert "Password Store" not in ctx.text.split("==== other spec sections")[0]
    assert ctx.cut == []
    assert ctx.tokens_estimate == estimate_tokens(ctx.text) == -(-len(ctx.text) // 4)


def test_task_context_picks_passages_mentioning_the_component_or_the_tasks_keywords(root: Path) -> None:
    ctx = assemble_context(root, "auth", "task", component="Token Service", task=TASK)
    overview = ctx.text.split("==== spec § Overview, excerpt (line 10) ====")[1].split("====")[0]
    assert "The token service issues signed session tokens." in overview
    assert "audit log" not in overview
    assert "Expiry is checked on every request" in ctx.text  # Notes shares keywords with the task
    assert "- Components > Password Store" in ctx.text.split("==== other spec sections")[1]


def test_without_matching_criteria_the_whole_section_is_sent(root: Path) -> None:
    ctx = assemble_context(root, "auth", "task", task="Set up the project layout.")
    assert "==== spec § Acceptance Criteria (lines 24-30) ====" in ctx.text
    assert all(f"[AUTH-0{i}]" in ctx.text for i in range(1, 5))


def test_cited_research_is_included(root: Path) -> None:
    write_research(root, "auth", "key rotation", "Rotate EdDSA keys yearly with overlap.")
    write_research(root, "auth", "unrelated", "Nothing to see.")
    ctx = assemble_context(root, "auth", "task", task=TASK + " See RESEARCH-key-rotation.md.")
    assert "RESEARCH-key-rotation.md" in ctx.sections_sent
    assert "Rotate EdDSA keys yearly with overlap." in ctx.text
    assert "Nothing to see." not in ctx.text
    assert "research index" in ctx.sections_sent  # every note is cited by its topic and title
    assert "- unrelated: unrelated\n" in ctx.text


def test_research_context_leads_with_the_references_and_the_notes_so_far(root: Path) -> None:
    write_research(root, "auth", "key rotation", "# Key rotation\n\nRotate EdDSA keys yearly.")
    ctx = assemble_context(root, "auth", "research")
    assert ctx.sections_sent[:3] == ["References", "Overview", "research index"]
    assert "- key-rotation: Key rotation — Rotate EdDSA keys yearly." in ctx.text
    assert "[AUTH-01]" not in ctx.text  # research is not planning: the criteria stay a read_spec away


def test_planning_context(root: Path) -> None:
    ctx = assemble_context(root, "auth", "planning")
    assert ctx.sections_sent == ["Overview", "contents", "Acceptance Criteria", "Dependencies", "Components", "Notes"]
    assert "### Password Store" in ctx.text
    assert "- Skills & Hooks\n- References" in ctx.text


def test_module_verification_and_oracle_contexts(root: Path) -> None:
    verification = assemble_context(root, "auth", "module-verification")
    assert verification.sections_sent == ["Acceptance Criteria", "Overview", "Skills & Hooks"]
    oracle = assemble_context(root, "auth", "oracle", component="token-service", task=TASK)
    assert oracle.sections_sent == ["task", "Acceptance Criteria", "Components > Token Service", "Skills & Hooks"]


def test_spec_context_with_and_without_a_spec(root: Path) -> None:
    ctx = assemble_context(root, "auth", "spec")
    assert ctx.sections_sent[0] == "(title)" and "References" in ctx.sections_sent
    assert "name: auth" in ctx.text
    fresh = assemble_context(root, "billing", "spec")
    assert fresh.sections_sent == ["spec pattern"]
    assert "no specification yet: write docs/requirements/billing/SPECIFICATION.md" in fresh.text
    assert "## Acceptance Criteria" in fresh.text
    broken = root / "docs/requirements/broken"
    broken.mkdir()
    (broken / "SPECIFICATION.md").write_text("# Broken\n\n## Overview\n\nx\n")
    gaps = assemble_context(root, "broken", "spec")
    assert gaps.sections_sent[0] == "spec check" and "Dependencies: section missing" in gaps.text


def test_over_budget_the_lowest_priority_pieces_are_cut_first(root: Path) -> None:
    full = assemble_context(root, "auth", "planning", budget_tokens=0)
    assert full.cut == []
    ctx = assemble_context(root, "auth", "planning", budget_tokens=full.tokens_estimate - 10)
    assert ctx.cut == ["Notes"] and "Notes" not in ctx.sections_sent
    assert ctx.tokens_estimate <= full.tokens_estimate - 10
    marker = '==== cut to fit the context budget: Notes (~49 tokens); read it with read_spec("auth", "Notes") ===='
    assert marker in ctx.text
    assert "opaque to clients" not in ctx.text
    lowest_first = ["Notes", "Components", "Dependencies", "Acceptance Criteria", "contents", "Overview"]
    floor = assemble_context(root, "auth", "planning", budget_tokens=1).tokens_estimate  # all cut that can be
    for budget in range(full.tokens_estimate, 0, -15):
        ctx = assemble_context(root, "auth", "planning", budget_tokens=budget)
        assert ctx.cut == [name for name in lowest_first if name in ctx.cut]  # lowest priority first
        assert ctx.tokens_estimate <= max(budget, floor)
        for name in ctx.cut:
            assert f'read_spec("auth", "{name}")' in ctx.text or name == "contents"


def test_the_last_piece_cut_keeps_its_head_when_enough_fits(root: Path) -> None:
    long_notes = "\n".join(f"Note line {i} about expiry and tokens." for i in range(200))
    spec = root / "docs/requirements/auth/SPECIFICATION.md"
    spec.write_text(SPEC.split("## Notes")[0] + f"## Notes\n\n{long_notes}\n\n## References\n\n- RFC 8037\n")
    full = assemble_context(root, "auth", "planning", budget_tokens=0)
    ctx = assemble_context(root, "auth", "planning", budget_tokens=full.tokens_estimate - 500)
    assert ctx.cut == ["Notes"] and "Notes" in ctx.sections_sent
    assert "Note line 0 about" in ctx.text and "Note line 199" not in ctx.text
    assert re.search(
        r'\[… \d+ more lines cut to fit the context budget; read it all with read_spec\("auth", "Notes"\)\]', ctx.text
    )
    assert full.tokens_estimate - 520 <= ctx.tokens_estimate <= full.tokens_estimate - 500


def test_the_task_is_never_cut(root: Path) -> None:
    task = "Implement the token service. " * 200
    ctx = assemble_context(root, "auth", "task", component="token-service", task=task, budget_tokens=50)
    assert task.strip() in ctx.text
    assert "task" in ctx.sections_sent and "task" not in ctx.cut
    assert "Acceptance Criteria" in ctx.cut
    assert labels(ctx.text)[0] == "task"


def test_bad_requests(root: Path) -> None:
    with pytest.raises(DocumentError, match="unknown context kind 'build'"):
        assemble_context(root, "auth", "build")  # type: ignore[arg-type]
    with pytest.raises(DocumentError, match="needs the task text"):
        assemble_context(root, "auth", "task")
    with pytest.raises(DocumentError, match="no specification at docs/requirements/billing"):
        assemble_context(root, "billing", "planning")
    with pytest.raises(DocumentError, match="contains a path"):
        assemble_context(root, "../auth", "spec")
