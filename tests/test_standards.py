"""Coding standards (lopen.documents.standards): found in the user's checkout, sent with every task, judged
by the oracle — a violation is a finding."""

from __future__ import annotations

from pathlib import Path

from test_guards_evidence_units import HOOKS, Desk

from lopen.documents.standards import MAX_CHARS, coding_standards
from lopen.workflow.oracle import prompt as oracle_prompt
from lopen.workflow.prompts import PromptContext, system_message
from lopen.workflow.steps import Kind

MODULE = "auth"
SPEC = """---
name: auth
description: Sign in.
---

# Auth Specification

## Overview

Sign in.

## Acceptance Criteria

- [ ] [AUTH-01] sign() signs

## Coding Standards

- Functions stay under 30 lines.

### Naming

- No abbreviations.

## Dependencies

None.
"""


def project(tmp_path: Path) -> Path:
    spec = tmp_path / "docs" / "requirements" / MODULE / "SPECIFICATION.md"
    spec.parent.mkdir(parents=True)
    spec.write_text(SPEC, encoding="utf-8")
    return tmp_path


def test_the_spec_section_then_the_projects_file_then_the_modules_file_win(tmp_path: Path) -> None:
    root = project(tmp_path)
    found = coding_standards(root, MODULE)
    assert found is not None and found.source.endswith("SPECIFICATION.md#Coding Standards")
    assert "under 30 lines" in found.text and "No abbreviations" in found.text  # its subsections too
    assert not found.text.startswith("#")
    (root / "docs" / "requirements" / "STANDARDS.md").write_text("Type hints everywhere.\n")
    assert coding_standards(root, MODULE).text == "Type hints everywhere."  # type: ignore[union-attr]
    (root / "docs" / "requirements" / MODULE / "STANDARDS.md").write_text("x" * (MAX_CHARS + 10))
    own = coding_standards(root, MODULE)
    assert own is not None and own.source == "docs/requirements/auth/STANDARDS.md"
    assert own.text.endswith("(cut: the standards are longer)") and len(own.text) < MAX_CHARS + 60


def test_no_standards_no_section(tmp_path: Path) -> None:
    root = project(tmp_path)
    spec = root / "docs" / "requirements" / MODULE / "SPECIFICATION.md"
    spec.write_text(SPEC.replace("## Coding Standards", "## Notes"), encoding="utf-8")
    assert coding_standards(root, MODULE) is None
    ctx = PromptContext(module=MODULE, kind=Kind.TASK, step=6, task="core/1")
    assert "Coding standards" not in system_message(ctx)


def test_a_task_prompt_carries_them_and_a_planning_prompt_does_not() -> None:
    standards = "(from docs/requirements/STANDARDS.md)\nFunctions stay under 30 lines."
    task = system_message(PromptContext(module=MODULE, kind=Kind.TASK, step=6, task="core/1", standards=standards))
    assert "## Coding standards" in task and "Functions stay under 30 lines." in task
    planning = system_message(PromptContext(module=MODULE, kind=Kind.PLANNING, step=2, standards=standards))
    assert "Coding standards" not in planning


def test_the_oracle_judges_the_change_against_them(tmp_path: Path) -> None:
    desk = Desk(tmp_path, HOOKS)
    try:
        (desk.root / "docs" / "requirements" / "STANDARDS.md").write_text("Functions stay under 30 lines.\n")
        desk.write("small.py", "s = 1\n")
        evidence = desk.collector.collect("module", MODULE, "")
        assert "Functions stay under 30 lines." in evidence.standards
        text = oracle_prompt(evidence, 7)
        assert "## Coding standards (a change that breaks one is a finding" in text
        assert "Functions stay under 30 lines." in text
    finally:
        desk.store.close()
