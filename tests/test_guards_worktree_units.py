"""The model's worktree (lopen/git/worktree.py), one guard at a time, on real repositories: the git
Lopen runs there never runs a program the repository's configuration names, a worktree whose git files
were rewritten is not trusted, and the branch's tip and HEAD are read right from git's own files.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from repos import git, write

from lopen.git import Worktree


def program(tmp_path: Path, name: str) -> tuple[Path, Path]:
    marker = tmp_path / f"{name}.ran"
    script = tmp_path / f"{name}.sh"
    write(script, f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    script.chmod(0o755)
    return script, marker


# -- hardened git ----------------------------------------------------------------------------------


def test_a_reference_transaction_hook_never_runs_when_lopen_commits(tmp_path, repo, wt):
    hooks = tmp_path / "hooks"
    script, marker = program(tmp_path, "hook")
    write(hooks / "reference-transaction", script.read_text())
    (hooks / "reference-transaction").chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    write(wt.path / "app.py", "print('v2')\n")
    tip = wt.tip()
    wt.commit(wt.tree(), tip, "work")
    wt.move_branch(tip)
    assert not marker.exists()


def test_an_fsmonitor_never_runs_when_lopen_writes_a_tree(tmp_path, repo, wt):
    script, marker = program(tmp_path, "fsmonitor")
    git(repo, "config", "core.fsmonitor", str(script))
    write(wt.path / "app.py", "print('v2')\n")
    wt.tree()
    wt.dirty_files()
    assert not marker.exists()


def test_an_ssh_command_is_never_run_by_lopens_git_in_the_worktree(tmp_path, repo, wt):
    script, marker = program(tmp_path, "ssh")
    git(repo, "config", "core.sshCommand", str(script))
    wt._git("ls-remote", "ssh://example.invalid/repo.git", check=False)
    assert not marker.exists()


# -- trusted pointers ------------------------------------------------------------------------------


def made_again(wt: Worktree) -> bool:
    """Whether ensure() moved the worktree aside (it did not trust it) and made a fresh one."""
    Worktree(wt.repo_root, wt.path, wt.branch).ensure()
    return any(p.name.startswith(f"{wt.path.name}.broken-") for p in wt.path.parent.iterdir())


def private_dir(wt: Worktree) -> Path:
    return Path(git(wt.path, "rev-parse", "--path-format=absolute", "--git-dir"))


def test_an_untouched_worktree_is_trusted(wt):
    assert not made_again(wt)


def test_a_pointer_without_the_gitdir_prefix_is_not_trusted(wt):
    write(wt.path / ".git", f"gitdir:{private_dir(wt)}\n")
    assert made_again(wt)


def test_a_pointer_to_a_folder_outside_the_repositorys_worktrees_is_not_trusted(tmp_path, wt):
    fake = tmp_path / "fake" / "worktrees" / "auth"
    fake.parent.mkdir(parents=True)
    subprocess.run(["cp", "-r", str(private_dir(wt)), str(fake)], check=True)
    write(wt.path / ".git", f"gitdir: {fake}\n")
    assert made_again(wt)


def test_a_private_folder_whose_gitdir_points_elsewhere_is_not_trusted_nor_removed(tmp_path, wt):
    write(private_dir(wt) / "gitdir", f"{tmp_path / 'elsewhere' / '.git'}\n")
    Worktree(wt.repo_root, wt.path, wt.branch).remove()
    assert (wt.path / "app.py").is_file()  # git is never asked to remove a worktree Lopen does not trust


def test_a_trusted_worktree_is_removed(wt):
    Worktree(wt.repo_root, wt.path, wt.branch).remove()
    assert not wt.path.exists()


def test_a_private_folder_whose_commondir_leads_elsewhere_is_not_trusted(tmp_path, wt):
    (tmp_path / "other").mkdir()
    write(private_dir(wt) / "commondir", f"{tmp_path / 'other'}\n")
    assert made_again(wt)


def test_a_pointer_that_is_not_text_is_not_trusted(wt):
    (wt.path / ".git").write_bytes(b"\xff\xfe")
    assert made_again(wt)


# -- reading git's files ---------------------------------------------------------------------------


def test_the_tip_is_read_from_packed_refs_too(repo, wt):
    tip = git(repo, "rev-parse", "lopen/auth")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "lopen" / "auth").exists()
    assert Worktree(repo, wt.path, wt.branch).tip() == tip


def test_a_missing_branch_has_no_tip(repo, wt):
    assert Worktree(repo, wt.path, "lopen/none").tip() == ""
    git(repo, "pack-refs", "--all")
    assert Worktree(repo, wt.path, "lopen/none").tip() == ""


def test_a_loose_ref_that_is_not_a_sha_is_asked_of_git(repo, wt):
    tip = wt.tip()
    git(repo, "pack-refs", "--all")
    write(repo / ".git" / "refs" / "heads" / "lopen" / "auth", "garbage\n")
    assert Worktree(repo, wt.path, wt.branch).tip() in ("", tip)  # never "garbage"


def test_head_is_the_branch_or_detached(repo, wt):
    assert wt.head_ref() == "refs/heads/lopen/auth"
    git(wt.path, "checkout", "-q", "--detach")
    assert Worktree(repo, wt.path, wt.branch).head_ref() == ""
    git(wt.path, "checkout", "-q", "-b", "model/branch")
    assert Worktree(repo, wt.path, wt.branch).head_ref() == "refs/heads/model/branch"


# -- trees, diffs, commits -------------------------------------------------------------------------


def test_diff_names_files_with_special_characters_as_they_are(wt):
    base = wt.tip()
    write(wt.path / "naïve café.py", "x = 1\n")
    write(wt.path / 'quote"d.txt', "y\n")
    text, files = wt.diff_and_files(base, wt.tree())
    assert sorted(files) == ["naïve café.py", 'quote"d.txt']
    assert text.startswith("diff --git")


def test_a_long_diff_is_cut_and_says_so(wt):
    base = wt.tip()
    write(wt.path / "big.txt", "line\n" * 1000)
    text, files = wt.diff_and_files(base, wt.tree(), max_chars=100)
    assert files == ["big.txt"]
    assert text == text[:100] + "\n… diff cut at 100 characters"
    assert len(text) == 100 + len("\n… diff cut at 100 characters")


def test_a_diff_exactly_at_the_limit_is_whole(wt):
    base = wt.tip()
    write(wt.path / "b.txt", "x\n")
    whole, _ = wt.diff_and_files(base, wt.tree())
    assert wt.diff_and_files(base, wt.tree(), max_chars=len(whole))[0] == whole


def test_a_merge_commit_has_both_parents_and_a_root_commit_none(repo, wt):
    tip = wt.tip()
    other = git(repo, "commit-tree", wt.tree_of(tip), "-p", tip, "-m", "other")
    sha = wt.commit(wt.tree_of(tip), tip, "merge it", merge_parent=other)
    assert git(repo, "rev-list", "--parents", "-n1", sha).split()[1:] == [tip, other]
    assert git(repo, "log", "-g", "-n1", "--format=%gs", "lopen/auth") == "lopen: merge it"
    root = Worktree(repo, wt.path, "lopen/fresh").commit(wt.tree_of(tip), "", "first")
    assert git(repo, "rev-list", "--parents", "-n1", root).split() == [root]


def test_find_commit_looks_only_after_the_given_point(repo, wt):
    start = wt.tip()
    write(wt.path / "a.txt", "a\n")
    tree = wt.tree()
    sha = wt.commit(tree, start, "task\n\nLopen-Task: core/1\n")
    assert wt.find_commit(tree, start, "Lopen-Task: core/1") == sha
    assert wt.find_commit(tree, sha, "Lopen-Task: core/1") is None
    assert wt.find_commit(tree, "", "Lopen-Task: core/1") == sha


# -- what Lopen's git does to the files ------------------------------------------------------------


def test_a_worktree_moved_aside_is_named_with_the_utc_time(wt):
    import re

    write(wt.path / ".git", "gitdir: /somewhere/else\n")
    Worktree(wt.repo_root, wt.path, wt.branch).ensure()
    [aside] = [p.name for p in wt.path.parent.iterdir() if ".broken-" in p.name]
    assert re.fullmatch(r"auth\.broken-\d{8}T\d{6}Z", aside)


def test_advance_brings_the_files_along_and_keeps_the_models_untracked_notes(repo, wt):
    old = wt.tip()
    write(wt.path / "notes.md", "research\n")
    other = Worktree(repo, repo / ".lopen" / "worktrees" / "other", "lopen/other")
    other.ensure(old)
    write(other.path / "app.py", "print('v2')\n")
    new = other.commit(other.tree(), old, "v2")
    wt.move_branch(new)
    wt.advance(old, new)
    assert (wt.path / "app.py").read_text() == "print('v2')\n"
    assert (wt.path / "notes.md").read_text() == "research\n"
    assert wt.dirty_files() == ["notes.md"]


def test_advance_over_conflicting_local_changes_makes_the_files_the_new_commit(repo, wt):
    old = wt.tip()
    write(wt.path / "app.py", "print('local')\n")
    git(wt.path, "add", "app.py")
    other = Worktree(repo, repo / ".lopen" / "worktrees" / "other", "lopen/other")
    other.ensure(old)
    write(other.path / "app.py", "print('v2')\n")
    new = other.commit(other.tree(), old, "v2")
    wt.move_branch(new)
    wt.advance(old, new)
    assert (wt.path / "app.py").read_text() == "print('v2')\n"
    assert wt.dirty_files() == []


def test_load_puts_a_trees_files_in_the_worktree_as_changes(wt):
    tip = wt.tip()
    write(wt.path / "app.py", "print('conflict')\n")
    tree = wt.tree()
    wt.reset_to(tip)
    wt.load(tree)
    assert (wt.path / "app.py").read_text() == "print('conflict')\n"
    assert wt.tip() == tip and wt.dirty_files() == ["app.py"]


def test_reset_to_makes_the_files_another_commit(wt):
    first = wt.tip()
    write(wt.path / "b.py", "B\n")
    second = wt.commit(wt.tree(), first, "b")
    wt.reset_to(first)
    assert not (wt.path / "b.py").exists()
    wt.reset_to(second)
    assert (wt.path / "b.py").read_text() == "B\n"


def test_a_worktree_with_changes_is_removed_and_its_branch_still_read(wt):
    tip = wt.tip()
    write(wt.path / "app.py", "print('unsaved')\n")
    write(wt.path / "new.txt", "x\n")
    wt.remove()
    assert not wt.path.exists()
    assert wt.tip() == tip


def test_the_reflog_says_lopen_moved_the_branch(repo, wt):
    tip = wt.tip()
    write(wt.path / "b.txt", "b\n")
    moved = wt.commit(wt.tree(), tip, "b")
    wt.move_branch(tip)
    assert git(repo, "log", "-g", "-n1", "--format=%gs", "lopen/auth") == "lopen: branch restored"
    wt.restart_at(moved)
    assert git(repo, "log", "-g", "-n1", "--format=%gs", "lopen/auth") == "lopen: component started afresh"


def test_commit_file_commits_only_that_file_and_leaves_what_the_model_staged(wt):
    tip = wt.tip()
    write(wt.path / "staged.py", "S = 1\n")
    git(wt.path, "add", "staged.py")
    sha = wt.commit_file("docs/spec.md", b"# spec\n", tip, "docs: spec")
    assert sorted(git(wt.repo_root, "ls-tree", "-r", "--name-only", sha).split()) == ["app.py", "docs/spec.md"]
    assert git(wt.path, "diff", "--cached", "--name-only").split() == ["staged.py"]
    assert (wt.path / "docs" / "spec.md").read_bytes() == b"# spec\n"


def test_lopens_git_for_bytes_follows_the_pinned_repository_not_the_worktrees_pointer(tmp_path, repo, wt):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    write(wt.path / ".git", f"gitdir: {other / '.git'}\n")
    assert wt.show(wt.tip(), "app.py") == b"print('v1')\n"


def test_git_for_bytes_says_which_command_failed_and_why(wt):
    from lopen.git import GitError

    with pytest.raises(GitError) as failed:
        wt._git_bytes("cat-file", "blob", "no-such-object")
    problem = failed.value
    assert problem.what == f"git cat-file blob no-such-object failed in {wt.path}"
    assert "no-such-object" in problem.why and problem.why.startswith("fatal:")  # git's own words
    assert problem.how == "check the repository"


# -- sizes and diffs -------------------------------------------------------------------------------


def test_only_new_or_changed_files_larger_than_the_limit_are_left_out(repo):
    write(repo / ".gitignore", "build/\n")
    write(repo / "gone.txt", "x\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "more")
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", ignore=("cache/",), max_file_bytes=10)
    wt.ensure()
    (wt.path / "gone.txt").unlink()  # deleted: listed by git, no size
    write(wt.path / "app.py", "x" * 50)  # changed, too large
    write(wt.path / "exact.txt", "x" * 10)  # at the limit: kept
    write(wt.path / "build" / "big.bin", "x" * 50)  # ignored by the project
    write(wt.path / "cache" / "big.bin", "x" * 50)  # ignored by Lopen
    write(wt.path / "zz.bin", "x" * 50)  # after the deleted one
    tree = wt.tree()
    assert sorted(wt.left_out) == [("app.py", 50), ("zz.bin", 50)]
    names = git(repo, "ls-tree", "-r", "--name-only", tree).split()
    assert "exact.txt" in names and "zz.bin" not in names and "gone.txt" not in names


def test_a_diff_is_from_its_base_and_never_coloured(repo, wt):
    git(repo, "config", "color.ui", "always")
    git(repo, "config", "color.diff", "always")
    base = wt.tip()
    write(wt.path / "b.txt", "b\n")
    text = wt.diff(base, wt.tree())
    assert "\x1b[" not in text
    assert "b.txt" in text and "app.py" not in text


def test_a_diff_is_cut_at_60000_characters_by_default(wt):
    base = wt.tip()
    write(wt.path / "big.txt", "".join(f"line {n}\n" for n in range(10_000)))
    tree = wt.tree()
    suffix = "\n… diff cut at 60000 characters"
    assert len(wt.diff(base, tree)) == 60_000 + len(suffix)
    assert len(wt.diff_and_files(base, tree)[0]) == 60_000 + len(suffix)


# -- publishing ------------------------------------------------------------------------------------


def test_push_publishes_the_branch_and_force_overwrites_a_diverged_one(tmp_path, repo, wt):
    from lopen.git import GitError

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    tip = wt.tip()
    write(wt.path / "a.txt", "a\n")
    first = wt.commit(wt.tree(), tip, "a")
    wt.push(str(remote))
    assert git(remote, "rev-parse", "lopen/auth") == first
    wt.reset_to(tip)
    write(wt.path / "b.txt", "b\n")
    wt.move_branch(tip)
    second = wt.commit(wt.tree(), tip, "b")
    with pytest.raises(GitError):
        wt.push(str(remote))  # not a fast-forward
    wt.push(str(remote), force=True)
    assert git(remote, "rev-parse", "lopen/auth") == second


def test_fetch_says_whether_git_could(tmp_path, repo, wt):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    wt.push(str(remote))
    assert wt.fetch(str(remote)) is True
    assert wt.fetch(str(remote), "lopen/none") is False
    assert wt.fetch(str(tmp_path / "missing.git")) is False


@pytest.mark.parametrize("direction", ["fetch", "push"])
def test_a_remote_that_never_answers_is_a_failure_after_the_timeout_not_a_hang(
    tmp_path, repo, wt, monkeypatch, direction
):
    """The team's remote stops answering mid-way (a network that drops, a server that hangs): a worker's
    fetch or push gives up after ``REMOTE_TIMEOUT`` and says so — fetch answers False, push raises — so the
    run goes on or ends with the reason, instead of waiting for ever. (Here the remote's git program
    sleeps, and the timeout is a second.)"""
    import threading

    from lopen.git import GitError
    from lopen.git import worktree as module

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    wt.push(str(remote))
    git(repo, "remote", "add", "team", str(remote))
    git(repo, "config", f"remote.team.{'uploadpack' if direction == 'fetch' else 'receivepack'}", "sleep 600;")
    write(wt.path / "a.txt", "a\n")
    wt.move_branch(wt.commit(wt.tree(), wt.tip(), "a"))
    monkeypatch.setattr(module, "REMOTE_TIMEOUT", 1.0)
    said: list[object] = []

    def call() -> None:
        try:
            said.append(wt.fetch("team") if direction == "fetch" else wt.push("team"))
        except GitError as error:
            said.append(error)

    calling = threading.Thread(target=call, daemon=True)
    calling.start()
    calling.join(timeout=20)
    assert not calling.is_alive(), f"git {direction} still waiting for the remote after 20 s"
    if direction == "fetch":
        assert said == [False]
    else:
        assert isinstance(said[0], GitError) and "took longer than 1 s" in str(said[0])


def test_a_file_name_that_is_not_utf8_is_named_with_a_replacement_character(wt):
    base = wt.tip()
    (wt.path / "bad\udcff.txt").write_text("x\n")  # the bytes b"bad\xff.txt"
    _text, files = wt.diff_and_files(base, wt.tree())
    assert files == ["bad\ufffd.txt"]


def test_the_moved_aside_name_is_utc_whatever_the_local_time_zone(monkeypatch, wt):
    import time

    write(wt.path / ".git", "gitdir: /somewhere/else\n")
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        before = time.strftime("%Y%m%dT%H", time.gmtime())
        Worktree(wt.repo_root, wt.path, wt.branch).ensure()
        after = time.strftime("%Y%m%dT%H", time.gmtime())
    finally:
        monkeypatch.undo()
        time.tzset()
    [aside] = [p.name for p in wt.path.parent.iterdir() if ".broken-" in p.name]
    assert aside.removeprefix("auth.broken-")[:11] in (before, after)


# -- git asked when its files cannot be read (a reftable repository) ---------------------------------


def test_with_a_reftable_folder_the_tip_and_head_are_asked_of_git_and_agree(repo, wt):
    """git 2.39 cannot make a reftable repository; a ``reftable`` folder in the common git folder is what
    makes Lopen stop reading ref files and ask git, and git's answers must be the same."""
    tip = wt.tip()
    (repo / ".git" / "reftable").mkdir()
    asked = Worktree(repo, wt.path, wt.branch)
    assert asked._dirs() is None
    assert asked.tip() == tip
    assert Worktree(repo, wt.path, "lopen/none").tip() == ""  # a missing branch: nothing, not its name
    assert asked.head_ref() == "refs/heads/lopen/auth"
    git(wt.path, "checkout", "-q", "--detach")
    assert Worktree(repo, wt.path, wt.branch).head_ref() == ""
    git(wt.path, "checkout", "-q", "-b", "model/branch")
    assert Worktree(repo, wt.path, wt.branch).head_ref() == "refs/heads/model/branch"


