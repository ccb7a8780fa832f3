"""The topics a spec's References name (``lopen.documents.references``): what asks for research."""

from __future__ import annotations

import pytest

from lopen.documents.references import research_topics
from lopen.documents.sections import parse_document


def topics(references: str) -> tuple[str, ...]:
    return research_topics(parse_document(f"# Auth\n\n## Overview\n\nSign-in.\n\n{references}"))


def test_each_top_level_list_item_is_a_topic_in_its_own_words() -> None:
    found = topics(
        "## References\n\n"
        "- [RFC 6749](https://www.rfc-editor.org/rfc/rfc6749) —\n  token grants\n"
        "- https://jwt.io/introduction\n"
        "- JWT signing key rotation\n"
        "  - a detail of the one above\n"
    )
    assert found == (
        "[RFC 6749](https://www.rfc-editor.org/rfc/rfc6749) — token grants",
        "https://jwt.io/introduction",
        "JWT signing key rotation a detail of the one above",
    )


def test_without_a_list_each_paragraph_is_a_topic() -> None:
    assert topics("## References\n\nOAuth device flow\n\nhttps://example.com/spec\n") == (
        "OAuth device flow",
        "https://example.com/spec",
    )


@pytest.mark.parametrize(
    "body",
    ["None.", "- none", "- N/A", "Nothing yet.", "- [TODO: links to related specifications]", "", "None: see Notes."],
)
def test_an_entry_that_says_there_is_nothing_asks_for_no_research(body: str) -> None:
    assert topics(f"## References\n\n{body}\n") == ()


def test_no_references_section_no_topics_and_a_nested_one_does_not_count() -> None:
    assert topics("## Notes\n\n- RFC 6749\n") == ()
    assert topics("## Components\n\n### References\n\n- RFC 6749\n") == ()


def test_a_repeated_entry_is_one_topic() -> None:
    assert topics("## References\n\n- RFC 6749\n- RFC 6749\n") == ("RFC 6749",)
