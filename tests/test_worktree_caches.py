"""Issue 21, repository scale: Lopen's private index keeps git's caches — every file's times from the
moment the worktree is checked out, and git's untracked cache — so a tree costs what changed, not the
repository; and nothing a model can do to file times or git's configuration hides a change from the
tree the oracle judges and Lopen commits."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from repos import git, make_repo, write

from lopen.git import Worktree
from lopen.git.worktree import ADD_NAMED_MAX

FILES = 120


def files_of(cwd: Path, tree: str) -> dict[str, str]:
    names = git(cwd, "ls-tree", "-r", "-z", "--name-only", tree).split("\0")
    return {name: git(cwd, "cat-file", "blob", f"{tree}:{name}") for name in names if name}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {f"src/d{n % 6}/f{n:03d}.py": f"VALUE = {n}\n" for n in range(FILES)}
    return make_repo(tmp_path, files | {".gitignore": "*.log\n"})


@pytest.fixture
def wt(repo: Path) -> Worktree:
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")
    worktree.ensure()
    return worktree


def files_reread(trace: Path) -> list[int]:
    """For each `git status` traced (GIT_TRACE2_EVENT): how many files git read again to tell whether
    they changed (their times did not say)."""
    found = []
    for line in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("event") == "data" and event.get("key") == "refresh/sum_scan":
            found.append(int(event["value"]))
    return found


def test_a_new_worktree_starts_with_every_file_s_times_so_its_first_tree_reads_none_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Before: the first tree of every lane read and hashed every file of the repository again (its
    index had no file times) — seconds at 20,000 files."""
    wt = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")
    wt.ensure()
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))

    tree = wt.tree()

    assert tree == wt.tree_of(wt.tip())
    [reread] = files_reread(trace)
    assert reread <= FILES // 10  # at most the few written in git's last clock tick (racy files)
    trace.unlink()
    write(wt.path / "src" / "d1" / "f001.py", "VALUE = 'changed'\n")
    assert files_of(wt.path, wt.tree())["src/d1/f001.py"] == "VALUE = 'changed'"
    assert files_reread(trace) == [1]  # the changed file (its times say so), and no other
    # the worktree's own index is the tip's, with the same file times: a person's `git status` is quick and clean
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    write(wt.path / "src" / "d1" / "f001.py", "VALUE = 1\n")
    assert git(wt.path, "status", "--porcelain") == ""