# -- the private indexes -----------------------------------------------------------------------------


def test_a_lock_a_killed_git_left_on_lopens_private_index_is_cleared(repo, wt):
    wt.tree()
    [index] = [p for p in (repo / ".lopen" / "indexes").iterdir()]
    assert index.name.startswith("auth-")
    write(wt.path / "b.py", "B = 1\n")
    index.with_name(index.name + ".lock").write_text("")  # a git killed while it held the index
    tree = wt.tree()
    assert "b.py" in git(repo, "ls-tree", "--name-only", tree).split()
    assert not index.with_name(index.name + ".lock").exists()
    fresh = Worktree(repo, wt.path, wt.branch)  # a new run: its index read from the tip again
    index.with_name(index.name + ".lock").write_text("")
    assert fresh.tree() == tree


def test_two_worktrees_of_one_name_keep_separate_private_indexes(repo, tmp_path):
    one = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")
    two = Worktree(repo, tmp_path / "elsewhere" / "auth", "lopen/auth-2")
    one.ensure()
    two.ensure()
    write(one.path / "one.py", "1\n")
    write(two.path / "two.py", "2\n")
    first, second = one.tree(), two.tree()
    assert "two.py" not in git(repo, "ls-tree", "--name-only", first).split()
    assert "one.py" not in git(repo, "ls-tree", "--name-only", second).split()
    assert len(list((repo / ".lopen" / "indexes").iterdir())) == 2


