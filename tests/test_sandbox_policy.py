"""The permission policy: decide() on the SDK's own permission request objects, and the handler
that answers the CLI with it."""

from __future__ import annotations

import os

import pytest
from copilot.generated.rpc import PermissionDecisionApproveOnce, PermissionDecisionReject
from copilot.generated.session_events import _load_PermissionRequest
from sandbox_project import SandboxProject, make_project

from lopen.sandbox import SandboxConfig
from lopen.sandbox.policy import Decision, Policy, decide, permission_handler, policy_for, url_allowed
from lopen.sandbox.shell import inspect


def request(kind: str, **fields: object) -> object:
    """A permission request exactly as the SDK decodes it from the CLI's message."""
    return _load_PermissionRequest({"kind": kind, **fields})


def write(path: str) -> object:
    return request("write", canOfferSessionApproval=True, diff="", fileName=path, intention="Create file")


def read(path: str) -> object:
    return request("read", intention=f"Read file: {path}", path=path)


def shell(command: str, **fields: object) -> object:
    return request(
        "shell",
        canOfferSessionApproval=False,
        commands=[{"identifier": command, "readOnly": False}],
        fullCommandText=command,
        hasWriteFileRedirection=False,
        intention="Running command",
        possiblePaths=[],
        possibleUrls=[],
        **fields,
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> SandboxProject:
    """One project for the module: deciding changes nothing (tests that add a file name it uniquely)."""
    return make_project(tmp_path_factory.mktemp("policy"))


def policy(project: SandboxProject, *, confinement: str = "none", **config: object) -> Policy:
    sandbox = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree), **config)
    temp = project.root.parent / "model-tmp"
    temp.mkdir(exist_ok=True)
    return policy_for(
        sandbox,
        cwd=str(project.worktree),
        temp_dir=str(temp),
        tools=["read_spec"],
        confinement=confinement,  # type: ignore[arg-type]
        home=str(project.home),
    )


# -- writes ------------------------------------------------------------------------------------


def test_writes_inside_the_worktree_and_temp_are_allowed(project):
    p = policy(project)
    assert decide(p, write("src/new.py")).allowed
    assert decide(p, write(str(project.worktree / "deep" / "er.txt"))).allowed
    assert decide(p, write(str(project.root.parent / "model-tmp" / "scratch"))).allowed


@pytest.mark.parametrize(
    "target",
    [
        "{outside}/pwned.txt",
        "{root}/README.md",  # the user's checkout
        "{root}/.lopen/config.json",  # Lopen's configuration
        "{root}/.lopen/worktrees/other/file",  # another module's worktree
        "{root}/docs/requirements/slugify/SPECIFICATION.md",  # the approved spec
        "../../config.json",  # relative, from the worktree
        "{worktree}/../../store.sqlite",
        "{root}/.git/hooks/post-commit",
        "/etc/cron.d/evil",
        "/tmp/anything",
    ],
)
def test_writes_anywhere_else_are_refused(project, target):
    path = target.format(outside=project.outside, root=project.root, worktree=project.worktree)
    decision = decide(policy(project), write(path))
    assert not decision.allowed
    assert decision.kind == "write"
    assert decision.target == os.path.realpath(os.path.join(project.worktree, path))
    assert "outside the worktree" in decision.reason or "protected" in decision.reason


def test_a_symlink_in_the_worktree_does_not_lead_a_write_outside(project):
    (project.worktree / "escape").symlink_to(project.outside)
    decision = decide(policy(project), write("escape/pwned.txt"))
    assert not decision.allowed
    assert decision.target == str(project.outside / "pwned.txt")


def test_the_worktrees_git_pointer_is_read_only(project):
    p = policy(project)
    decision = decide(p, write(".git"))
    assert not decision.allowed and "read-only" in decision.reason
    assert decide(p, read(".git")).allowed


def test_every_file_of_an_edit_is_checked(project):
    edit = request(
        "write",
        canOfferSessionApproval=True,
        diff="",
        fileName="ok.txt",
        intention="Edit file",
        fileEdits=[{"after": {"content": "x", "path": str(project.outside / "sneaky")}}],
    )
    assert not decide(policy(project), edit).allowed


