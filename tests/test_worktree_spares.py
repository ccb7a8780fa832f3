"""Issue 21, repository scale: a run in lanes checks out spare worktrees while the model plans
(``lopen.git.spares``), so that a lane starts without writing the repository's files. A lane that takes
one gets exactly the worktree it would have made — its branch, its start, clean for git and for Lopen's
trees — and nothing of a spare outlives the run, even a killed one."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from repos import git, make_repo, write
from test_worktree_caches import files_reread

from lopen.git import GitError, Worktree
from lopen.git import worktree as worktree_module
from lopen.git.spares import Spares, spares_dir
from lopen.git.worktree import SETTLE_MARGIN, Spare, deleted

FILES = 60
T = TypeVar("T")

WAIT = 30.0
"""A lane's wait for a spare, or the run's end waiting for the filler, longer than this is a hang: the test
fails (a spare never holds up a run for ever)."""


def within(call: Callable[[], T]) -> T:
    """``call()`` from another thread; the test fails when it is not back within :data:`WAIT` seconds."""
    returned: list[T] = []
    raised: list[BaseException] = []

    def calling() -> None:
        try:
            returned.append(call())
        except BaseException as error:  # given back to the test
            raised.append(error)

    thread = threading.Thread(target=calling, daemon=True)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), f"{call.__qualname__} still waiting after {WAIT:.0f} s"
    if raised:
        raise raised[0]
    return returned[0]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path, {f"src/d{n % 4}/f{n:03d}.py": f"VALUE = {n}\n" for n in range(FILES)})


@pytest.fixture
def module(repo: Path) -> Worktree:
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")
    worktree.ensure()
    return worktree


def lane(module: Worktree, component: str, spares: Spares | None) -> Worktree:
    return Worktree(
        module.repo_root,
        module.path.with_name(f"{module.path.name}.components") / component,
        f"lopen/auth--{component}",
        shared_branch=True,
        take_spare=(lambda: within(spares.take)) if spares is not None else None,
    )


def taking(module: Worktree, count: int) -> tuple[Spares, Worktree]:
    """``count`` spares filled at the module's tip, and the lane ``api`` made from one of them."""
    spares = Spares(module.repo_root, spares_dir(module.path))
    spares.fill(count, module.tip())
    taken = lane(module, "api", spares)
    taken.ensure(module.tip())
    return spares, taken


