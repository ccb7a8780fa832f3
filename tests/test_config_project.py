"""The project root and `.lopen/`: discovery from subfolders, the .gitignore entry, the docs reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from lopen.config.reference import render_reference, update_document
from lopen.config.schema import FIELDS
from lopen.errors import LopenError
from lopen.project import ensure_lopen_dir, find_root, nearest_root

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_root_is_found_from_a_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    deep = tmp_path / "repo" / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_root(deep) == tmp_path / "repo"
    monkeypatch.chdir(deep)
    assert find_root() == tmp_path / "repo"


def test_nearest_marker_wins(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    inner = tmp_path / "sub" / "module"
    (inner / ".lopen").mkdir(parents=True)
    assert find_root(inner / ".lopen") == inner
    assert find_root(tmp_path / "sub") == tmp_path


def test_git_file_of_a_worktree_marks_a_root(tmp_path: Path) -> None:
    (tmp_path / "worktree").mkdir()
    (tmp_path / "worktree" / ".git").write_text("gitdir: /elsewhere/.git/worktrees/w\n")
    assert find_root(tmp_path / "worktree") == tmp_path / "worktree"


def test_a_lopen_file_is_not_a_root(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / ".lopen").write_text("not a folder")
    assert nearest_root(tmp_path / "x") in (None, *(tmp_path / "x").parents)
    assert nearest_root(tmp_path / "x") != tmp_path / "x"


def test_no_root_is_an_error_with_guidance(tmp_path: Path) -> None:
    if nearest_root(tmp_path) is not None:
        pytest.skip(f"{tmp_path} lies inside a project")
    with pytest.raises(LopenError) as caught:
        find_root(tmp_path)
    assert str(tmp_path) in caught.value.what
    assert ".lopen/" in caught.value.why and ".git" in caught.value.why
    assert "git init" in caught.value.how
    assert caught.value.exit_code == 1
    assert find_root(tmp_path, required=False) is None


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("node_modules\n", "node_modules\n.lopen/\n"),
        ("node_modules", "node_modules\n.lopen/\n"),
        ("", ".lopen/\n"),
        ("/.lopen\n*.pyc\n", "/.lopen\n*.pyc\n"),
        ("  .lopen/  \n", "  .lopen/  \n"),
    ],
)
def test_gitignore_gets_lopen_once(tmp_path: Path, before: str, after: str) -> None:
    (tmp_path / ".gitignore").write_text(before, encoding="utf-8")
    assert ensure_lopen_dir(tmp_path) == tmp_path / ".lopen"
    ensure_lopen_dir(tmp_path)
    assert (tmp_path / ".lopen").is_dir()
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == after


def test_no_gitignore_is_created(tmp_path: Path) -> None:
    ensure_lopen_dir(tmp_path)
    assert not (tmp_path / ".gitignore").exists()


def test_configuration_reference_is_current() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert update_document(text) == text, "docs/configuration.md is out of date: run bin/gen-config-docs"
    reference = render_reference()
    for spec in FIELDS.values():
        assert f"`{spec.key}`" in reference and f"`{spec.env_var}`" in reference