# -- reads -------------------------------------------------------------------------------------


def test_reads_of_the_worktree_and_the_users_checkout_are_allowed(project):
    p = policy(project)
    assert decide(p, read("README.md")).allowed
    assert decide(p, read(str(project.root / "README.md"))).allowed
    assert decide(p, read("/usr/lib")).allowed


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("{root}/.lopen/config.json", "Lopen's own state"),
        ("{root}/.lopen/store.sqlite", "Lopen's own state"),
        ("{root}/.lopen/project-id", "Lopen's own state"),
        ("../../config.json", "Lopen's own state"),
        ("{root}/.lopen/worktrees/other/x", "Lopen's own state"),
        ("{root}/docs/requirements/slugify/SPECIFICATION.md", "read_spec"),
        ("{home}/.ssh/id_ed25519", "credentials"),
        ("~/.ssh/id_ed25519", "credentials"),
        ("/etc/shadow", "credentials"),
        ("/proc/1/environ", "environment"),
        ("/proc/self/task/1/environ", "environment"),
    ],
)
def test_reads_of_lopens_state_the_spec_and_secrets_are_refused(project, target, why):
    path = target.format(root=project.root, home=project.home)
    decision = decide(policy(project), read(path))
    assert not decision.allowed, decision
    assert why in decision.reason


def search(path: str) -> object:
    return request("read", intention=f"Search in directory: {path}", path=path)


def test_without_a_kernel_sandbox_searching_a_folder_that_holds_protected_paths_is_refused(project):
    p = policy(project)
    for folder in ("/etc", "/", str(project.home), str(project.root)):
        decision = decide(p, search(folder))
        assert not decision.allowed and decision.reason.startswith(f"searching {folder} would read "), decision
    assert decide(p, search(str(project.worktree))).allowed  # its own worktree, inside .lopen/
    assert decide(p, search("/usr/lib")).allowed
    listing = request("read", intention="List directory: /etc", path="/etc")
    assert decide(p, listing).allowed  # names only


def test_with_a_kernel_sandbox_searches_are_left_to_it(project):
    assert decide(policy(project, confinement="landlock"), search("/etc")).allowed


def test_a_symlink_to_lopens_config_is_refused_where_it_points(project):
    (project.worktree / "link.json").symlink_to(project.lopen / "config.json")
    decision = decide(policy(project), read("link.json"))
    assert not decision.allowed
    assert decision.target == str(project.lopen / "config.json")


def test_extra_protected_paths_are_refused(project):
    (project.root / "secrets.env").write_text("x")
    p = policy(project, protected=(str(project.root / "secrets.env"),))
    assert not decide(p, read(str(project.root / "secrets.env"))).allowed


def test_the_user_config_folder_follows_xdg_config_home(project, monkeypatch):
    config_home = project.root.parent / "xdg"
    (config_home / "lopen").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    assert not decide(policy(project), read(str(config_home / "lopen" / "config.json"))).allowed


# -- shell -------------------------------------------------------------------------------------


def test_shell_is_allowed_when_a_kernel_sandbox_confines_it(project):
    decision = decide(policy(project, confinement="bwrap"), shell("cat /etc/shadow"))
    assert decision == Decision("shell", "cat /etc/shadow", True, "confined by the kernel sandbox (bwrap)")


@pytest.mark.parametrize(
    "command",
    [
        "cat /etc/shadow | head -2",
        "cat ../../config.json",
        "cd ../.. && cat config.json",
        "sqlite3 {root}/.lopen/store.sqlite 'delete from events'",
        "rm -f {root}/.lopen/store.sqlite",
        "echo pwned > {outside}/pwned.txt",
        "echo pwned >> {root}/.git/hooks/post-commit",
        "touch {outside}/x",
        "cp README.md {outside}/",
        "tee {outside}/log < README.md",
        "dd if=README.md of={outside}/copy",
        "cat ~/.ssh/id_ed25519",
        "cat $HOME/.ssh/id_ed25519",
        "cat /proc/$PPID/environ",
        "base64 < /etc/shadow",
        "cat {root}/.lopen/*.json",
    ],
)
def test_without_a_kernel_sandbox_shell_commands_naming_protected_paths_are_refused(project, command):
    text = command.format(root=project.root, outside=project.outside)
    decision = decide(policy(project), shell(text))
    assert not decision.allowed, decision
    assert decision.reason.startswith(("the command reads", "the command writes"))


