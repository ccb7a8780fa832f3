"""Two projects with a module of the same name on one real PostgreSQL store (issue 15): the team setup
docs/store.md describes. Each builds, lists and re-runs its own history; neither sees the other's
unless asked (`--all-projects`). Needs LOPEN_TEST_POSTGRES_URL (`bin/postgres-for-tests`; CI sets it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from e2e.scenario import DEMO, MODULE, approve_module, lopen_env, run_here, story
from lopen.app.demo import prepare_project
from lopen.project import project_id
from lopen.scripted_model import ScriptedModelServer

URL = os.environ.get("LOPEN_TEST_POSTGRES_URL", "")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not URL and not os.environ.get("CI"),
        reason="LOPEN_TEST_POSTGRES_URL is not set: run `bin/postgres-for-tests` (as root), export what it prints",
    ),
]


def test_two_projects_share_a_postgres_store_without_mixing_their_modules(tmp_path, cli_path):
    assert URL, "CI must provide LOPEN_TEST_POSTGRES_URL"
    store_url = f"{URL}{'&' if '?' in URL else '?'}schema=lopen_{uuid.uuid4().hex[:10]}"
    roots = [prepare_project(tmp_path / name) for name in ("first", "second")]
    for root in roots:
        (root / ".lopen").mkdir(exist_ok=True)
        (root / ".lopen" / "config.json").write_text(json.dumps({"store": {"url": store_url}}))
        approve_module(root, MODULE)
    assert project_id(roots[0]) != project_id(roots[1])

    with ScriptedModelServer(DEMO) as server:
        for root in roots:
            ran = run_here(root, server, cli_path, {"store.url": store_url}, no_resume=True)
            assert ran.code == 0, "\n".join(ran.lines)
        requests = len(server.chat_requests)
        for root in roots:
            env = lopen_env(cli_path, server.url)
            again = subprocess.run(
                [sys.executable, "-m", "lopen", "run", MODULE, "--headless"], cwd=root, env=env, capture_output=True,
                text=True, timeout=120,
            )  # fmt: skip
            assert again.returncode == 0 and "is complete" in again.stdout, again.stdout + again.stderr
            listed = json.loads(
                subprocess.run(
                    [sys.executable, "-m", "lopen", "session", "list", "--json"], cwd=root, env=env,
                    capture_output=True, text=True, check=True,
                ).stdout
            )  # fmt: skip
            assert [(s["module"], s["status"], s["project"]) for s in listed] == [
                (MODULE, "completed", project_id(root))
            ]
            every = subprocess.run(
                [sys.executable, "-m", "lopen", "session", "list", "--json", "--all-projects"], cwd=root, env=env,
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            assert sorted(s["project"] for s in json.loads(every.stdout)) == sorted(project_id(r) for r in roots)
        assert len(server.chat_requests) == requests  # the re-runs asked the model nothing
    first, second = story(roots[0]), story(roots[1])
    assert first.session_id == second.session_id  # the same id, each in its own project's history
    assert {e.project for e in first.events} == {project_id(roots[0])}
    assert {e.project for e in second.events} == {project_id(roots[1])}
