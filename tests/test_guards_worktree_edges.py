"""The model's worktree (lopen/git/worktree.py), where the mutation run found its guards untested: the
user's own ignore files, a ``core.worktree`` a model plants, nested repositories beside the user's
submodules, sizes measured against the tip, git's non-UTF-8 words, ``advance`` over staged work,
``config.worktree`` put back, and removing a worktree the slow way. Real git in temporary folders.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from repos import git, nested_repo, write

from lopen.git import Worktree


def private_dir(wt: Worktree) -> Path:
    return Path(git(wt.path, "rev-parse", "--path-format=absolute", "--git-dir"))


# -- the user's own ignore files -------------------------------------------------------------------


def names_in(repo: Path, tree: str) -> list[str]:
    return sorted(git(repo, "ls-tree", "-r", "--name-only", tree).split())


def lopen_ignoring(repo: Path, *ignore: str) -> Worktree:
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", ignore=ignore)
    wt.ensure()
    write(wt.path / "notes.log", "log\n")
    write(wt.path / "__pycache__" / "m.pyc", "pyc\n")
    write(wt.path / "cache" / "c.bin", "cache\n")
    write(wt.path / "keep.py", "K = 1\n")
    return wt


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own: git's global configuration and excludes file are read from it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    return home


def test_the_users_configured_excludes_file_and_lopens_patterns_keep_their_files_out(repo, home):
    write(home / "my-ignores", "*.log")  # no newline at its end; named with ~ in git's configuration
    git(repo, "config", "core.excludesFile", "~/my-ignores")
    wt = lopen_ignoring(repo, "__pycache__/", "cache/")
    assert names_in(repo, wt.tree()) == ["app.py", "keep.py"]
    assert (repo / ".lopen" / "git-excludes").read_text() == "*.log\n__pycache__/\ncache/\n"


def test_the_users_excludes_file_under_xdg_config_home_is_used_when_none_is_configured(repo, home, monkeypatch):
    write(home / "xdg" / "git" / "ignore", "*.log\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    wt = lopen_ignoring(repo, "__pycache__/")
    assert names_in(repo, wt.tree()) == ["app.py", "cache/c.bin", "keep.py"]
    assert (repo / ".lopen" / "git-excludes").read_text() == "*.log\n__pycache__/\n"


def test_the_users_excludes_file_under_the_home_config_folder_is_used_without_xdg_config_home(repo, home):
    write(home / ".config" / "git" / "ignore", "*.log\n")
    wt = lopen_ignoring(repo, "cache/")
    assert names_in(repo, wt.tree()) == ["__pycache__/m.pyc", "app.py", "keep.py"]


def test_without_an_excludes_file_of_the_users_only_lopens_patterns_apply(repo, home):
    wt = lopen_ignoring(repo, "cache/")
    assert names_in(repo, wt.tree()) == ["__pycache__/m.pyc", "app.py", "keep.py", "notes.log"]
    assert (repo / ".lopen" / "git-excludes").read_text() == "cache/\n"


def test_an_excludes_file_that_cannot_be_read_is_skipped(repo, home):
    git(repo, "config", "core.excludesFile", "/proc/self/mem")  # a file whose reading fails (EIO)
    wt = lopen_ignoring(repo, "cache/")
    assert names_in(repo, wt.tree()) == ["__pycache__/m.pyc", "app.py", "keep.py", "notes.log"]
    assert (repo / ".lopen" / "git-excludes").read_text() == "cache/\n"


def test_an_excludes_file_an_earlier_run_left_with_other_patterns_is_written_again(repo, home):
    write(repo / ".lopen" / "git-excludes", "*.log\n")  # another setting's patterns
    wt = lopen_ignoring(repo, "cache/")
    assert names_in(repo, wt.tree()) == ["__pycache__/m.pyc", "app.py", "keep.py", "notes.log"]


def test_a_tree_is_written_after_lopens_folder_was_deleted(repo, tmp_path):
    import shutil

    wt = Worktree(repo, tmp_path / "outside" / "auth", "lopen/auth")
    wt.ensure()
    shutil.rmtree(repo / ".lopen")
    write(wt.path / "b.py", "B\n")
    assert names_in(repo, wt.tree()) == ["app.py", "b.py"]


# -- pinned git folders --------------------------------------------------------------------------------


def test_a_core_worktree_the_model_sets_never_points_lopens_git_at_another_folder(tmp_path, repo, wt):
    decoy = tmp_path / "decoy"
    write(decoy / "planted.py", "evil\n")
    git(repo, "config", "extensions.worktreeConfig", "true")
    write(private_dir(wt) / "config.worktree", f"[core]\n\tworktree = {decoy}\n")
    write(wt.path / "mine.py", "M\n")
    fresh = Worktree(repo, wt.path, wt.branch)
    assert names_in(repo, fresh.tree()) == ["app.py", "mine.py"]
    assert fresh.dirty_files() == ["mine.py"]


# -- nested repositories and submodules ----------------------------------------------------------------


def test_a_nested_repository_whose_name_ends_like_a_mutation_is_named_whole(repo, wt):
    git(wt.path, "init", "-q", "TeX")  # a name ending in X: only "/" is cut from it
    write(wt.path / "TeX" / "t.tex", "x\n")
    tree = wt.tree()
    assert wt.nested == ["TeX"]
    assert names_in(repo, tree) == ["app.py"]


def test_a_submodule_the_branch_tracks_is_recorded_at_its_new_commit_not_left_out(repo, wt):
    sub = wt.path / "sub"
    first = nested_repo(sub, {"s.txt": "1\n"})
    tip = wt.tip()
    index = {"GIT_INDEX_FILE": str(wt.path.parent / "sub-index")}
    subprocess.run(["git", "read-tree", tip], cwd=repo, env={**os.environ, **index}, check=True)
    subprocess.run(
        ["git", "update-index", "--add", "--cacheinfo", f"160000,{first},sub"],
        cwd=repo,
        env={**os.environ, **index},
        check=True,
    )
    tree = subprocess.run(
        ["git", "write-tree"], cwd=repo, env={**os.environ, **index}, capture_output=True, text=True, check=True
    ).stdout.strip()
    wt.move_branch(wt.commit(tree, tip, "the user's submodule"))
    write(sub / "s.txt", "2\n")
    git(sub, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-qam", "two")
    second = git(sub, "rev-parse", "HEAD")
    tree = wt.tree()
    assert wt.nested == []
    assert git(repo, "ls-tree", tree, "sub").split()[:3] == ["160000", "commit", second]


# -- sizes measured against the tip ---------------------------------------------------------------------


def test_a_large_file_the_tip_holds_unchanged_is_not_reported_left_out(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")
    wt.ensure()
    write(wt.path / "big.bin", "x" * 500)  # committed by Lopen (commit-tree): the worktree's own index lacks it
    wt.commit(wt.tree(), wt.tip(), "big")
    limited = Worktree(repo, wt.path, wt.branch, max_file_bytes=100)  # the limit set afterwards
    write(wt.path / "b.py", "B\n")
    tree = limited.tree()
    assert limited.left_out == []
    assert names_in(repo, tree) == ["app.py", "b.py", "big.bin"]


# -- git's words ---------------------------------------------------------------------------------------


def test_show_of_a_path_that_is_not_utf8_is_none_not_a_crash(wt):
    assert wt.show(wt.tip(), os.fsdecode(b"\xff.txt")) is None  # git names it, raw, in its error


# -- advancing over the model's staged work ------------------------------------------------------------


def test_advance_keeps_what_the_model_staged_in_a_file_the_merge_did_not_touch(repo, wt):
    old = wt.commit_file("k.txt", b"k\n", wt.tip(), "k")
    write(wt.path / "k.txt", "staged\n")
    git(wt.path, "add", "k.txt")
    other = Worktree(repo, repo / ".lopen" / "worktrees" / "other", "lopen/other")
    other.ensure(old)
    write(other.path / "app.py", "print('v2')\n")
    new = other.commit(other.tree(), old, "v2")
    wt.move_branch(new)
    wt.advance(old, new)
    assert (wt.path / "app.py").read_text() == "print('v2')\n"
    assert (wt.path / "k.txt").read_text() == "staged\n"


# -- config.worktree put back --------------------------------------------------------------------------


def test_a_kept_value_with_a_newline_a_quote_and_a_backslash_survives_the_rewrite_as_git_reads_it(repo, wt):
    config = private_dir(wt) / "config.worktree"
    write(
        config,
        '[core]\n\tsparseCheckout = "a\\nb\\\\c\\"d"\n\tsparseCheckoutCone = true\n\tfsmonitor = /bin/evil\n'
        "[index]\n\tsparse = true\n",
    )
    assert wt.restore_git_files() == ["the worktree's git folder's config.worktree set core.fsmonitor: removed"]
    assert config.read_text() == (
        '[core]\n\tsparsecheckout = "a\\nb\\\\c\\"d"\n\tsparsecheckoutcone = "true"\n[index]\n\tsparse = "true"\n'
    )
    listed = subprocess.run(
        ["git", "config", "--file", str(config), "--null", "--list"], capture_output=True, text=True, check=True
    ).stdout
    assert listed.split("\0")[:-1] == [
        'core.sparsecheckout\na\nb\\c"d',
        "core.sparsecheckoutcone\ntrue",
        "index.sparse\ntrue",
    ]
    assert wt.restore_git_files() == []  # what it wrote, it keeps


def test_a_config_worktree_made_a_symlink_is_replaced_though_its_target_keeps_only_sparse_keys(tmp_path, wt):
    target = tmp_path / "models-config"
    write(target, "[core]\n\tsparseCheckout = true\n")  # harmless now; the model can change it at any time
    config = private_dir(wt) / "config.worktree"
    config.symlink_to(target)
    assert wt.restore_git_files() == [
        f"the worktree's git folder's config.worktree set made a symlink to {target}: removed"
    ]
    assert not config.is_symlink() and config.read_text() == ""
    assert target.read_text() == "[core]\n\tsparseCheckout = true\n"


# -- removing a worktree ---------------------------------------------------------------------------------


def test_a_worktree_that_cannot_be_moved_aside_is_removed_by_git_with_its_changes(repo):
    name = "m" * 240  # the name it would be moved aside under is longer than a file name may be
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / name, "lopen/long")
    wt.ensure()
    write(wt.path / "app.py", "print('unsaved')\n")  # changes git refuses to drop without --force
    wt.remove()
    assert not wt.path.exists()
    assert str(wt.path) not in git(repo, "worktree", "list")
    assert not [p for p in wt.path.parent.iterdir() if ".removed-" in p.name]


def test_deleted_says_whether_the_background_deletions_are_done_within_the_time_given():
    import threading

    from lopen.git import worktree

    release = threading.Event()
    slow = threading.Thread(target=release.wait, args=(5,), daemon=True)  # a deletion still going on
    slow.start()
    worktree.DELETING.append(slow)
    try:
        assert worktree.deleted(timeout=0.01) is False
        assert [slow] == worktree.DELETING
    finally:
        release.set()
    assert worktree.deleted() is True
    assert worktree.DELETING == []


def test_a_removed_worktrees_files_are_deleted_by_threads_that_never_hold_the_process_at_exit(wt):
    from lopen.git import worktree

    write(wt.path / "big" / "file.txt", "x\n")
    wt.remove()
    assert worktree.DELETING and all(thread.daemon for thread in worktree.DELETING)
    assert worktree.deleted()


def test_a_leftover_named_like_a_removed_worktree_that_is_a_symlink_is_never_followed_nor_an_error(
    tmp_path, monkeypatch, wt
):
    import threading

    from lopen.git import worktree

    precious = tmp_path / "precious"
    write(precious / "keep.txt", "mine\n")
    (wt.path.parent / f".{wt.path.name}.removed-1-1").symlink_to(precious)
    failures: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
    wt.remove()
    assert worktree.deleted()
    assert (precious / "keep.txt").read_text() == "mine\n"
    assert failures == []


# -- HEAD put back -----------------------------------------------------------------------------------------


def test_head_is_put_back_by_git_when_refs_are_not_files(repo, wt):
    git(wt.path, "checkout", "-q", "--detach")
    (repo / ".git" / "reftable").mkdir()  # git 2.39 makes no reftable repository: the folder stands for one
    fresh = Worktree(repo, wt.path, wt.branch)
    fresh.restore_head()
    assert git(wt.path, "symbolic-ref", "HEAD") == "refs/heads/lopen/auth"
    assert fresh.head_ref() == "refs/heads/lopen/auth"


def test_a_pointer_made_a_hard_link_is_named_so_and_replaced_without_writing_the_other_file(tmp_path, wt):
    pointer = wt.path / ".git"
    text = pointer.read_text()
    other = tmp_path / "models-file"
    os.link(pointer, other)  # the model's own name for the same file: a write through one shows in both
    assert wt.restore_git_files() == [".git was made a hard link to another file"]
    assert pointer.read_text() == text and pointer.stat().st_nlink == 1
    write(pointer, "gitdir: /elsewhere\n")
    assert other.read_text() == text  # no longer the same file


# -- named pipes where git's files were ------------------------------------------------------------------
# Reading a named pipe blocks until something writes to it: a model that puts one in place of a git file
# must not make Lopen wait forever (git itself would: Lopen never asks it about such a file).


def mkfifo_at(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.timeout(10)
def test_a_pointer_made_a_named_pipe_is_put_back_and_named_so(wt):
    text = (wt.path / ".git").read_text()
    mkfifo_at(wt.path / ".git")
    assert wt.restore_git_files() == [".git was made a named pipe"]
    assert (wt.path / ".git").read_text() == text


@pytest.mark.timeout(10)
def test_a_worktree_whose_pointer_is_a_named_pipe_is_not_trusted_and_made_again(wt):
    mkfifo_at(wt.path / ".git")
    Worktree(wt.repo_root, wt.path, wt.branch).ensure()
    [aside] = [p for p in wt.path.parent.iterdir() if p.name.startswith(f"{wt.path.name}.broken-")]
    assert (aside / ".git.untrusted").exists()
    assert git(wt.path, "symbolic-ref", "HEAD") == "refs/heads/lopen/auth"


@pytest.mark.timeout(10)
def test_a_head_made_a_named_pipe_is_no_branch_and_is_put_back(repo, wt):
    mkfifo_at(private_dir(wt) / "HEAD")
    fresh = Worktree(repo, wt.path, wt.branch)
    assert fresh.head_ref() == ""
    fresh.restore_head()
    assert fresh.head_ref() == "refs/heads/lopen/auth"
    assert git(wt.path, "symbolic-ref", "HEAD") == "refs/heads/lopen/auth"


# -- what restore_git_files says the model left, and how it writes git's files back --------------------------


def test_a_pointer_rewritten_to_text_that_is_not_utf8_is_quoted_with_replacement_characters(wt):
    (wt.path / ".git").write_bytes(b"gitdir: /tmp/\xff\xfe")
    assert wt.restore_git_files() == [".git was rewritten to 'gitdir: /tmp/\ufffd\ufffd'"]


def test_what_a_pointer_was_rewritten_to_is_quoted_from_its_first_200_bytes_and_cut_at_120_characters(wt):
    write(wt.path / ".git", " " * 200 + "gitdir: /beyond/the/first/200/bytes\n")
    assert wt.restore_git_files() == [".git was rewritten to ''"]
    write(wt.path / ".git", "x" * 130)
    assert wt.restore_git_files() == [f".git was rewritten to '{'x' * 120}'"]


def test_a_pointer_made_a_socket_is_said_to_be_unreadable_and_put_back(monkeypatch, wt):
    import socket

    text = (wt.path / ".git").read_text()
    (wt.path / ".git").unlink()
    monkeypatch.chdir(wt.path)  # a socket's path is short: bound relative to its folder
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(".git")
        assert wt.restore_git_files() == [".git was made unreadable"]
    assert (wt.path / ".git").read_text() == text


def test_a_plain_file_put_back_is_rewritten_in_place_and_a_missing_one_made_rw_r__r__(wt):
    pointer = wt.path / ".git"
    text = pointer.read_text()
    write(pointer, "gitdir: /elsewhere\n")
    held = os.open(pointer, os.O_RDONLY)  # as a read-only bind of it in a running sandbox holds it
    try:
        assert wt.restore_git_files() == [".git was rewritten to 'gitdir: /elsewhere'"]
        assert os.pread(held, 4096, 0).decode() == text  # the same file, rewritten: the bind stays in force
    finally:
        os.close(held)
    pointer.unlink()
    old = os.umask(0o022)
    try:
        assert wt.restore_git_files() == [".git was removed"]
    finally:
        os.umask(old)
    assert pointer.stat().st_mode & 0o777 == 0o644


# -- where Lopen's git runs ------------------------------------------------------------------------------


def test_lopens_git_runs_at_the_worktrees_top_whatever_folder_lopen_runs_from(monkeypatch, repo, wt):
    write(wt.path / "sub" / "s.txt", "s\n")
    write(wt.path / "top.py", "T = 1\n")
    monkeypatch.chdir(wt.path / "sub")  # git's paths ('.', a file's name) are relative to where it runs
    assert names_in(repo, wt.tree()) == ["app.py", "sub/s.txt", "top.py"]
    tip = wt.commit_file("spec.md", b"# spec\n", wt.tip(), "docs: spec")
    assert git(wt.path, "diff", "--cached", "--name-only", tip) == ""  # the worktree's index has the file too


def test_a_private_index_deleted_between_two_trees_is_read_from_the_tip_again(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", ignore=("*.md",))
    wt.ensure()
    tip = wt.commit_file("docs/spec.md", b"# spec\n", wt.tip(), "docs: spec")  # tracked, though Lopen ignores *.md
    assert wt.tree() == wt.tree_of(tip)
    [index] = (repo / ".lopen" / "indexes").iterdir()
    index.unlink()  # someone cleaned .lopen/ up
    assert wt.tree() == wt.tree_of(tip)


def test_a_private_index_git_cannot_read_is_made_afresh_from_the_tip(repo, wt):
    write(wt.path / "b.py", "B\n")
    first = wt.tree()
    [index] = (repo / ".lopen" / "indexes").iterdir()
    index.write_bytes(b"DIRC garbage: a git killed while writing it")
    assert Worktree(repo, wt.path, wt.branch).tree() == first  # a new run
    index.write_bytes(b"DIRC garbage again")
    assert wt.tree() == first  # the same run, its index already read


# -- what ensure() tells the person it cannot do ---------------------------------------------------------


def refusal(worktree: Worktree, start_at: str = "") -> tuple[str, str, str]:
    from lopen.git import GitError

    with pytest.raises(GitError) as caught:
        worktree.ensure(start_at)
    return caught.value.what, caught.value.why, caught.value.how


def test_a_branch_the_history_places_at_a_commit_this_clone_lacks_is_refused_with_how_to_fetch_it(repo):
    missing = "1234567890" * 4
    assert refusal(Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth"), missing) == (
        "the module's history says lopen/auth is at 12345678, which this clone does not have",
        "another clone (or another machine) built it, sharing this project's event store",
        "fetch it first: `git fetch <remote> lopen/auth:lopen/auth`, then run again",
    )


def test_a_branch_checked_out_in_the_users_checkout_is_refused_with_how_to_free_it(repo):
    git(repo, "checkout", "-q", "-b", "lopen/auth")
    assert refusal(Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")) == (
        f"lopen/auth is checked out in {repo}",
        "Lopen builds the module in its own worktree and git allows a branch in one worktree only",
        f"switch that checkout to another branch (`git -C {repo} checkout -`), then run again",
    )


def test_a_folder_of_the_users_where_the_worktree_would_go_is_refused_with_how_to_move_it(repo):
    write(repo / "src" / "auth" / "code.py", "mine\n")
    assert refusal(Worktree(repo, repo / "src" / "auth", "lopen/auth")) == (
        f"{repo / 'src' / 'auth'} exists and is not a worktree Lopen made",
        "Lopen builds each module in its own worktree, <git.worktree_dir>/<module>, and never touches a folder "
        "of yours",
        "set git.worktree_dir to another folder (`lopen config set git.worktree_dir .lopen/worktrees`)",
    )


def test_a_worktree_folder_several_levels_below_missing_folders_is_made(repo):
    wt = Worktree(repo, repo / "build" / "lopen" / "worktrees" / "auth", "lopen/auth")
    assert wt.ensure()[0] is True
    assert (wt.path / "app.py").read_text() == "print('v1')\n"


# -- lines changed ------------------------------------------------------------------------------------------


def test_numstat_counts_a_file_whose_name_holds_a_tab(wt):
    base = wt.tip()
    write(wt.path / "a\tb.py", "one\ntwo\n")  # with -z git writes the name as it is, tab included
    assert wt.numstat(base, wt.tree()) == (2, 0, 1)


def test_a_tree_of_a_worktree_whose_branch_is_gone_holds_its_files(repo, wt):
    git(repo, "update-ref", "-d", "refs/heads/lopen/auth")  # no tip: the private index starts empty
    write(wt.path / "b.py", "B\n")
    assert names_in(repo, Worktree(repo, wt.path, wt.branch).tree()) == ["app.py", "b.py"]


def test_every_key_removed_from_config_worktree_is_named(wt):
    write(private_dir(wt) / "config.worktree", '[core]\n\tfsmonitor = /bin/evil\n[filter "x"]\n\tclean = /bin/evil\n')
    assert wt.restore_git_files() == [
        "the worktree's git folder's config.worktree set core.fsmonitor, filter.x.clean: removed"
    ]


def test_a_pointer_whose_second_line_leads_back_to_the_private_folder_is_put_back(wt: Worktree) -> None:
    """`gitdir: <private>/x` + newline + `/..` resolves (as a path) to the private folder, but git reads it
    as one path with a newline in it, and fails: such a pointer is rewritten."""
    private = private_dir(wt)
    (wt.path / ".git").write_text(f"gitdir: {private}/x\n/..\n", encoding="utf-8")

    [said] = wt.restore_git_files()
    assert said.startswith(".git ")
    assert (wt.path / ".git").read_text(encoding="utf-8") == f"gitdir: {private}\n"
    assert git(wt.path, "status", "--porcelain") == ""


@pytest.mark.parametrize("gone", ["worktree", "private git folder"])
def test_a_worktree_or_private_folder_gone_has_nothing_put_back_and_nothing_made(wt: Worktree, gone: str) -> None:
    private = private_dir(wt)
    folder = wt.path if gone == "worktree" else private
    shutil.rmtree(folder)

    assert wt.restore_git_files() == []
    assert not folder.exists()
