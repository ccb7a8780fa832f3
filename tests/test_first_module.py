"""The first module without a trap: `lopen init`, the placeholders it leaves, git readiness, every
way to get a model in `lopen doctor`, SDK log lines kept off the terminal, and
docs/your-own-playbook.md followed literally in a fresh repository."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from events import catalogue as ev
from lopen.cli.init_cmd import scaffold
from lopen.documents.sections import parse_document
from lopen.documents.spec_check import check_spec
from lopen.readiness import git_problems

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
PLAYBOOK_DOC = REPO / "docs" / "your-own-playbook.md"


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """No git identity, no credentials, no user configuration: a fresh machine."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
        **extra,
    }


def lopen(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def git(cwd: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


# -- lopen init --------------------------------------------------------------------------------------


def test_the_scaffold_fails_the_spec_check_only_for_its_placeholders() -> None:
    text = scaffold("token-service")
    gaps = check_spec(parse_document(text), "token-service").gaps
    assert gaps and all(g.problem.startswith("placeholder left: [TODO:") for g in gaps)
    assert {g.part for g in gaps} >= {"Overview", "Acceptance Criteria", "Dependencies", "Notes", "References"}
    filled = re.sub(r"\[TODO:[^\]]*\]", "Something real", text)
    assert check_spec(parse_document(filled), "token-service").gaps == []
    assert "[TOKENSER-01]" in text and "# Token Service Specification" in text


def test_init_in_a_ready_repository(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    root = tmp_path / "project"
    root.mkdir()
    git(root, env, "init", "-q", "-b", "main")
    git(root, env, "config", "user.name", "Ada Lovelace")
    git(root, env, "config", "user.email", "ada@example.com")
    git(root, env, "commit", "-q", "--allow-empty", "-m", "start")
    out = lopen(root, env, "init", "greet")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:3] == [
        "✓ wrote docs/requirements/greet/SPECIFICATION.md from the specification pattern (docs/specifications.md)",
        "  next: replace its 8 [TODO: …] placeholders; `lopen spec check greet` lists what is left",
        "✓ git: a repository with commits; Lopen will commit as Ada Lovelace <ada@example.com>",
    ]
    assert (root / "docs/requirements/greet/SPECIFICATION.md").read_text() == scaffold("greet")
    check = lopen(root, env, "spec", "check", "greet")
    assert check.returncode == 1 and check.stdout.count("placeholder left: [TODO:") == 8
    approve = lopen(root, env, "spec", "approve", "greet")
    assert approve.returncode == 1 and "error: the specification of greet still has 8 placeholders" in approve.stderr
    again = lopen(root, env, "init", "greet")
    assert again.returncode == 1 and "already exists" in again.stderr and "never overwrites" in again.stderr


def test_init_says_what_git_is_missing_and_how_to_fix_it(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    root = tmp_path / "project"
    root.mkdir()
    out = lopen(root, env, "init", "greet")
    assert out.returncode == 1
    assert "✗ git: " in out.stdout and "is not a git repository" in out.stdout and "fix: cd " in out.stdout
    assert (root / "docs/requirements/greet/SPECIFICATION.md").is_file()  # the spec is written all the same

    git(root, env, "init", "-q", "-b", "main")
    problems = git_problems(root, env)
    assert problems[0].what == "the repository has no commit yet"
    assert "git commit --allow-empty" in problems[0].how


def test_git_without_an_identity_is_reported_with_the_fix(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    root = tmp_path / "project"
    root.mkdir()
    git(root, env, "init", "-q", "-b", "main")
    git(root, {**env, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "A",
               "GIT_COMMITTER_EMAIL": "a@b"}, "commit", "-q", "--allow-empty", "-m", "start")  # fmt: skip
    problems = git_problems(root, {**env, "GIT_CONFIG_GLOBAL": str(tmp_path / "none")})
    identity = [p for p in problems if "identity" in p.what]
    if not identity:
        pytest.skip("git finds an identity on this machine by itself (a configured hostname and user)")
    assert identity[0].how.startswith('git config user.name "Your Name" && git config user.email')


# -- lopen doctor and the model -----------------------------------------------------------------------


def test_doctor_lists_every_way_to_get_a_model(tmp_path: Path, cli_path: str) -> None:
    env = clean_env(tmp_path / "home", COPILOT_CLI_PATH=cli_path)
    out = lopen(tmp_path, env, "doctor")
    assert out.returncode == 1
    text = out.stdout
    assert "✗ credentials:" in text
    assert "fix: three ways to get a model:" in text
    assert "1. GitHub Copilot: `lopen auth login`" in text
    assert "2. your own provider" in text and "LOPEN_PROVIDER__BASE_URL=" in text
    assert "3. the scripted model" in text and "python -m lopen.scripted_model --playbook" in text


def test_doctor_checks_the_configured_models_against_the_provider(tmp_path: Path, cli_path: str) -> None:
    from lopen.scripted_model import ScriptedModelServer, parse_playbook

    playbook = parse_playbook('[playbook]\nname = "p"\nmodels = ["main", "mini"]\n[[rule]]\nname = "r"\n'
                              '  [[rule.turn]]\n  text = "hi"\n', "p.toml")  # fmt: skip
    with ScriptedModelServer(playbook) as server:
        env = clean_env(
            tmp_path / "home",
            COPILOT_CLI_PATH=cli_path,
            LOPEN_PROVIDER__TYPE="openai",
            LOPEN_PROVIDER__BASE_URL=server.url,
            LOPEN_MODELS__PLANNING="main",
            LOPEN_MODELS__BUILDING="main",
            LOPEN_MODELS__RESEARCH="main",
            LOPEN_MODELS__ORACLE="gpt-9",
            LOPEN_MODELS__FALLBACK="",
        )
        url = server.url
        out = lopen(tmp_path, env, "doctor")
    assert "✓ credentials:" in out.stdout
    assert f"✗ models: model gpt-9 (models.oracle) is not offered by openai provider at {url}" in out.stdout
    assert "the models offered are: main, mini" in out.stdout
    assert "fix: set models.oracle to one of them: export LOPEN_MODELS__ORACLE=<model>" in out.stdout


def test_sdk_log_lines_never_reach_the_terminal(tmp_path: Path) -> None:
    """The Copilot SDK logs the CLI's stderr lines as warnings; `lopen` sends them to a file instead."""
    (tmp_path / ".git").mkdir()
    script = (
        "import logging, sys\n"
        "import lopen.cli as cli\n"
        "def app():\n"
        "    logging.getLogger('copilot._jsonrpc').warning('[CLI] %s', 'model gpt-9 not found; token ghp_"
        + "A"
        * 36
        + "')\n"
        "    print('the command ran')\n"
        "cli.app = app\n"
        "sys.argv = ['lopen']\n"
        "cli.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=clean_env(tmp_path / "home"), capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == "the command ran\n"
    assert done.stderr == ""
    log = (tmp_path / ".lopen" / "logs" / "copilot-sdk.log").read_text()
    assert "[CLI] model gpt-9 not found" in log and "ghp_" + "A" * 36 not in log

    debug = subprocess.run(
        [sys.executable, "-c", script.replace("['lopen']", "['lopen', '--debug']")],
        cwd=tmp_path,
        env=clean_env(tmp_path / "home"),
        capture_output=True,
        text=True,
    )
    assert "[CLI] model gpt-9 not found" in debug.stderr  # --debug shows them


# -- docs/your-own-playbook.md, followed literally ---------------------------------------------------------


def doc_script(with_engine: bool) -> str:
    """The page's ```sh blocks, in order, as one bash script (the run's part only ``with_engine``)."""
    text = PLAYBOOK_DOC.read_text(encoding="utf-8")
    if not with_engine:
        text = re.sub(r"<!-- engine: begin -->.*?<!-- engine: end -->", "", text, flags=re.S)
    blocks = re.findall(r"^```sh\n(.*?)^```$", text, flags=re.S | re.M)
    assert len(blocks) >= 6
    return "set -euo pipefail\n" + "\n".join(blocks)


def follow(tmp_path: Path, with_engine: bool) -> tuple[subprocess.CompletedProcess[str], Path]:
    env = clean_env(tmp_path / "home", PYTHONPATH=str(REPO))  # the Lopen beside this page, whatever the venv has
    child = subprocess.Popen(
        ["bash", "-c", doc_script(with_engine)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err), tmp_path / "greet-project"


def test_the_playbook_page_up_to_the_run(tmp_path: Path) -> None:
    done, root = follow(tmp_path, with_engine=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # the page's example output of `lopen init` is what it prints
    page = PLAYBOOK_DOC.read_text(encoding="utf-8")
    shown = re.search(r"```sh\nlopen init greet\n```\n\n```text\n(.*?)```", page, flags=re.S)
    assert shown is not None
    for line in shown.group(1).splitlines():
        assert line in done.stdout.splitlines()
    assert "greet.md follows the specification pattern" in done.stdout.replace("SPECIFICATION.md", "greet.md")
    assert "✓ openai provider at http://127.0.0.1:" in done.stdout and " answers" in done.stdout
    assert "✓ approved the specification of greet by Ada Lovelace <ada@example.com>" in done.stdout
    assert done.stderr.count("[scripted model]") <= 1  # only its start line; --quiet keeps the rest

    from events.store import EventStore

    with EventStore.open(root) as store:
        approvals = [r.event for r in store.read_all() if isinstance(r.event, ev.SpecApproved)]
    assert [a.approver for a in approvals] == ["Ada Lovelace <ada@example.com>"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True)
    assert status.stdout == ""  # Lopen's folder stays out of git; the page commits everything else


@pytest.mark.e2e
def test_the_playbook_page_to_a_complete_run(tmp_path: Path, cli_path: str) -> None:
    """ENGINE: the whole page, `lopen run greet --headless` included, completes the module."""
    done, root = follow(tmp_path, with_engine=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CommitRecorded" in done.stdout and "REJECTED" not in done.stdout
    assert "✓ research on 1 topic: 1 note for planning and the tasks" in done.stdout  # the References' topic
    assert "ResearchCompleted" in done.stdout  # and its story in `lopen replay`
    commits = subprocess.run(
        ["git", "log", "--format=%s", "main..lopen/greet"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert commits == ["feat(greet): Greet by name in core", "docs(greet): research notes"]  # newest first
    assert "test_greet_says_hello" not in done.stderr
