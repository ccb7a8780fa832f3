"""Protected and writable paths (lopen/sandbox/paths.py), one rule at a time.

What a user would notice when one of these breaks: a secret in their home left readable to the model,
a write inside the worktree judged against the wrong root, a `~` path judged somewhere else, the
kernel sandbox opening the wrong git folders of a linked worktree.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lopen.sandbox import paths
from lopen.sandbox.config import SandboxConfig


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


# -- home and ~ -----------------------------------------------------------------------------------


def test_the_home_folder_is_homes_value_when_set(tmp_path):
    assert paths.home_dir({"HOME": str(tmp_path)}) == str(tmp_path)


def test_without_home_the_home_folder_is_the_accounts(monkeypatch):
    monkeypatch.setenv("HOME", "/nonexistent-home-from-the-environment")
    expected = str(Path.home())
    assert paths.home_dir({}) == expected
    assert paths.home_dir({"HOME": ""}) == expected


def test_the_processs_environment_is_the_default(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert paths.home_dir() == str(tmp_path / "me")


def test_tilde_alone_and_tilde_slash_are_the_home_folder(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    assert paths.resolve("~", str(cwd), str(home)) == str(home)
    assert paths.resolve("~/.ssh/id_rsa", str(cwd), str(home)) == str(home / ".ssh" / "id_rsa")
    assert paths.resolve("~other", str(cwd), str(home)) == str(cwd / "~other")  # not a home: a file name


def test_without_a_home_argument_tilde_is_the_users_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert paths.resolve("~/.aws/credentials", "/") == str(tmp_path / "me" / ".aws" / "credentials")


# -- inside ---------------------------------------------------------------------------------------


def test_a_root_ending_in_x_still_contains_its_files():
    assert paths.inside("/data/BOX/notes.txt", "/data/BOX")
    assert paths.inside("/data/BOX/notes.txt", "/data/BOX/")
    assert paths.inside("/data/BOX", "/data/BOX/")
    assert not paths.inside("/data/BOXES/notes.txt", "/data/BOX")


# -- secrets --------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for rel in (".ssh", ".config/gh", ".copilot", ".aws"):
        (home / rel).mkdir(parents=True)
    return home


def test_the_cli_credentials_are_secrets_by_default(home):
    found = paths.secret_paths(str(home))
    assert {str(home / rel) for rel in (".ssh", ".config/gh", ".copilot", ".aws")} <= set(found)


def test_the_cli_credentials_can_be_left_out_and_only_they_are(home):
    found = set(paths.secret_paths(str(home), include_cli_credentials=False))
    assert str(home / ".ssh") in found and str(home / ".aws") in found
    assert str(home / ".config/gh") not in found and str(home / ".copilot") not in found


def test_a_home_whose_name_looks_like_a_pattern_keeps_its_secrets(tmp_path):
    home = tmp_path / "h[x]"
    (home / ".ssh").mkdir(parents=True)
    (tmp_path / "hx" / ".aws").mkdir(parents=True)  # what the pattern h[x] would match instead
    found = set(paths.secret_paths(str(home)))
    assert str(home / ".ssh") in found
    assert str(tmp_path / "hx" / ".aws") not in found


def test_lopens_paths_follow_the_environments_config_folder(tmp_path):
    xdg = tmp_path / "xdg"
    config = SandboxConfig(project_root=str(tmp_path / "project"))
    protected = paths.lopen_paths(config, {"XDG_CONFIG_HOME": str(xdg), "HOME": str(tmp_path / "home")})
    assert str(xdg / "lopen") in protected
    assert str(tmp_path / "project" / ".lopen") in protected
    assert str(tmp_path / "project" / "docs" / "requirements") in protected


# -- a linked worktree's git folders ---------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "root")
    return repo


def test_a_linked_worktrees_git_folders_are_its_private_one_and_the_repositorys(repo, tmp_path):
    _git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "lane")
    private, common = paths.git_dirs(str(tmp_path / "wt"))
    assert private == str((repo / ".git" / "worktrees" / "wt").resolve())
    assert common == str((repo / ".git").resolve())


def test_a_relative_gitdir_is_read_from_the_worktree(repo, tmp_path):
    _git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "lane")
    (tmp_path / "wt" / ".git").write_text("gitdir: ../repo/.git/worktrees/wt\n")
    assert paths.git_dirs(str(tmp_path / "wt")) == (
        str((repo / ".git" / "worktrees" / "wt").resolve()),
        str((repo / ".git").resolve()),
    )


def test_without_a_commondir_file_the_common_folder_is_two_levels_up(tmp_path):
    private = tmp_path / "repo" / ".git" / "worktrees" / "wt"
    private.mkdir(parents=True)
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {private}\n")
    assert paths.git_dirs(str(tmp_path / "wt")) == (str(private), str(tmp_path / "repo" / ".git"))


def test_a_main_checkout_or_a_plain_folder_is_no_linked_worktree(repo, tmp_path):
    assert paths.git_dirs(str(repo)) == ("", "")  # .git is a folder
    assert paths.git_dirs(str(tmp_path)) == ("", "")  # no .git at all


def test_a_git_file_without_a_gitdir_line_is_no_linked_worktree(tmp_path):
    (tmp_path / ".git").write_bytes(b"\xff\xfe not a pointer\n")
    assert paths.git_dirs(str(tmp_path)) == ("", "")


def test_the_common_folder_is_where_commondir_leads(tmp_path):
    common = tmp_path / "repo" / ".git"
    private = tmp_path / "elsewhere" / "wt"  # not <common>/worktrees/<name>
    private.mkdir(parents=True)
    common.mkdir(parents=True)
    (private / "commondir").write_text("../../repo/.git\n")
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {private}\n")
    assert paths.git_dirs(str(tmp_path / "wt")) == (str(private), str(common))
