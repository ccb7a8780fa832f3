"""Guards of the permission policy that a mutation study found untested: a protected path that lies
INSIDE a writable root stays unwritable (and the refusal says which guard refused it), and a sibling
folder whose name merely starts with a writable root's name is not inside it.

The CLI asks ``write`` before its ``create``/``edit`` tools act; ``decide`` answers with
``<path> is <why>``, which the model reads as its feedback: the reason is asserted word for word."""

from __future__ import annotations

from pathlib import Path

import pytest
from copilot.generated.session_events import _load_PermissionRequest
from sandbox_project import SandboxProject, make_project

from lopen.sandbox import SandboxConfig, paths
from lopen.sandbox.policy import Policy, decide, policy_for

SPEC_WHY = "protected: it is the approved specification; read it with the read_spec tool"
STATE_WHY = "protected: it is Lopen's own state (store, configuration, locks)"
SECRET_WHY = "protected: it holds credentials or secrets"
GIT_WHY = "read-only: it is git's pointer from the worktree to the repository"
OUTSIDE_WHY = "outside the worktree and the temp folder: write only there"


def write(path: str) -> object:
    """A write permission request exactly as the SDK decodes it from the CLI's message."""
    fields = {"canOfferSessionApproval": True, "diff": "", "fileName": path, "intention": "Create file"}
    return _load_PermissionRequest({"kind": "write", **fields})


def shell(command: str) -> object:
    return _load_PermissionRequest(
        {
            "kind": "shell",
            "canOfferSessionApproval": False,
            "commands": [{"identifier": command, "readOnly": False}],
            "fullCommandText": command,
            "hasWriteFileRedirection": True,
            "intention": "Running command",
            "possiblePaths": [],
            "possibleUrls": [],
        }
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> SandboxProject:
    """One project for the module: deciding writes nothing."""
    return make_project(tmp_path_factory.mktemp("guards"))


def session(project: SandboxProject, worktree: Path, cwd: Path | None = None, **config: object) -> Policy:
    """The policy of a session whose writable worktree is ``worktree`` (working in ``cwd``)."""
    sandbox = SandboxConfig(project_root=str(project.root), worktree=str(worktree), **config)
    temp = project.root.parent / "model-tmp"
    temp.mkdir(exist_ok=True)
    return policy_for(sandbox, cwd=str(cwd or worktree), temp_dir=str(temp), home=str(project.home))


# -- a protected path inside the writable worktree ---------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("docs/requirements/slugify/SPECIFICATION.md", SPEC_WHY),
        ("docs/requirements/slugify/new-notes.md", SPEC_WHY),
        (".lopen/config.json", STATE_WHY),
        (".lopen/store.sqlite", STATE_WHY),
        (".lopen/worktrees/slugify/src/x.py", STATE_WHY),  # the module's worktree, seen from above it
        (".git/hooks/post-commit", GIT_WHY),
        (".git/config", GIT_WHY),
    ],
)
def test_a_protected_path_inside_the_writable_worktree_stays_unwritable_and_says_why(project, relative, why):
    """A session whose writable worktree holds the approved spec, Lopen's state and git's folder (the
    checkout itself): a write there is refused by the protected-path guard, not allowed as "inside"."""
    policy = session(project, project.root)
    target = str(project.root / relative)
    assert decide(policy, write("README.md")).allowed  # the root is writable…

    decision = decide(policy, write(relative))

    assert not decision.allowed  # …but not what is protected inside it
    assert (decision.target, decision.reason) == (target, f"{target} is {why}")


def configured_secret(project: SandboxProject) -> tuple[Path, Policy, object]:
    """``sandbox.protected`` naming a file in the (ordinary) module worktree, its policy, and an edit
    request whose second file is that one."""
    secret = project.worktree / "deploy.env"
    policy = session(project, project.worktree, protected=(str(secret),))
    edit = _load_PermissionRequest(
        {
            "kind": "write",
            "canOfferSessionApproval": True,
            "diff": "",
            "fileName": "README.md",
            "intention": "Edit file",
            "fileEdits": [{"after": {"content": "TOKEN=x", "path": str(secret)}}],
        }
    )
    return secret, policy, edit


