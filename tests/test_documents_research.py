"""Research documents: slugged topics, an index kept current, no way out of the module folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from lopen.documents import DocumentError, list_research, read_research, research_path, write_research
from lopen.documents.research import INDEX_END, INDEX_START


def test_write_read_and_index(tmp_path: Path) -> None:
    path = write_research(tmp_path, "auth", "JWT Signing Keys", "Use **EdDSA**.\r\n\r\nRotate yearly.")
    assert path == tmp_path / "docs/requirements/auth/RESEARCH-jwt-signing-keys.md"
    assert path.read_text() == "# JWT Signing Keys\n\nUse **EdDSA**.\n\nRotate yearly.\n"
    write_research(tmp_path, "auth", "RESEARCH-sessions.md", "# Session storage\n\nRedis it is.\n")
    for topic in ("jwt signing keys", "jwt-signing-keys", "RESEARCH-jwt-signing-keys.md"):
        assert "EdDSA" in read_research(tmp_path, "auth", topic)
    index = (tmp_path / "docs/requirements/auth/RESEARCH.md").read_text()
    assert index == (
        f"# Research: auth\n\n{INDEX_START}\n"
        "- [JWT Signing Keys](RESEARCH-jwt-signing-keys.md) — Use **EdDSA**.\n"
        "- [Session storage](RESEARCH-sessions.md) — Redis it is.\n"
        f"{INDEX_END}\n"
    )
    assert [d.slug for d in list_research(tmp_path, "auth")] == ["jwt-signing-keys", "sessions"]


def test_rewriting_a_topic_replaces_it_and_keeps_the_users_index_text(tmp_path: Path) -> None:
    folder = tmp_path / "docs/requirements/auth"
    folder.mkdir(parents=True)
    (folder / "RESEARCH.md").write_text("# Our research\n\nHand-written notes.\n")
    write_research(tmp_path, "auth", "tokens", "first")
    write_research(tmp_path, "auth", "tokens", "---\ndescription: The final answer\n---\n# Tokens\n\nsecond\n")
    assert "second" in read_research(tmp_path, "auth", "tokens")
    index = (folder / "RESEARCH.md").read_text()
    assert index.startswith("# Our research\n\nHand-written notes.\n\n" + INDEX_START)
    assert "- [Tokens](RESEARCH-tokens.md) — The final answer\n" in index
    assert index.count(INDEX_START) == 1
    (folder / "RESEARCH.md").write_text(index + "\nAfter the list.\n")
    write_research(tmp_path, "auth", "more", "x")
    assert (folder / "RESEARCH.md").read_text().endswith(f"{INDEX_END}\n\nAfter the list.\n")


@pytest.mark.parametrize(
    ("module", "topic", "message"),
    [
        ("auth", "../../etc/passwd", "contains a path"),
        ("auth", "..", "contains a path"),
        ("auth", "/etc/passwd", "absolute path"),
        ("auth", "C:\\Windows", "absolute path"),
        ("auth", "a\x00b", "NUL byte"),
        ("auth", "sub/topic", "contains a path"),
        ("auth", "sub\\topic", "contains a path"),
        ("auth", "!!!", "no letters or digits"),
        ("../auth", "x", "module name '../auth' contains a path"),
        ("/tmp", "x", "absolute path"),
        ("..", "x", "contains a path"),
        ("au th", "x", "not valid"),
        ("", "x", "not valid"),
        ("auth.lock", "x", "names the git branch"),  # git refuses such branch names
        ("auth.", "x", "names the git branch"),
        ("a..b", "x", "names the git branch"),
    ],
)
def test_path_escapes_are_refused(tmp_path: Path, module: str, topic: str, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        write_research(tmp_path, module, topic, "content")
    with pytest.raises(DocumentError, match=message):
        read_research(tmp_path, module, topic)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_unicode_topics_and_long_topics_stay_in_the_folder(tmp_path: Path) -> None:
    assert research_path(tmp_path, "auth", "Café Crème").name == "RESEARCH-café-crème.md"
    assert research_path(tmp_path, "auth", "Research methods").name == "RESEARCH-research-methods.md"
    long = research_path(tmp_path, "auth", "word " * 100)
    assert long.parent == tmp_path / "docs/requirements/auth" and len(long.name) < 100


def test_reading_missing_research_names_the_topics_there_are(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="it has no research documents yet"):
        read_research(tmp_path, "auth", "jwt")
    write_research(tmp_path, "auth", "sessions", "x")
    with pytest.raises(DocumentError, match=r"no research on 'jwt' in module 'auth'.*topics are: sessions"):
        read_research(tmp_path, "auth", "jwt")


def test_empty_and_oversized_content_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="empty"):
        write_research(tmp_path, "auth", "x", " \n ")
    with pytest.raises(DocumentError, match="split large findings"):
        write_research(tmp_path, "auth", "x", "a" * 1_000_001)