def test_a_change_with_its_file_time_set_back_is_in_the_tree_whatever_git_s_configuration_says(
    repo: Path, wt: Worktree
) -> None:
    """Trees trust the file times in Lopen's index. A model can set a file's modification time back
    (`touch -d`) and keep its size, but not its inode when it writes a new file over it (as editors do),
    nor a folder's content: Lopen's git compares every stat field, and walks the folders, whatever the
    configuration says (here: only the modification time and the size)."""
    git(repo, "config", "core.trustctime", "false")
    git(repo, "config", "core.checkStat", "minimal")
    git(repo, "config", "core.untrackedCache", "true")
    for path in (wt.path / "src").rglob("*"):  # written a while ago: git's index, written after, is not racy
        os.utime(path, (time.time() - 100, time.time() - 100))
    first = wt.tree()
    changed, folder = wt.path / "src" / "d2" / "f002.py", wt.path / "src" / "d2"
    before, folder_before = changed.stat(), folder.stat()
    write(folder / "new.tmp", "VALUE = 9\n")  # the same size
    os.replace(folder / "new.tmp", changed)
    write(folder / "planted.py", "X = 1\n")  # a new file in a folder whose time is set back
    os.utime(changed, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.utime(folder, ns=(folder_before.st_atime_ns, folder_before.st_mtime_ns))

    files = files_of(wt.path, wt.tree())

    assert files["src/d2/f002.py"] == "VALUE = 9" and files["src/d2/planted.py"] == "X = 1"
    assert wt.tree() != first


def test_a_worktree_whose_check_out_was_cut_off_is_checked_out_again(repo: Path, wt: Worktree) -> None:
    """Its files are written after git registers it, its own index last: a run killed in between leaves a
    folder with some of the files and no index, which the next run fills instead of building on."""
    private = Path(git(wt.path, "rev-parse", "--path-format=absolute", "--git-dir"))
    (private / "index").unlink()
    (wt.path / "src" / "d3" / "f003.py").unlink()

    again = Worktree(repo, wt.path, wt.branch)
    again.ensure()

    assert (wt.path / "src" / "d3" / "f003.py").read_text(encoding="utf-8") == "VALUE = 3\n"
    assert git(wt.path, "status", "--porcelain") == ""
    assert again.tree() == again.tree_of(again.tip()) and again.dirty_files() == []


def test_many_changes_and_names_git_would_read_as_patterns_are_all_in_the_tree(wt: Worktree) -> None:
    """What changed is given to `git add` by name — each name literal — or, past ADD_NAMED_MAX, git walks
    the worktree itself: both trees hold exactly the files."""
    odd = ["src/d0/a*b.py", "src/d0/:(exclude)c.py", "src/d0/[x].py", "src/d0/space d.py", "src/d0/é.py"]
    for name in odd:
        write(wt.path / name, f"# {name}\n")
    (wt.path / "src" / "d0" / "f000.py").unlink()
    write(wt.path / "src" / "d0" / "f006.py", "VALUE = 'six'\n")
    write(wt.path / "debug.log", "ignored\n")

    files = files_of(wt.path, wt.tree())

    assert {name for name in odd if name not in files} == set()
    assert "src/d0/f000.py" not in files and files["src/d0/f006.py"] == "VALUE = 'six'"
    assert "debug.log" not in files and len(files) == FILES + len(odd)
    many = [f"src/d4/new{n:03d}.py" for n in range(ADD_NAMED_MAX + 10)]
    for name in many:
        write(wt.path / name, f"# {name}\n")
    files = files_of(wt.path, wt.tree())
    assert set(many) <= set(files) and len(files) == FILES + len(odd) + len(many)


def commands_run(trace: Path) -> list[str]:
    """The git commands traced (GIT_TRACE2_EVENT), by name."""
    found = []
    for line in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("event") == "cmd_name":
            found.append(event["name"])
    return found


def test_after_lopen_commits_the_tree_it_took_the_next_tree_reads_no_commit_again(
    wt: Worktree, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """After each task, Lopen commits the tree it took: its private index holds that commit already. The
    next tree read the whole commit into it again (every entry, 20,000 in a large repository) all the same.
    (Nor does the first tree after the check-out, which wrote the index from the tip.)"""
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    write(wt.path / "src" / "d1" / "f001.py", "VALUE = 'task 1'\n")
    wt.commit(wt.tree(), wt.tip(), "task 1")
    write(wt.path / "src" / "d2" / "f002.py", "VALUE = 'task 2'\n")

    files = files_of(wt.path, wt.tree())

    assert "read-tree" not in commands_run(trace)
    assert files["src/d1/f001.py"] == "VALUE = 'task 1'" and files["src/d2/f002.py"] == "VALUE = 'task 2'"
    assert len(files) == FILES + 1  # and .gitignore


def test_a_commit_of_another_tree_is_read_into_the_index_before_the_next_tree(wt: Worktree) -> None:
    """A commit of a tree Lopen did not just take (a merge, another tree) moves the tip to what the private
    index does not hold: the next tree starts from it — here, so that a file the new tip tracks stays in the
    tree although `.gitignore` matches it."""
    wt.tree()
    scratch = {**os.environ, "GIT_INDEX_FILE": str(wt.path.parent / "scratch-index")}

    def scratch_git(*args: str, text: str | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=wt.path, env=scratch, input=text, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    scratch_git("read-tree", wt.tip())
    blob = scratch_git("hash-object", "-w", "--stdin", text="kept\n")
    scratch_git("update-index", "--add", "--cacheinfo", f"100644,{blob},notes.log")
    tracked = scratch_git("write-tree")
    wt.commit(tracked, wt.tip(), "notes tracked though ignored")
    write(wt.path / "notes.log", "kept\n")

    assert files_of(wt.path, wt.tree()).get("notes.log") == "kept"


def test_after_a_task_with_nothing_left_over_the_reset_looks_at_the_files_once(
    wt: Worktree, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """After each task Lopen puts the worktree at the commit. It ran `git reset --hard` and `git clean`,
    each looking at every file (at 20,000 files, 65 ms a task). Usually nothing is left over: one `git
    status` against the private index says so, and the worktree's own index — where the model's staging
    is — becomes the tip's, file times included, so a person's `git status` there is clean."""
    write(wt.path / "src" / "d1" / "f001.py", "VALUE = 'task 1'\n")
    write(wt.path / "src" / "new.py", "NEW = 1\n")
    git(wt.path, "rm", "-q", "--cached", "src/d2/f002.py")  # the model's staging, in the own index
    wt.commit(wt.tree(), wt.tip(), "task 1")
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))

    wt.reset_to_tip()

    ran = commands_run(trace)
    assert "reset" not in ran and "clean" not in ran and ran.count("status") == 1
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    assert git(wt.path, "status", "--porcelain") == ""
    assert git(wt.path, "rev-parse", "HEAD") == wt.tip()
    assert files_of(wt.path, wt.tip())["src/new.py"] == "NEW = 1"


@pytest.mark.parametrize("left", ["a file", "a change", "a deletion", "an oversized file", "HEAD elsewhere"])
def test_what_a_task_left_over_after_its_commit_still_goes(wt: Worktree, left: str) -> None:
    """The quick way is taken only when nothing is left: a file or a change made after the verified tree
    was committed, a file too large for any tree, HEAD on another branch (which the guard after each
    invocation puts back first) — each is put back as before."""
    wt.max_file_bytes = 1000
    write(wt.path / "src" / "d1" / "f001.py", "VALUE = 'task 1'\n")
    tip = wt.commit(wt.tree(), wt.tip(), "task 1")
    if left == "a file":
        write(wt.path / "src" / "stray.py", "STRAY = 1\n")
    elif left == "a change":
        write(wt.path / "src" / "d1" / "f001.py", "VALUE = 'after the commit'\n")
    elif left == "a deletion":
        (wt.path / "src" / "d1" / "f001.py").unlink()
    elif left == "HEAD elsewhere":
        git(wt.path, "branch", "elsewhere", "HEAD~1")
        git(wt.path, "symbolic-ref", "HEAD", "refs/heads/elsewhere")
    else:
        write(wt.path / "data.bin", "x" * 5000)

    wt.reset_to_tip()

    assert git(wt.path, "status", "--porcelain") == ""
    assert git(wt.path, "rev-parse", "HEAD") == tip
    assert (wt.path / "src" / "d1" / "f001.py").read_text() == "VALUE = 'task 1'\n"
    assert not (wt.path / "src" / "stray.py").exists() and not (wt.path / "data.bin").exists()
