"""Which paths are sensitive, and how a path the model names is compared with them.

A path is judged only after it is resolved: ``~`` expanded, made absolute against the
session's working directory, ``..`` collapsed and every symlink that exists followed
(:func:`resolve`). ``worktree/../../config.json`` and a symlink in the worktree pointing at
``.lopen/config.json`` both resolve to ``.lopen/config.json``.

The sensitive paths are:

- Lopen's own state: the project's ``.lopen/`` folder (store, configuration, project id, locks,
  caches, other modules' worktrees) and the user's Lopen configuration folder;
- the approved spec's source of truth: ``docs/requirements/`` of the user's checkout (the model
  reads the spec through Lopen's ``read_spec`` tool and its worktree's own copy);
- well-known secret files (:data:`SYSTEM_SECRETS`, :data:`HOME_SECRETS`), and other processes'
  environments under ``/proc``.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from lopen.sandbox.config import SandboxConfig

SYSTEM_SECRETS: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
    "/root/.ssh",
)
"""System files holding secrets (globs allowed)."""

HOME_SECRETS: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".local/share/keyrings",
    ".config/gh",
    ".config/gcloud",
    ".config/lopen",
    ".copilot",
)
"""Files and folders under the user's home holding credentials (relative to ``HOME``)."""

CLI_CREDENTIALS: tuple[str, ...] = (".config/gh", ".copilot")
"""Home folders the Copilot CLI itself reads for GitHub credentials (a stored login): the kernel
sandbox leaves them visible to the CLI when it uses GitHub's routing; the policy still refuses
them to the model's tools."""

_PROC_SECRET = re.compile(r"^/proc/[^/]+/(?:task/[^/]+/)?(?:environ|mem|auxv)$")


def home_dir(env: Mapping[str, str] | None = None) -> str:
    """The user's home folder, from ``HOME`` when set."""
    env = os.environ if env is None else env
    return env.get("HOME") or str(Path.home())


def resolve(path: str, cwd: str, home: str = "") -> str:
    """``path`` as the kernel will see it: absolute, ``~`` expanded, ``..`` and symlinks resolved.

    A missing tail (a file not yet created) is resolved as far as it exists, so a write to
    ``link/new.txt`` through a symlinked folder is judged where it would land.
    """
    if path == "~" or path.startswith("~/"):
        path = (home or home_dir()) + path[1:]
    joined = os.path.join(cwd or os.getcwd(), path)
    return os.path.realpath(joined)


def real(path: str) -> str:
    """An absolute path with symlinks resolved ("" stays "")."""
    return os.path.realpath(path) if path else ""


def inside(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (both already resolved)."""
    if not root:
        return False
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def deepest(path: str, roots: Iterable[str]) -> str:
    """The longest of ``roots`` that contains ``path``, or ""."""
    return max((r for r in roots if inside(path, r)), key=len, default="")


def is_proc_secret(path: str) -> bool:
    """True for another process's environment or memory (``/proc/<pid>/environ`` …)."""
    return bool(_PROC_SECRET.match(path))


def secret_paths(home: str, *, include_cli_credentials: bool = True) -> tuple[str, ...]:
    """Every well-known secret path that exists here, resolved."""
    found: list[str] = []
    patterns = list(SYSTEM_SECRETS)
    skipped = set() if include_cli_credentials else set(CLI_CREDENTIALS)
    # the home folder is a literal path: a `[` or `*` in it must not turn it into a pattern
    patterns += [os.path.join(glob.escape(home), rel) for rel in HOME_SECRETS if rel not in skipped]
    for pattern in patterns:
        matches = glob.glob(pattern) if glob.has_magic(pattern) else [pattern]
        found += [real(m) for m in matches if os.path.lexists(m)]
    return tuple(dict.fromkeys(found))


def user_config_dir(env: Mapping[str, str] | None = None) -> str:
    """The user's Lopen configuration folder (``$XDG_CONFIG_HOME/lopen``)."""
    from lopen.config.loader import user_config_path

    return str(user_config_path(env).parent)


def lopen_paths(config: SandboxConfig, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Lopen's own state the model may not touch: ``.lopen/``, the user's Lopen configuration,
    the approved spec's source of truth, and the config's extra ``protected`` paths."""
    paths = [config.lopen_dir, user_config_dir(env)]
    if config.project_root:
        paths.append(os.path.join(config.project_root, "docs", "requirements"))
    paths += config.protected
    return tuple(dict.fromkeys(real(p) for p in paths if p))


def git_dirs(worktree: str) -> tuple[str, str]:
    """For a linked worktree, ``(its private git dir, the repository's common git dir)``.

    ``<worktree>/.git`` is a file ``gitdir: <repo>/.git/worktrees/<name>``; that folder's
    ``commondir`` names the repository's ``.git``. Returns ``("", "")`` when ``worktree`` is not
    a linked worktree (no ``.git`` file). Nothing is run: the files are read.
    """
    pointer = Path(worktree, ".git")
    if not pointer.is_file():
        return "", ""
    text = pointer.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return "", ""
    private = Path(worktree, text.removeprefix("gitdir:").strip()).resolve()
    commondir = private / "commondir"
    common = (private / commondir.read_text().strip()).resolve() if commondir.is_file() else private.parent.parent
    return str(private), str(common)
