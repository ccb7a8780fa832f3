"""The permission policy: Lopen's answer to every permission request of the Copilot CLI.

The CLI asks before its tools act — ``write`` (``create``, ``edit``), ``read`` (``view``, a
folder listing), ``shell`` (``bash``), ``url``, ``mcp``, ``custom-tool``, ``memory``, ``hook``,
``workflow``, ``extension-*`` — and Lopen answers each with :func:`decide`, a pure function of
a :class:`Policy` and the request (it reads the file system only to resolve paths):

=============== ==========================================================================
request         answer
=============== ==========================================================================
write           allowed only inside a writable root (the worktree, the temp folder), and
                not inside a protected path below it (the worktree's ``.git`` pointer)
read            refused inside a protected path (Lopen's state, the approved spec, secret
                files, other processes' environments) unless a writable root is deeper;
                without a kernel sandbox, a search (grep, glob) of a folder holding a
                protected path is refused too
shell           allowed when a kernel sandbox confines the CLI; otherwise (policy only)
                the command text is read for paths (:mod:`lopen.sandbox.shell`) and judged
                like reads and writes
url             allowed when the host matches one of ``allow_urls`` (``fnmatch`` patterns)
custom-tool     allowed for the session's own Lopen tools
mcp             allowed for a tool the user listed in ``mcp.servers.<server>.tools`` (``*`` =
                all of the server's) when the session was given that server (task and
                verification sessions); refused otherwise
memory, hook,   refused: Lopen's sessions keep no memory between invocations (fresh
workflow,       context, W6), and install nothing
extension-…
=============== ==========================================================================

:func:`permission_handler` adapts a policy to the SDK's handler signature and reports every
:class:`Decision` through a callback, so each one is recorded as an event.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec

from lopen.sandbox import paths, shell
from lopen.sandbox.config import SandboxConfig

Kind = Literal[
    "shell",
    "write",
    "read",
    "url",
    "mcp",
    "custom-tool",
    "memory",
    "hook",
    "workflow",
    "extension-management",
    "extension-permission-access",
    "extension-env-access",
    "other",
]
_KINDS: frozenset[str] = frozenset(Kind.__args__)  # type: ignore[attr-defined]

Confinement = Literal["bwrap", "landlock", "none"]
"""Which kernel sandbox confines the CLI's processes; ``none`` = the policy alone."""


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """Everything :func:`decide` needs, for one session. Paths are resolved and absolute.

    - ``cwd`` — the session's working directory (relative paths are resolved against it);
    - ``writable`` — the roots the model may write in (worktree, temp folder);
    - ``read_only`` — paths inside a writable root the model may read but not write;
    - ``protected`` — paths the model may neither read nor write;
    - ``allow_urls`` — host patterns the model may fetch;
    - ``tools`` — the session's own custom (Lopen) tools;
    - ``confinement`` — the kernel sandbox around the CLI, if any;
    - ``home`` — the user's home, for ``~``;
    - ``mcp`` — the user's MCP servers this session was given, each with the tools the model may call
      (``*`` = all of them).
    """

    cwd: str
    writable: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    allow_urls: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    confinement: Confinement = "none"
    home: str = ""
    mcp: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


class Decision(msgspec.Struct, frozen=True):
    """The answer to one request: what was asked (``kind``, ``target``), and whether and why."""

    kind: Kind
    target: str
    allowed: bool
    reason: str


def policy_for(
    config: SandboxConfig,
    *,
    cwd: str,
    temp_dir: str,
    tools: Iterable[str] = (),
    confinement: Confinement = "none",
    home: str = "",
    mcp: dict[str, tuple[str, ...]] | None = None,
) -> Policy:
    """The policy of one session working in ``cwd``, under ``config``."""
    home = home or paths.home_dir()
    cwd = paths.real(cwd or config.worktree or os.getcwd())
    worktree = paths.real(config.worktree) or cwd
    lanes = paths.real(config.lanes)
    if lanes and cwd != lanes and paths.inside(cwd, lanes):  # a component's worktree: only its own
        worktree = os.path.join(lanes, os.path.relpath(cwd, lanes).split(os.sep)[0])
    writable = tuple(dict.fromkeys(p for p in (worktree, paths.real(temp_dir)) if p))
    return Policy(
        cwd=cwd,
        writable=writable,
        read_only=(os.path.join(worktree, ".git"),),
        protected=paths.lopen_paths(config) + paths.secret_paths(home),
        allow_urls=tuple(p.lower() for p in config.allow_urls),
        tools=tuple(tools),
        confinement=confinement,
        home=home,
        mcp=dict(mcp or {}),
    )


