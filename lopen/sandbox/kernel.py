"""The kernel sandbox around the Copilot CLI: which one works here, what it confines, and the
command that starts the CLI inside it.

:func:`detect` picks the protection for a ``sandbox.mode``:

- ``auto`` — bubblewrap when ``bwrap`` runs here (it is tried with the very options Lopen
  uses), else Landlock when the kernel has it, else the permission policy alone, with one
  warning saying what is missing and how to get it;
- ``bwrap`` / ``landlock`` — that one, or an error saying why it cannot run;
- ``policy`` — no kernel sandbox, by choice.

:func:`plan` says what the sandbox allows for one :class:`SandboxConfig`: the writable places
(the worktree, the model's temp folder, the CLI's home, and — for a linked git worktree — its
private git folder and the repository's ``objects/``, so ``git add`` and ``git status`` work
while refs, config and hooks stay read-only: the model cannot plant a hook or move a branch),
the hidden ones (Lopen's state, the approved spec, secret files) and read-only islands (git's
own files inside writable places: the ``.git`` pointers, the private folder's ``HEAD``,
``commondir``, ``gitdir``, ``config.worktree``, the packs — :func:`git_files`, :func:`lane_pointers`;
only bubblewrap can keep them, Landlock can only allow whole folders).

:func:`unpack_cli` lets the CLI unpack its bundled code into the user's cache first (the
sandbox keeps that cache read-only), and :func:`launch` turns a protection and a plan into
the ``(path, args)`` the SDK spawns the CLI with —
``RuntimeConnection.for_stdio(path=path, args=args)`` runs ``[path, *args, --headless, …]``,
so the CLI's own arguments follow ours.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

from lopen.errors import LopenError
from lopen.sandbox import bwrap, forward, landlock, paths
from lopen.sandbox.config import Mode, SandboxConfig
from lopen.sandbox.network import Route
from lopen.sandbox.policy import Confinement

Kind = Literal["bwrap", "landlock", "policy"]

INSTALL_BWRAP = "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap)"
_SCOPE = (
    ": writes only in the worktree, temp and the CLI's home; Lopen's state, the approved spec and secret files hidden"
)


class Protection(msgspec.Struct, frozen=True):
    """The protection in force: ``kind``, what exactly (``detail``), and a ``warning`` when Lopen
    fell back to the permission policy alone."""

    kind: Kind
    detail: str
    warning: str = ""
    landlock_abi: int = 0
    """Under Landlock, the kernel's ABI: from 4 on, Landlock also confines TCP (:attr:`confines_network`)."""

    @property
    def confinement(self) -> Confinement:
        return "none" if self.kind == "policy" else self.kind

    @property
    def confines_network(self) -> bool:
        """The model's network reaches only Lopen's proxy (and a loopback provider): under bubblewrap (a
        network namespace) and under Landlock from ABI 4 (TCP connect by port, no bind)."""
        return self.kind == "bwrap" or (self.kind == "landlock" and self.landlock_abi >= landlock.NET_ABI)

    @property
    def network_warning(self) -> str:
        """What is left open on the network: "" when :attr:`confines_network`, else a plain statement
        that it is not confined."""
        if self.confines_network:
            return ""
        if self.kind == "landlock":
            under = f"under Landlock ABI {self.landlock_abi} (TCP rules need ABI {landlock.NET_ABI}, Linux 6.7+)"
        else:
            under = "with the permission policy alone"
        return (
            f"the network is not confined {under}: the model's shell can reach any address, this machine's "
            f"loopback included (a local MCP server, databases); {INSTALL_BWRAP} to give it a network of its "
            "own that reaches only the model provider"
        )


class Plan(msgspec.Struct, frozen=True):
    """What a kernel sandbox allows: resolved paths, each list without duplicates."""

    writable: tuple[str, ...]
    hidden: tuple[str, ...]
    read_only: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()  # read as the rest of / is: the checkout, its git folder, the home folder


# -- detection ----------------------------------------------------------------------------------


