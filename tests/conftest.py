"""Fixtures every test folder shares, and the rule that CI skips nothing for a missing prerequisite."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from repos import make_repo

from lopen.copilot.locate import find_cli
from lopen.errors import LopenError
from lopen.git import Worktree


@pytest.fixture(scope="session")
def cli_path() -> str:
    """The Copilot CLI bin/setup installed. In CI its absence is a failure, not a skip."""
    try:
        return find_cli().path
    except LopenError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the Copilot CLI is required in CI: {exc.what}")
        pytest.skip(f"these tests need the Copilot CLI: {exc.what} — run bin/setup")


@pytest.fixture(scope="session")
def playbook_page_run(tmp_path_factory: pytest.TempPathFactory, cli_path: str):
    """docs/your-own-playbook.md followed to the end, once per test session: (what it printed, the project),
    module ``greet`` built by a real run on the scripted model (tests/playbook_page.py)."""
    from playbook_page import follow

    return follow(tmp_path_factory.mktemp("playbook-page"), with_engine=True)


@pytest.fixture
def otlp_receiver():
    """A real OTLP/HTTP receiver on a loopback port (tests/otlp_receiver.py)."""
    from otlp_receiver import OtlpReceiver

    with OtlpReceiver() as receiver:
        yield receiver


# -- no silent skips in CI ---------------------------------------------------------------------------
# A test skips, saying why, when this machine lacks what it needs. When CI is set, a skip whose reason
# names a prerequisite CI must have is a failure that says what to install; any other skip (for
# instance "root writes into read-only folders") stays a skip. The skip sites keep their own reasons
# (lopen.sandbox.kernel's bwrap_status and landlock_status, "needs tmux …"): they are matched here.

PREREQUISITES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"\bno kernel sandbox\b", re.IGNORECASE),
        "a kernel sandbox (bubblewrap or Landlock)",
        "apt-get install bubblewrap (bin/setup does it)",
    ),
    (
        re.compile(r"\bbwrap\b|\bbubblewrap\b", re.IGNORECASE),
        "bubblewrap",
        "apt-get install bubblewrap (bin/setup does it); in a container, allow unprivileged user namespaces",
    ),
    (
        re.compile(r"\blandlock\b", re.IGNORECASE),
        "Landlock",
        "run CI on Linux 5.13 or newer with landlock in the kernel's LSM list (lsm=…,landlock)",
    ),
    (re.compile(r"\btmux\b"), "tmux", "apt-get install tmux (.ci/run does it)"),
    (
        re.compile(r"\bLOPEN_TEST_POSTGRES_URL\b|\bPostgreSQL\b", re.IGNORECASE),
        "PostgreSQL",
        "export LOPEN_TEST_POSTGRES_URL=$(bin/postgres-for-tests) (.ci/run does it)",
    ),
    (re.compile(r"\bCopilot CLI\b"), "the Copilot CLI", "run bin/setup"),
)


def missing_in_ci(reason: str) -> str:
    """The failure message for a skip with ``reason`` when CI is set, or "" when the skip may stand."""
    if not os.environ.get("CI"):
        return ""
    for pattern, what, fix in PREREQUISITES:
        if pattern.search(reason):
            return f"CI: {what} is missing — {fix}. The test would have skipped: {reason}"
    return ""


def skip_reason(longrepr: object) -> str:
    """The reason of a skip from its report's ``longrepr`` ((path, line, "Skipped: reason"))."""
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A skip (by a mark or by ``pytest.skip``) in setup or in the test becomes a failure whose
    message says what to install, before the report is made: the summary line shows it."""
    if call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
        message = missing_in_ci(str(call.excinfo.value.msg))
        if message:
            try:
                pytest.fail(message, pytrace=False)
            except pytest.fail.Exception:
                call.excinfo = pytest.ExceptionInfo.from_current()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A whole module skipped (``pytest.skip(..., allow_module_level=True)``) for a missing prerequisite."""
    report = yield
    message = missing_in_ci(skip_reason(report.longrepr)) if report.skipped else ""
    if message:
        report.outcome = "failed"
        report.longrepr = message
    return report


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on ``main`` with one commit (``tests/repos.py``: ``make_repo``); a test file may have its own."""
    return make_repo(tmp_path)


@pytest.fixture
def wt(repo: Path) -> Worktree:
    """The module ``auth``'s worktree in ``repo``, made."""
    worktree = Worktree(repo, repo / ".lopen" / "worktrees" / "auth", "lopen/auth")
    worktree.ensure()
    return worktree
