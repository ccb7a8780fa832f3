"""bubblewrap: the Copilot CLI in a mount namespace where only its work is writable.

``bwrap`` builds a private view of the file system for one process tree, then runs it:

- ``--ro-bind / /`` — everything read-only (the user's checkout included);
- ``--dev /dev``, ``--proc /proc`` with ``--unshare-pid`` — a private ``/dev`` and a ``/proc``
  that shows only the sandbox's own processes (Lopen's environment is not there to read);
- ``--tmpfs DIR`` / ``--ro-bind /dev/null FILE`` — hidden folders and files: Lopen's
  ``.lopen/``, the approved spec, secret files (an empty folder, an empty file), the folders
  made read-only at the end (``--remount-ro``);
- ``--bind P P`` — the writable places, bound again *after* the hiding, so the worktree and the
  CLI's home reappear inside the hidden ``.lopen/``;
- ``--ro-bind P P`` — read-only islands inside writable places (the worktree's ``.git``
  pointer, the repository's packs), and what the private ``/dev`` would cover: the proxy's socket
  folder, a checkout under ``/dev/shm``;
- ``--unshare-net`` — a network namespace of its own: loopback only, no route out. The CLI
  reaches its model provider through the forwarder started first inside
  (:mod:`lopen.sandbox.forward`) and Lopen's allowlisting proxy outside
  (:mod:`lopen.sandbox.proxy`), over a Unix socket visible read-only in the sandbox;
- ``--die-with-parent`` — the sandbox dies with Lopen.

bwrap drops every capability of the sandboxed process, even when Lopen runs as root.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from lopen.sandbox.paths import inside

BASE: tuple[str, ...] = (
    "--die-with-parent",
    "--unshare-pid",
    "--unshare-net",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
)
"""The options every Lopen sandbox starts with (also what detection tries)."""


def arguments(
    writable: Sequence[str], hidden: Sequence[str], read_only: Sequence[str] = (), shown: Sequence[str] = ()
) -> list[str]:
    """bwrap's options (before ``--`` and the command) for this confinement.

    ``shown``: places the sandbox reads as it reads ``/`` (the user's checkout, the home folder); one that
    lives under ``/dev`` (a project in ``/dev/shm``) is bound again, read-only and before any hiding, since
    the private ``/dev`` covers it — never ``/dev`` or a folder right under it (``/dev/shm`` holds other
    programs' shared memory).

    Paths must be resolved. Missing paths are skipped (bwrap refuses to bind what is not there).
    """
    nested = [h for h in hidden if any(inside(h, w) for w in writable)]
    args = list(BASE)
    under_dev = [path for path in shown if inside(path, "/dev") and path.count("/") >= 3]
    args += [a for path in under_dev if os.path.exists(path) for a in ("--ro-bind", path, path)]
    args += _hide([h for h in hidden if h not in nested])
    args += [a for path in writable if os.path.exists(path) for a in ("--bind", path, path)]
    args += [a for path in read_only if os.path.exists(path) for a in ("--ro-bind", path, path)]
    args += _hide(nested)  # hidden paths inside a writable place: after it is bound
    # The empty folders are read-only too — last, once the binds made their mount points in them.
    args += [a for path in hidden if os.path.isdir(path) for a in ("--remount-ro", path)]
    return args


def _hide(paths: Sequence[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args
