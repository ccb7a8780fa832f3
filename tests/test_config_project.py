"""The project root and `.lopen/`: discovery from subfolders, kept out of git through `.git/info/exclude`
(never the user's `.gitignore`), the project id, the docs reference."""

from __future__ import annotations

import subprocess
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


def test_lopen_folder_is_kept_out_of_git_without_a_gitignore(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "app.py").write_text("print('hi')\n")
    assert ensure_lopen_dir(tmp_path) == tmp_path / ".lopen"
    ensure_lopen_dir(tmp_path)
    (tmp_path / ".lopen" / "store.sqlite").write_text("x")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    assert status.splitlines() == ["?? app.py"]
    assert not (tmp_path / ".gitignore").exists()
    exclude = (tmp_path / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.lopen/") == 1  # once, however often it runs


def test_a_users_gitignore_is_left_alone(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("node_modules", encoding="utf-8")
    ensure_lopen_dir(tmp_path)
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == "node_modules"


def test_project_id_is_the_first_commit_and_is_recorded(tmp_path: Path) -> None:
    from lopen.project import project_id

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    who = ["-c", "user.name=A", "-c", "user.email=a@b.c"]
    subprocess.run(["git", *who, "commit", "-q", "--allow-empty", "-m", "first"], cwd=tmp_path, check=True)
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    subprocess.run(["git", *who, "commit", "-q", "--allow-empty", "-m", "second"], cwd=tmp_path, check=True)
    assert project_id(tmp_path) == first[:12]
    assert (tmp_path / ".lopen" / "project-id").read_text().strip() == first[:12]
    assert project_id(tmp_path, "team-x") == "team-x"  # the project.id setting wins


def test_configuration_reference_is_current() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert update_document(text) == text, "docs/configuration.md is out of date: run bin/gen-config-docs"
    reference = render_reference()
    for spec in FIELDS.values():
        assert f"`{spec.key}`" in reference and f"`{spec.env_var}`" in reference