def test_a_configured_protected_file_inside_the_module_worktree_is_refused_to_create_edit_and_shell(project):
    """Create, edit and a shell redirect into it are refused by the protected-path guard; its neighbour
    stays writable."""
    secret, policy, edit = configured_secret(project)

    assert decide(policy, write("deploy.env.example")).allowed
    for asked in (write("deploy.env"), write(str(secret)), edit):
        decision = decide(policy, asked)
        assert not decision.allowed and decision.target == str(secret)
        assert decision.reason.startswith(f"{secret} is protected: "), decision.reason
    refused = decide(policy, shell("echo TOKEN=x > deploy.env"))
    assert not refused.allowed
    assert refused.reason.startswith(f"the command writes {secret}, which is protected: "), refused.reason


def test_a_configured_protected_file_inside_the_module_worktree_is_not_called_lopens_state(project):
    secret, policy, _edit = configured_secret(project)
    assert decide(policy, write("deploy.env")).reason == f"{secret} is {SECRET_WHY}"


def test_the_worktrees_git_pointer_refusal_names_the_pointer(project):
    policy = session(project, project.worktree)
    target = str(project.worktree / ".git")
    assert decide(policy, write(".git")).reason == f"{target} is {GIT_WHY}"


# -- a sibling with the same prefix is not inside ----------------------------------------------------


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("/x/slugify", "/x/slugify", True),
        ("/x/slugify/a/b.py", "/x/slugify", True),
        ("/x/slugify/a", "/x/slugify/", True),
        ("/anything", "/", True),
        ("/x/slugify2", "/x/slugify", False),
        ("/x/slugify2/a.py", "/x/slugify", False),
        ("/x/slugify.components", "/x/slugify", False),
        ("/x/slugify.components/core/a.py", "/x/slugify", False),
        ("/x/slugify-old/.git", "/x/slugify", False),
        ("/x/slug", "/x/slugify", False),
        ("/x/slugify", "", False),
    ],
)
def test_inside_compares_whole_path_components_not_string_prefixes(path, root, expected):
    assert paths.inside(path, root) is expected


@pytest.mark.parametrize("sibling", ["slugify2", "slugify.components", "slugify-old"])
def test_a_write_into_a_sibling_folder_that_shares_the_worktrees_name_prefix_is_refused(project, sibling):
    """The module worktree is ``.lopen/worktrees/slugify``: ``slugify2`` (another module's worktree) and
    ``slugify.components`` (the lanes' folder, not writable without parallel work) are outside it."""
    policy = session(project, project.worktree)
    target = str(project.worktree.parent / sibling / "src" / "pwned.py")
    assert decide(policy, write(str(project.worktree / "src" / "ok.py"))).allowed

    decision = decide(policy, write(target))

    assert not decision.allowed
    assert decision.reason == f"{target} is {OUTSIDE_WHY}"


def test_a_component_session_cannot_write_into_a_sibling_component_sharing_its_prefix(project):
    """Parallel work: a session in lane ``core`` may write only its own worktree, not lane ``core2``."""
    lanes = project.worktree.parent / f"{project.worktree.name}.components"
    (lanes / "core").mkdir(parents=True, exist_ok=True)
    (lanes / "core2").mkdir(exist_ok=True)
    policy = session(project, project.worktree, cwd=lanes / "core", lanes=str(lanes))
    target = str(lanes / "core2" / "pwned.py")
    assert decide(policy, write("mine.py")).allowed

    decision = decide(policy, write(target))

    assert not decision.allowed and decision.reason == f"{target} is {OUTSIDE_WHY}"
