"""Guards of the permission policy that a mutation study found untested: every branch of ``decide``
answers with the whole :class:`Decision` (kind, target, allowed, reason — the reason is what the model
reads), requests that name nothing or lack an attribute, searches of ``/proc``, the shell's own working
directory, both sides of an edit, ``~`` against the policy's home, how ``policy_for`` picks the session's
folders, and which guard wins when a protected path is a writable root itself.

Requests are the SDK's own objects (:func:`request`) or, for attributes the SDK always sets, bare
stand-ins that have only the attributes named."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from copilot.generated.rpc import PermissionDecisionReject
from sandbox_project import SandboxProject, make_project
from test_sandbox_policy import request, shell

from lopen.sandbox import SandboxConfig, paths
from lopen.sandbox.policy import Decision, Policy, decide, permission_handler, policy_for, url_allowed

OUTSIDE_WHY = "outside the worktree and the temp folder: write only there"
STATE_WHY = "protected: it is Lopen's own state (store, configuration, locks)"
SECRET_WHY = "protected: it holds credentials or secrets"
CONFIG_WHY = "protected: it is Lopen's configuration"
PROC_WHY = "another process's environment or memory"
NO_MEMORY = "no memory is kept between Lopen's invocations: the recorded state is the memory"
WRITE_OK = "inside the worktree or the temp folder"
SHELL_OK = "names no protected path (policy only: no kernel sandbox)"
URL_NO = "the host is not in sandbox.allow_urls; add it there to allow it"


def real(path: Path | str) -> str:
    return os.path.realpath(path)


def write(path: str, **fields: object) -> object:
    return request("write", canOfferSessionApproval=True, diff="", fileName=path, intention="Create file", **fields)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> SandboxProject:
    """One project for the module: deciding changes nothing."""
    return make_project(tmp_path_factory.mktemp("guards-policy"))


def temp_of(project: SandboxProject) -> Path:
    temp = project.root.parent / "model-tmp"
    temp.mkdir(exist_ok=True)
    return temp


def session(project: SandboxProject, *, confinement: str = "none", **config: object) -> Policy:
    """The policy of a session in the module worktree, with the project's home."""
    sandbox = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree), **config)
    return policy_for(
        sandbox,
        cwd=str(project.worktree),
        temp_dir=str(temp_of(project)),
        tools=["read_spec"],
        confinement=confinement,  # type: ignore[arg-type]
        home=str(project.home),
    )


# -- writes ------------------------------------------------------------------------------------------


def test_a_write_naming_no_file_is_refused(project):
    p = session(project)
    nothing = Decision("write", "", False, "the write names no file")
    assert decide(p, write("")) == nothing
    assert decide(p, SimpleNamespace(kind="write")) == nothing  # no file_name, no file_edits at all
    edit_without_paths = SimpleNamespace(kind="write", file_edits=[SimpleNamespace(after=SimpleNamespace(path=None))])
    assert decide(p, edit_without_paths) == nothing  # a side whose path is None names nothing
    assert decide(p, SimpleNamespace(kind="write", file_edits=[SimpleNamespace(after=SimpleNamespace())])) == nothing


def test_an_allowed_and_a_refused_write_answer_in_full(project):
    p = session(project)
    target = real(project.worktree / "src" / "new.py")
    assert decide(p, write("src/new.py")) == Decision("write", target, True, WRITE_OK)
    outside = real(project.outside / "x")
    assert decide(p, write(outside)) == Decision("write", outside, False, f"{outside} is {OUTSIDE_WHY}")


@pytest.mark.parametrize("side", ["before", "after"])
def test_an_edit_whose_before_or_after_path_is_protected_is_refused(project, side):
    ok, secret = real(project.worktree / "ok.py"), real(project.worktree / "deploy.env")
    p = session(project, protected=(secret,))
    other = "after" if side == "before" else "before"
    edits = [{side: {"content": "x", "path": secret}, other: {"content": "x", "path": ok}}]
    asked = write(ok, fileEdits=edits)
    assert decide(p, asked) == Decision("write", secret, False, f"{secret} is {SECRET_WHY}")


@pytest.mark.parametrize("side", ["before", "after"])
def test_an_edit_with_only_one_side_is_judged_by_that_side(project, side):
    """An edit object that has only one of the two attributes (a move's or a creation's stand-in)."""
    secret = real(project.worktree / "deploy.env")
    p = session(project, protected=(secret,))
    edit = SimpleNamespace(**{side: SimpleNamespace(path=secret)})
    asked = SimpleNamespace(kind="write", file_name="ok.py", file_edits=[edit])
    assert decide(p, asked) == Decision("write", secret, False, f"{secret} is {SECRET_WHY}")


