"""``lopen.git.Worktree`` on real repositories: the module's own worktree on ``lopen/<module>``, the
tree of its files as they are, and commits of exactly a given tree (G1, G5, G6)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lopen.git import GitError, Worktree
from lopen.project import ensure_lopen_dir

MODULE = "auth"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def files_of(cwd: Path, tree: str) -> dict[str, str]:
    names = git(cwd, "ls-tree", "-r", "--name-only", tree).splitlines()
    return {name: git(cwd, "cat-file", "blob", f"{tree}:{name}") for name in names}


class Checkout:
    """The user's checkout, and a way to tell it was not touched."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.before = self.look()

    def look(self) -> tuple[str, ...]:
        return (
            git(self.root, "symbolic-ref", "HEAD"),
            git(self.root, "rev-parse", "HEAD"),
            git(self.root, "ls-files", "--stage"),  # the index
            git(self.root, "status", "--porcelain=v1", "--untracked-files=all"),
            (self.root / "app.py").read_text(encoding="utf-8"),
        )

    def untouched(self) -> bool:
        return self.look() == self.before


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    write(root / "app.py", "print('v1')\n")
    write(root / "README.md", "# app\n")
    write(root / ".gitignore", "*.log\nbuild/\n")
    write(root / "keep.log", "tracked although ignored\n")
    git(root, "add", ".")
    git(root, "add", "-f", "keep.log")
    git(root, "commit", "-q", "-m", "initial")
    ensure_lopen_dir(root)
    return root


@pytest.fixture
def wt(repo: Path) -> Worktree:
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / MODULE, f"lopen/{MODULE}")
    worktree.ensure()
    return worktree


# -- making it -----------------------------------------------------------------------------------


def test_ensure_makes_the_branch_from_the_user_s_head_in_a_worktree_of_its_own(repo: Path) -> None:
    write(repo / "app.py", "print('my edit, not committed')\n")  # the user is in the middle of something
    user = Checkout(repo)
    head = git(repo, "rev-parse", "HEAD")
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / MODULE, f"lopen/{MODULE}")

    assert worktree.ensure() == (True, head)
    assert worktree.tip() == head and worktree.head_ref() == f"refs/heads/lopen/{MODULE}"
    assert (worktree.path / "app.py").read_text(encoding="utf-8") == "print('v1')\n"
    assert worktree.dirty_files() == []
    assert worktree.ensure() == (False, head)  # again: nothing new
    assert user.untouched()


def test_ensure_keeps_an_existing_branch_where_it_is(repo: Path, wt: Worktree) -> None:
    tip = wt.tip()
    write(repo / "app.py", "print('v2')\n")
    git(repo, "commit", "-q", "-am", "the user goes on")
    created, _ = wt.ensure()
    assert not created and wt.tip() == tip


def test_ensure_makes_the_worktree_again_when_its_folder_was_deleted(repo: Path, wt: Worktree) -> None:
    import shutil

    tip = wt.tip()
    shutil.rmtree(wt.path)
    assert wt.ensure()[0] is False
    assert wt.tip() == tip and (wt.path / "app.py").is_file() and wt.head_ref() == wt.ref


def test_ensure_refuses_a_branch_checked_out_in_the_user_s_checkout(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", f"lopen/{MODULE}")
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / MODULE, f"lopen/{MODULE}")
    with pytest.raises(GitError) as caught:
        worktree.ensure()
    assert f"lopen/{MODULE} is checked out in {repo}" in caught.value.what
    assert "checkout" in caught.value.how
    assert not worktree.path.exists()


def test_a_worktree_folder_outside_lopen_dir_stays_out_of_the_user_s_status(repo: Path) -> None:
    user = Checkout(repo)
    Worktree(repo, repo / "worktrees" / MODULE, f"lopen/{MODULE}").ensure()
    assert user.untouched()


def test_only_the_module_s_own_folder_is_hidden_from_git_never_the_user_s_folder_around_it(repo: Path) -> None:
    """git.worktree_dir = docs: the worktree is docs/<module>; the user's other docs stay visible to git."""
    Worktree(repo, repo / "docs" / MODULE, f"lopen/{MODULE}").ensure()
    write(repo / "docs" / "design.md", "my design\n")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == "?? docs/design.md"


def test_a_folder_of_the_user_s_where_the_worktree_would_go_is_refused_and_left_alone(repo: Path) -> None:
    write(repo / "src" / MODULE / "code.py", "mine\n")
    with pytest.raises(GitError, match="is not a worktree Lopen made"):
        Worktree(repo, repo / "src" / MODULE, f"lopen/{MODULE}").ensure()
    assert (repo / "src" / MODULE / "code.py").read_text(encoding="utf-8") == "mine\n"


# -- reading it ----------------------------------------------------------------------------------


