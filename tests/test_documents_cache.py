"""The section cache: served when fresh, rebuilt when stale or corrupt, never in the way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lopen.documents import DocumentError, SectionCache, section_cache

SPEC = "# Auth\n\n## Overview\n\nUsers sign in.\n\n## Notes\n\nOpaque tokens.\n"


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "SPECIFICATION.md"
    path.write_text(SPEC)
    return path


def forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(path: Path) -> None:
        raise AssertionError(f"parsed {path} although the cache was fresh")

    monkeypatch.setattr(section_cache, "read_document", fail)


def entries(root: Path) -> list[str]:
    return sorted(p.name for p in (root / section_cache.CACHE_DIR).rglob("*.msgpack"))


def test_a_fresh_entry_is_served_without_parsing(tmp_path: Path, spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = SectionCache(tmp_path).document(spec)
    assert SectionCache(tmp_path).section(spec, "overview").text == "## Overview\n\nUsers sign in.\n\n"
    assert len(entries(tmp_path)) == 2
    forbid_parsing(monkeypatch)
    assert SectionCache(tmp_path).document(spec) == first
    assert SectionCache(tmp_path).section(spec, "Overview").key == "Overview"


def test_a_changed_mtime_invalidates_even_with_the_same_size(tmp_path: Path, spec: Path) -> None:
    cache = SectionCache(tmp_path)
    assert "Opaque tokens." in cache.section(spec, "Notes").text
    stat = spec.stat()
    spec.write_text(SPEC.replace("Opaque tokens.", "Signed tokens."))  # same size
    os.utime(spec, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert "Signed tokens." in cache.section(spec, "Notes").text
    assert "Signed tokens." in cache.document(spec).source


def test_a_stale_document_drops_the_old_section_entries(tmp_path: Path, spec: Path) -> None:
    cache = SectionCache(tmp_path)
    cache.section(spec, "Overview")
    cache.section(spec, "Notes")
    assert len(entries(tmp_path)) == 3
    spec.write_text(SPEC + "\n## Added\n")
    cache.document(spec)
    assert entries(tmp_path) == ["document.msgpack"]
    assert [s.key for s in cache.document(spec).sections][-1] == "Added"


@pytest.mark.parametrize("garbage", [b"", b"\x00\x01not msgpack", b"\x93\x01\x02\x03"])
def test_a_corrupt_entry_is_silently_rebuilt(tmp_path: Path, spec: Path, garbage: bytes) -> None:
    cache = SectionCache(tmp_path)
    cache.section(spec, "Notes")
    for file in (tmp_path / section_cache.CACHE_DIR).rglob("*.msgpack"):
        file.write_bytes(garbage)
    assert "Opaque" in cache.section(spec, "Notes").text
    assert [s.key for s in cache.document(spec).sections] == ["Auth", "Overview", "Notes"]
    rebuilt = next((tmp_path / section_cache.CACHE_DIR).rglob("document.msgpack")).read_bytes()
    assert rebuilt != garbage and len(rebuilt) > 20


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path, spec: Path) -> None:
    (tmp_path / ".lopen").write_text("a file where the cache folder should be")
    assert SectionCache(tmp_path).section(spec, "Notes").key == "Notes"


def test_lookup_errors_are_not_cached(tmp_path: Path, spec: Path) -> None:
    cache = SectionCache(tmp_path)
    with pytest.raises(DocumentError, match="no section 'Later'"):
        cache.section(spec, "Later", label="auth")
    spec.write_text(SPEC + "## Later\n")
    assert cache.section(spec, "Later").text == "## Later\n"