def test_a_tilde_in_a_write_is_the_policys_home_not_the_processs(project, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    target = real(project.home / ".ssh" / "authorized_keys")
    assert decide(session(project), write("~/.ssh/authorized_keys")) == Decision(
        "write", target, False, f"{target} is {OUTSIDE_WHY}"
    )
    # inside a writable home, the protected folder is what refuses it
    home_session = Policy(
        cwd=real(project.home),
        writable=(real(project.home),),
        protected=(real(project.home / ".ssh"),),
        home=str(project.home),
    )
    assert decide(home_session, write("~/.ssh/authorized_keys")) == Decision(
        "write", target, False, f"{target} is {SECRET_WHY}"
    )


# -- reads and searches ------------------------------------------------------------------------------


def test_an_allowed_and_a_refused_read_answer_in_full(project):
    p = session(project)
    readme = real(project.root / "README.md")
    assert decide(p, request("read", intention="Read file", path=readme)) == Decision(
        "read", readme, True, "not protected"
    )
    config = real(project.lopen / "config.json")
    refused = decide(p, request("read", intention="Read file", path=config))
    assert refused == Decision("read", config, False, f"{config} is {STATE_WHY}")


def test_a_read_naming_no_path_is_the_working_directory(project):
    p = session(project)
    here = Decision("read", real(project.worktree), True, "not protected")
    assert decide(p, request("read", intention="Read file", path="")) == here
    assert decide(p, SimpleNamespace(kind="read")) == here  # no path, no intention


def test_another_processs_environment_is_refused_with_its_reason(project):
    refused = decide(session(project), request("read", intention="Read file", path="/proc/1/environ"))
    assert refused == Decision("read", "/proc/1/environ", False, f"/proc/1/environ is {PROC_WHY}")


def test_without_a_kernel_sandbox_a_search_of_proc_is_refused_and_names_an_environment(project):
    p = session(project)
    searched = decide(p, request("read", intention="Search in directory: /proc", path="/proc"))
    why = f"searching /proc would read /proc/1/environ, which is {PROC_WHY}"
    assert searched == Decision("read", "/proc", False, why)
    listed = decide(p, request("read", intention="List directory: /proc", path="/proc"))
    assert listed == Decision("read", "/proc", True, "not protected")


def test_a_refused_search_answers_in_full(project):
    root = real(project.root)
    searched = decide(session(project), request("read", intention=f"Search in directory: {root}", path=root))
    why = f"searching {root} would read {root}/.lopen, which is {STATE_WHY}"
    assert searched == Decision("read", root, False, why)


def test_the_user_config_folder_is_refused_as_lopens_configuration(project, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".config" / "lopen").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    sandbox = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree))
    p = policy_for(sandbox, cwd=str(project.worktree), temp_dir=str(temp_of(project)), home=str(home))
    target = real(home / ".config" / "lopen" / "config.json")
    asked = request("read", intention="Read file", path="~/.config/lopen/config.json")
    assert decide(p, asked) == Decision("read", target, False, f"{target} is {CONFIG_WHY}")


def test_a_protected_file_inside_lopens_state_is_called_lopens_state(project):
    store = real(project.lopen / "store.sqlite")
    p = session(project, protected=(store,))
    assert decide(p, request("read", intention="Read file", path=store)) == Decision(
        "read", store, False, f"{store} is {STATE_WHY}"
    )


def test_a_lopen_folder_inside_the_worktree_is_lopens_state_not_a_secret(project):
    """``sandbox.protected`` naming a ``.lopen`` folder below the model's worktree: its name says what it is."""
    nested = real(project.worktree) + "/.lopen"
    target = nested + "/store.sqlite"
    p = session(project, protected=(nested,))
    assert decide(p, request("read", intention="Read file", path=target)) == Decision(
        "read", target, False, f"{target} is {STATE_WHY}"
    )


def test_the_worktrees_folder_listed_as_protected_is_worded_as_a_users_secret(project):
    """Guards at or below ``.lopen/worktrees/`` are the model's own worktrees' business, not Lopen's state:
    a user listing the folder itself in ``sandbox.protected`` gets the generic wording."""
    worktrees = real(project.lopen / "worktrees")
    target = worktrees + "/other/x"
    p = session(project, protected=(worktrees,))
    assert decide(p, request("read", intention="Read file", path=target)) == Decision(
        "read", target, False, f"{target} is {SECRET_WHY}"
    )


# -- a protected path that is a writable root itself ----------------------------------------------------