def test_commit_file_leaves_no_temporary_index_behind(monkeypatch, tmp_path, wt):
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    wt.commit_file("docs/spec.md", b"# spec\n", wt.tip(), "docs: spec")
    assert list(scratch.iterdir()) == []


def test_commit_file_into_existing_and_deep_folders_and_as_a_first_commit(repo, wt):
    first = wt.commit_file("docs/spec.md", b"# v1\n", wt.tip(), "docs: v1")
    second = wt.commit_file("docs/more.md", b"# more\n", first, "docs: more")  # docs/ exists now
    third = wt.commit_file("a/b/c.md", b"c\n", second, "docs: deep")
    names = sorted(git(repo, "ls-tree", "-r", "--name-only", third).split())
    assert names == ["a/b/c.md", "app.py", "docs/more.md", "docs/spec.md"]
    assert git(repo, "ls-tree", "-r", third, "a/b/c.md").split()[0] == "100644"
    assert (wt.path / "a" / "b" / "c.md").read_bytes() == b"c\n"
    assert git(wt.path, "status", "--porcelain") == ""  # the files, the index and HEAD agree
    root = Worktree(repo, wt.path, "lopen/fresh").commit_file("only.md", b"o\n", "", "first")
    assert git(repo, "ls-tree", "-r", "--name-only", root).split() == ["only.md"]
    assert git(repo, "rev-list", "--parents", "-n1", root).split() == [root]