@pytest.mark.parametrize(
    "command",
    [
        "echo '{{}}' > ./x/../../../config.json",
        "echo '{{}}' > $PWD/../../config.json",
        "echo '{{}}' > ${{PWD}}/../../config.json",
        "cd {root} && echo '{{}}' > .lopen/config.json",
        "echo '{{}}' > {root}/.lopen/conf*.json",
        "bash -c 'echo {{}} > ../../config.json'",
        "sh -c \"bash -c 'echo {{}} > ../../config.json'\"",
        "eval 'echo {{}} > ../../config.json'",
        "D=../..; echo '{{}}' > $D/config.json",
        "export D={root}/.lopen; cp /dev/null ${{D}}/config.json",
        "D=../.. sh -c 'echo {{}} > $D/config.json'",
        "python3 -c \"open('../../config.json', 'w').write('{{}}')\"",
        "python3 - <<'EOF'\nopen('{root}/.lopen/config.json', 'w').write('{{}}')\nEOF",
        "node -e \"require('fs').writeFileSync('../../config.json', '{{}}')\"",
        "perl -e 'open(F, \">../../config.json\")'",
    ],
)
def test_without_a_kernel_sandbox_lopens_config_is_refused_by_any_name(project, command):
    """Issue 21: in policy mode the model wrote `.lopen/config.json` by an obfuscated path. The worktree
    is `.lopen/worktrees/<module>`, so `../../config.json` is Lopen's configuration."""
    (project.worktree / "link").unlink(missing_ok=True)
    (project.worktree / "link").symlink_to(project.lopen)
    for text in (command.format(root=project.root), "echo '{}' > link/config.json"):
        decision = decide(policy(project), shell(text))
        assert not decision.allowed, (text, decision)
        assert str(project.lopen / "config.json") in decision.reason, decision


@pytest.mark.parametrize(
    "command",
    [
        "python -m pytest -q",
        "python3 -c \"import json; print(json.load(open('package.json'))['name'])\"",
        "bash -c 'echo hi > out.txt' && D=src; mkdir -p $D && echo x > $D/a.py",
        "awk -F/ '{{print $1}}' notes.txt; echo 'a/b c/d' | tr '/' '-'",
        "mkdir -p src/pkg && echo 'x = 1' > src/pkg/__init__.py",
        "git add -A && git status --short",
        "ls -la /usr/lib | head; echo done >&2; echo x > /dev/null; echo y > /dev/stderr",
        "cat README.md {root}/README.md",
        "cat <<EOF > notes.txt\nhello\nEOF",
        "FOO=1 env | sort",
    ],
)
def test_without_a_kernel_sandbox_ordinary_commands_are_allowed(project, command):
    decision = decide(policy(project), shell(command.format(root=project.root)))
    assert decision.allowed, decision


def test_shell_inspection_resolves_words_against_the_folder_the_command_runs_in(tmp_path):
    access = inspect("cd sub && cat ../a b; echo x > c", str(tmp_path), "/home/u")
    assert access.reads == (
        str(tmp_path / "sub"),
        str(tmp_path / "a"),
        str(tmp_path / "sub" / "b"),
        str(tmp_path / "sub" / "x"),
    )
    assert access.writes == (str(tmp_path / "sub" / "c"),)


# -- urls, mcp, custom tools, the rest ------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "url", "allowed"),
    [
        ((), "https://example.com/x", False),
        (("example.com",), "https://example.com/x", True),
        (("example.com",), "https://evil-example.com/x", False),
        (("example.com",), "https://sub.example.com/x", False),
        (("*.example.com",), "https://sub.example.com/x", True),
        (("*.example.com",), "https://example.com.evil.net/x", False),
        (("*",), "http://anything.net", True),
        (("example.com",), "https://EXAMPLE.com:8443/x", True),
        (("example.com",), "not a url", False),
    ],
)
def test_urls_are_allowed_only_for_the_configured_hosts(patterns, url, allowed):
    assert url_allowed(patterns, url) is allowed