EQUAL_ROOT = (
    "write_problem/read_problem compare len(guard) > len(root): a protected path EQUAL to a writable root "
    "loses to it (docs: refused inside a protected path unless a writable root is DEEPER); fix: >="
)


def test_a_write_into_a_protected_path_that_is_the_worktree_itself_is_refused(project):
    worktree = real(project.worktree)
    target = worktree + "/x.py"
    p = session(project, protected=(worktree,))
    assert decide(p, write(target)) == Decision("write", target, False, f"{target} is {SECRET_WHY}")


def test_a_read_of_a_protected_path_that_is_the_worktree_itself_is_refused(project):
    worktree = real(project.worktree)
    target = worktree + "/README.md"
    p = session(project, protected=(worktree,))
    asked = request("read", intention="Read file", path=target)
    assert decide(p, asked) == Decision("read", target, False, f"{target} is {SECRET_WHY}")


# -- shell -------------------------------------------------------------------------------------------


def test_shell_decisions_answer_in_full(project):
    p = session(project)
    assert decide(p, shell("ls")) == Decision("shell", "ls", True, SHELL_OK)
    assert decide(p, shell("")) == Decision("shell", "", True, SHELL_OK)
    assert decide(p, SimpleNamespace(kind="shell")) == Decision("shell", "", True, SHELL_OK)
    pwned = real(project.outside / "p")
    command = f"echo x > {pwned}"
    assert decide(p, shell(command)) == Decision(
        "shell", command, False, f"the command writes {pwned}, which is {OUTSIDE_WHY}"
    )
    key = real(project.home / ".ssh" / "id_ed25519")
    assert decide(p, shell("cat ~/.ssh/id_ed25519")) == Decision(
        "shell", "cat ~/.ssh/id_ed25519", False, f"the command reads {key}, which is {SECRET_WHY}"
    )


def test_a_shell_command_is_read_in_the_folder_it_runs_in(project):
    p = session(project)
    ssh = real(project.home / ".ssh")
    key = ssh + "/id_ed25519"
    refused = Decision("shell", "cat id_ed25519", False, f"the command reads {key}, which is {SECRET_WHY}")
    assert decide(p, shell("cat id_ed25519", resolvedWorkingDirectory=ssh)) == refused


def test_without_its_own_folder_a_shell_command_is_read_in_the_sessions(project):
    ssh = real(project.home / ".ssh")
    key = ssh + "/id_ed25519"
    p = Policy(cwd=ssh, writable=(real(project.worktree),), protected=(ssh,), home=str(project.home))
    refused = Decision("shell", "cat id_ed25519", False, f"the command reads {key}, which is {SECRET_WHY}")
    assert decide(p, SimpleNamespace(kind="shell", full_command_text="cat id_ed25519")) == refused


# -- urls --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://[::1", "file:///etc/passwd", ""])
def test_a_url_without_a_parsable_host_is_refused_even_for_any_host(url):
    assert url_allowed(["*"], url) is False


def test_url_decisions_answer_in_full(project):
    p = session(project, allow_urls=("docs.python.org",))
    good, bad = "https://docs.python.org/3/", "https://evil.example/"
    assert decide(p, request("url", intention="Fetch", url=good)) == Decision(
        "url", good, True, "the host is in sandbox.allow_urls"
    )
    assert decide(p, request("url", intention="Fetch", url=bad)) == Decision("url", bad, False, URL_NO)
    assert decide(session(project, allow_urls=("*",)), SimpleNamespace(kind="url")) == Decision(
        "url", "", False, URL_NO
    )


# -- custom tools, mcp, memory, the rest -----------------------------------------------------------------


def test_custom_tool_decisions_answer_in_full(project):
    p = session(project)
    ours = request("custom-tool", toolDescription="", toolName="read_spec")
    assert decide(p, ours) == Decision("custom-tool", "read_spec", True, "one of this session's Lopen tools")
    theirs = request("custom-tool", toolDescription="", toolName="not_ours")
    assert decide(p, theirs) == Decision(
        "custom-tool", "not_ours", False, "not_ours is not one of this session's tools"
    )
    nameless = SimpleNamespace(kind="custom-tool")
    assert decide(p, nameless) == Decision("custom-tool", "", False, " is not one of this session's tools")


def test_an_mcp_request_without_names_is_refused_as_unknown(project):
    refused = decide(session(project), SimpleNamespace(kind="mcp"))
    assert refused == Decision(
        "mcp", "?/?", False, "? is not one of this session's MCP servers (mcp.servers: task and verification sessions)"
    )


