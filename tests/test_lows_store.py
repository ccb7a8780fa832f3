"""Issue 21's lows around the store, as a user meets them: `lopen session list` and the other commands
that only read, on a full disk and in a read-only `.lopen` — a what/why/fix or the answer, never a
traceback. Real CLI, real SQLite, a real full file system (tmpfs) and a real read-only folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from test_events_cli import PROJECT, new_project

from events import catalogue as ev
from events.errors import StoreTampered
from events.journal import Journal
from events.recorded import module_stream
from events.store import EventStore

SESSION = "auth-20261126-1"
READERS = [("session", "list"), ("session", "show", SESSION), ("modules",), ("replay", SESSION), ("verify",)]


def with_a_session(root: Path) -> Path:
    new_project(root)
    with EventStore.open(root) as store:
        store.append(module_stream(PROJECT, "auth"), [ev.SpecApproved(spec_hash="s1", approver="ana")])
        journal = Journal(store, PROJECT, "auth")
        journal.open_session(ev.SessionStarted(lopen_version="0.1.0"), date(2026, 11, 26))
        journal.record(ev.StepEntered(phase="planning", step=3), ev.SessionPaused(reason="budget"))
        journal.close()
    return root


def lopen(root: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "NO_COLOR": "1", "COLUMNS": "200"}
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    env["TMPDIR"] = str(root.parent / "tmp")
    os.makedirs(env["TMPDIR"], exist_ok=True)
    command = [*prefix, sys.executable, "-m", "lopen", *args]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_commands_that_read_say_what_why_and_fix_on_a_full_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "4m") as disk:
        root = with_a_session(disk / "project")
        assert "auth-20261126-1" in lopen(root, "session", "list").stdout
        with open(disk / "filler", "wb") as filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 65536)
        for suffix in ("-wal", "-shm"):  # a fresh start: SQLite must make its -shm on the full disk
            (root / ".lopen" / f"store.sqlite{suffix}").unlink(missing_ok=True)
        for args in READERS:
            done = lopen(root, *args)
            assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr)
            assert "No space left on device (errno 28)" in done.stderr and "0 MiB free on that disk" in done.stderr
            assert "fix: check free disk space" in done.stderr
        (disk / "filler").unlink()
        assert "auth-20261126-1" in lopen(root, "session", "list").stdout  # nothing was lost


def _as_non_root() -> tuple[str, ...]:
    """A prefix that runs a command in a user namespace of its own: the same user, without root's
    power over files (a folder chmod 0555 is read-only to it, as to any user)."""
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-U", "true"], capture_output=True).returncode != 0:
        pytest.skip("no user namespaces here (unshare -U): as root a read-only folder cannot be made")
    return (unshare, "-U")


def test_a_read_only_lopen_folder_still_answers_the_commands_that_read(tmp_path: Path) -> None:
    root = with_a_session(tmp_path / "project")
    prefix = _as_non_root() if os.geteuid() == 0 else ()
    lopen_dir = root / ".lopen"
    before = sorted(p.name for p in lopen_dir.iterdir())
    lopen_dir.chmod(0o555)
    try:
        listed = lopen(root, "session", "list", prefix=prefix)
        assert listed.returncode == 0, listed.stderr
        assert SESSION in listed.stdout and "paused" in listed.stdout
        for args in READERS:
            done = lopen(root, *args, prefix=prefix)
            assert done.returncode == 0 and "errno" not in done.stderr, (args, done.stderr)
        assert "SessionPaused" in lopen(root, "replay", SESSION, prefix=prefix).stdout
        # a command that writes still says plainly that it cannot, and how to fix it
        deleted = lopen(root, "session", "delete", SESSION, prefix=prefix)
        assert deleted.returncode == 1 and "Traceback" not in deleted.stderr, deleted.stderr
        assert f"make {lopen_dir} writable" in deleted.stderr
    finally:
        lopen_dir.chmod(0o700)
    assert sorted(p.name for p in lopen_dir.iterdir()) == before  # nothing written beside the store
    assert not list((root.parent / "tmp").glob("lopen-snapshot-*"))  # the private copies are gone


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_store_deleted_under_lopen_is_saved_where_the_message_says(tmp_path: Path, how: str) -> None:
    """The fix line used to name a `.lopen/corrupted` copy that did not exist: now the store Lopen still
    holds open is saved there, every event in it, and the message names that very file."""
    root = with_a_session(tmp_path / "project")
    path = root / ".lopen" / "store.sqlite"
    store = EventStore.open(root)
    try:
        stream = module_stream(PROJECT, "auth")
        store.append(stream, [ev.ProgressReported(progress="the last event before the deletion")])
        held = store.version(stream)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        if how == "replaced":
            EventStore.open(root).close()  # a fresh, empty store where the old one was
        with pytest.raises(StoreTampered) as caught:
            store.check_intact(stream, held)
    finally:
        store.close()
    error = caught.value
    assert f"the event store {path} was {how} while Lopen was running" in error.what
    saved = list((root / ".lopen" / "corrupted").glob(f"store.sqlite-{how}-*"))
    assert len(saved) == 1 and str(saved[0]) in error.why and f"move {saved[0]} to {path}" in error.how
    # the saved copy is the whole store: put back, every event of the session reads again
    path.unlink(missing_ok=True)
    saved[0].rename(path)
    with EventStore.open(root) as back:
        events = [r.event for r in back.read_stream(module_stream(PROJECT, "auth"))]
    assert isinstance(events[-1], ev.ProgressReported) and len(events) == held
    assert "SessionPaused" in lopen(root, "replay", SESSION).stdout


def test_a_second_clone_is_told_where_the_commits_are_not_to_look_at_an_empty_branch(tmp_path: Path) -> None:
    """Issue 21: a clone sharing the store (another machine's work) was told "see it with `git log
    lopen/<module>`" where that branch had no commits. A real repository; the store records a module
    completed with a commit made elsewhere."""
    from lopen.app.engine import completed, worktree_for
    from lopen.config import Settings

    root = tmp_path / "clone"
    root.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@e.x", *args], cwd=root, check=True)
    here = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    (root / ".lopen").mkdir()
    with EventStore.open(root) as store:
        journal = Journal(store, PROJECT, "auth")
        journal.open_session(ev.SessionStarted(lopen_version="0.1.0"), date(2026, 11, 26))
        journal.record(
            ev.ComponentsRecorded(components=(ev.ComponentSpec(name="tokens"),)),
            ev.TasksRecorded(
                component="tokens", tasks=(ev.TaskSpec(id="tokens/1", name="A"), ev.TaskSpec(id="tokens/2", name="B"))
            ),
            *(
                ev.TaskStatusChanged(task_id=t, from_state=a, to_state=b, tree="t")
                for t in ("tokens/1", "tokens/2")
                for a, b in (("pending", "in-progress"), ("in-progress", "complete"))
            ),
        )
        elsewhere = "1234567" * 5 + "89abc"
        journal.record(ev.CommitRecorded(sha=elsewhere, message="feat: done", task_id="tokens/1", tree="t"))
        worktree = worktree_for(root, "auth", Settings())
        said = completed(journal, worktree, "origin")
        assert "See it with `git log lopen/auth`" not in said
        assert "made in another clone that shares this store: lopen/auth has no commits here" in said
        assert "Get them with `git fetch origin lopen/auth:lopen/auth`" in said
        journal.record(ev.CommitRecorded(sha=here, message="feat: here", task_id="tokens/2", tree="t"))
        assert "See it with `git log lopen/auth`" in completed(journal, worktree)  # the commits are here
