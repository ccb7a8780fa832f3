"""The specification pattern check, acceptance criteria and Skills & Hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from lopen.documents import (
    DocumentError,
    acceptance_criteria,
    check_module,
    check_modules,
    check_spec,
    list_modules,
    parse_document,
    skills_and_hooks,
)

GOOD = """---
name: auth
description: Sign-in and sessions
---

# Auth Specification

## Overview

Users sign in with a password and get a session token.

## Acceptance Criteria

- [ ] [AUTH-01] A user signs in with a correct password
- [x] [AUTH-02] A wrong password is refused
  with a clear message
- [ ] Sessions expire after an hour

### Security

- [ ] [AUTH-10] Passwords are hashed with argon2

```
- [ ] [AUTH-99] not a criterion: inside a fence
```

## Dependencies

- argon2-cffi

## Skills & Hooks

- verify-tests: `python -m pytest -q` — runs the suite
- **verify-lint**: `ruff check .`
verify-build: python -m compileall -q auth
- **verify-sdk**: Lightweight prose, nothing to run

## Notes

Tokens are opaque.

## References

- [RFC 6749](https://www.rfc-editor.org/rfc/rfc6749)
"""


def gaps_of(text: str, module: str | None = "auth") -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for gap in check_spec(parse_document(text), module).gaps:
        found.setdefault(gap.part, []).append(f"{gap.severity}: {gap.problem}")
    return found


def test_a_spec_following_the_pattern_has_no_gaps() -> None:
    result = check_spec(parse_document(GOOD), "auth")
    assert result.gaps == []
    assert result.ok and result.summary() == "ok"


def test_a_broken_spec_reports_each_gap_with_what_is_expected() -> None:
    broken = "## Overview\n\ntext\n\n## Acceptance Criteria\n\n- plain bullet, no checkbox\n\n## Notes\n"
    result = check_spec(parse_document(broken), "auth")
    assert not result.ok
    by_part = {g.part: g for g in result.gaps}
    assert by_part["front matter"].expected.startswith("a '---' block at the top")
    assert by_part["H1"].problem == "no H1 title"
    assert by_part["Acceptance Criteria"].problem == "no checkbox items"
    assert "- [ ] [AUTH-01]" in by_part["Acceptance Criteria"].expected
    for missing in ("Dependencies", "Skills & Hooks", "References"):
        assert by_part[missing].problem == "section missing"
        assert by_part[missing].expected.startswith(f"a '## {missing}' section")
    assert by_part["Notes"].severity == "warning" and by_part["Notes"].problem == "section is empty"
    assert result.summary().startswith("6 errors (front matter, H1, Acceptance Criteria, Dependencies")
    assert all(g.render().startswith(("error: ", "warning: ")) for g in result.gaps)


def test_front_matter_without_name_or_description_and_with_another_name() -> None:
    text = GOOD.replace("description: Sign-in and sessions\n", "")
    assert gaps_of(text) == {"front matter": ["error: no 'description'"]}
    renamed = gaps_of(GOOD.replace("name: auth", "name: login"))
    assert renamed == {"front matter": ["warning: name 'login' differs from the module folder 'auth'"]}
    odd = gaps_of(GOOD.replace("name: auth", "name: auth\ntags: [a, b]"))
    assert odd["front matter"][0].startswith("warning: front matter line")


def test_title_problems() -> None:
    two = GOOD.replace("## Notes", "# Notes")
    assert gaps_of(two)["H1"] == ["error: 2 H1 headings (lines 6, 38)"]
    late = GOOD.replace("# Auth Specification", "## Intro\n\n# Auth Specification")
    assert gaps_of(late)["H1"] == ["error: the H1 'Auth Specification' is not the first heading"]


def test_a_required_section_only_found_nested_is_a_gap() -> None:
    nested = GOOD.replace("## Dependencies", "### Dependencies")
    assert gaps_of(nested) == {
        "Dependencies": ["error: found only as the nested section 'Acceptance Criteria > Dependencies'"]
    }


def test_duplicate_criterion_ids_are_a_gap() -> None:
    text = GOOD.replace("[AUTH-10]", "[AUTH-01]")
    assert gaps_of(text) == {"Acceptance Criteria": ["error: id [AUTH-01] is used more than once"]}


def test_skills_without_commands_are_a_warning() -> None:
    prose = (
        GOOD.split("## Skills & Hooks")[0]
        + "## Skills & Hooks\n\n- **verify-sdk**: call the SDK\n\n## Notes\nn\n## References\nr\n"
    )
    result = check_spec(parse_document(prose), "auth")
    assert result.ok
    assert [g.problem for g in result.gaps] == ["entries describe skills but give no command Lopen can run"]
    assert result.summary() == "ok, 1 warning"


def test_acceptance_criteria_items_with_and_without_ids() -> None:
    items = acceptance_criteria(parse_document(GOOD))
    assert [(c.id, c.text, c.checked, c.line) for c in items] == [
        ("AUTH-01", "A user signs in with a correct password", False, 14),
        ("AUTH-02", "A wrong password is refused with a clear message", True, 15),
        (None, "Sessions expire after an hour", False, 17),
        ("AUTH-10", "Passwords are hashed with argon2", False, 21),
    ]
    assert acceptance_criteria(parse_document("# T\n## Overview\n")) == []


def test_checkbox_forms_and_ids() -> None:
    text = (
        "## Acceptance Criteria\n* [X] [R2] upper-case X\n1. [ ] numbered\n"
        "- [ ]\n- [] not a box\n- [ ] [not-an-id] text\n"
    )
    items = acceptance_criteria(parse_document(text))
    assert [(c.id, c.text, c.checked) for c in items] == [
        ("R2", "upper-case X", True),
        (None, "numbered", False),
        (None, "", False),
        (None, "[not-an-id] text", False),
    ]


def test_skills_and_hooks_commands() -> None:
    entries = skills_and_hooks(parse_document(GOOD))
    assert [(e.name, e.command, e.description, e.line) for e in entries] == [
        ("verify-tests", "python -m pytest -q", "runs the suite", 33),
        ("verify-lint", "ruff check .", "", 34),
        ("verify-build", "python -m compileall -q auth", "", 35),
        ("verify-sdk", None, "Lightweight prose, nothing to run", 36),
    ]


def test_skills_in_a_fence_and_prose_lines_ignored() -> None:
    text = "## Skills & Hooks\n\nThese run in CI:\n\n```\nverify-tests: pytest -q\n```\n\nNote: keep them fast\n"
    entries = skills_and_hooks(parse_document(text))
    assert [(e.name, e.command) for e in entries] == [("verify-tests", "pytest -q")]


def test_module_list_and_checks(tmp_path: Path) -> None:
    for name, text in (("auth", GOOD), ("billing", "# Billing\n")):
        folder = tmp_path / "docs" / "requirements" / name
        folder.mkdir(parents=True)
        (folder / "SPECIFICATION.md").write_text(text)
    (tmp_path / "docs" / "requirements" / "empty").mkdir()
    assert list_modules(tmp_path) == ["auth", "billing"]
    checks = check_modules(tmp_path)
    assert checks["auth"].ok and not checks["billing"].ok
    with pytest.raises(DocumentError, match="modules with a specification: auth, billing"):
        check_module(tmp_path, "nope")