# -- deciding ---------------------------------------------------------------------------------


def decide(policy: Policy, request: Any) -> Decision:
    """Answer one permission request (an SDK ``PermissionRequest*`` object, or anything with
    the same attributes). Unknown kinds are refused."""
    kind = getattr(request, "kind", "other")
    kind = kind if kind in _KINDS else "other"
    match kind:
        case "write":
            return _write(policy, request)
        case "read":
            return _read(policy, request)
        case "shell":
            return _shell(policy, request)
        case "url":
            return _url(policy, str(getattr(request, "url", "")))
        case "custom-tool":
            name = str(getattr(request, "tool_name", ""))
            if name in policy.tools:
                return Decision("custom-tool", name, True, "one of this session's Lopen tools")
            return Decision("custom-tool", name, False, f"{name} is not one of this session's tools")
        case "mcp":
            return _mcp(policy, str(getattr(request, "server_name", "") or "?"), str(getattr(request, "tool_name", "")))
        case "memory":
            return Decision("memory", str(getattr(request, "subject", "") or ""), False, _NO_MEMORY)
        case _:
            target = str(getattr(request, "tool_name", "") or getattr(request, "extension_name", "") or "")
            return Decision(kind, target, False, f"{kind} requests are not allowed in Lopen's sessions")


def _mcp(policy: Policy, server: str, tool: str) -> Decision:
    """A call of an MCP server's tool. The CLI names it ``<server>-<tool>`` in the request."""
    tool = tool.removeprefix(f"{server}-") or "?"
    target = f"{server}/{tool}"
    allowed = policy.mcp.get(server)
    if allowed is None:
        why = f"{server} is not one of this session's MCP servers (mcp.servers: task and verification sessions)"
        return Decision("mcp", target, False, why)
    if "*" in allowed or tool in allowed:
        return Decision("mcp", target, True, f"listed in mcp.servers.{server}.tools")
    return Decision("mcp", target, False, f"{tool} is not listed in mcp.servers.{server}.tools")


_NO_MEMORY = "no memory is kept between Lopen's invocations: the recorded state is the memory"


def write_problem(policy: Policy, path: str) -> str:
    """Why the model may not write ``path`` (resolved), worded to follow "<path> is", or ""."""
    root = paths.deepest(path, policy.writable)
    if not root:
        return "outside the worktree and the temp folder: write only there"
    if paths.deepest(path, policy.read_only):
        return "read-only: it is git's pointer from the worktree to the repository"
    guard = paths.deepest(path, policy.protected)
    if guard and len(guard) >= len(root):  # a protected path wins over a writable root it equals
        return f"protected: {_why(guard)}"
    return ""


def read_problem(policy: Policy, path: str) -> str:
    """Why the model may not read ``path`` (resolved), worded to follow "<path> is", or ""."""
    if paths.is_proc_secret(path):
        return "another process's environment or memory"
    guard = paths.deepest(path, policy.protected)
    if guard and len(guard) >= len(paths.deepest(path, policy.writable)):
        return f"protected: {_why(guard)}"
    return ""


def _why(guard: str) -> str:
    name = os.path.basename(guard)
    inside_lopen = "/.lopen/" in guard + "/" and "/.lopen/worktrees/" not in guard + "/"  # not the model's own
    if name == ".lopen" or inside_lopen:
        return "it is Lopen's own state (store, configuration, locks)"
    if guard.endswith("/docs/requirements"):
        return "it is the approved specification; read it with the read_spec tool"
    if name == "lopen":
        return "it is Lopen's configuration"
    return "it holds credentials or secrets"