def test_lanes_making_their_worktrees_at_the_same_moment_all_get_one(repo: Path) -> None:
    """CI, issue 14: two lanes started together; one's `git worktree add` failed while the other's
    `git worktree prune` removed its half-made entry. Eight at once here, each on its own branch."""
    import threading

    gate, failures = threading.Barrier(8), []
    trees = [
        Worktree(repo, repo / ".lopen" / "worktrees" / "m.components" / f"c{n}", f"lopen/m--c{n}") for n in range(8)
    ]

    def make(tree: Worktree) -> None:
        gate.wait()
        try:
            tree.ensure()
        except GitError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=make, args=(tree,)) for tree in trees]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    listed = git(repo, "worktree", "list", "--porcelain")
    assert all(f"branch refs/heads/lopen/m--c{n}" in listed for n in range(8))
    assert all((tree.path / "app.py").is_file() for tree in trees)


def test_the_tree_holds_the_files_as_they_are_without_touching_the_worktree_s_index(wt: Worktree) -> None:
    write(wt.path / "app.py", "print('changed')\n")  # modified
    (wt.path / "README.md").unlink()  # deleted
    write(wt.path / "src" / "new" / "mod.py", "X = 1\n")  # untracked, in a new folder
    git(wt.path, "add", "src/new/mod.py")  # …and staged: the tree does not care
    write(wt.path / "src" / "other.py", "Y = 2\n")  # untracked, not staged
    write(wt.path / "debug.log", "noise\n")  # ignored
    write(wt.path / "build" / "out.bin", "noise\n")  # in an ignored folder
    write(wt.path / "keep.log", "tracked and ignored, changed\n")  # tracked although ignored
    status = git(wt.path, "status", "--porcelain=v1")
    staged = git(wt.path, "diff", "--cached", "--name-only")

    tree = wt.tree()

    assert files_of(wt.path, tree) == {
        ".gitignore": "*.log\nbuild/",
        "app.py": "print('changed')",
        "keep.log": "tracked and ignored, changed",
        "src/new/mod.py": "X = 1",
        "src/other.py": "Y = 2",
    }
    assert git(wt.path, "status", "--porcelain=v1") == status  # the model's index is as it left it
    assert git(wt.path, "diff", "--cached", "--name-only") == staged
    assert wt.tree() == tree  # the same files, the same tree
    write(wt.path / "src" / "other.py", "Y = 3\n")
    assert wt.tree() != tree


def test_a_clean_worktree_s_tree_is_its_tip_s_tree(wt: Worktree) -> None:
    assert wt.tree() == wt.tree_of(wt.tip())


def test_diff_and_changed_files_run_from_a_base_to_a_tree(wt: Worktree) -> None:
    base = wt.tip()
    write(wt.path / "app.py", "print('v2')\n")
    write(wt.path / "lib.py", "Z = 0\n")
    tree = wt.tree()
    assert wt.changed_files(base, tree) == ["app.py", "lib.py"]
    diff = wt.diff(base, tree)
    assert "+print('v2')" in diff and "+Z = 0" in diff
    assert "app.py" in wt.changed_files(None, tree)  # no base: everything, from the empty tree
    assert wt.diff(base, tree, max_chars=20).endswith("diff cut at 20 characters")


