"""Drift hashes: whitespace never drifts; a changed section names its re-entry step."""

from __future__ import annotations

import re

from lopen.documents import compare, content_hash, normalize, parse_document, section_hashes, spec_hash
from lopen.documents.hashing import reentry_step_for

SPEC = """---
name: auth
description: Sign-in
---
# Auth

Intro.

## Overview

Users sign in.

## Acceptance Criteria

- [ ] [AUTH-01] A user signs in
- [ ] [AUTH-02] A wrong password is refused

### Security

- [ ] [AUTH-10] Passwords are hashed

## Dependencies

- argon2

## Notes

Opaque tokens.
"""


def hashes(text: str) -> dict[str, str]:
    return section_hashes(parse_document(text))


def test_normalize() -> None:
    assert normalize("\ufeff\r\n\r\n  a  \r\n\r\n\r\n\r\nb\t\n\n") == "a\n\nb"
    assert normalize("x \n \ny") == "x\n\ny"
    assert re.fullmatch(r"[0-9a-f]{32}", content_hash("x"))


def test_section_hashes_cover_front_matter_preamble_and_sections() -> None:
    assert list(hashes(SPEC)) == [
        "(front matter)",
        "Auth",
        "Overview",
        "Acceptance Criteria",
        "Acceptance Criteria > Security",
        "Dependencies",
        "Notes",
    ]
    assert "(preamble)" in hashes("Before any heading.\n\n# T\n")


def test_whitespace_only_edits_are_not_drift() -> None:
    edited = SPEC.replace("\n", "  \r\n").replace("Users sign in.", "Users sign in.\n\n\n\n")
    edited = "\ufeff" + edited + "\n\n\n"
    assert hashes(edited) == hashes(SPEC)
    drift = compare(hashes(SPEC), hashes(edited))
    assert not drift.drifted and drift.reentry_step is None
    assert spec_hash(parse_document(edited)) == spec_hash(parse_document(SPEC))


def test_a_changed_criterion_re_enters_at_step_3() -> None:
    changed = SPEC.replace("A wrong password is refused", "A wrong password is refused twice")
    drift = compare(hashes(SPEC), hashes(changed))
    assert drift.changed == ["Acceptance Criteria"]
    assert (drift.added, drift.removed, drift.reentry_step) == ([], [], 3)


def test_a_criterion_in_a_subsection_also_re_enters_at_step_3() -> None:
    drift = compare(hashes(SPEC), hashes(SPEC.replace("are hashed", "are hashed with argon2id")))
    assert drift.changed == ["Acceptance Criteria > Security"] and drift.reentry_step == 3


def test_dependencies_re_enter_at_step_2_and_win_over_criteria() -> None:
    deps = SPEC.replace("- argon2", "- argon2\n- redis")
    assert compare(hashes(SPEC), hashes(deps)).reentry_step == 2
    both = deps.replace("A user signs in", "A user signs in fast")
    drift = compare(hashes(SPEC), hashes(both))
    assert drift.changed == ["Acceptance Criteria", "Dependencies"] and drift.reentry_step == 2


def test_other_changes_are_reported_only() -> None:
    drift = compare(hashes(SPEC), hashes(SPEC.replace("Opaque tokens.", "JWTs.").replace("Sign-in", "Login")))
    assert drift.drifted
    assert drift.changed == ["(front matter)", "Notes"] and drift.reentry_step is None


def test_added_and_removed_sections() -> None:
    current = SPEC.replace("## Notes\n\nOpaque tokens.\n", "## References\n\n- RFC\n")
    drift = compare(hashes(SPEC), hashes(current))
    assert (drift.changed, drift.added, drift.removed) == ([], ["References"], ["Notes"])
    removed_criteria = SPEC.replace("### Security\n\n- [ ] [AUTH-10] Passwords are hashed\n", "")
    assert compare(hashes(SPEC), hashes(removed_criteria)).reentry_step == 3


def test_reentry_step_by_key() -> None:
    assert reentry_step_for("Acceptance Criteria#2") == 3
    assert reentry_step_for("Components > Token Service > Dependencies") == 2
    assert reentry_step_for("Overview") is None
