"""Sections and front matter: the Markdown a careful reader would see."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lopen.documents import DocumentError, parse_document


def keys(text: str) -> list[str]:
    return [s.key for s in parse_document(text).sections]


def test_headings_in_fenced_and_indented_code_are_not_headings() -> None:
    text = (
        "# T\n\n## Real\n\n```md\n# not one\n## nor this\n```\n\n"
        "~~~\n## tilde\n~~~\n\n    ## indented code\n\n## Next\n"
    )
    assert keys(text) == ["T", "Real", "Next"]
    doc = parse_document(text)
    assert "# not one" in doc.text(doc.find("Real"))


def test_headings_in_html_blocks_quotes_and_lists_are_not_sections() -> None:
    text = "# T\n\n<div>\n# inside html\n</div>\n\n> ## quoted\n\n- ## in a list\n\n## Real\n"
    assert keys(text) == ["T", "Real"]


def test_setext_headings() -> None:
    text = "Title\n=====\n\nintro\n\nPart\n----\n\nbody\n\n### Deep\n\nmore\n"
    doc = parse_document(text)
    assert [(s.key, s.level, s.line) for s in doc.sections] == [("Title", 1, 1), ("Part", 2, 6), ("Part > Deep", 3, 11)]
    assert doc.body_text(doc.find("Part")).strip() == "body"


def test_a_section_runs_to_the_next_heading_of_the_same_or_higher_level() -> None:
    text = "# T\n## A\na\n### A1\na1\n#### A1x\nx\n### A2\na2\n## B\nb\n"
    doc = parse_document(text)
    a = doc.find("A")
    assert doc.text(a) == "## A\na\n### A1\na1\n#### A1x\nx\n### A2\na2\n"
    assert doc.own_text(a) == "## A\na\n"
    assert (a.line, a.end_line) == (2, 9)
    assert doc.text(doc.find("A1")) == "### A1\na1\n#### A1x\nx\n"
    assert doc.text(doc.find("B")) == "## B\nb\n"


def test_the_only_h1_is_the_title_and_is_left_out_of_paths() -> None:
    doc = parse_document("# Auth Specification\n## Components\n### Token Service\n")
    assert doc.title is not None and doc.title.title == "Auth Specification"
    assert keys("# Auth Specification\n## Components\n### Token Service\n") == [
        "Auth Specification",
        "Components",
        "Components > Token Service",
    ]
    assert keys("# One\n## a\n# Two\n## a\n") == ["One", "One > a", "Two", "Two > a"]


def test_lookup_by_text_path_slug_and_loose_title() -> None:
    doc = parse_document("# S\n## Back-Pressure\n### Category 1\nc1\n## Skills & Hooks\nh\n")
    assert doc.find("back-pressure > category 1").key == "Back-Pressure > Category 1"
    assert doc.find("Category 1").key == "Back-Pressure > Category 1"
    assert doc.find("§ Back-Pressure").key == "Back-Pressure"
    assert doc.find("CATEGORY 1").key == "Back-Pressure > Category 1"
    assert doc.find("#skills--hooks").key == "Skills & Hooks"
    assert doc.find("skills-hooks").key == "Skills & Hooks"
    assert doc.find("skills and hooks").key == "Skills & Hooks"


def test_duplicate_headings_get_numbered_keys_and_ambiguity_is_an_error() -> None:
    doc = parse_document("# S\n## Notes\nfirst\n## Notes\nsecond\n## A\n### Setup\n## B\n### Setup\n")
    assert [s.key for s in doc.sections][1:3] == ["Notes", "Notes#2"]
    assert "first" in doc.text(doc.find("Notes"))  # the exact key wins
    assert "second" in doc.text(doc.find("notes#2"))
    assert "second" in doc.text(doc.find("#notes-1"))  # GitHub's anchor for the second one
    assert doc.find("Setup#2").key == "B > Setup"
    assert doc.find("B > Setup").key == "B > Setup"
    with pytest.raises(DocumentError, match=r"ambiguous.*'A > Setup', 'B > Setup'"):
        doc.find("Setup")


def test_not_found_lists_the_nearest_headings_and_all_sections() -> None:
    doc = parse_document("# Auth\n## JWT Tokens\n## Sessions\n")
    with pytest.raises(DocumentError) as caught:
        doc.find("JWT Token", label="auth")
    message = str(caught.value)
    assert message.startswith("no section 'JWT Token' in auth; nearest: 'JWT Tokens'")
    assert "sections are: Auth, JWT Tokens, Sessions" in message
    with pytest.raises(DocumentError, match="empty section name"):
        doc.find("  ")


def test_crlf_bom_and_lone_cr_are_normalized() -> None:
    lf = "---\nname: a\n---\n# T\n\n## A\ntext  \n## B\n"
    crlf = "\ufeff" + lf.replace("\n", "\r\n")
    cr = lf.replace("\n", "\r")
    for variant in (crlf, cr):
        doc = parse_document(variant)
        assert doc.source == lf
        assert [(s.key, s.line) for s in doc.sections] == [("T", 4), ("A", 6), ("B", 8)]
        assert doc.front_matter is not None and doc.front_matter.name == "a"


def test_unicode_headings() -> None:
    doc = parse_document("# Spéc\n## Über Café ☕\ncontenu\n## 日本語の見出し\n本文\n")
    assert doc.find("über café ☕").key == "Über Café ☕"
    assert doc.find("日本語の見出し").slug == "日本語の見出し"
    assert doc.text(doc.find("日本語の見出し")) == "## 日本語の見出し\n本文\n"


def test_empty_sections_and_empty_documents() -> None:
    doc = parse_document("## A\n## B\n\n## C")
    assert [doc.text(s) for s in doc.sections] == ["## A\n", "## B\n\n", "## C"]
    assert doc.body_text(doc.sections[0]) == ""
    assert parse_document("").sections == []
    assert parse_document("just text\n").preamble() == "just text\n"
    with pytest.raises(DocumentError, match="no headings"):
        parse_document("").find("x")


def test_raw_source_text_is_returned_not_rendered() -> None:
    doc = parse_document("# T\n## **Bold** `code` &amp; [link](http://x)\nSome *text* <b>here</b>\n")
    section = doc.find("Bold code & link")
    assert doc.text(section) == "## **Bold** `code` &amp; [link](http://x)\nSome *text* <b>here</b>\n"


def test_front_matter_fields_and_line_numbers() -> None:
    text = (
        "---\nname: auth\ndescription: >\n  Tokens and\n  sessions\nowners:\n  - ana\n  - bo\n"
        "quoted: 'it''s'\n# a comment\n---\n# Auth\n"
    )
    doc = parse_document(text)
    fm = doc.front_matter
    assert fm is not None and fm.problems == []
    assert fm.fields == {"name": "auth", "description": "Tokens and sessions", "owners": "ana, bo", "quoted": "it's"}
    assert doc.sections[0].line == 12
    assert doc.source[doc.body_start :].startswith("# Auth")


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        ("name: 'unterminated\n", "unterminated quote"),
        ("tags: [a, b]\n", "YAML syntax"),
        ("just words\n", "not a 'key: value' line"),
        ("name: a\nname: b\n", "appears twice"),
        ("  indented: first\n", "outside any key"),
    ],
)
def test_odd_front_matter_is_reported_not_fatal(front: str, problem: str) -> None:
    doc = parse_document(f"---\n{front}---\n# T\n")
    assert doc.front_matter is not None
    assert any(problem in p for p in doc.front_matter.problems)
    assert any(problem in p for p in doc.problems)
    assert [s.key for s in doc.sections] == ["T"]


def test_unclosed_front_matter_is_read_as_markdown() -> None:
    doc = parse_document("---\nname: x\n# T\n")
    assert doc.front_matter is None
    assert "never closed" in doc.problems[0]
    assert [s.key for s in doc.sections] == ["T"]


def test_block_scalar_keeps_lines() -> None:
    doc = parse_document("---\ndescription: |\n  line one\n\n  line two\n---\n")
    assert doc.front_matter is not None
    assert doc.front_matter.description == "line one\n\nline two"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("#=-`~> \n\r\t*[]x:ab\ufeff")), max_size=200))
def test_any_text_parses_into_ordered_well_formed_sections(text: str) -> None:
    doc = parse_document(text)
    previous = 0
    for section in doc.sections:
        assert previous <= section.start <= section.body <= section.own_end <= section.end <= len(doc.source)
        assert section.line <= section.end_line
        previous = section.start
    assert len({s.key for s in doc.sections}) == len(doc.sections)