def _write(policy: Policy, request: Any) -> Decision:
    names = [str(getattr(request, "file_name", "") or "")]
    for edit in getattr(request, "file_edits", None) or ():
        for side in (getattr(edit, "before", None), getattr(edit, "after", None)):
            if side is not None and getattr(side, "path", None):
                names.append(str(side.path))
    targets = [paths.resolve(n, policy.cwd, policy.home) for n in dict.fromkeys(n for n in names if n)]
    if not targets:
        return Decision("write", "", False, "the write names no file")
    for target in targets:
        problem = write_problem(policy, target)
        if problem:
            return Decision("write", target, False, f"{target} is {problem}")
    return Decision("write", targets[0], True, "inside the worktree or the temp folder")


def _read(policy: Policy, request: Any) -> Decision:
    target = paths.resolve(str(getattr(request, "path", "") or ""), policy.cwd, policy.home)
    problem = read_problem(policy, target)
    if problem:
        return Decision("read", target, False, f"{target} is {problem}")
    intention = str(getattr(request, "intention", "") or "")
    if policy.confinement == "none" and not intention.startswith("List directory") and os.path.isdir(target):
        # grep and glob search a whole tree in the CLI's own process: without a kernel sandbox
        # to hide what is protected inside it, the search itself must be refused.
        inner = _protected_inside(policy, target)
        if inner:
            reason = f"searching {target} would read {inner}, which is {read_problem(policy, inner)}"
            return Decision("read", target, False, reason)
    return Decision("read", target, True, "not protected")


def _protected_inside(policy: Policy, folder: str) -> str:
    """A protected path below ``folder`` (not inside a writable root below it), or ""."""
    for guard in (*policy.protected, "/proc/1/environ"):
        if guard != folder and paths.inside(guard, folder) and read_problem(policy, guard):
            return guard
    return ""


def _shell(policy: Policy, request: Any) -> Decision:
    command = str(getattr(request, "full_command_text", "") or "")
    if policy.confinement != "none":
        return Decision("shell", command, True, f"confined by the kernel sandbox ({policy.confinement})")
    cwd = paths.real(str(getattr(request, "resolved_working_directory", "") or "")) or policy.cwd
    access = shell.inspect(command, cwd, policy.home)
    for path in access.writes:
        problem = write_problem(policy, path)
        if problem:
            return Decision("shell", command, False, f"the command writes {path}, which is {problem}")
    for path in access.reads:
        problem = read_problem(policy, path)
        if problem:
            return Decision("shell", command, False, f"the command reads {path}, which is {problem}")
    return Decision("shell", command, True, "names no protected path (policy only: no kernel sandbox)")


def url_allowed(patterns: Iterable[str], url: str) -> bool:
    """True when the URL's host matches one of the host patterns (case-insensitive)."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    return bool(host) and any(fnmatch.fnmatchcase(host, p) for p in patterns)


def _url(policy: Policy, url: str) -> Decision:
    if url_allowed(policy.allow_urls, url):
        return Decision("url", url, True, "the host is in sandbox.allow_urls")
    return Decision("url", url, False, "the host is not in sandbox.allow_urls; add it there to allow it")


# -- the SDK adapter --------------------------------------------------------------------------

Report = Callable[[Decision, Any], None]
"""Called with every decision and the request it answers."""


def permission_handler(policy: Policy, report: Report) -> Callable[[Any, Any], Any]:
    """An ``on_permission_request`` handler for an SDK session that answers with :func:`decide`.

    An allowed request is approved once; a refused one is rejected with the reason as feedback,
    which the CLI passes to the model. A policy that fails refuses (and says why).
    """
    from copilot.generated.rpc import PermissionDecisionApproveOnce, PermissionDecisionReject

    def handle(request: Any, invocation: Any) -> Any:
        try:
            decision = decide(policy, request)
        except Exception as exc:  # fail closed, visibly
            decision = Decision("other", str(getattr(request, "kind", "?")), False, f"the policy failed: {exc}")
        report(decision, request)
        if decision.allowed:
            return PermissionDecisionApproveOnce()
        return PermissionDecisionReject(feedback=f"Refused by Lopen's sandbox: {decision.reason}")

    return handle
