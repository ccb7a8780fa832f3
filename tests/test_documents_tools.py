"""The document tool handlers (T1–T3, T6) and the read-only CLI commands."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from lopen.cli import app
from lopen.documents import DOCUMENT_TOOLS, DocumentError
from lopen.documents.tools import (
    LogResearchArgs,
    ReadPlanArgs,
    ReadResearchArgs,
    ReadSpecArgs,
    log_research,
    read_plan,
    read_research,
    read_spec,
)
from lopen.errors import LopenError

SPEC = """---
name: auth
description: Sign-in
---
# Auth Specification

## Overview

Users sign in.

## Components

### JWT Tokens

Signed with EdDSA.

## Acceptance Criteria

- [ ] [AUTH-01] A user signs in

## Dependencies

None.

## Skills & Hooks

- verify-tests: `pytest -q`

## Notes

n

## References

r
"""


class Ctx(msgspec.Struct):
    root: Path


@pytest.fixture
def ctx(tmp_path: Path) -> Ctx:
    folder = tmp_path / "docs/requirements/auth"
    folder.mkdir(parents=True)
    (folder / "SPECIFICATION.md").write_text(SPEC)
    (tmp_path / ".git").mkdir()
    return Ctx(root=tmp_path)


def test_read_spec_returns_one_section_as_written(ctx: Ctx) -> None:
    assert (
        read_spec(ReadSpecArgs(module="auth", section="§JWT Tokens"), ctx) == "### JWT Tokens\n\nSigned with EdDSA.\n"
    )
    assert read_spec(ReadSpecArgs(module="auth", section="components > jwt tokens"), ctx).startswith("### JWT")
    assert (ctx.root / ".lopen/cache/sections").is_dir()


def test_read_spec_errors_the_model_can_act_on(ctx: Ctx) -> None:
    with pytest.raises(DocumentError) as caught:
        read_spec(ReadSpecArgs(module="auth", section="JWT"), ctx)
    assert str(caught.value).startswith("no section 'JWT' in auth; ")
    assert "sections are: Auth Specification, Overview, Components, Components > JWT Tokens" in str(caught.value)
    with pytest.raises(DocumentError, match=r"module 'billing' has no specification.*with a specification: auth"):
        read_spec(ReadSpecArgs(module="billing", section="Overview"), ctx)
    with pytest.raises(DocumentError, match="contains a path"):
        read_spec(ReadSpecArgs(module="../auth", section="Overview"), ctx)


def test_research_round_trip(ctx: Ctx) -> None:
    message = log_research(LogResearchArgs(module="auth", topic="Key Rotation", content="Yearly."), ctx)
    assert message.startswith("Saved research on 'Key Rotation' to docs/requirements/auth/RESEARCH-key-rotation.md")
    assert "read_research('auth', 'key-rotation')" in message
    assert read_research(ReadResearchArgs(module="auth", topic="key rotation"), ctx) == "# Key Rotation\n\nYearly.\n"
    with pytest.raises(DocumentError, match="research topics are: key-rotation"):
        read_research(ReadResearchArgs(module="auth", topic="sessions"), ctx)
    with pytest.raises(DocumentError, match="contains a path"):
        log_research(LogResearchArgs(module="auth", topic="../../x", content="x"), ctx)


def test_read_plan(ctx: Ctx) -> None:
    assert "planning (steps 2-5) has not happened" in read_plan(ReadPlanArgs(module="auth"), ctx)
    assert "has no specification yet" in read_plan(ReadPlanArgs(module="billing"), ctx)
    plan = ctx.root / ".lopen/modules/auth/plan.md"
    plan.parent.mkdir(parents=True)
    plan.write_text("# Plan\n- [ ] jwt-tokens\n")
    assert read_plan(ReadPlanArgs(module="auth"), ctx) == "# Plan\n- [ ] jwt-tokens\n"


def test_tool_table_and_argument_structs() -> None:
    assert [t.name for t in DOCUMENT_TOOLS] == ["read_spec", "read_research", "read_plan", "log_research"]
    for tool in DOCUMENT_TOOLS:
        schema = msgspec.json.schema(tool.arguments)
        assert "module" in str(schema) and tool.description
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        msgspec.convert({"module": "auth", "section": "x", "extra": 1}, ReadSpecArgs)
    with pytest.raises(msgspec.ValidationError, match="missing required field `section`"):
        msgspec.convert({"module": "auth"}, ReadSpecArgs)
    # the module is optional: Lopen's toolbox fills in the run's module
    assert msgspec.convert({"section": "x"}, ReadSpecArgs).module == ""
    assert msgspec.convert({}, ReadPlanArgs).module == ""


def test_cli_modules_and_spec_check(ctx: Ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = ctx.root / "docs/requirements/billing"
    broken.mkdir()
    (broken / "SPECIFICATION.md").write_text("# Billing\n\n## Overview\n\nx\n")
    monkeypatch.chdir(ctx.root)
    runner = CliRunner()
    listed = runner.invoke(app, ["modules"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines() == [
        "MODULE   STATE        SPEC CHECK",
        "auth     not started  ok",
        "billing  not started  6 errors (front matter, Acceptance Criteria, Dependencies, Skills & Hooks, Notes, "
        "References)",
    ]
    good = runner.invoke(app, ["spec", "check", "auth"])
    assert good.exit_code == 0, good.output
    assert "follows the specification pattern" in good.output
    assert "acceptance criteria: 1 (1 with ids, 0 checked)" in good.output
    assert "verify-tests: pytest -q" in good.output
    bad = runner.invoke(app, ["spec", "check", "billing"])
    assert bad.exit_code == 1
    assert "error: Dependencies: section missing" in bad.output
    missing = runner.invoke(app, ["spec", "check", "nope"])
    assert isinstance(missing.exception, LopenError)
    assert "modules with a specification: auth, billing" in missing.exception.why


def test_the_module_rows_are_the_one_doors(ctx: Ctx) -> None:
    """`lopen modules`, the TUI's picker and MCP's list_modules list ``lopen.app.queries.modules``:
    a project where nothing was recorded lists its specifications as not started (and opens no store)."""
    from lopen.app import queries
    from lopen.app.context import Project
    from lopen.cli.modules import render_modules

    rows = queries.modules(Project(ctx.root))
    assert [(r.module, r.state, r.spec_check) for r in rows] == [("auth", "not started", "ok")]
    assert not (ctx.root / ".lopen" / "store.sqlite").exists()
    assert render_modules(rows).splitlines()[1].split() == ["auth", "not", "started", "ok"]
