"""The tree Lopen writes of the model's worktree (lopen/git/worktree.py ``Worktree.tree``), where the mutation
run found it untested: tracked files whose names hold spaces, a rename then an edit, a submodule's own filter
never run, earlier changes kept when a file grows past the size limit, Lopen's ignore patterns when git walks
the whole worktree, and a branch that is gone. Real git in temporary folders.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from repos import git, nested_repo, write

from lopen.git import Worktree
from lopen.git.worktree import ADD_NAMED_MAX


def names_in(repo: Path, tree: str) -> list[str]:
    listed = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", tree], cwd=repo, capture_output=True)
    return listed.stdout.decode().removesuffix("\0").split("\0")  # names as they are, spaces included


def text_in(repo: Path, tree: str, name: str) -> str:
    return git(repo, "cat-file", "blob", f"{tree}:{name}")


SPACED = (" lead.py", "two  spaces.py", "a b c d e f g h i j.py", "dir with space/trail .py")


def test_changes_to_tracked_files_whose_names_hold_spaces_are_in_the_tree(repo, wt):
    wt.commit_files({name: b"old\n" for name in SPACED}, wt.tip(), "spaced names")
    for name in SPACED:
        write(wt.path / name, f"new {name}\n")
    tree = wt.tree()
    assert sorted(names_in(repo, tree)) == sorted(["app.py", *SPACED])
    assert {name: text_in(repo, tree, name) for name in SPACED} == {name: f"new {name}" for name in SPACED}


def test_a_file_renamed_in_one_tree_and_edited_before_the_next_is_in_the_next_with_the_edit(repo, wt):
    (wt.path / "app.py").rename(wt.path / "main.py")  # the private index holds the rename after this tree
    assert names_in(repo, wt.tree()) == ["main.py"]
    write(wt.path / "main.py", "print('v2')\n")
    tree = wt.tree()
    assert names_in(repo, tree) == ["main.py"]
    assert text_in(repo, tree, "main.py") == "print('v2')"


def planted_submodule(tmp_path: Path, wt: Worktree) -> tuple[str, Path]:
    """A submodule the branch tracks, checked out in the worktree, where the model planted a clean filter (its
    own program, in the submodule's .git/config) and left a dirty file: (the submodule's commit, the marker
    file the program makes if anyone runs it)."""
    sub = wt.path / "sub"
    commit = nested_repo(sub, {"s.txt": "1\n"})
    git(wt.path, "update-index", "--add", "--cacheinfo", f"160000,{commit},sub")  # the branch tracks it
    wt.move_branch(wt.commit(git(wt.path, "write-tree"), wt.tip(), "the user's submodule"))
    marker = tmp_path / "filter.ran"
    git(sub, "config", "filter.x.clean", f"touch {marker}; cat")
    write(sub / ".gitattributes", "* filter=x\n")
    write(sub / "s.txt", "2\n")  # a dirty file: a git that looked inside would clean it through the filter
    return commit, marker


def test_a_clean_filter_planted_in_a_checked_out_submodule_never_runs_when_lopen_writes_a_tree(tmp_path, repo, wt):
    commit, marker = planted_submodule(tmp_path, wt)
    tree = wt.tree()
    assert not marker.exists()
    assert git(repo, "ls-tree", tree, "sub").split()[:3] == ["160000", "commit", commit]


def test_a_clean_filter_planted_in_a_submodule_never_runs_when_git_walks_the_whole_worktree(tmp_path, repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", max_file_bytes=100)
    wt.ensure()
    commit, marker = planted_submodule(tmp_path, wt)
    wt.tree()
    write(wt.path / "big.bin", "x" * 500)  # past the limit after a tree: the index is read again, all is added
    tree = wt.tree()
    assert not marker.exists()
    assert git(repo, "ls-tree", tree, "sub").split()[:3] == ["160000", "commit", commit]


def test_a_file_growing_past_the_limit_leaves_the_earlier_changes_in_the_tree(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", max_file_bytes=100)
    wt.ensure()
    write(wt.path / "app.py", "print('v2')\n")
    write(wt.path / "b.py", "B\n")
    assert names_in(repo, wt.tree()) == ["app.py", "b.py"]
    write(wt.path / "big.bin", "x" * 500)  # the only change since: the index is read from the tip again
    tree = wt.tree()
    assert wt.left_out == [("big.bin", 500)]
    assert names_in(repo, tree) == ["app.py", "b.py"]
    assert text_in(repo, tree, "app.py") == "print('v2')"


def test_lopens_ignore_patterns_hold_when_so_many_files_changed_that_git_walks_the_whole_worktree(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", ignore=("*.log",))
    wt.ensure()
    many = [f"gen/f{n:03}.py" for n in range(ADD_NAMED_MAX + 1)]
    for name in many:
        write(wt.path / name, "x\n")
    write(wt.path / "run.log", "log\n")
    assert names_in(repo, wt.tree()) == ["app.py", *many]


def test_a_file_too_large_and_a_nested_repository_are_left_out_beside_a_new_file(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", max_file_bytes=100)
    wt.ensure()
    write(wt.path / "big.bin", "x" * 500)
    git(wt.path, "init", "-q", "vendor")
    write(wt.path / "vendor" / "v.py", "V\n")
    write(wt.path / "b.py", "B\n")
    tree = wt.tree()
    assert (wt.left_out, wt.nested) == ([("big.bin", 500)], ["vendor"])
    assert names_in(repo, tree) == ["app.py", "b.py"]


def test_a_tree_of_a_worktree_whose_branch_is_gone_starts_from_nothing(repo):
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth", ignore=("*.md",))
    wt.ensure()
    wt.commit_file("docs/spec.md", b"# spec\n", wt.tip(), "docs: spec")  # tracked, though Lopen ignores *.md
    assert names_in(repo, wt.tree()) == ["app.py", "docs/spec.md"]
    git(repo, "update-ref", "-d", "refs/heads/lopen/auth")
    write(wt.path / "b.py", "B\n")
    # a new run: no tip to keep docs/spec.md, so Lopen's ignore patterns decide, as for any new file
    assert names_in(repo, Worktree(repo, wt.path, wt.branch, ignore=("*.md",)).tree()) == ["app.py", "b.py"]


def test_a_tree_of_a_worktree_whose_branch_is_gone_and_that_never_wrote_one_holds_its_files(repo, wt):
    git(repo, "update-ref", "-d", "refs/heads/lopen/auth")
    for index in (repo / ".lopen" / "indexes").glob("*"):
        index.unlink()  # no private index yet either
    write(wt.path / "b.py", "B\n")
    assert names_in(repo, Worktree(repo, wt.path, wt.branch).tree()) == ["app.py", "b.py"]