def test_numstat_counts_lines_as_git_diff_numstat_does_and_a_binary_file_as_a_file(wt: Worktree) -> None:
    """P2: lines changed from a base to a tree — what a task's commit records."""
    base = wt.tip()
    write(wt.path / "app.py", "print('v2')\nprint('v3')\n")  # one line replaced, one added
    write(wt.path / "lib.py", "A = 1\nB = 2\nC = 3\n")
    (wt.path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    (wt.path / "docs").mkdir()
    git(wt.path, "mv", "README.md", "docs/README.md")  # a rename: one file, its lines unchanged
    tree = wt.tree()
    rows = [line.split("\t") for line in git(wt.path, "diff", "--numstat", base, tree).splitlines()]
    expected = (
        sum(int(a) for a, _, _ in rows if a != "-"),
        sum(int(r) for _, r, _ in rows if r != "-"),
        len(rows),
    )
    assert wt.numstat(base, tree) == expected == (5, 1, 4)  # app.py +2 −1, lib.py +3, the binary and the rename: files
    assert wt.numstat(tree, tree) == (0, 0, 0)


def test_dirty_files_lists_what_the_model_left_but_not_ignored_files(wt: Worktree) -> None:
    write(wt.path / "app.py", "print('changed')\n")
    (wt.path / "docs").mkdir()
    git(wt.path, "mv", "README.md", "docs/README.md")
    write(wt.path / "pkg" / "deep" / "x.py", "x = 1\n")
    write(wt.path / "debug.log", "ignored\n")
    assert sorted(wt.dirty_files()) == ["app.py", "docs/README.md", "pkg/deep/x.py"]


# -- changing it ---------------------------------------------------------------------------------


def test_commit_makes_a_commit_of_exactly_the_tree_and_moves_the_branch(repo: Path, wt: Worktree) -> None:
    user = Checkout(repo)
    parent = wt.tip()
    write(wt.path / "app.py", "print('verified')\n")
    tree = wt.tree()
    write(wt.path / "app.py", "print('changed after')\n")  # whatever happens in the files since

    sha = wt.commit(tree, parent, "feat(auth): verified work\n\nLopen-Task: auth/1\n")

    assert wt.tip() == sha and wt.tree_of(sha) == tree
    assert git(wt.path, "rev-parse", f"{sha}^") == parent
    assert git(wt.path, "show", f"{sha}:app.py") == "print('verified')"
    assert (wt.path / "app.py").read_text(encoding="utf-8") == "print('changed after')\n"
    assert "lopen: feat(auth): verified work" in git(wt.path, "reflog", "show", "--format=%gs", wt.ref)
    assert user.untouched()


def test_files_that_are_the_new_tip_are_not_dirty_after_a_commit(wt: Worktree) -> None:
    write(wt.path / "new.py", "N = 1\n")
    wt.commit(wt.tree(), wt.tip(), "feat(auth): new")
    assert wt.dirty_files() == []


def test_commit_refuses_when_the_branch_moved_since_the_parent(wt: Worktree) -> None:
    parent = wt.tip()
    write(wt.path / "app.py", "print('mine')\n")
    tree = wt.tree()
    git(wt.path, "commit", "-q", "-am", "the model commits by itself")
    moved = wt.tip()

    with pytest.raises(GitError, match="update-ref"):
        wt.commit(tree, parent, "feat(auth): would lose the model's commit")

    assert wt.tip() == moved


def test_commit_file_commits_that_file_only_and_puts_it_in_the_worktree(wt: Worktree) -> None:
    parent = wt.tip()
    write(wt.path / "app.py", "print('work in progress')\n")  # not part of the commit
    relative = f"docs/requirements/{MODULE}/SPECIFICATION.md"

    sha = wt.commit_file(relative, b"# Auth\n\napproved\n", parent, "docs(auth): the approved specification")

    assert wt.tip() == sha and git(wt.path, "rev-parse", f"{sha}^") == parent
    assert git(wt.path, "diff", "--name-only", parent, sha).splitlines() == [relative]
    assert (wt.path / relative).read_bytes() == b"# Auth\n\napproved\n"
    assert wt.show(sha, relative) == b"# Auth\n\napproved\n" and wt.show(parent, relative) is None
    assert wt.dirty_files() == ["app.py"]  # the spec is not a leftover; the model's edit is still there


def test_find_commit_finds_a_commit_by_its_tree_and_trailer_after_a_point(wt: Worktree) -> None:
    base = wt.tip()
    write(wt.path / "one.py", "ONE = 1\n")
    tree = wt.tree()
    sha = wt.commit(tree, base, "feat(auth): one in auth\n\nLopen-Task: auth/1\nLopen-Session: s\n")

    assert wt.find_commit(tree, base, "Lopen-Task: auth/1") == sha
    assert wt.find_commit(tree, "", "Lopen-Task: auth/1") == sha  # the whole branch
    assert wt.find_commit(tree, base, "Lopen-Task: auth/2") is None
    assert wt.find_commit(wt.tree_of(base), base, "Lopen-Task: auth/1") is None
    assert wt.find_commit(tree, sha, "Lopen-Task: auth/1") is None  # only commits after `since`


def test_find_commit_matches_the_whole_trailer_not_a_prefix_of_another_task_s(wt: Worktree) -> None:
    """auth/10's commit is not auth/1's, even when both tasks left the same tree."""
    base = wt.tip()
    tree = wt.tree()
    wt.commit(tree, base, "feat(auth): ten in auth\n\nLopen-Task: auth/10\n")
    assert wt.find_commit(tree, base, "Lopen-Task: auth/1") is None


def test_move_branch_and_restore_head_put_back_what_the_model_moved(wt: Worktree) -> None:
    tip = wt.tip()
    write(wt.path / "app.py", "print('x')\n")
    git(wt.path, "commit", "-q", "-am", "model commit")
    git(wt.path, "checkout", "-q", "--detach")
    assert wt.head_ref() == ""

    wt.restore_head()
    wt.move_branch(tip)

    assert wt.head_ref() == wt.ref and wt.tip() == tip
    assert wt.dirty_files() == ["app.py"]  # the model's work stays in the files, uncommitted


def test_reset_to_makes_the_files_a_commit_keeping_ignored_ones(wt: Worktree) -> None:
    tip = wt.tip()
    write(wt.path / "app.py", "print('x')\n")
    write(wt.path / "new" / "file.py", "n = 1\n")
    git(wt.path, "add", "new/file.py")
    write(wt.path / "untracked.py", "u = 1\n")
    write(wt.path / "debug.log", "ignored\n")

    wt.reset_to(tip)

    assert wt.dirty_files() == [] and wt.tree() == wt.tree_of(tip)
    assert not (wt.path / "new").exists() and not (wt.path / "untracked.py").exists()
    assert (wt.path / "debug.log").is_file()


# -- a model that rewires the worktree's git files -----------------------------------------------


def test_a_rewritten_commondir_never_makes_lopen_s_git_run_the_model_s_program(tmp_path: Path, wt: Worktree) -> None:
    """The model can write the worktree's private git folder; a ``commondir`` pointing at a git folder
    of its own, whose config names an fsmonitor and an external diff, must not run them."""
    private = Path(git(wt.path, "rev-parse", "--path-format=absolute", "--git-dir"))
    common = Path(git(wt.repo_root, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    evil = tmp_path / "evil"
    evil.mkdir()
    for name in ("objects", "refs", "info", "hooks", "logs"):
        if (common / name).exists():
            (evil / name).symlink_to(common / name)
    marker = tmp_path / "RAN.txt"
    program = evil / "x.sh"
    write(program, f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    program.chmod(0o755)
    write(
        evil / "config",
        f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {program}\n[diff]\n\texternal = {program}\n",
    )
    write(private / "commondir", f"{evil}\n")
    write(wt.path / "app.py", "print('v2')\n")

    tree = Worktree(wt.repo_root, wt.path, wt.branch).tree()
    wt.diff(None, tree)
    wt.dirty_files()

    assert not marker.exists()


def test_a_worktree_whose_git_pointer_was_redirected_is_moved_aside_and_made_again(wt: Worktree) -> None:
    write(wt.path / ".git", "gitdir: /somewhere/else\n")
    write(wt.path / "notes.txt", "the model's work, kept for inspection\n")

    Worktree(wt.repo_root, wt.path, wt.branch).ensure()

    aside = [p for p in wt.path.parent.iterdir() if p.name.startswith(f"{wt.path.name}.broken-")]
    assert len(aside) == 1 and (aside[0] / "notes.txt").is_file()
    assert git(wt.path, "symbolic-ref", "HEAD") == wt.ref


def test_files_over_the_size_limit_stay_out_of_the_tree_and_are_named(repo: Path, wt: Worktree) -> None:
    """A model's 600 MB download is never hashed into the repository or committed (git.max_file_mb)."""
    limited = Worktree(repo, wt.path, wt.branch, max_file_bytes=1000)
    (wt.path / "big.bin").write_bytes(b"x" * 2000)
    (wt.path / "data").mkdir()
    (wt.path / "data" / "also big.bin").write_bytes(b"y" * 1001)
    write(wt.path / "small.txt", "fits\n")
    write(wt.path / "app.py", "print('v2')\n" + "#" * 2000)  # a tracked file grown past the limit keeps its tip

    files = files_of(wt.path, limited.tree())

    assert "small.txt" in files and "big.bin" not in files and "data/also big.bin" not in files
    assert files["app.py"] == "print('v1')"  # (stripped)
    assert sorted(limited.left_out) == [("app.py", 2012), ("big.bin", 2000), ("data/also big.bin", 1001)]
    assert "big.bin" not in limited.dirty_files()


def test_a_nested_repository_stays_out_of_the_tree_and_is_named(repo: Path, wt: Worktree) -> None:
    """Issue 21: a model's `git init sub` made `git add -A` fail (a repository without a commit) and every
    later run abort; one with a commit became a gitlink to a commit nobody can fetch."""
    write(wt.path / "src.py", "print('mine')\n")
    subprocess.run(["git", "init", "-q", "empty"], cwd=wt.path, check=True)  # no commit in it
    write(wt.path / "empty" / "f.txt", "inside\n")
    subprocess.run(["git", "init", "-q", "vendor/lib"], cwd=wt.path, check=True)  # below an untracked folder
    write(wt.path / "vendor" / "lib" / "g.txt", "inside\n")
    git(wt.path / "vendor" / "lib", "add", ".")
    git(wt.path / "vendor" / "lib", "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-qm", "vendored")
    write(wt.path / "vendor" / "README", "kept\n")

    tree = wt.tree()

    files = files_of(wt.path, tree)
    assert "src.py" in files and "vendor/README" in files
    assert not [f for f in files if f.startswith(("empty", "vendor/lib"))]
    assert "160000" not in git(wt.path, "ls-tree", "-r", tree)  # no gitlink
    assert sorted(wt.nested) == ["empty", "vendor/lib"]
    shutil.rmtree(wt.path / "empty")
    wt.tree()
    assert wt.nested == ["vendor/lib"]