@functools.cache
def bwrap_status() -> tuple[str, str]:
    """``(version, "")`` when bubblewrap works here with Lopen's options, else ``("", why not)``."""
    path = shutil.which("bwrap")
    if not path:
        return "", "bwrap is not installed"
    try:
        tried = subprocess.run([path, *bwrap.BASE, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"bwrap does not run: {exc}"
    if tried.returncode != 0:
        reason = next((line for line in tried.stderr.splitlines() if line.strip()), f"exit {tried.returncode}")
        return "", f"bwrap cannot create a sandbox here: {reason.strip()}"
    answered = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    return (answered.stdout.strip() or "bubblewrap"), ""


@functools.cache
def landlock_status() -> tuple[int, str]:
    """``(ABI version, "")`` when Landlock is available, else ``(0, why not)``."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is Linux only (this is {sys.platform})"
    abi = landlock.abi_version()
    if abi < 1:
        return 0, "this kernel has no Landlock (Linux 5.13+ with landlock in the LSM list)"
    return abi, ""


def detect(mode: Mode = "auto") -> Protection:
    """The protection ``mode`` gives on this machine; raises a LopenError when an explicitly
    chosen kernel sandbox cannot run."""
    if mode == "policy":
        return choose(mode, ("", "not tried"), (0, "not tried"))
    return choose(mode, bwrap_status(), landlock_status())


def choose(mode: Mode, bwrap_found: tuple[str, str], landlock_found: tuple[int, str]) -> Protection:
    """The protection for ``mode`` given what works here (:func:`bwrap_status`,
    :func:`landlock_status`): the decision alone, without probing anything."""
    if mode == "policy":
        return Protection("policy", "the permission policy alone (sandbox.mode = policy)")
    version, no_bwrap = bwrap_found
    if mode in ("auto", "bwrap") and version:
        return Protection(
            "bwrap",
            f"{version} confines the Copilot CLI and every command it runs{_SCOPE}; their network reaches only "
            "the model provider and sandbox.allow_network, through Lopen's proxy",
        )
    if mode == "bwrap":
        raise LopenError(
            "sandbox.mode is bwrap but bubblewrap cannot confine the Copilot CLI here",
            no_bwrap,
            f"{INSTALL_BWRAP}, or set sandbox.mode to auto (or landlock)",
        )
    abi, no_landlock = landlock_found
    if abi:
        network = ""
        if abi >= landlock.NET_ABI:
            network = (
                "; their TCP connections reach only Lopen's proxy (the model provider and sandbox.allow_network) "
                "and a loopback provider's port, and they bind no TCP port"
            )
        return Protection(
            "landlock",
            f"Landlock (ABI {abi}) confines the Copilot CLI and every command it runs{_SCOPE}{network}",
            landlock_abi=abi,
        )
    if mode == "landlock":
        raise LopenError(
            "sandbox.mode is landlock but Landlock is not available",
            no_landlock,
            "use a Linux kernel with Landlock (5.13+), or set sandbox.mode to auto (or bwrap)",
        )
    return Protection(
        "policy",
        "the permission policy alone",
        warning=(
            f"no kernel sandbox here ({no_bwrap}; {no_landlock}): the model's shell commands are only "
            f"checked by the permission policy, best effort; {INSTALL_BWRAP} to confine them"
        ),
    )


# -- what is confined ---------------------------------------------------------------------------


def plan(config: SandboxConfig, *, temp_dir: str, copilot_home: str, byok: bool, home: str = "") -> Plan:
    """The confinement for ``config``; ``copilot_home`` "" means the CLI's default ``~/.copilot``.

    With GitHub's routing (``byok`` false) the CLI's own credential stores (``~/.copilot``,
    ``~/.config/gh``) stay visible to it; the policy still refuses them to the model's tools.
    """
    home = home or paths.home_dir()
    worktree = paths.real(config.worktree)
    writable = [
        worktree,
        paths.real(config.lanes),
        paths.real(temp_dir),
        paths.real(copilot_home or os.path.join(home, ".copilot")),
    ]
    read_only: list[str] = []
    shown = [paths.real(config.project_root), paths.real(home)]
    if worktree:
        private, common = paths.git_dirs(worktree)
        shown.append(common)
        if private:
            objects = os.path.join(common, "objects")
            writable += [private, objects]
            read_only += [os.path.join(objects, "pack"), os.path.join(objects, "info")]
            read_only += git_files(private)
        read_only.append(os.path.join(worktree, ".git"))
    read_only += lane_pointers(paths.real(config.lanes))
    writable = [w for w in dict.fromkeys(writable) if w]
    hidden = paths.lopen_paths(config) + paths.secret_paths(home, include_cli_credentials=byok)
    hidden = tuple(h for h in dict.fromkeys(hidden) if h not in writable)
    return Plan(
        writable=tuple(writable),
        hidden=hidden,
        read_only=tuple(dict.fromkeys(read_only)),
        shown=tuple(dict.fromkeys(p for p in shown if p)),
    )


def git_files(private: str) -> list[str]:
    """The files of a worktree's private git folder that say which branch, repository and configuration
    it is — ``HEAD``, ``commondir``, ``gitdir``, ``config.worktree`` — kept as git made them (the
    folder itself is writable: ``git add`` writes the index there).

    A missing ``config.worktree`` is created empty first: bubblewrap can only keep a file that exists
    read-only, and an empty one is what git reads when there is none.
    """
    placeholder = os.path.join(private, "config.worktree")
    if not os.path.lexists(placeholder):
        with contextlib.suppress(OSError), open(placeholder, "x", encoding="utf-8"):
            pass
    names = ("HEAD", "commondir", "gitdir", "config.worktree")
    return [p for name in names if os.path.isfile(p := os.path.join(private, name))]


def lane_pointers(lanes: str) -> list[str]:
    """The ``.git`` pointers of the component worktrees already under ``lanes`` (a resumed parallel run).
    One made later, while the CLI runs, cannot be bound: Lopen checks and restores it (the Git actor)."""
    if not lanes or not os.path.isdir(lanes):
        return []
    found = (os.path.join(lanes, name, ".git") for name in sorted(os.listdir(lanes)))
    return [pointer for pointer in found if os.path.isfile(pointer) and not os.path.islink(pointer)]


def unpack_cli(cli_path: str, env: Mapping[str, str]) -> None:
    """Let the CLI unpack itself before it is confined.

    The Copilot CLI binary carries its code as a bundle it extracts on first use into
    ``$XDG_CACHE_HOME/copilot/pkg/<platform>/<version>`` (``~/.cache`` by default, about 235 MB,
    a few seconds). Inside the sandbox that cache is read-only — writable, a model could plant
    code there that the user's own, unconfined ``copilot`` would later run — so the CLI is run
    once, unconfined, with ``--version`` and the same environment: it extracts what is missing
    (and returns at once when everything is there). A failure here is left for the real start
    to report. When the cache already holds this version, extracted to the end (the CLI's own
    ``.extraction-complete`` marker), nothing is run: a start of the CLI saved on every run.
    """
    if _extracted(cli_path, env):
        return
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([cli_path, "--version"], env=dict(env), capture_output=True, timeout=300, check=False)


def _extracted(cli_path: str, env: Mapping[str, str]) -> bool:
    """The CLI's bundle for its version and platform (its ``package.json``, next to the binary) is fully
    extracted in the cache the CLI will use (``$XDG_CACHE_HOME``, else ``$HOME/.cache``)."""
    try:
        meta = msgspec.json.decode((Path(cli_path).resolve().parent / "package.json").read_bytes())
        version, platform = str(meta["version"]), str(meta["name"]).rsplit("copilot-", 1)[1]
    except (OSError, msgspec.DecodeError, KeyError, IndexError, TypeError):
        return False
    home = env.get("HOME") or str(Path.home())
    cache = Path(env.get("XDG_CACHE_HOME") or Path(home) / ".cache")
    return (cache / "copilot" / "pkg" / platform / version / ".extraction-complete").is_file()


def launch(
    protection: Protection, confinement: Plan, cli_path: str, route: Route | None = None
) -> tuple[str, list[str]]:
    """``(path, args)`` to spawn the CLI at ``cli_path`` under ``protection``. Under bubblewrap the
    CLI has no network but ``route``: the forwarder (:mod:`lopen.sandbox.forward`) starts first
    and becomes the CLI; without a route the sandbox has no network at all. Under Landlock a
    ``route`` confines TCP: connect only to its ports (Lopen's proxy, the direct loopback services),
    bind none; without one the network is left as it is."""
    if protection.kind == "bwrap":
        binary = shutil.which("bwrap") or "bwrap"
        command = [cli_path]
        read_only = confinement.read_only
        if route is not None:
            command = [sys.executable, "-I", "-S", forward.__file__, *route.forwarder_args(), "--", cli_path]
            # the proxy's socket, read-only: bound again, as the root is, after the private /dev
            # (a TMPDIR on /dev/shm) and whatever hiding covers its folder
            read_only = (*read_only, os.path.dirname(route.socket))
        return binary, [
            *bwrap.arguments(confinement.writable, confinement.hidden, read_only, confinement.shown),
            "--",
            *command,
        ]
    if protection.kind == "landlock":
        args = ["-I", landlock.__file__]
        args += [a for p in confinement.writable for a in ("--rw", p)]
        args += [a for p in confinement.hidden for a in ("--hide", p)]
        if route is not None:
            args += ["--net", *(a for port in route.ports() for a in ("--connect", str(port)))]
        return sys.executable, [*args, "--", cli_path]
    return cli_path, []