def test_a_url_request_follows_allow_urls(project):
    fetch = request("url", intention="Fetch", url="https://docs.python.org/3/")
    assert not decide(policy(project), fetch).allowed
    decision = decide(policy(project, allow_urls=("docs.python.org",)), fetch)
    assert decision.allowed and decision.target == "https://docs.python.org/3/"


def test_mcp_memory_hooks_and_unknown_tools_are_refused(project):
    p = policy(project)
    mcp = request("mcp", readOnly=True, serverName="github", toolName="github-get_issue", toolTitle="Get issue")
    assert decide(p, mcp) == Decision(
        "mcp",
        "github/get_issue",
        False,
        "github is not one of this session's MCP servers (mcp.servers: task and verification sessions)",
    )
    assert not decide(p, request("memory", fact="the user likes tabs")).allowed
    assert not decide(p, request("hook", toolName="bash")).allowed
    assert not decide(p, request("custom-tool", toolDescription="", toolName="not_ours")).allowed
    assert decide(p, request("custom-tool", toolDescription="", toolName="read_spec")).allowed

    class FutureKind:
        kind = "teleport"

    assert decide(p, FutureKind()) == Decision("other", "", False, "other requests are not allowed in Lopen's sessions")


# -- the SDK handler ---------------------------------------------------------------------------


def test_the_handler_approves_once_or_rejects_with_the_reason_and_reports_each(project):
    reported: list[tuple[Decision, object]] = []
    handle = permission_handler(policy(project), lambda decision, asked: reported.append((decision, asked)))
    inside, outside = write("ok.txt"), write(str(project.outside / "x"))

    assert isinstance(handle(inside, {"session_id": "s"}), PermissionDecisionApproveOnce)
    answer = handle(outside, {"session_id": "s"})
    assert isinstance(answer, PermissionDecisionReject)
    assert answer.feedback.startswith("Refused by Lopen's sandbox: ") and "outside the worktree" in answer.feedback
    assert [(d.allowed, asked) for d, asked in reported] == [(True, inside), (False, outside)]


def test_a_policy_that_fails_refuses_and_says_so(project):
    reported: list[Decision] = []

    class Broken:
        kind = "write"

        @property
        def file_name(self) -> str:
            raise RuntimeError("boom")

    handle = permission_handler(policy(project), lambda decision, _asked: reported.append(decision))
    assert isinstance(handle(Broken(), {"session_id": "s"}), PermissionDecisionReject)
    assert not reported[0].allowed and "the policy failed: boom" in reported[0].reason


def test_the_engine_builds_the_sandbox_from_the_settings(project):
    from lopen.config import load_settings
    from lopen.sandbox.config import sandbox_config

    env = {"HOME": str(project.home), "LOPEN_SANDBOX__MODE": "landlock", "LOPEN_SANDBOX__ALLOW_URLS": "*.python.org"}
    config = sandbox_config(load_settings(project.root, None, env), project.root, project.worktree)
    assert config == SandboxConfig(
        mode="landlock",
        allow_urls=("*.python.org",),
        project_root=str(project.root),
        worktree=str(project.worktree),
    )
    assert config.lopen_dir == str(project.lopen)


def test_an_mcp_tool_is_allowed_only_when_its_server_lists_it(project):
    """The CLI names the tool <server>-<tool> in the request; mcp.servers lists it bare, or * for all."""
    sandbox = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree))
    p = policy_for(
        sandbox,
        cwd=str(project.worktree),
        temp_dir=str(project.root.parent / "model-tmp"),
        mcp={"docs": ("search",), "tracker": ("*",)},
    )

    def call(server: str, tool: str) -> Decision:
        asked = request("mcp", readOnly=False, serverName=server, toolName=f"{server}-{tool}", toolTitle=tool)
        return decide(p, asked)

    assert call("docs", "search") == Decision("mcp", "docs/search", True, "listed in mcp.servers.docs.tools")
    assert call("docs", "delete_page") == Decision(
        "mcp", "docs/delete_page", False, "delete_page is not listed in mcp.servers.docs.tools"
    )
    assert call("tracker", "close_issue").allowed
    assert not call("github", "get_issue").allowed