def test_memory_requests_are_refused_and_name_their_subject(project):
    p = session(project)
    assert decide(p, request("memory", fact="f", subject="tabs")) == Decision("memory", "tabs", False, NO_MEMORY)
    assert decide(p, request("memory", fact="f")) == Decision("memory", "", False, NO_MEMORY)
    assert decide(p, SimpleNamespace(kind="memory")) == Decision("memory", "", False, NO_MEMORY)


@pytest.mark.parametrize(
    ("asked", "kind", "target"),
    [
        (request("hook", toolName="bash"), "hook", "bash"),
        (request("extension-management", operation="install", extensionName="evil"), "extension-management", "evil"),
        (
            request("extension-env-access", environmentVariables=["X"], extensionName="env"),
            "extension-env-access",
            "env",
        ),
        (SimpleNamespace(kind="workflow"), "workflow", ""),
        (SimpleNamespace(kind="teleport", tool_name="t"), "other", "t"),
        (object(), "other", ""),
    ],
)
def test_every_other_kind_is_refused_and_names_its_tool_or_extension(project, asked, kind, target):
    assert decide(session(project), asked) == Decision(
        kind, target, False, f"{kind} requests are not allowed in Lopen's sessions"
    )


# -- the handler fails closed ----------------------------------------------------------------------------


class _BrokenWrite:
    kind = "write"

    @property
    def file_name(self) -> str:
        raise RuntimeError("boom")


class _BrokenKindless:
    @property
    def tool_name(self) -> str:
        raise RuntimeError("boom")


@pytest.mark.parametrize(("asked", "target"), [(_BrokenWrite(), "write"), (_BrokenKindless(), "?")])
def test_a_policy_that_fails_refuses_with_the_whole_decision(project, asked, target):
    reported: list[Decision] = []
    handle = permission_handler(session(project), lambda decision, _asked: reported.append(decision))
    answer = handle(asked, {"session_id": "s"})
    assert isinstance(answer, PermissionDecisionReject)
    assert answer.feedback == "Refused by Lopen's sandbox: the policy failed: boom"
    assert reported == [Decision("other", target, False, "the policy failed: boom")]


# -- policy_for ----------------------------------------------------------------------------------------


def folders(p: Policy) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    return p.cwd, p.writable, p.read_only


def test_the_default_home_is_the_users(project, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    p = policy_for(SandboxConfig(worktree=str(project.worktree)), cwd=str(project.worktree), temp_dir="")
    assert p.home == paths.home_dir() == str(tmp_path)


def test_without_a_cwd_the_session_works_in_the_worktree_or_the_process_folder(project, tmp_path, monkeypatch):
    worktree, temp = real(project.worktree), real(temp_of(project))
    git = worktree + "/.git"
    config = SandboxConfig(worktree=str(project.worktree))
    assert folders(policy_for(config, cwd="", temp_dir=str(temp), home="/h")) == (worktree, (worktree, temp), (git,))
    here = real(tmp_path)
    monkeypatch.chdir(tmp_path)
    p = policy_for(SandboxConfig(), cwd="", temp_dir=str(temp), home="/h")
    assert folders(p) == (here, (here, temp), (here + "/.git",))
    p = policy_for(SandboxConfig(), cwd=str(project.outside), temp_dir="", home="/h")
    outside = real(project.outside)
    assert folders(p) == (outside, (outside,), (outside + "/.git",))


def test_a_subfolder_as_cwd_keeps_the_whole_worktree_writable(project):
    worktree, sub = real(project.worktree), real(project.worktree / "src")
    p = policy_for(SandboxConfig(worktree=worktree), cwd=sub, temp_dir="", home="/h")
    assert folders(p) == (sub, (worktree,), (worktree + "/.git",))


def test_a_component_lane_writes_only_its_own_worktree_and_the_lanes_folder_is_not_a_lane(project):
    worktree = real(project.worktree)
    lanes = worktree + ".components"
    os.makedirs(lanes + "/c1/src", exist_ok=True)
    config = SandboxConfig(worktree=worktree, lanes=lanes)

    lane = policy_for(config, cwd=lanes + "/c1/src", temp_dir="", home="/h")
    assert folders(lane) == (lanes + "/c1/src", (lanes + "/c1",), (lanes + "/c1/.git",))

    above = policy_for(config, cwd=lanes, temp_dir="", home="/h")  # the lanes folder itself: the module's
    assert folders(above) == (lanes, (worktree,), (worktree + "/.git",))
    assert not decide(above, write(lanes + "/c2/x.py")).allowed

    module = policy_for(config, cwd=worktree, temp_dir="", home="/h")  # not below the lanes
    assert folders(module) == (worktree, (worktree,), (worktree + "/.git",))