def worktrees(repo: Path) -> dict[str, str]:
    """Every worktree git knows: its folder → its branch ("detached" for none)."""
    found: dict[str, str] = {}
    path = ""
    for line in git(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
            found[path] = "detached"
        elif line.startswith("branch "):
            found[path] = line.removeprefix("branch refs/heads/")
    return found


def commit_on(module: Worktree, files: dict[str, str | None], message: str) -> str:
    """The module branch moved on (a planning commit): ``files`` written (None: deleted) and committed."""
    for name, text in files.items():
        if text is None:
            (module.path / name).unlink()
        else:
            write(module.path / name, text)
    sha = module.commit(module.tree(), module.tip(), message)
    module.reset_to(sha)
    return sha


def test_lanes_take_the_spares_checked_out_ahead_and_get_the_worktrees_they_would_have_made(
    repo: Path, module: Worktree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Path] = []  # the worktrees whose files were checked out (written), spares included
    check_out = Worktree._check_out

    def checking_out(worktree: Worktree, at: str = "") -> None:
        written.append(worktree.path)
        check_out(worktree, at)

    monkeypatch.setattr(Worktree, "_check_out", checking_out)
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(2, module.tip())
    lanes = [lane(module, name, spares) for name in ("api", "store")]
    started = [threading.Thread(target=lane.ensure, args=(module.tip(),)) for lane in lanes]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    within(spares.close)

    known = worktrees(repo)
    for taken in lanes:
        assert known[str(taken.path)] == taken.branch  # on its own branch, where git knows it
        assert git(taken.path, "symbolic-ref", "HEAD") == taken.ref
        assert taken.tip() == module.tip()
        assert git(taken.path, "status", "--porcelain") == ""  # the person's git: clean
        assert taken.dirty_files() == []
        assert (taken.path / "src" / "d1" / "f001.py").read_text(encoding="utf-8") == "VALUE = 1\n"
    assert not [path for path in known if ".spares" in path]  # both taken: none left
    assert sorted(p.name for p in written) == ["spare-1", "spare-2"]  # no lane wrote the repository's files
    # a lane's first tree finds every file's times in its index, as a worktree made in place does
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    write(lanes[0].path / "src" / "d2" / "f002.py", "VALUE = 'two'\n")
    assert lanes[0].tree() != lanes[0].tree_of(lanes[0].tip())
    [reread] = files_reread(trace)
    assert reread <= FILES // 10


def test_a_spare_checked_out_before_the_module_moved_on_is_brought_to_the_lane_s_start(
    repo: Path, module: Worktree
) -> None:
    """Spares are made at the tip the run started with; the plan may commit before lanes start: a lane's
    worktree is at its start — files added, changed and deleted since are so — and clean."""
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(1, module.tip())
    spare = within(spares.take)
    assert spare is not None
    inode = (spare.path / "src" / "d1" / "f001.py").stat().st_ino
    start = commit_on(
        module, {"PLAN.md": "# plan\n", "src/d0/f000.py": "VALUE = 'zero'\n", "src/d3/f003.py": None}, "plan"
    )
    given = iter([spare])
    taken = Worktree(
        repo, module.path.with_name("auth.components") / "api", "lopen/auth--api", take_spare=lambda: next(given)
    )

    created, base = taken.ensure(start)

    assert (created, base, taken.tip()) == (True, start, start)
    assert (taken.path / "PLAN.md").read_text(encoding="utf-8") == "# plan\n"
    assert (taken.path / "src" / "d0" / "f000.py").read_text(encoding="utf-8") == "VALUE = 'zero'\n"
    assert not (taken.path / "src" / "d3" / "f003.py").exists()
    assert (taken.path / "src" / "d1" / "f001.py").stat().st_ino == inode  # the spare's file: not written again
    assert git(taken.path, "status", "--porcelain") == ""
    assert taken.tree() == taken.tree_of(start)
    assert not spare.path.exists() and not spare.index.exists()
    within(spares.close)


def test_a_lane_whose_branch_exists_keeps_it_where_it_is(repo: Path, module: Worktree) -> None:
    """A branch from an earlier run (its worktree removed after its merge) is taken up where it is, never
    moved to where the spare was made."""
    earlier = commit_on(module, {"src/d0/extra.py": "EXTRA = 1\n"}, "earlier work")
    git(repo, "branch", "lopen/auth--api", earlier)
    module.restart_at(git(repo, "rev-parse", "main"))
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(1, module.tip())
    taken = lane(module, "api", spares)

    created, base = taken.ensure()

    assert (created, base, taken.tip()) == (False, earlier, earlier)
    assert (taken.path / "src" / "d0" / "extra.py").read_text(encoding="utf-8") == "EXTRA = 1\n"
    assert git(taken.path, "status", "--porcelain") == ""
    within(spares.close)


def test_spares_no_lane_took_are_removed_when_the_run_ends(repo: Path, module: Worktree) -> None:
    spares, taken = taking(module, 3)

    within(spares.close)

    assert set(worktrees(repo)) == {str(repo), str(module.path), str(taken.path)}
    assert not [p for p in spares_dir(module.path).iterdir() if not p.name.startswith(".")]
    assert sorted(p.name.split("-")[0] for p in (repo / ".lopen" / "indexes").iterdir()) == ["api", "auth"]
    assert within(spares.take) is None  # a lane starting after the end makes its own


def test_what_a_killed_run_left_is_removed_when_the_next_run_fills(repo: Path, module: Worktree) -> None:
    """A run killed while it made spares leaves a whole spare, one git registered without its files, and a
    folder git never registered: the next run removes them all before making its own."""
    folder = spares_dir(module.path)
    Worktree(repo, folder / "spare-1", "").make_spare(module.tip())
    git(repo, "worktree", "add", "-q", "--no-checkout", "--detach", str(folder / "spare-2"), module.tip())
    write(folder / "spare-3" / "half.py", "X = 1\n")
    index = Worktree(repo, folder / "spare-3", "")._index_file()
    lock = index.with_name(index.name + ".lock")
    write(lock, "")  # killed while git wrote its index again (settling it)

    spares = Spares(repo, folder)
    spares.fill(1, module.tip())
    spare = within(spares.take)

    assert spare is not None and spare.path == folder / "spare-1"
    assert [p.name for p in folder.iterdir() if not p.name.startswith(".")] == ["spare-1"]
    assert set(worktrees(repo)) == {str(repo), str(module.path), str(spare.path)}
    assert not lock.exists()
    within(spares.close)
    Worktree(repo, spare.path, "").remove()


def test_without_a_spare_or_with_one_git_cannot_move_a_lane_makes_its_own_worktree(
    repo: Path, module: Worktree, tmp_path: Path
) -> None:
    empty = Spares(repo, spares_dir(module.path))  # nothing to fill: take() answers at once
    first = lane(module, "api", empty)
    first.ensure(module.tip())
    bogus = Spare(tmp_path / "no-such-spare", tmp_path / "no-such-index", module.tip())
    second = Worktree(
        repo, module.path.with_name("auth.components") / "store", "lopen/auth--store", take_spare=lambda: bogus
    )
    second.ensure(module.tip())

    for made in (first, second):
        assert worktrees(repo)[str(made.path)] == made.branch
        assert git(made.path, "status", "--porcelain") == "" and made.dirty_files() == []


def test_a_run_in_lanes_has_spares_only_for_the_components_left_to_build(tmp_path: Path) -> None:
    """Before the plan: as many as run at once; after it, one per component left without a folder."""
    from events import catalogue as ev
    from events.fold import ModuleState
    from lopen.app.crew import spares_wanted

    lanes = tmp_path / "auth.components"
    (lanes / "api").mkdir(parents=True)
    assert spares_wanted(ModuleState(module="auth"), 4, lanes) == 4
    planned = ModuleState(module="auth")
    planned.apply(ev.ComponentsRecorded(components=tuple(ev.ComponentSpec(name=s) for s in ("api", "store", "ui"))))
    assert sorted(planned.components) == ["api", "store", "ui"]
    assert spares_wanted(planned, 4, lanes) == 2  # api has its folder already
    assert spares_wanted(planned, 1, lanes) == 1


@pytest.mark.parametrize("lock", ["worktrees.lock", "checkouts.lock"])
def test_a_spare_is_made_under_the_locks_lanes_make_their_worktrees_under(
    repo: Path, module: Worktree, lock: str
) -> None:
    """Registered with git under the lock worktrees are made in (git's prune must never meet a half-made
    one), its files written under the one check-outs take turns on: while a lane holds either, the spare
    waits — its folder unmade, or made without its files."""
    spare = Worktree(repo, spares_dir(module.path) / "spare-1", "")
    with open(repo / ".lopen" / lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        making = threading.Thread(target=spare.make_spare, args=(module.tip(),))
        making.start()
        making.join(timeout=1.0)
        assert making.is_alive()  # waiting for the lane's lock
        assert not (spare.path / "src" / "d1" / "f001.py").exists()
        fcntl.flock(held, fcntl.LOCK_UN)
    making.join()
    assert (spare.path / "src" / "d1" / "f001.py").read_text(encoding="utf-8") == "VALUE = 1\n"


def test_a_spare_is_made_in_folders_that_do_not_exist_yet(repo: Path, module: Worktree) -> None:
    made = Worktree(repo, repo / ".lopen" / "deep" / "er" / "spare-1", "").make_spare(module.tip())
    assert git(made.path, "rev-parse", "HEAD") == module.tip() and git(made.path, "status", "--porcelain") == ""


def test_a_lane_branch_made_from_a_spare_says_so_in_its_reflog(repo: Path, module: Worktree) -> None:
    spares, taken = taking(module, 1)
    within(spares.close)
    assert git(repo, "reflog", "show", "-1", "--format=%gs", taken.ref) == "lopen: branch created"


def test_a_spare_half_taken_is_removed_and_git_s_error_told(repo: Path, module: Worktree) -> None:
    """Moved into place, then git refuses (here: the branch it was to make exists after all): the lane's
    folder is removed (the next ensure makes it afresh), no index is left, and git's error is what the
    caller gets."""
    spare = Worktree(repo, spares_dir(module.path) / "spare-1", "").make_spare(module.tip())
    git(repo, "branch", "lopen/auth--api", module.tip())
    taken = lane(module, "api", None)
    taken.path.parent.mkdir(parents=True)

    with pytest.raises(GitError, match="update-ref"):
        taken._adopt(spare, True, module.tip())

    assert not taken.path.exists() and not spare.path.exists()
    assert not spare.index.exists() and not taken._index_file().exists()
    assert str(taken.path) not in worktrees(repo)


def test_the_own_index_follows_a_tip_that_moved_since_the_check_out(repo: Path, module: Worktree) -> None:
    """Checked out at the tip, the worktree's own index is that tip (no reset needed); a commit later, the
    index sync makes it the new tip: a person's `git status` there is clean, not the commit undone."""
    write(module.path / "src" / "d0" / "new.py", "NEW = 1\n")
    module.move_branch(module.commit(module.tree(), module.tip(), "more"))

    module.sync_index()

    assert git(module.path, "diff", "--cached", "--name-only") == ""
    assert git(module.path, "status", "--porcelain") == ""


def test_a_spare_git_registered_without_its_pointer_is_forgotten_by_git_too(repo: Path, module: Worktree) -> None:
    """Killed inside `git worktree add`, after git registered the folder but before it wrote its `.git`:
    the folder goes, and so does git's record of it (a `git worktree list` of the person's shows neither)."""
    folder = spares_dir(module.path)
    git(repo, "worktree", "add", "-q", "--no-checkout", "--detach", str(folder / "spare-1"), module.tip())
    (folder / "spare-1" / ".git").unlink()

    spares = Spares(repo, folder)
    spares.fill(1, module.tip())
    spare = within(spares.take)
    within(spares.close)

    assert spare is not None and spare.path == folder / "spare-1"  # made afresh where the leftover was
    assert "prunable" not in git(repo, "worktree", "list", "--porcelain")
    assert [p for p in worktrees(repo) if ".spares" in p] == [str(spare.path)]


def test_a_lane_asking_after_the_spares_ran_out_is_answered_at_once(repo: Path, module: Worktree) -> None:
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(1, module.tip())
    assert within(spares.take) is not None
    asking = threading.Thread(target=spares.take)
    asking.start()
    asking.join(timeout=30)  # the filler ends right after its one spare: never a wait for more
    assert not asking.is_alive()
    within(spares.close)
    within(Spares(repo, spares_dir(module.path)).close)  # never filled: nothing to stop, nothing to remove


def test_spares_are_removed_under_the_lock_lanes_make_their_worktrees_under(repo: Path, module: Worktree) -> None:
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(1, module.tip())
    spare = within(spares.take)
    assert spare is not None
    spares._ready.append(spare)  # not taken after all: close removes it
    with open(repo / ".lopen" / "worktrees.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        closing = threading.Thread(target=spares.close)
        closing.start()
        closing.join(timeout=1.0)
        assert closing.is_alive() and spare.path.exists()  # waiting for the lane's lock
        fcntl.flock(held, fcntl.LOCK_UN)
    closing.join()
    assert not spare.path.exists()


@pytest.mark.parametrize("asked", ["no spare", "no commit to make them at"])
def test_a_run_that_asks_for_no_spare_makes_none_and_touches_nothing(repo: Path, module: Worktree, asked: str) -> None:
    """Every component has its folder (no spare wanted), or the module has no commit yet: no spare is made,
    and what is under the folder stays as it is (a lane asking is answered at once)."""
    folder = spares_dir(module.path)
    write(folder / "spare-1" / "half.py", "X = 1\n")
    spares = Spares(repo, folder)

    spares.fill(0, module.tip()) if asked == "no spare" else spares.fill(2, "")

    assert within(spares.take) is None
    assert (folder / "spare-1" / "half.py").read_text(encoding="utf-8") == "X = 1\n"
    within(spares.close)


def test_a_spare_already_being_deleted_is_left_to_its_deletion_and_gone_when_the_run_ends(
    repo: Path, module: Worktree
) -> None:
    """A removed spare is moved aside (``.spare-N.removed-…``) and deleted in the background, which a killed
    run cut short: filling never waits to delete it again (seconds in a large repository) and makes its
    spares at once; the run's end removes it with the spare of that name."""
    folder = spares_dir(module.path)
    aside = folder / ".spare-2.removed-1-2"
    write(aside / "src" / "big.py", "X = 1\n")
    spares = Spares(repo, folder)
    spares.fill(2, module.tip())

    first = within(spares.take)
    assert first is not None and aside.is_dir()  # not deleted by the filler

    within(spares.close)  # spare-2, not taken, removed: its name's leftovers with it
    assert deleted(timeout=WAIT) and not aside.exists()
    Worktree(repo, first.path, "").remove()


# -- settled: no file git would read again --------------------------------------------------------------


def racy(worktree: Path, index: Path) -> list[str]:
    """The entries of ``index`` git takes for "racily clean": written in the second the index itself was
    (git compares times to the second), so that every git command reads and hashes them again."""
    written = int(index.stat().st_mtime)
    listed = subprocess.run(
        ["git", "ls-files", "--debug"],
        cwd=worktree,
        env={**os.environ, "GIT_INDEX_FILE": str(index)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found, name = [], ""
    for line in listed.splitlines():
        if not line.startswith(" "):
            name = line
        elif line.strip().startswith("mtime:") and int(line.split(":")[1]) >= written:
            found.append(name)
    return found


def own_index(worktree: Path) -> Path:
    return Path(git(worktree, "rev-parse", "--path-format=absolute", "--git-path", "index"))


def settled(spares: Spares) -> Spare:
    """The first spare ready, once the filler settled it (it tells every waiter when it has)."""
    with spares._changed:
        while not (spares._ready and spares._ready[0].settled):
            spares._changed.wait()
        return spares._ready[0]


def test_a_spare_is_settled_while_it_waits_for_a_lane(repo: Path, module: Worktree) -> None:
    """A check-out writes its files and then its index in the same second: git takes every such file for
    racily clean, and read and hashed each again at every command (a lane's first tree 160 ms instead of 65
    at 20,000 files, its first reset 214 instead of 60). A spare no lane took yet is written again once that
    second is over: its own and its private index hold no racy file, and so neither does the lane's."""
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(1, module.tip())
    spare = within(lambda: settled(spares))
    assert racy(spare.path, spare.index) == [] and racy(spare.path, own_index(spare.path)) == []

    taken = lane(module, "api", spares)
    taken.ensure(module.tip())

    assert racy(taken.path, taken._index_file()) == [] and racy(taken.path, own_index(taken.path)) == []
    assert git(taken.path, "status", "--porcelain") == "" and taken.tree() == taken.tree_of(module.tip())
    within(spares.close)


def test_a_spare_taken_before_it_settled_is_settled_by_the_lane(repo: Path, module: Worktree) -> None:
    """Taken in the second it was checked out in, nothing can settle it yet; taken later, the lane writes its
    index again as it moves it in (a spare at the lane's start: nothing else writes it)."""
    made = Worktree(repo, spares_dir(module.path) / "spare-1", "")
    spare = made.make_spare(module.tip())
    assert racy(spare.path, spare.index) != []  # 60 files, checked out in a few ms: one second
    left = made.settle()
    if left:
        assert left <= 1 + SETTLE_MARGIN  # the rest of the check-out's second, and a tick of the kernel's clock
        assert racy(spare.path, spare.index) != []  # nothing written yet
        time.sleep(left)  # the wall clock is what this waits for
    given = iter([spare])
    taken = Worktree(
        repo, module.path.with_name("auth.components") / "api", "lopen/auth--api", take_spare=lambda: next(given)
    )

    taken.ensure(module.tip())

    assert racy(taken.path, taken._index_file()) == [] and racy(taken.path, own_index(taken.path)) == []
    assert git(taken.path, "status", "--porcelain") == "" and taken.tree() == taken.tree_of(module.tip())


def test_the_filler_waits_out_the_second_and_ends_once_every_spare_is_settled(
    repo: Path, module: Worktree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filler waits for the clock (it does not spin on the spare, holding it out of the pool again and
    again), settles each spare once, and then ends, raising nothing."""
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: raised.append(hook.exc_value))
    calls: list[float] = []
    settle = Worktree.settle

    def counted(worktree: Worktree) -> float:
        calls.append(settle(worktree))
        return calls[-1]

    monkeypatch.setattr(Worktree, "settle", counted)
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(2, module.tip())
    assert spares._filler is not None
    within(lambda: spares._filler.join())  # type: ignore[union-attr]

    assert raised == [] and [spare.settled for spare in spares._ready] == [True, True]
    assert calls.count(0.0) == 2 and len(calls) <= 6  # each: at most a wait or two for the second to end
    within(spares.close)


def test_a_spare_git_could_not_settle_stays_in_the_pool_unsettled(
    repo: Path, module: Worktree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing its index again failed (a full disk, say): the spare is still a whole worktree, and a lane
    taking it writes the index again itself."""

    def failing(worktree: Worktree) -> float:
        raise GitError("git update-index: No space left on device")

    monkeypatch.setattr(Worktree, "settle", failing)
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(1, module.tip())
    within(lambda: spares._filler.join())  # type: ignore[union-attr]

    assert [spare.settled for spare in spares._ready] == [False]
    taken = lane(module, "api", spares)
    taken.ensure(module.tip())
    assert git(taken.path, "status", "--porcelain") == "" and taken.tree() == taken.tree_of(module.tip())
    within(spares.close)


def test_a_lane_asking_after_every_spare_was_taken_is_answered_at_once_while_the_filler_waits_for_the_clock(
    repo: Path, module: Worktree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filler waits for a spare's second to end before it settles it; once a lane took that spare there
    is nothing left to wait for: the next lane is told at once that none is left (and makes its worktree),
    not after the wait. The wait is made ten minutes long here, so that a lane kept waiting fails the test."""
    monkeypatch.setattr(worktree_module, "SETTLE_MARGIN", 600.0)
    spares = Spares(repo, spares_dir(module.path))
    spares.fill(1, module.tip())

    first = within(spares.take)
    second = within(spares.take)

    assert first is not None and not first.settled and second is None
    within(spares.close)
    Worktree(repo, first.path, "").remove()


def test_a_lane_takes_an_unsettled_spare_over_a_killed_run_s_index_lock_and_a_failing_settle(
    repo: Path, module: Worktree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settling a spare as it is taken only saves git work later: a lock a killed run left on the lane's
    index is removed (no one else works on a lane not made yet), and a settle git cannot do leaves the spare
    taken, whole, rather than the lane without a worktree."""
    made = Worktree(repo, spares_dir(module.path) / "spare-1", "")
    spares = [
        made.make_spare(module.tip()),
        Worktree(repo, spares_dir(module.path) / "spare-2", "").make_spare(module.tip()),
    ]
    given = iter(spares)

    def taking(name: str) -> Worktree:
        return Worktree(
            repo, module.path.with_name("auth.components") / name, f"lopen/auth--{name}", take_spare=lambda: next(given)
        )

    locked = taking("api")
    lock = locked._index_file().with_name(locked._index_file().name + ".lock")
    write(lock, "")
    left = int(spares[1].index.stat().st_mtime) + 1 + SETTLE_MARGIN - time.time()
    time.sleep(max(left, 0))  # the wall clock is what this waits for: the check-outs' second is over
    locked.ensure(module.tip())
    assert not lock.exists() and racy(locked.path, locked._index_file()) == []

    def failing(worktree: Worktree, index: Path) -> float:
        raise GitError("git update-index: No space left on device")

    monkeypatch.setattr(Worktree, "_write_again", failing)
    failed = taking("store")
    failed.ensure(module.tip())
    for taken in (locked, failed):
        assert git(taken.path, "status", "--porcelain") == "" and taken.tree() == taken.tree_of(module.tip())
    assert not spares_dir(module.path).exists() or not any(spares_dir(module.path).iterdir())
