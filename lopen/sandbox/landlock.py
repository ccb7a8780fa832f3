"""Landlock: the kernel's unprivileged sandbox, through its three system calls, with ctypes.

Landlock (Linux 5.13+) lets a process give up file-system rights for itself and every process
it starts; nothing can give them back. A *ruleset* lists the access rights to restrict
("handled"), *rules* grant some of them back beneath given folders or on given files, and
``landlock_restrict_self`` applies the ruleset — after ``PR_SET_NO_NEW_PRIVS``, so no setuid
program can escape it.

Lopen uses it as a launcher around the Copilot CLI::

    python -m lopen.sandbox.landlock --rw WORKTREE --rw TMP --hide PROJECT/.lopen -- copilot --headless …

- ``--rw PATH``: full access beneath PATH (the worktree, the temp folder, the CLI's home, the
  git folders a worktree needs). Nothing else can be written, created, renamed or removed.
- ``--hide PATH``: PATH's files cannot be read or executed (Lopen's state, secret files). A
  Landlock rule can only grant, so "everything but PATH" is granted piece by piece: every
  entry of every folder on the way from ``/`` to PATH, except the way itself, gets read
  rights; ``/`` gets the right to list folders, so hidden names stay listable but their
  contents do not.
- ``--net`` (ABI 4 and later): the command may bind no TCP port and connect to none but the
  ``--connect PORT`` ones (Lopen's network proxy, a loopback model provider). Landlock's TCP
  rules name a port, not an address: an allowed port is allowed on every host. UDP and Unix
  sockets are not Landlock's to restrict.
- on ABI 6 and later, signals and abstract unix sockets are scoped: the model cannot signal
  Lopen or reach its sockets. Landlock also stops a sandboxed process from ptrace-ing — and so
  from reading ``/proc/<pid>/environ`` (Lopen's secrets) of — processes outside it, *unless*
  it holds ``CAP_SYS_PTRACE``: so when Lopen runs as root, the launcher first empties the
  capability bounding set, and the command starts with no capabilities at all.

Rights of an ABI newer than the kernel's are left out; on a kernel without Landlock the
launcher exits with status 126 and says so. This module uses the standard library only, so it
also runs as a plain script (``python .../landlock.py --rw …``).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable, Sequence

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
NET_ABI = 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the only rights a rule on a file may hold
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts")
"""Devices every program expects to open for writing (``> /dev/null``, terminals)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_rights(abi: int) -> int:
    """Every file-system right this ABI knows, except device ioctls (terminals need them)."""
    rights = READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG
    rights |= MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def read_grants(hidden: Iterable[str]) -> list[tuple[str, int]]:
    """Rules that let everything be read except beneath the ``hidden`` paths.

    Without hidden paths: one rule, ``/`` readable. Otherwise ``/`` may only be listed, and
    every entry of each folder leading to a hidden path — except that path and the folders
    leading to other hidden paths — is granted read rights. Symlinks are skipped: what they
    point at is granted (or not) where it really is.
    """
    hidden_set = {os.path.realpath(p) for p in hidden if os.path.lexists(p)} - {"/"}
    if not hidden_set:
        return [("/", READ)]
    leading: set[str] = set()
    for path in hidden_set:
        parent = os.path.dirname(path)
        while parent not in leading:
            leading.add(parent)
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    grants: list[tuple[str, int]] = [("/", READ_DIR)]

    def visit(folder: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            path = os.path.join(folder, entry.name)
            if path in hidden_set:
                continue
            if path in leading:
                visit(path)
            elif not entry.is_symlink():
                grants.append((path, READ))

    visit("/")
    return grants


def restrict(writable: Sequence[str], hidden: Sequence[str] = (), connect: Sequence[int] | None = None) -> int:
    """Confine this process and its future children: write only beneath ``writable``, read
    everything but ``hidden``; with ``connect`` (a list, empty or not), bind no TCP port and connect
    to those ports only. Returns the ABI used; raises OSError when Landlock is missing, or when
    ``connect`` is asked of a kernel whose Landlock cannot restrict TCP (before ABI 4)."""
    abi = abi_version()
    if abi < 1:
        raise OSError(38, "Landlock is not available in this kernel (or is disabled)")
    if connect is not None and abi < NET_ABI:
        raise OSError(95, f"this kernel's Landlock (ABI {abi}) cannot restrict the network (ABI {NET_ABI}+)")
    libc = _libc()
    handled = handled_rights(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if connect is not None else 0
    attr = _RulesetAttr(handled_access_fs=handled, handled_access_net=net, scoped=0)
    size = 8 if abi < 4 else 16
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    ruleset = _check(
        libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    try:
        grants = read_grants(hidden)
        grants += [(p, handled) for p in writable if p]
        grants += [(d, READ | WRITE_FILE | TRUNCATE) for d in DEVICES]
        for path, rights in grants:
            _add_rule(libc, ruleset, path, rights & handled)
        for port in dict.fromkeys(connect or ()):
            rule = _NetPortAttr(allowed_access=NET_CONNECT_TCP, port=port)
            _check(
                libc.syscall(_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(rule), ctypes.c_uint32(0)),
                f"landlock_add_rule(connect port {port})",
            )
        if os.geteuid() == 0:
            _drop_capabilities(libc)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Empty the bounding and ambient sets: root's next ``exec`` then gets no capability."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as file:
            last = int(file.read())
    except (OSError, ValueError):
        last = 63
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(last + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone since it was listed, or unreachable: nothing to grant
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            rights &= FILE_RIGHTS
        if not rights:
            return
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        _check(
            libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)


def _parse(argv: Sequence[str]) -> tuple[list[str], list[str], list[int] | None, list[str]]:
    writable: list[str] = []
    hidden: list[str] = []
    connect: list[int] | None = None
    args = list(argv)
    while args and args[0] != "--":
        option = args.pop(0)
        if option == "--net":
            connect = connect or []
            continue
        if option not in ("--rw", "--hide", "--connect") or not args:
            raise ValueError(f"unexpected argument {option!r}")
        value = args.pop(0)
        if option == "--connect":
            if not value.isdigit() or not 0 < int(value) < 65536:
                raise ValueError(f"--connect takes a TCP port (1-65535), not {value!r}")
            connect = [*(connect or []), int(value)]
        else:
            (writable if option == "--rw" else hidden).append(value)
    if not args or len(args) < 2:
        raise ValueError("no command after --")
    return writable, hidden, connect, args[1:]


USAGE = (
    "usage: python -m lopen.sandbox.landlock [--rw PATH]... [--hide PATH]... [--net [--connect PORT]...] "
    "-- COMMAND [ARG]..."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Confine, then exec the command. Exit 2 on bad usage, 126 when Landlock is unavailable."""
    try:
        writable, hidden, connect, command = _parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"lopen landlock: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        restrict(writable, hidden, connect)
    except OSError as exc:
        print(f"lopen landlock: cannot confine {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 126
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"lopen landlock: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
