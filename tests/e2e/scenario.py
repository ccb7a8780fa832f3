"""What the end-to-end scenarios share: the demo's playbook with rules put first or replaced, an
approved copy of the example project, a run in this process or as `lopen` itself, and the story
the store tells afterwards. Real Copilot CLI, real git, real event store; only the model is scripted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from events import catalogue as ev
from events.selection import session_records
from lopen.app.demo import MAIN_MODEL, MODULE, ORACLE_MODEL, PLAYBOOK, demo_settings, prepare_project
from lopen.app.engine import run_module
from lopen.project import open_store
from lopen.scripted_model import (
    LoggedRequest,
    Match,
    Playbook,
    RequestView,
    Rule,
    ScriptedModelServer,
    ToolCall,
    Turn,
    load_playbook,
)
from lopen.workflow.approval import approve_spec

__all__ = [
    "DEMO",
    "DEMO_RULES",
    "LOPEN_RUN",
    "MAIN_MODEL",
    "MODULE",
    "ORACLE_MODEL",
    "SPEC",
    "TEST_COMMAND",
    "Ran",
    "Story",
    "about",
    "alive",
    "approve",
    "approve_module",
    "approved_project",
    "descendants",
    "git",
    "header",
    "lopen_env",
    "playbook",
    "rule",
    "run_here",
    "story",
    "story_of",
    "system",
    "tokens_of",
    "turn",
    "user",
    "wait_for",
    "worktree",
]

DEMO = load_playbook(PLAYBOOK)
DEMO_RULES = {r.name: r for r in DEMO.rules}
SPEC = Path("docs/requirements") / MODULE / "SPECIFICATION.md"
TEST_COMMAND = "python -m pytest -q"


# -- playbooks ------------------------------------------------------------------------------------


def header(**fields: str) -> str:
    """A regex for Lopen's header line with these fields, in any order (as the demo's rules match)."""
    return r"\[lopen\]" + "".join(rf"(?=[^\n]* {key}={re.escape(value)}(?!\S))" for key, value in fields.items())


def rule(name: str, turns: list[Turn], *, max_uses: int = 0, from_turn: int = 0, **fields: str) -> Rule:
    match = Match(user_regex=header(**fields), from_turn=from_turn)
    return Rule(name=name, turns=turns, match=match, max_uses=max_uses)


def turn(text: str, *calls: tuple[str, dict[str, Any]], **extra: Any) -> Turn:
    return Turn(text=text, tool_calls=[ToolCall(name=name, arguments=args) for name, args in calls], **extra)


def playbook(*first: Rule, replace: dict[str, Rule] | None = None) -> Playbook:
    """The demo playbook with ``first`` placed before its rules and ``replace`` swapping some of them."""
    replace = replace or {}
    rules = [*first, *(replace.get(r.name, r) for r in DEMO.rules)]
    return msgspec.structs.replace(DEMO, name="slugify-recovery", rules=rules)


def tokens_of(name: str) -> int:
    """Input + output tokens a demo rule reports when every turn is played once."""
    usages = (t.usage or DEMO.default_usage for t in DEMO_RULES[name].turns)
    return sum(u.prompt_tokens + u.completion_tokens for u in usages)


# -- the request log ------------------------------------------------------------------------------


def user(entry: LoggedRequest) -> str:
    return RequestView.of(entry.body or {}).user


def system(entry: LoggedRequest) -> str:
    return RequestView.of(entry.body or {}).system


def about(entry: LoggedRequest, **fields: str) -> bool:
    """Whether the request's header line has these fields (oracle requests carry their task too)."""
    return re.search(header(**fields), user(entry)) is not None


# -- projects, runs, results ---------------------------------------------------------------------


def approved_project(tmp_path: Path) -> Path:
    root = prepare_project(tmp_path / "project")
    approve(root)
    return root


def approve(root: Path) -> None:
    approve_module(root, MODULE)


def project_store(root: Path) -> tuple[Any, str]:
    """The project's store as its configuration names it (a shared PostgreSQL one included)."""
    from lopen.config import load_settings

    settings = load_settings(root, env={})
    return open_store(root, settings.store.url, settings.project.id)


def approve_module(root: Path, module: str) -> None:
    store, project = project_store(root)
    with store:
        approve_spec(root, module, store, project)


def worktree(root: Path) -> Path:
    """Where Lopen builds the module (its own git worktree on lopen/<module>)."""
    return root / ".lopen" / "worktrees" / MODULE


def settings_for(root: Path, url: str, extra: dict[str, object] | None = None):
    """The demo's settings with ``extra`` on top."""
    return demo_settings(root, url, extra)


class Ran(NamedTuple):
    code: int
    detail: str
    lines: list[str]


def run_here(
    root: Path, server: ScriptedModelServer, cli_path: str, extra: dict[str, object] | None = None, **kwargs: Any
) -> Ran:
    """One `lopen run` in this process, headless (no `ask`)."""
    os.environ.setdefault("COPILOT_CLI_PATH", cli_path)
    lines: list[str] = []
    code, _, detail = run_module(root, MODULE, settings_for(root, server.url, extra), lines.append, **kwargs)
    return Ran(code, detail, lines)


def lopen_env(cli_path: str, url: str, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOPEN_")}
    env.update(
        {
            "COPILOT_CLI_PATH": cli_path,
            "LOPEN_PROVIDER__TYPE": "openai",
            "LOPEN_PROVIDER__BASE_URL": url,
            "LOPEN_MODELS__REQUIREMENT_GATHERING": MAIN_MODEL,
            "LOPEN_MODELS__PLANNING": MAIN_MODEL,
            "LOPEN_MODELS__BUILDING": MAIN_MODEL,
            "LOPEN_MODELS__RESEARCH": MAIN_MODEL,
            "LOPEN_MODELS__ORACLE": ORACLE_MODEL,
            "LOPEN_MODELS__FALLBACK": "[]",
        }
    )
    env.update({f"LOPEN_{key.upper()}": value for key, value in settings.items()})
    return env


LOPEN_RUN = [sys.executable, "-m", "lopen", "run", MODULE, "--headless"]


class Story(NamedTuple):
    """What the store says about the project's one session."""

    session_id: str
    status: str
    events: list[ev.Event]
    totals: Any

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    def index(self, event: ev.Event) -> int:
        return next(i for i, e in enumerate(self.events) if e is event)

    def invocations(self, **fields: object) -> list[ev.InvocationStarted]:
        """The workflow's invocations (the oracle's, nested under a verify tool, only when asked for)."""
        fields.setdefault("kind", lambda kind: kind != "oracle")
        return [
            e
            for e in self.of(ev.InvocationStarted)
            if all(v(getattr(e, k)) if callable(v) else getattr(e, k) == v for k, v in fields.items())
        ]

    def finish_of(self, started: ev.InvocationStarted) -> ev.InvocationFinished | None:
        return next(
            (e for e in self.of(ev.InvocationFinished) if e.invocation_id == started.invocation_id),
            None,
        )


def story(root: Path) -> Story:
    return story_of(root, "")


def story_of(root: Path, module: str) -> Story:
    """The story of the one session of ``module`` (of the project's one session when "")."""
    store, project = project_store(root)
    with store:
        store.projections.catch_up()
        (session,) = [s for s in store.projections.sessions.all() if not module or s.module == module]
        events = [r.event for r in session_records(store, project, session.id)]
        return Story(session.id, session.status, events, store.projections.tokens.session(session.id))


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is not alive
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


alive = _alive
descendants = _descendants
wait_for = _wait