# -- what a tree leaves out ----------------------------------------------------------------------------


def test_a_large_file_after_a_nested_repository_is_still_left_out(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", max_file_bytes=10)
    wt.ensure()
    nested = wt.path / "aaa"
    nested.mkdir()
    git(nested, "init", "-q")
    write(nested / "x.txt", "x\n")
    write(wt.path / "big.bin", "x" * 50)
    write(wt.path / "small.txt", "s\n")
    tree = wt.tree()
    assert wt.nested == ["aaa"]
    assert wt.left_out == [("big.bin", 50)]
    assert sorted(git(repo, "ls-tree", "--name-only", tree).split()) == ["app.py", "small.txt"]


def test_a_tree_is_the_same_whatever_folder_lopen_runs_from(monkeypatch, repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", max_file_bytes=10)
    wt.ensure()
    write(wt.path / "big.bin", "x" * 50)
    write(wt.path / "sub" / "s.txt", "s\n")
    monkeypatch.chdir(wt.path / "sub")
    tree = wt.tree()
    assert wt.left_out == [("big.bin", 50)]
    assert sorted(git(repo, "ls-tree", "-r", "--name-only", tree).split()) == ["app.py", "sub/s.txt"]
    assert wt.show(wt.tip(), "app.py") == b"print('v1')\n"


# -- finding a commit a killed run made ---------------------------------------------------------------


def test_find_commit_needs_the_tree_and_the_exact_trailer_line(repo, wt):
    start = wt.tip()
    write(wt.path / "a.txt", "a\n")
    tree = wt.tree()
    sha = wt.commit(tree, start, "task\n\nLopen-Task: core/10\n")
    assert wt.find_commit(tree, start, "Lopen-Task: core/1") is None  # another task's trailer
    assert wt.find_commit(wt.tree_of(start), start, "Lopen-Task: core/10") is None  # another tree
    assert wt.find_commit(tree, start, "Lopen-Task: core/10") == sha
    again = wt.commit(tree, sha, "again\n\n  Lopen-Task: core/2  \n")
    assert wt.find_commit(tree, start, "Lopen-Task: core/2") == again  # the line, its spaces aside
    assert wt.find_commit(tree, start, "Lopen-Task: core/10") == sha  # an older commit on the branch


def test_find_commit_after_a_commit_this_clone_lacks_finds_nothing_and_does_not_fail(wt):
    write(wt.path / "a.txt", "a\n")
    tree = wt.tree()
    wt.commit(tree, wt.tip(), "task\n\nLopen-Task: core/1\n")
    assert wt.find_commit(tree, "0" * 40, "Lopen-Task: core/1") is None


def test_a_head_that_cannot_be_read_is_no_branch_and_no_crash(repo, wt):
    private = Path(git(wt.path, "rev-parse", "--path-format=absolute", "--git-dir"))
    (private / "HEAD").unlink()
    (private / "HEAD").mkdir()  # unreadable as a file (root reads any file, so a folder stands in)
    assert Worktree(repo, wt.path, wt.branch).head_ref() == ""


def test_a_large_changed_file_after_a_deleted_one_is_still_left_out(repo):
    write(repo / "a_gone.txt", "x\n")
    write(repo / "b_big.txt", "x\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "more")
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", max_file_bytes=10)
    wt.ensure()
    (wt.path / "a_gone.txt").unlink()
    write(wt.path / "b_big.txt", "x" * 50)
    tree = wt.tree()
    assert wt.left_out == [("b_big.txt", 50)]
    assert git(repo, "show", f"{tree}:b_big.txt") == "x"  # the tip's version stays
    assert "a_gone.txt" not in git(repo, "ls-tree", "--name-only", tree).split()


def test_commit_file_of_a_spec_named_like_a_branch_commits_that_file_only(repo, wt):
    tip = wt.tip()
    write(wt.path / "staged.py", "S = 1\n")
    git(wt.path, "add", "staged.py")
    sha = wt.commit_file("main", b"# spec named main\n", tip, "docs: spec")  # "main" is also a branch
    assert wt.tip() == sha and (wt.path / "main").read_bytes() == b"# spec named main\n"
    assert git(wt.path, "diff", "--cached", "--name-only").split() == ["staged.py"]


def test_a_file_the_branch_tracks_stays_in_the_next_tree_after_the_tip_moved_though_ignored(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", ignore=("*.md",))
    wt.ensure()
    first = wt.tree()  # the private index, read from the tip
    tip = wt.commit_file("docs/spec.md", b"# spec\n", wt.tip(), "docs: spec")  # the tip moves
    assert first != wt.tree_of(tip)
    write(wt.path / "notes.md", "ignored\n")
    tree = wt.tree()
    names = git(repo, "ls-tree", "-r", "--name-only", tree).split()
    assert "docs/spec.md" in names and "notes.md" not in names
    assert tree == wt.tree_of(tip) and wt.dirty_files() == []


def test_a_file_grown_too_large_after_an_earlier_tree_keeps_the_tips_version(repo):
    write(repo / "b.txt", "x\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-q", "-m", "b")
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", max_file_bytes=10)
    wt.ensure()
    write(wt.path / "b.txt", "y\n")
    assert git(repo, "show", f"{wt.tree()}:b.txt") == "y"  # the private index now holds this version
    write(wt.path / "b.txt", "z" * 50)
    tree = wt.tree()
    assert wt.left_out == [("b.txt", 50)]
    assert git(repo, "show", f"{tree}:b.txt") == "x"  # the tip's, not the earlier tree's


# -- a component's folders of several workers ------------------------------------------------------


def component(repo: Path, folder: str, shared: bool = True) -> Worktree:
    """A worker's folder of the component ``api`` (``shared``), or a worktree of its branch as a module's is made."""
    path, branch = repo / ".lopen" / "worktrees" / "auth.components" / folder, "lopen/auth--api"
    return Worktree(repo, path, branch, shared_branch=True) if shared else Worktree(repo, path, branch)


def test_a_worker_takes_over_a_component_in_a_folder_of_its_own_beside_the_earlier_holder_s(repo):
    """Worker 1 held the component and was paused past its lease: its folder still has the branch checked out.
    Worker 2's folder of the component is made beside it, on the same branch where it is (git allows a
    branch in one worktree only: told to allow it here), so the two never share a folder."""
    first = component(repo, "api@w1")
    first.ensure(git(repo, "rev-parse", "HEAD"))
    write(first.path / "api.py", "API = 1\n")
    first.move_branch(first.commit(first.tree(), first.tip(), "worker 1's task"))

    second = component(repo, "api@w2")
    created, base = second.ensure()

    assert (created, base, second.tip()) == (False, first.tip(), first.tip())
    assert (second.path / "api.py").read_text(encoding="utf-8") == "API = 1\n"
    assert git(second.path, "status", "--porcelain") == "" and second.dirty_files() == []
    listed = git(repo, "worktree", "list", "--porcelain").split("\n\n")
    assert sum("branch refs/heads/lopen/auth--api" in entry for entry in listed) == 2


@pytest.mark.parametrize("shared", [True, False])
def test_a_branch_checked_out_outside_lopen_s_folders_is_refused_with_how_to_free_it(repo, tmp_path, shared):
    """The person's own checkout of the branch (or a folder that is not a worker's of the same component) is
    never worked beside: git's one-worktree rule holds, and the error says which folder to switch. A module's
    worktree is never shared, even with a sibling folder."""
    from lopen.git import GitError

    git(repo, "branch", "lopen/auth--api")
    theirs = (repo / ".lopen" / "worktrees" / "auth.components" / "api@w1") if not shared else tmp_path / "mine"
    git(repo, "worktree", "add", "-q", str(theirs), "lopen/auth--api")

    with pytest.raises(GitError, match=re.escape(f"lopen/auth--api is checked out in {theirs}")):
        component(repo, "api@w2", shared=shared).ensure()


@pytest.mark.parametrize("lock", ["worktrees.lock", "checkouts.lock"])
def test_a_lane_s_worktree_is_made_under_the_locks_every_other_is_made_under(repo, lock):
    """Registered with git under the lock worktrees are made in (git's prune, which a removal runs, must
    never meet a half-made one), its files written under the one check-outs take turns on: while another
    holds either, a lane's worktree waits — unmade, or made without its files."""
    import fcntl
    import threading

    lane = component(repo, "api")
    (repo / ".lopen").mkdir(exist_ok=True)
    with open(repo / ".lopen" / lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        making = threading.Thread(target=lane.ensure, args=(git(repo, "rev-parse", "HEAD"),))
        making.start()
        making.join(timeout=1.0)
        assert making.is_alive()  # waiting for the other's lock
        assert not (lane.path / "app.py").exists()
        fcntl.flock(held, fcntl.LOCK_UN)
    making.join()
    assert (lane.path / "app.py").is_file() and git(lane.path, "status", "--porcelain") == ""


def test_a_check_out_a_killed_run_left_locked_is_made_all_the_same(repo):
    """A run killed while git wrote a worktree's files through Lopen's private index leaves that index's
    lock file: the next run's check-out removes it (only Lopen writes there) instead of failing on it."""
    lane = component(repo, "api")
    index = lane._index_file()
    write(index.with_name(index.name + ".lock"), "")

    lane.ensure(git(repo, "rev-parse", "HEAD"))

    assert (lane.path / "app.py").is_file() and lane.tree() == lane.tree_of(lane.tip())


def test_a_worktree_s_private_index_is_named_within_a_file_name_s_length_whatever_its_letters(repo):
    """Its name is cut to 100 bytes (with its digest and `.lock`, a file name fits 255): a cut that falls
    inside a letter of several bytes drops that letter rather than failing."""
    name = "a" * 99 + "é" * 80  # byte 100 is the middle of the first é
    made = Worktree(repo, repo / ".lopen" / "worktrees" / name, "lopen/long")._index_file()
    assert made.name.startswith("a" * 99 + "-") and len(made.name.encode()) + len(".lock") <= 255


def test_a_new_worktree_s_own_index_is_its_tip_so_the_first_sync_runs_no_git(repo, monkeypatch, tmp_path):
    """Checked out just now, the worktree's own index is already its tip: the index sync after a lane's
    start (or a resume) costs nothing, rather than an `lstat` of every file."""
    lane = component(repo, "api")
    lane.ensure(git(repo, "rev-parse", "HEAD"))
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))

    lane.sync_index()

    assert not trace.exists() or '"cmd_name"' not in trace.read_text(encoding="utf-8")
    assert git(lane.path, "status", "--porcelain") == ""
