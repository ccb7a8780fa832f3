"""The kernel sandboxes, for real: processes started under bubblewrap and under Landlock try to
write outside their worktree, read Lopen's state and secrets, and plant git hooks."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sandbox_project import SENTINEL, SandboxProject, make_project

from lopen.errors import LopenError
from lopen.sandbox import SandboxConfig, bwrap, kernel, landlock, network
from lopen.sandbox.kernel import Protection, choose


def available(kind: str) -> str:
    """Why ``kind`` cannot run here, or ""."""
    if kind == "bwrap":
        return kernel.bwrap_status()[1]
    return kernel.landlock_status()[1]


KINDS = [
    pytest.param(kind, marks=pytest.mark.skipif(bool(available(kind)), reason=available(kind)))
    for kind in ("bwrap", "landlock")
]


@pytest.fixture
def project(tmp_path: Path) -> SandboxProject:
    return make_project(tmp_path)


class Confined:
    """Runs shell commands the way the Copilot CLI would run them: inside the sandbox."""

    def __init__(self, kind: str, project: SandboxProject, temp: Path) -> None:
        config = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree))
        self.plan = kernel.plan(
            config, temp_dir=str(temp), copilot_home=str(project.lopen / "copilot"), byok=True, home=str(project.home)
        )
        self.path, self.args = kernel.launch(Protection(kind, ""), self.plan, "/bin/sh")  # type: ignore[arg-type]
        self.project = project
        self.env = {"PATH": os.environ["PATH"], "HOME": str(project.home), "TMPDIR": str(temp), "LANG": "C.UTF-8"}

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.path, *self.args, "-c", command],
            cwd=self.project.worktree,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )


@pytest.fixture(params=KINDS)
def confined(request: pytest.FixtureRequest, project: SandboxProject, tmp_path: Path) -> Confined:
    temp = tmp_path / "model-tmp"
    temp.mkdir()
    return Confined(request.param, project, temp)


def test_the_worktree_and_temp_are_writable(confined):
    done = confined.run('echo inside > made.txt && mkdir -p src/pkg && echo t > "$TMPDIR/t" && cat made.txt')
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "inside"
    assert (confined.project.worktree / "src" / "pkg").is_dir()


@pytest.mark.parametrize(
    "target",
    [
        "{outside}/pwned.txt",
        "{root}/README.md",
        "{root}/new-file",
        "{root}/.lopen/config.json",
        "{root}/.lopen/store.sqlite",
        "{root}/docs/requirements/slugify/SPECIFICATION.md",
        "{root}/.git/hooks/post-commit",
        "{root}/.git/config",
        "{root}/.git/refs/heads/main",
        "{home}/.bashrc",
        "/etc/lopen-sandbox-escape",
    ],
)
def test_writes_anywhere_else_fail(confined, target):
    project = confined.project
    path = Path(target.format(outside=project.outside, root=project.root, home=project.home))
    before = path.read_text() if path.is_file() else None
    done = confined.run(f"echo pwned >> '{path}'")
    assert done.returncode != 0
    assert (path.read_text() if path.is_file() else None) == before


@pytest.mark.parametrize(
    "target",
    [
        "{root}/.lopen/config.json",
        "{root}/.lopen/store.sqlite",
        "{root}/.lopen/project-id",
        "{root}/docs/requirements/slugify/SPECIFICATION.md",
        "{home}/.ssh/id_ed25519",
        "../../config.json",
    ],
)
def test_lopens_state_the_spec_and_secrets_cannot_be_read(confined, target):
    project = confined.project
    done = confined.run(f"cat '{target.format(root=project.root, home=project.home)}'")
    assert done.returncode != 0
    assert SENTINEL not in done.stdout


def test_the_shadow_file_cannot_be_read(confined):
    done = confined.run("cat /etc/shadow")
    assert "root:" not in done.stdout


def test_the_users_checkout_stays_readable(confined):
    done = confined.run(f"cat '{confined.project.root}/README.md' && ls '{confined.project.root}'")
    assert done.returncode == 0, done.stderr
    assert "a project" in done.stdout


def test_git_works_in_the_worktree_but_cannot_move_a_branch_or_plant_a_hook(confined):
    project = confined.project
    branch = f"lopen/{project.module}"
    before = {b: project.branch_sha(b) for b in ("main", branch)}
    done = confined.run("echo x > feature.py && git add feature.py && git status --short")
    assert done.returncode == 0, done.stderr
    assert "A  feature.py" in done.stdout  # the worktree's index and the object store are writable

    commit = confined.run(
        "git -c user.name=m -c user.email=m@x commit -qm evil; "
        "git update-ref refs/heads/main HEAD; "
        "echo 'echo pwned' > \"$(git rev-parse --git-common-dir)/hooks/post-commit\"; "
        "git config core.hooksPath /tmp"
    )
    assert commit.returncode != 0
    assert {b: project.branch_sha(b) for b in ("main", branch)} == before
    assert not (project.root / ".git" / "hooks" / "post-commit").exists()
    assert "hooksPath" not in (project.root / ".git" / "config").read_text()


def test_another_modules_worktree_cannot_be_written(confined):
    other = confined.project.lopen / "worktrees" / "other"
    other.mkdir()
    done = confined.run(f"echo x > '{other}/file'")
    assert done.returncode != 0
    assert not (other / "file").exists()


def test_lopens_environment_cannot_be_read_nor_lopen_signalled(confined):
    sentinel = f"{SENTINEL}-environ"
    sleeper = subprocess.Popen(["sleep", "60"], env={**os.environ, "LOPEN_TEST_SECRET": sentinel})
    try:
        done = confined.run(f"cat /proc/{sleeper.pid}/environ; kill -TERM {sleeper.pid}")
        assert sentinel not in done.stdout
        assert sleeper.poll() is None  # still alive: the signal did not reach it
    finally:
        sleeper.kill()
        sleeper.wait()


def test_bwrap_keeps_the_worktrees_git_pointer_read_only(project, tmp_path):
    if available("bwrap"):
        pytest.skip(available("bwrap"))
    temp = tmp_path / "t"
    temp.mkdir()
    done = Confined("bwrap", project, temp).run("echo 'gitdir: /elsewhere' > .git")
    assert done.returncode != 0
    assert (project.worktree / ".git").read_text().startswith(f"gitdir: {project.root}/.git/worktrees/")


def private_git_dir(project: SandboxProject) -> Path:
    return project.root / ".git" / "worktrees" / project.module


@pytest.mark.parametrize("name", ["HEAD", "config.worktree", "commondir", "gitdir"])
def test_bwrap_keeps_the_worktrees_private_git_files_read_only(project, tmp_path, name):
    if available("bwrap"):
        pytest.skip(available("bwrap"))
    temp = tmp_path / "t"
    temp.mkdir()
    confined = Confined("bwrap", project, temp)  # its plan makes the missing config.worktree first
    target = private_git_dir(project) / name
    before = target.read_bytes()
    done = confined.run(
        f"printf '[core]\\n\\tfsmonitor = /tmp/evil\\n' > '{target}'; "
        f"rm -f '{target}'; mv '{target}' '{target}.moved'; "
        'git add README.md && git status --short >/dev/null && echo "git works"'
    )
    assert target.read_bytes() == before
    assert "git works" in done.stdout, done.stderr  # the index beside them stays writable


def test_bwrap_keeps_an_existing_lanes_git_pointer_read_only(project, tmp_path):
    if available("bwrap"):
        pytest.skip(available("bwrap"))
    lanes = project.worktree.with_name(f"{project.module}.components")
    lane = lanes / "core"
    project.git("worktree", "add", "-q", "-b", f"lopen/{project.module}--core", str(lane))
    pointer = (lane / ".git").read_text()
    temp = tmp_path / "t"
    temp.mkdir()
    config = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree), lanes=str(lanes))
    plan = kernel.plan(config, temp_dir=str(temp), copilot_home=str(project.lopen / "copilot"), byok=True)
    assert str(lane / ".git") in plan.read_only
    path, args = kernel.launch(Protection("bwrap", ""), plan, "/bin/sh")
    done = subprocess.run(
        [path, *args, "-c", "echo 'gitdir: /tmp/evil' > .git; rm -f .git; echo written > made.txt"],
        cwd=lane,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (lane / ".git").read_text() == pointer
    assert (lane / "made.txt").read_text() == "written\n", done.stderr  # the lane itself stays writable


# -- the plan and the launch command --------------------------------------------------------------


def test_the_plan_for_a_linked_worktree(project, tmp_path):
    config = SandboxConfig(project_root=str(project.root), worktree=str(project.worktree))
    plan = kernel.plan(config, temp_dir=str(tmp_path / "t"), copilot_home="", byok=False, home=str(project.home))
    git_dir = project.root / ".git"
    assert plan.writable == (
        str(project.worktree),
        str(tmp_path / "t"),
        str(project.home / ".copilot"),  # the CLI's default home when none is set
        str(git_dir / "worktrees" / project.module),
        str(git_dir / "objects"),
    )
    private = git_dir / "worktrees" / project.module
    assert plan.read_only == (
        str(git_dir / "objects" / "pack"),
        str(git_dir / "objects" / "info"),
        str(private / "HEAD"),  # which branch
        str(private / "commondir"),  # which repository this worktree is
        str(private / "gitdir"),
        str(private / "config.worktree"),  # made empty when missing, so that it can be kept read-only
        str(project.worktree / ".git"),
    )
    assert (private / "config.worktree").read_text() == ""
    assert plan.shown == (str(project.root), str(project.home), str(git_dir))  # bound again if under /dev
    assert str(project.lopen) in plan.hidden
    assert str(project.root / "docs" / "requirements") in plan.hidden
    assert str(project.home / ".ssh") in plan.hidden
    assert str(project.home / ".copilot") not in plan.hidden  # GitHub routing: the CLI's own login


def test_bwrap_binds_writable_places_after_hiding_their_parents():
    args = bwrap.arguments(writable=["/tmp"], hidden=["/etc", "/tmp/secret-inside-writable"], read_only=[])
    assert args[: len(bwrap.BASE)] == list(bwrap.BASE)
    order = [args.index("--tmpfs"), args.index("--bind")]
    assert order == sorted(order)  # /etc hidden, then /tmp bound


@pytest.mark.skipif(bool(available("bwrap")), reason=available("bwrap") or "bubblewrap works")
def test_a_secret_inside_a_writable_place_stays_hidden(tmp_path):
    """A hidden file or folder inside a place the model may write (a token file in the CLI's home) is hidden
    after that place is bound: hidden before, the bind would show it again."""
    place = tmp_path / "writable"
    (place / "keys").mkdir(parents=True)
    (place / "token").write_text("SECRET-TOKEN\n")
    (place / "keys" / "id").write_text("SECRET-KEY\n")
    args = bwrap.arguments(writable=[str(place)], hidden=[str(place / "token"), str(place / "keys")])
    probe = f"cd '{place}' && cat token; ls keys; echo made > new.txt; echo ok"

    done = subprocess.run(["bwrap", *args, "--", "sh", "-c", probe], capture_output=True, text=True, timeout=60)

    assert done.stdout.endswith("ok\n") and (place / "new.txt").read_text() == "made\n", done.stderr
    assert "SECRET" not in done.stdout and "id" not in done.stdout.split()


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_only_a_place_inside_a_folder_of_dev_is_bound_again(tmp_path):
    """A home or checkout that is ``/dev/shm`` itself is not bound again: that would show the sandbox every
    other program's shared memory. One outside ``/dev`` needs nothing (``/`` is bound already)."""
    inside = tempfile.mkdtemp(prefix="lopen-test-", dir="/dev/shm")
    try:
        args = bwrap.arguments([], [], shown=["/dev", "/dev/shm", inside, str(tmp_path)])
        assert args == [*bwrap.BASE, "--ro-bind", inside, inside]
    finally:
        os.rmdir(inside)


@pytest.mark.skipif(bool(available("bwrap")), reason=available("bwrap") or "bubblewrap works")
@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_a_checkout_under_dev_shm_stays_readable_and_still_hides_lopens_state():
    """bubblewrap's private ``/dev`` covers ``/dev/shm``: a project there is bound again, read-only, before
    what it hides (``.lopen/``, the spec); the rest of ``/dev/shm`` (other programs' shared memory) stays
    out of sight."""
    base = Path(tempfile.mkdtemp(prefix="lopen-test-", dir="/dev/shm"))
    try:
        project = make_project(base)
        temp = base / "model-tmp"
        temp.mkdir()
        confined = Confined("bwrap", project, temp)
        done = confined.run(
            f"cat '{project.root}/README.md' && git status --short && echo x > made.txt && ls /dev/shm; "
            f"cat '{project.lopen}/config.json' '{project.root}/docs/requirements/{project.module}/SPECIFICATION.md';"
            f" echo y > '{project.root}/README.md'"
        )
        assert "a project" in done.stdout and (project.worktree / "made.txt").read_text() == "x\n", done.stderr
        assert done.stdout.split("\n")[1:2] == [base.name]  # /dev/shm shows the project's folder alone
        assert SENTINEL not in done.stdout and (project.root / "README.md").read_text() == "a project\n"
        assert "Read-only file system" in done.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(kernel.landlock_status()[0] < landlock.NET_ABI, reason="Landlock's TCP rules need ABI 4")
def test_landlock_with_a_route_connects_only_to_its_ports_and_binds_none(project, tmp_path):
    """A real process under the launcher: the proxy's port answers; another loopback port (Lopen's MCP
    server, say) and binding a port are refused by the kernel."""
    allowed, other = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    yes, no = allowed.getsockname()[1], other.getsockname()[1]
    with allowed, other:
        route = network.tcp_route(allowed.getsockname()[1])
        plan = kernel.Plan(writable=(str(project.worktree),), hidden=())
        path, args = kernel.launch(choose("landlock", NO_BWRAP, LANDLOCK), plan, sys.executable, route)
        assert args[-5:] == ["--net", "--connect", str(allowed.getsockname()[1]), "--", sys.executable]
        ports = f"({allowed.getsockname()[1]}, {other.getsockname()[1]})"
        probe = (
            "import socket\n"
            f"for port in {ports}:\n"
            "    try: socket.create_connection(('127.0.0.1', port), timeout=5); print(port, 'connected')\n"
            "    except OSError as exc: print(port, type(exc).__name__)\n"
            "try: socket.create_server(('127.0.0.1', 0)); print('bound')\n"
            "except OSError as exc: print('bind', type(exc).__name__)\n"
        )
        done = subprocess.run([path, *args, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [
        f"{yes} connected",
        f"{no} PermissionError",
        "bind PermissionError",
    ], done.stderr


def test_landlock_launches_through_this_python_and_the_standalone_module(project, tmp_path):
    plan = kernel.Plan(writable=(str(project.worktree),), hidden=(str(project.lopen),))
    path, args = kernel.launch(Protection("landlock", ""), plan, "/usr/bin/copilot")
    assert path == sys.executable
    assert args == [
        "-I",
        landlock.__file__,
        "--rw",
        str(project.worktree),
        "--hide",
        str(project.lopen),
        "--",
        "/usr/bin/copilot",
    ]
    assert kernel.launch(Protection("policy", ""), plan, "/usr/bin/copilot") == ("/usr/bin/copilot", [])


@pytest.mark.parametrize(
    ("argv", "status", "says"),
    [
        (["--rw"], 2, "unexpected argument '--rw'"),
        (["--rw", "/tmp"], 2, "no command after --"),
        (["--write", "/tmp", "--", "true"], 2, "unexpected argument '--write'"),
        (["--", "/no/such/program"], 127, "cannot run /no/such/program"),
        (["--net", "--connect", "http", "--", "true"], 2, "--connect takes a TCP port (1-65535), not 'http'"),
    ],
)
def test_the_landlock_launcher_explains_bad_usage(argv, status, says):
    if available("landlock") and status == 127:
        pytest.skip(available("landlock"))
    done = subprocess.run([sys.executable, "-m", "lopen.sandbox.landlock", *argv], capture_output=True, text=True)
    assert done.returncode == status
    assert says in done.stderr


# -- choosing the protection --------------------------------------------------------------------

BWRAP = ("bubblewrap 0.8.0", "")
NO_BWRAP = ("", "bwrap is not installed")
LANDLOCK = (7, "")
NO_LANDLOCK = (0, "this kernel has no Landlock")


@pytest.mark.parametrize(
    ("mode", "bwrap_found", "landlock_found", "kind"),
    [
        ("auto", BWRAP, LANDLOCK, "bwrap"),
        ("auto", NO_BWRAP, LANDLOCK, "landlock"),
        ("auto", NO_BWRAP, NO_LANDLOCK, "policy"),
        ("bwrap", BWRAP, NO_LANDLOCK, "bwrap"),
        ("landlock", BWRAP, LANDLOCK, "landlock"),
        ("policy", BWRAP, LANDLOCK, "policy"),
    ],
)
def test_the_strongest_protection_that_works_is_chosen(mode, bwrap_found, landlock_found, kind):
    assert choose(mode, bwrap_found, landlock_found).kind == kind


def test_falling_back_to_the_policy_warns_once_with_the_reasons_and_the_fix():
    protection = choose("auto", NO_BWRAP, NO_LANDLOCK)
    assert protection.confinement == "none"
    assert "bwrap is not installed" in protection.warning and "no Landlock" in protection.warning
    assert "apt-get install bubblewrap" in protection.warning
    assert choose("policy", NO_BWRAP, NO_LANDLOCK).warning == ""  # chosen, not a fallback


@pytest.mark.parametrize(("mode", "what"), [("bwrap", "bubblewrap cannot"), ("landlock", "Landlock is not available")])
def test_an_explicit_kernel_sandbox_that_cannot_run_is_an_error(mode, what):
    with pytest.raises(LopenError) as caught:
        choose(mode, NO_BWRAP, NO_LANDLOCK)
    assert what in caught.value.what
    assert "sandbox.mode to auto" in caught.value.how


def test_detection_here_matches_what_runs_here():
    protection = kernel.detect("auto")
    if not available("bwrap"):
        assert protection.kind == "bwrap" and "bubblewrap" in protection.detail
    elif not available("landlock"):
        assert protection.kind == "landlock"
    else:
        assert protection.warning


def test_the_cli_is_started_unconfined_to_unpack_only_when_its_version_is_not_extracted(tmp_path: Path) -> None:
    """Every run started `copilot --version` once before the sandbox (about 0.2 s of the isolation's
    cost): it is needed only when the cache lacks this version's fully extracted bundle."""
    package = tmp_path / "node_modules" / "@github" / "copilot-linux-x64"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@github/copilot-linux-x64", "version": "9.9.9"}')
    ran = tmp_path / "ran"
    cli = package / "copilot"
    cli.write_text(f'#!/bin/sh\necho "$@" >> {ran}\n')
    cli.chmod(0o755)
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]}

    kernel.unpack_cli(str(cli), env)
    assert ran.read_text() == "--version\n"  # nothing extracted yet: the CLI unpacks itself

    marker = tmp_path / "home" / ".cache" / "copilot" / "pkg" / "linux-x64" / "9.9.9" / ".extraction-complete"
    marker.parent.mkdir(parents=True)
    kernel.unpack_cli(str(cli), env)
    assert ran.read_text() == "--version\n--version\n"  # a half-extracted bundle (no marker): again

    marker.touch()
    kernel.unpack_cli(str(cli), env)
    kernel.unpack_cli(str(cli), {**env, "XDG_CACHE_HOME": str(tmp_path / "elsewhere")})
    assert ran.read_text() == "--version\n" * 3  # extracted: not run; another cache folder: run
