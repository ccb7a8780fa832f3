"""What the sandbox needs to know about one Lopen process: where the model may write, what it
must not see, and which protection to use.

The engine fills a :class:`SandboxConfig` from the settings and the module's worktree and puts
it on ``GatewayConfig.sandbox``; :func:`sandbox_config` does that from a ``Settings``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

if TYPE_CHECKING:
    from lopen.config.model import Settings

Mode = Literal["auto", "bwrap", "landlock", "policy"]
"""Which protection to use: ``auto`` (the strongest that works here), ``bwrap``, ``landlock``
(fail when unavailable), or ``policy`` (the permission policy alone, no kernel sandbox)."""


class SandboxConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The model's confinement for one gateway (one Copilot CLI process).

    Paths are absolute; "" means "not set".

    - ``project_root`` — the user's checkout. Read-only to the model; its ``.lopen/`` (Lopen's
      store, configuration, project id, locks, caches) and ``docs/requirements/`` (the approved
      spec's source of truth) are refused to the model entirely.
    - ``worktree`` — the model's git worktree (``<project>/.lopen/worktrees/<module>``): the one
      place the model may write, besides ``temp_dir``. The session's working directory should
      be this folder; when ``worktree`` is "", the session's working directory is used.
    - ``lanes`` — the folder holding the module's component worktrees when components are built in
      parallel (``<worktree>.components``): writable too, made before the CLI starts; a session
      working in one of them may write only in its own (the policy), the kernel sandbox allows them all
      (one CLI process serves every lane).
    - ``temp_dir`` — the model's private temp folder (its ``TMPDIR``); "" = the gateway makes
      one and removes it when it closes.
    - ``state_dir`` — Lopen's state folder; "" = ``<project_root>/.lopen``.
    - ``protected`` — more paths the model may neither read nor write.
    - ``allow_urls`` — host patterns (``example.com``, ``*.python.org``, ``*``) whose URLs the
      model may fetch; empty = none.
    - ``allow_network`` — host patterns (``pypi.org``, ``*.pythonhosted.org``, ``host:port``) the
      sandbox's network may reach besides the model provider (bubblewrap only; see
      :mod:`lopen.sandbox.network`).
    """

    mode: Mode = "auto"
    allow_urls: tuple[str, ...] = ()
    allow_network: tuple[str, ...] = ()
    project_root: str = ""
    worktree: str = ""
    lanes: str = ""
    temp_dir: str = ""
    state_dir: str = ""
    protected: tuple[str, ...] = ()

    @property
    def lopen_dir(self) -> str:
        """Lopen's state folder, or "" when neither it nor the project root is known."""
        if self.state_dir:
            return self.state_dir
        return str(Path(self.project_root) / ".lopen") if self.project_root else ""


def sandbox_config(
    settings: Settings, root: Path, worktree: Path, temp_dir: Path | None = None, lanes: Path | None = None
) -> SandboxConfig:
    """The sandbox for a module run in ``worktree`` of the project at ``root`` (and its component
    worktrees under ``lanes``, for parallel work)."""
    return SandboxConfig(
        mode=settings.sandbox.mode,
        allow_urls=settings.sandbox.allow_urls,
        allow_network=settings.sandbox.allow_network,
        project_root=str(root),
        worktree=str(worktree),
        lanes=str(lanes) if lanes else "",
        temp_dir=str(temp_dir) if temp_dir else "",
    )
