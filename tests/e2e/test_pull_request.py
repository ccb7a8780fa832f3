"""`lopen pr`: module ``greet``, built by a real run (docs/your-own-playbook.md followed once per session),
proposed as a pull request — pushed for real to a local bare repository standing for GitHub, its text checked
against the history; opened through a fake `gh` that records what Lopen asks of it; its review comments taken
back as queued messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from playbook_page import REPO, clean_env

from events import catalogue as ev
from events.store import EventStore
from lopen.app.pull_request import GITHUB, compare_url

pytestmark = pytest.mark.e2e

URL = "https://github.com/ada/greet/pull/7"
FAKE_GH = """#!{python}
import json, os, sys
args = sys.argv[1:]
record = {{"args": args}}
if "--body-file" in args:
    record["body"] = open(args[args.index("--body-file") + 1], encoding="utf-8").read()
with open(os.environ["FAKE_GH_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps(record) + "\\n")
if args[:2] == ["auth", "status"]:
    sys.exit(0)
opened = os.environ["FAKE_GH_LOG"] + ".opened"
if args[:2] == ["pr", "create"]:
    open(opened, "w").close()
    print("{url}")
elif args[:2] == ["pr", "view"] and not os.path.exists(opened):
    sys.exit("no pull requests found for branch " + args[2])
elif args[:2] == ["pr", "view"] and "url,state,isDraft,baseRefName" in args:
    print(json.dumps({{"url": "{url}", "state": "OPEN", "isDraft": True, "baseRefName": "main"}}))
elif args[:2] in (["pr", "edit"], ["pr", "ready"]):
    pass
elif args[:2] == ["pr", "view"]:
    print(json.dumps({{"number": 7, "url": "{url}", "reviews": [
        {{"author": {{"login": "grace"}}, "state": "CHANGES_REQUESTED",
          "body": "Please greet 'World' when no name is given."}},
        {{"author": {{"login": "alan"}}, "state": "APPROVED", "body": ""}}],
      "comments": [{{"author": {{"login": "grace"}}, "body": "Also add a --shout option?"}}]}}))
elif args[:1] == ["api"]:
    print(json.dumps([{{"user": {{"login": "grace"}}, "path": "greet/__init__.py", "line": 3,
                       "body": "Strip the name before greeting."}}]))
else:
    sys.exit("fake gh: unexpected " + " ".join(args))
"""


def lopen(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lopen", *args], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def queued_texts(root: Path) -> list[str]:
    with EventStore.open(root) as store:
        return [r.event.text for r in store.read_all() if isinstance(r.event, ev.UserMessageQueued)]


def test_lopen_pr_pushes_the_module_and_proposes_it(
    playbook_page_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    done, root = playbook_page_run
    assert done.returncode == 0, done.stdout + done.stderr
    env = clean_env(tmp_path / "home", PYTHONPATH=str(REPO))  # no gh on this PATH

    # not built, no remote: what, why, fix
    typo = lopen(root, env, "pr", "gret")
    assert typo.returncode == 1 and "error: module gret has not been built — did you mean greet?" in typo.stderr
    none = lopen(root, env, "pr", "greet")
    assert none.returncode == 1 and "error: no git remote origin to push lopen/greet to" in none.stderr
    assert "git remote add origin <url>" in none.stderr and "Traceback" not in none.stderr

    # "GitHub": a bare repository the ssh address is rewritten to, so the push is a real one
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(root, "remote", "add", "origin", "git@github.com:ada/greet.git")
    git(root, "config", f"url.{bare}.insteadOf", "git@github.com:ada/greet.git")
    git(root, "push", "-q", "origin", "main")

    # someone else's lopen/greet on the remote: the push is refused, never forced
    other = git(root, "commit-tree", "main^{tree}", "-p", "main", "-m", "someone else's work")
    git(root, "push", "-q", "origin", f"{other}:refs/heads/lopen/greet")
    refused = lopen(root, env, "pr", "greet")
    assert refused.returncode == 1 and "error: git push of lopen/greet to origin was refused" in refused.stderr
    assert "rejected" in refused.stderr and "--force-with-lease" in refused.stderr
    assert git(bare, "rev-parse", "lopen/greet") == other
    git(root, "push", "-q", "origin", ":refs/heads/lopen/greet")

    # without gh: pushed, and the body and the URL to open printed
    out = lopen(root, env, "pr", "greet")
    assert out.returncode == 0, out.stderr
    tip = git(root, "rev-parse", "lopen/greet")
    assert git(bare, "rev-parse", "lopen/greet") == tip
    assert f"✓ pushed lopen/greet ({tip[:8]}) to origin (git@github.com:ada/greet.git)" in out.stdout
    assert "not opened with gh: gh (the GitHub CLI) is not on PATH" in out.stdout
    assert out.stdout.rstrip().endswith("https://github.com/ada/greet/compare/main...lopen/greet?expand=1")
    body = (root / ".lopen" / "modules" / "greet" / "pull-request.md").read_text()
    assert body in out.stdout
    with EventStore.open(root) as store:
        records = [r.event for r in store.read_all()]
    commits = {e.task_id: e.sha for e in records if isinstance(e, ev.CommitRecorded) and e.task_id}
    sessions = {e.session_id for e in records if isinstance(e, ev.SessionStarted)}
    assert set(commits) == {"core/1", "cli/1"}
    assert "**2 of 2 tasks complete** in 2 components · 3 commits on `lopen/greet` since `main`" in body
    core, cli = body.index("### `core/1` Greet by name — complete"), body.index("### `cli/1` Greet from the")
    assert core < cli
    assert "- [x] [GREET-01] greet('Ada') == 'Hello, Ada!'" in body[core:cli]
    assert "- [x] [GREET-02] python -m greet Ada prints Hello, Ada!" in body[cli:]
    verdict = "✓ passed (attempt 1 by scripted-oracle; met: GREET-01, GREET-02, GREET-03)"
    assert verdict in body[core:cli] and verdict in body[cli:]
    assert f"Commit: `{commits['core/1'][:8]}` feat(greet): Greet by name in core" in body[core:cli]
    assert f"Commit: `{commits['cli/1'][:8]}` feat(greet): Greet from the command line in cli" in body[cli:]
    assert "Spent: 7,700 tokens, 2 premium requests, unpriced in 7 model calls" in body[core:cli]  # the playbook's
    assert "- module `greet`: ✓ passed" in body and "- component `cli`: ✓ passed" in body
    assert [f"lopen replay {s}" for s in sorted(sessions)] == [ln for ln in body.splitlines() if "lopen replay" in ln]

    # with gh (a fake one, signed in): the pull request opened with the body, into the branch the module came from
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH.format(python=sys.executable, url=URL))
    (bin_dir / "gh").chmod(0o755)
    log = tmp_path / "gh.log"
    with_gh = {**env, "PATH": f"{bin_dir}:{env['PATH']}", "FAKE_GH_LOG": str(log)}
    opened = lopen(root, with_gh, "pr", "greet")
    assert opened.returncode == 0, opened.stderr
    assert f"✓ opened pull request: {URL}" in opened.stdout
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["args"][:2] for c in calls] == [["auth", "status"], ["pr", "view"], ["pr", "create"]]
    body_file = str(root / ".lopen" / "modules" / "greet" / "pull-request.md")
    assert calls[2]["args"][2:] == [
        "--title", "greet: A friendly greeting for a name", "--body-file", body_file,
        "--base", "main", "--head", "lopen/greet", "--repo", "ada/greet",
    ]  # fmt: skip
    assert calls[2]["body"] == body

    # a second `lopen pr` finds it open (a draft, say): its text replaced and, the module complete, made ready
    log.unlink()
    again = lopen(root, with_gh, "pr", "greet")
    assert again.returncode == 0, again.stderr
    assert f"✓ updated the open pull request: {URL}" in again.stdout
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["args"][:2] for c in calls] == [["auth", "status"], ["pr", "view"], ["pr", "edit"], ["pr", "ready"]]
    assert calls[2]["args"][2:] == [
        "lopen/greet", "--title", "greet: A friendly greeting for a name", "--body-file", body_file,
        "--repo", "ada/greet",
    ]  # fmt: skip
    assert calls[2]["body"] == body

    # --comments: each review with a text, line comment and conversation comment queued once
    log.unlink()
    taken = lopen(root, with_gh, "pr", "greet", "--comments")
    assert taken.returncode == 0, taken.stderr
    assert "✓ queued 3 review comments of pull request #7 for module greet" in taken.stdout
    assert "lopen run greet --replan" in taken.stdout  # the module is complete: a new plan takes them in
    calls = [json.loads(line)["args"] for line in log.read_text().splitlines()]
    assert calls[1][:3] == ["pr", "view", "lopen/greet"] and calls[2][:2] == [
        "api",
        "repos/{owner}/{repo}/pulls/7/comments",
    ]
    assert queued_texts(root) == [
        "Review of pull request #7 by @grace (changes requested): Please greet 'World' when no name is given.",
        "Review comment on greet/__init__.py:3 (pull request #7) by @grace: Strip the name before greeting.",
        "Comment on pull request #7 by @grace: Also add a --shout option?",
    ]
    again = lopen(root, with_gh, "pr", "greet", "--comments")
    assert "✓ queued 0 review comments of pull request #7 for module greet (3 queued before, left out)" in again.stdout
    assert len(queued_texts(root)) == 3

    no_gh = lopen(root, env, "pr", "greet", "--comments")
    assert no_gh.returncode == 1
    assert "error: reading the pull request's review comments needs gh, the GitHub CLI" in no_gh.stderr
    assert "gh auth login" in no_gh.stderr


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/ada/greet.git",
        "https://github.com/ada/greet",
        "git@github.com:ada/greet.git",
        "ssh://git@github.com/ada/greet.git",
    ],
)
def test_a_github_remote_in_any_form_gives_the_compare_page(url: str) -> None:
    found = GITHUB.match(url)
    assert found is not None
    page = compare_url(found["owner"], found["repo"], "main", "lopen/greet")
    assert page == "https://github.com/ada/greet/compare/main...lopen/greet?expand=1"
    assert GITHUB.match("https://gitlab.com/ada/greet.git") is None
