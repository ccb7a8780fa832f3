"""The first module without a trap: `lopen init`, the placeholders it leaves, git readiness, every
way to get a model in `lopen doctor`, SDK log lines kept off the terminal, and
docs/your-own-playbook.md followed literally in a fresh repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from playbook_page import PLAYBOOK_DOC, REPO, clean_env, follow

from events import catalogue as ev
from lopen.cli.init_cmd import scaffold
from lopen.documents.sections import parse_document
from lopen.documents.spec_check import check_spec
from lopen.readiness import git_problems


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
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = clean_env(tmp_path / "home", COPILOT_CLI_PATH=cli_path, TMPDIR=str(temp), PYTHONPATH=str(REPO))
    out = lopen(tmp_path, env, "doctor")
    assert out.returncode == 1
    text = out.stdout
    assert "✓ copilot cli" in text  # the CLI answered a ping, from a home of its own …
    assert not [p for p in temp.iterdir() if p.name.startswith("lopen-")]  # … in its cache, not a new temp folder
    assert (tmp_path / "home" / ".cache" / "lopen" / "doctor").is_dir()
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
    assert "✓ approved the specification of greet by Ada Lovelace <ada@example.com>" in done.stdout
    assert "LOPEN_" not in doc_text_of_commands()  # no environment variables to set: --playbook does it

    from events.store import EventStore

    with EventStore.open(root) as store:
        approvals = [r.event for r in store.read_all() if isinstance(r.event, ev.SpecApproved)]
    assert [a.approver for a in approvals] == ["Ada Lovelace <ada@example.com>"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True)
    assert status.stdout == ""  # Lopen's folder stays out of git; the page commits everything else


def doc_text_of_commands() -> str:
    return "\n".join(re.findall(r"^```sh\n(.*?)^```$", PLAYBOOK_DOC.read_text(encoding="utf-8"), flags=re.S | re.M))


@pytest.mark.e2e
def test_the_playbook_page_to_a_complete_run(playbook_page_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """ENGINE: the whole page, `lopen run greet --playbook … --headless` included, completes the module of two
    components, in a fresh project with an empty HOME and no environment variable naming a model or provider."""
    done, root = playbook_page_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CommitRecorded" in done.stdout and "REJECTED" not in done.stdout
    assert "✓ research on 1 topic: 1 note for planning and the tasks" in done.stdout  # the References' topic
    assert "ResearchCompleted" in done.stdout  # and its story in `lopen replay`
    commits = subprocess.run(
        ["git", "log", "--format=%s", "main..lopen/greet"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert commits == [  # newest first: the second component's task after the first's
        "feat(greet): Greet from the command line in cli",
        "feat(greet): Greet by name in core",
        "docs(greet): research notes",
    ]
    assert "test_greet_says_hello" not in done.stderr
    shown = subprocess.run(
        ["git", "show", "lopen/greet:greet/__main__.py"], cwd=root, capture_output=True, text=True, check=True
    )
    assert "print(greet(" in shown.stdout


def test_a_missing_or_invalid_playbook_is_refused_before_anything_starts(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home", PYTHONPATH=str(REPO))
    root = tmp_path / "project"
    root.mkdir()
    git(root, env, "init", "-q", "-b", "main")
    git(root, env, "config", "user.name", "Ada Lovelace")
    git(root, env, "config", "user.email", "ada@example.com")
    git(root, env, "commit", "-q", "--allow-empty", "-m", "start")
    assert lopen(root, env, "init", "greet").returncode == 0
    missing = lopen(root, env, "run", "greet", "--playbook", "playbooks/greet.toml", "--headless")
    assert missing.returncode == 1, missing.stderr
    assert "error: no playbook playbooks/greet.toml" in missing.stderr
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    (root / "playbooks").mkdir()
    (root / "playbooks" / "greet.toml").write_text('[playbook]\nname = "greet"\nmodels = []\n')
    invalid = lopen(root, env, "run", "greet", "--playbook", "playbooks/greet.toml", "--headless")
    assert invalid.returncode == 1
    assert "error: invalid playbook playbooks/greet.toml" in invalid.stderr
    assert "models must list at least one model id" in invalid.stderr and "Traceback" not in invalid.stderr
    assert not (root / ".lopen" / "store.sqlite").exists()  # nothing recorded
