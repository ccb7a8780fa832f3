"""The example project `lopen demo` builds (lopen/examples/slugify) and its scripted playbook.

The playbook is played here without a server or a CLI: Lopen's own prompts pick rules through the
scripted model's own `Playbook.choose`, and the CLI's tools (`create`, `edit`, `view`, `bash`) are
carried out in a copy of the template the way the Copilot CLI does (absolute paths, parent folder
must exist, `create` never overwrites, `edit` replaces one exact occurrence). So: the routing and the
usage totals are what a real run gets, the code the scripted model writes really passes its tests
whenever the script says so, and the oracle's rejection of the first core/2 is true.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "lopen" / "examples" / "slugify"
SPEC = TEMPLATE / "docs" / "requirements" / "slugify" / "SPECIFICATION.md"
DEMO = ROOT / "lopen" / "playbooks" / "slugify.toml"
FALSE_CLAIM = ROOT / "tests" / "playbooks" / "slugify_false_claim.toml"
MODULE = "slugify"
MAIN_MODEL, ORACLE_MODEL = "scripted-opus", "scripted-mini"
VERIFY_SCOPES = {
    "verify_task_completion": ("task", "task_id"),
    "verify_component_completion": ("component", "component"),
    "verify_module_completion": ("module", "module"),
}
# Tool name -> (required arguments, optional arguments): Lopen's tool contract and the CLI's tools.
TOOL_ARGUMENTS: dict[str, tuple[set[str], set[str]]] = {
    "get_current_context": (set(), set()),
    "read_spec": ({"section"}, {"module"}),
    "read_research": ({"topic"}, {"module"}),
    "read_plan": (set(), {"module"}),
    "log_research": ({"topic", "content"}, {"module"}),
    "report_progress": ({"progress"}, set()),
    "record_dependencies": ({"dependencies"}, set()),
    "record_components": ({"components"}, {"replace"}),
    "select_component": ({"component"}, {"reason"}),
    "record_tasks": ({"tasks"}, {"component", "replace"}),
    "update_task_status": ({"status"}, {"task_id", "reason"}),
    "verify_task_completion": (set(), {"task_id", "notes"}),
    "verify_component_completion": (set(), {"component", "notes"}),
    "verify_module_completion": (set(), {"module", "notes"}),
    "create": ({"path", "file_text"}, set()),
    "edit": ({"path", "old_str", "new_str"}, set()),
    "view": ({"path"}, set()),
    "bash": ({"command", "description"}, set()),
}
CLI_TOOLS = ("bash", "create", "edit", "view", "grep", "glob")
SAFETY_NETS = {"oracle-any"}


class Invocation(NamedTuple):
    kind: str
    step: int
    component: str = ""
    task: str = ""
    last_of_component: bool = False


# What Lopen runs for the example, in order (W2, W6); a component's and the module's verification
# ask the oracle directly, with no main-model invocation.
DEMO_RUN = (
    Invocation("planning", 2),
    Invocation("task", 6, "core", "core/1"),
    Invocation("task", 6, "core", "core/2", last_of_component=True),
    Invocation("component-verification", 6, "core"),
    Invocation("planning", 4),
    Invocation("task", 6, "cli", "cli/1", last_of_component=True),
    Invocation("component-verification", 6, "cli"),
    Invocation("module-verification", 7),
)

# The rules answering, in order (a rule answering several requests in a row is listed once).
DEMO_RULES = [
    "plan-slugify",
    "task-core-1",
    "oracle-core-1",
    "task-core-1",
    "task-core-2",
    "oracle-core-2-rejects",
    "task-core-2",
    "oracle-core-2",
    "task-core-2",
    "oracle-component-core",
    "plan-next-component",
    "task-cli-1",
    "oracle-cli-1",
    "task-cli-1",
    "oracle-component-cli",
    "oracle-module",
]

# Usage of a full run, per model: (requests, prompt_tokens, completion_tokens, cached_tokens).
# The end-to-end test of `lopen demo` expects exactly these totals.
DEMO_TOTALS = {
    MAIN_MODEL: (31, 332_053, 6_303, 273_878),
    ORACLE_MODEL: (7, 32_923, 1_368, 10_240),
}
FALSE_CLAIM_TOTALS = {
    MAIN_MODEL: (32, 343_124, 6_390, 284_654),
    ORACLE_MODEL: (7, 32_923, 1_368, 10_240),
}


class Request(NamedTuple):
    rule: str
    turn: int
    model: str
    usage: tuple[int, int, int]


class Project:
    """A copy of the template in which the playbook's CLI tool calls are carried out."""

    def __init__(self, path: Path) -> None:
        shutil.copytree(TEMPLATE, path)
        self.path = path
        self.env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])
        self.test_runs: list[tuple[str, int, int]] = []  # (rule, turn, tests passed)
        self.snapshots: dict[str, Path] = {}
        self.verifications: Counter[str] = Counter()

    def apply(self, name: str, arguments: dict[str, Any], rule: str, turn: int) -> None:
        if name in VERIFY_SCOPES:
            target = arguments[VERIFY_SCOPES[name][1]]
            self.verifications[target] += 1
            snapshot = self.path.with_name(f"{self.path.name}@{target.replace('/', '-')}#{self.verifications[target]}")
            shutil.copytree(self.path, snapshot)
            self.snapshots[f"{target}#{self.verifications[target]}"] = snapshot
            return
        if name not in ("create", "edit", "view", "bash"):
            return
        args = substitute(arguments, str(self.path))
        where = f"{rule} turn {turn}: {name}"
        if name == "bash":
            done = self.run(args["command"])
            assert done.returncode == 0, f"{where} {args['command']!r} failed:\n{done.stdout}{done.stderr}"
            if "pytest" in args["command"]:
                self.test_runs.append((rule, turn, passed_count(done.stdout)))
            return
        path = Path(args["path"])
        assert path.is_absolute() and path.is_relative_to(self.path), f"{where}: path {path} is not in the project"
        if name == "create":
            assert path.parent.is_dir(), f"{where}: the folder of {path} does not exist"
            assert not path.exists(), f"{where}: {path} exists already"
            path.write_text(args["file_text"])
        elif name == "edit":
            text = path.read_text()
            assert text.count(args["old_str"]) == 1, f"{where}: old_str is not found exactly once in {path}"
            path.write_text(text.replace(args["old_str"], args["new_str"]))
        else:
            assert path.is_file(), f"{where}: {path} does not exist"

    def run(self, command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command,
            shell=True,
            cwd=cwd or self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def substitute(value: Any, cwd: str) -> Any:
    """{{cwd}} replaced in every string of a tool call's arguments, as the scripted model does."""
    if isinstance(value, str):
        return value.replace("{{cwd}}", cwd)
    if isinstance(value, dict):
        return {k: substitute(v, cwd) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, cwd) for v in value]
    return value


def passed_count(pytest_output: str) -> int:
    found = re.search(r"(\d+) passed", pytest_output)
    assert found, pytest_output
    return int(found.group(1))


def load(path: Path) -> Any:
    import lopen.scripted_model as scripted

    return scripted.load_playbook(path)


def play(playbook: Any, project: Project | None = None) -> list[Request]:
    """Every request of the run, answered by the playbook's own rule choice; CLI tools done in ``project``."""
    from lopen.scripted_model import RequestView
    from lopen.workflow.oracle import Evidence
    from lopen.workflow.oracle import prompt as oracle_prompt
    from lopen.workflow.prompts import PromptContext, user_prompt
    from lopen.workflow.rubric import Rubric
    from lopen.workflow.steps import Kind, toolset

    uses: dict[str, int] = {}
    log: list[Request] = []

    def converse(prompt: str, model: str, tools: tuple[str, ...], on_call: Callable[..., None]) -> None:
        messages: list[dict[str, Any]] = [{"role": "system", "content": "…"}, {"role": "user", "content": prompt}]
        offered = [{"type": "function", "function": {"name": name}} for name in tools]
        for turn in range(100):
            body = {"model": model, "messages": messages, "tools": offered}
            choice = playbook.choose(RequestView.of(body), uses)
            assert choice is not None, f"no rule matches turn {turn} of:\n{prompt.splitlines()[0]}"
            assert not choice.overflow, f"rule {choice.rule.name} ran out of turns at turn {turn}"
            usage = choice.turn.usage
            assert usage is not None, f"rule {choice.rule.name} turn {turn} has no usage of its own"
            log.append(
                Request(
                    choice.rule.name, turn, model, (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
                )
            )
            if not choice.turn.tool_calls:
                return
            messages.append({"role": "assistant", "content": choice.turn.text, "tool_calls": []})
            for call in choice.turn.tool_calls:
                assert call.name in tools, f"{choice.rule.name} turn {turn} calls {call.name}, which is not offered"
                on_call(call.name, call.arguments, choice.rule.name, turn)
                messages.append({"role": "tool", "content": "done"})
        raise AssertionError("a conversation never ended")

    def verify(scope: str, target: str, component: str, task: str) -> None:
        evidence = Evidence(
            MODULE, scope, target, component, task, diff="", changed_files=[], rubric=Rubric(), commands=[]
        )
        converse(oracle_prompt(evidence), ORACLE_MODEL, (), on_call=lambda *_: None)

    for invocation in DEMO_RUN:
        kind = Kind(invocation.kind)
        if kind is Kind.COMPONENT_VERIFICATION:
            verify("component", invocation.component, invocation.component, "")
            continue
        if kind is Kind.MODULE_VERIFICATION:
            verify("module", MODULE, "", "")
            continue
        tools = toolset(kind)
        if kind is Kind.TASK:
            tools = (*tools, *CLI_TOOLS)
        context = PromptContext(
            module=MODULE,
            kind=kind,
            step=invocation.step,
            component=invocation.component,
            task=invocation.task,
            tools=tools,
        )

        def on_call(name: str, arguments: dict[str, Any], rule: str, turn: int, inv: Invocation = invocation) -> None:
            if project is not None:
                project.apply(name, arguments, rule, turn)
            if name in VERIFY_SCOPES:
                scope, key = VERIFY_SCOPES[name]
                component = inv.component if scope != "module" else ""
                verify(scope, arguments[key], component, inv.task if scope == "task" else "")

        converse(user_prompt(context), MAIN_MODEL, tools, on_call)
    return log


def totals(log: list[Request]) -> dict[str, tuple[int, int, int, int]]:
    result: dict[str, tuple[int, int, int, int]] = {}
    for request in log:
        n, p, c, k = result.get(request.model, (0, 0, 0, 0))
        result[request.model] = (n + 1, p + request.usage[0], c + request.usage[1], k + request.usage[2])
    return result


def collapsed(log: list[Request]) -> list[str]:
    return [r.rule for i, r in enumerate(log) if i == 0 or log[i - 1].rule != r.rule]


def calls(rule: Any) -> list[tuple[int, str, dict[str, Any]]]:
    return [(i, c.name, c.arguments) for i, turn in enumerate(rule.turns) for c in turn.tool_calls]


@pytest.fixture(scope="module")
def demo() -> Any:
    return load(DEMO)


@pytest.fixture(scope="module")
def built(demo: Any, tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The example built by playing the whole demo run in a copy of the template."""
    project = Project(tmp_path_factory.mktemp("demo") / "slugify")
    play(demo, project)
    return project


# --- the template and its specification ------------------------------------------------------


def test_template_holds_the_specification_and_no_code() -> None:
    files = sorted(p.relative_to(TEMPLATE).as_posix() for p in TEMPLATE.rglob("*") if p.is_file())
    assert files == [".gitignore", "README.md", "docs/requirements/slugify/SPECIFICATION.md", "pyproject.toml"]
    ignored = (TEMPLATE / ".gitignore").read_text().split()
    assert {"__pycache__/", ".pytest_cache/", ".lopen/"} <= set(ignored)


def test_specification_follows_the_pattern() -> None:
    from lopen.documents.criteria import acceptance_criteria, skills_and_hooks
    from lopen.documents.sections import read_document
    from lopen.documents.spec_check import check_spec

    doc = read_document(SPEC)
    check = check_spec(doc, MODULE)
    assert check.gaps == [], [gap.render() for gap in check.gaps]
    assert doc.front_matter is not None and doc.front_matter.name == MODULE
    criteria = acceptance_criteria(doc)
    assert [c.id for c in criteria] == [f"SLUG-{n:02}" for n in range(1, 10)]
    assert not any(c.checked for c in criteria)
    commands = {hook.name: hook.command for hook in skills_and_hooks(doc)}
    assert commands == {"verify-tests": "python -m pytest -q", "verify-build": "python -m compileall -q slugify"}


def test_planned_tasks_cover_the_criteria(demo: Any) -> None:
    spec_ids = set(re.findall(r"\[(SLUG-\d\d)\]", SPEC.read_text()))
    planned: list[str] = []
    for rule in demo.rules:
        for _, name, arguments in calls(rule):
            if name == "record_tasks":
                for task in arguments["tasks"]:
                    assert set(task) == {"name", "description", "subtasks", "acceptance"}
                    planned += re.findall(r"\[(SLUG-\d\d)\]", " ".join(task["acceptance"]))
    assert set(planned) <= spec_ids
    assert set(planned) == spec_ids - {"SLUG-09"}  # SLUG-09 (the whole suite passes) is module-wide


# --- the playbook's shape ----------------------------------------------------------------------


@pytest.mark.parametrize("path", [DEMO, FALSE_CLAIM], ids=["demo", "false-claim"])
def test_playbook_is_well_formed(path: Path) -> None:
    playbook = load(path)
    assert playbook.models == [MAIN_MODEL, ORACLE_MODEL]
    for rule in playbook.rules:
        assert rule.match.user_regex and not rule.match.tools_include, rule.name
        for i, turn in enumerate(rule.turns):
            assert turn.usage is not None, f"{rule.name} turn {i}: usage must be explicit"
            assert turn.fault is None and turn.text, f"{rule.name} turn {i}"
            last = i == len(rule.turns) - 1
            # A turn without tool calls ends the conversation: only the last one may have none.
            assert bool(turn.tool_calls) != last, f"{rule.name} turn {i}"
        for i, name, arguments in calls(rule):
            required, optional = TOOL_ARGUMENTS[name]
            assert required <= set(arguments) <= required | optional, f"{rule.name} turn {i}: {name}{arguments}"
            if name in ("create", "edit", "view"):
                assert arguments["path"].startswith("{{cwd}}/"), f"{rule.name} turn {i}: paths must be absolute"


def test_usage_numbers_are_distinct(demo: Any) -> None:
    usages = [msgspec.to_builtins(turn.usage) for rule in demo.rules for turn in rule.turns]
    repeated = [u for u, n in Counter(tuple(u.values()) for u in usages).items() if n > 1]
    assert not repeated


def test_oracle_answers_are_verdicts(demo: Any) -> None:
    from lopen.workflow.oracle import parse_verdict

    oracle_rules = [rule for rule in demo.rules if "kind=oracle" in (rule.match.user_regex or "")]
    assert [r.name for r in oracle_rules] == [r.name for r in demo.rules if r.name.startswith("oracle-")]
    for rule in oracle_rules:
        (turn,) = rule.turns
        verdict = parse_verdict(turn.text)
        assert verdict.summary and verdict.raw == ""  # raw is kept only when an answer is not a verdict
        if rule.name == "oracle-core-2-rejects":
            assert rule.max_uses == 1 and not verdict.passed
            assert [f.severity for f in verdict.findings] == ["error"]
        else:
            assert rule.max_uses == 0 and verdict.passed and verdict.confidence >= 0.7


# --- a run: routing, usage ---------------------------------------------------------------------


def test_demo_run_is_answered_by_the_expected_rules(demo: Any) -> None:
    log = play(demo)
    assert collapsed(log) == DEMO_RULES
    used = {r.rule for r in log}
    assert used == {rule.name for rule in demo.rules} - SAFETY_NETS
    for rule in demo.rules:  # a conversation plays each of its turns once, in order; an oracle session one
        turns = [r.turn for r in log if r.rule == rule.name]
        if rule.name.startswith("oracle-"):
            assert set(turns) <= {0}, rule.name
        elif turns:
            assert turns == list(range(len(rule.turns))), rule.name


def test_demo_run_usage_totals(demo: Any) -> None:
    assert totals(play(demo)) == DEMO_TOTALS


def test_the_rejection_comes_first_then_the_general_oracle_rule(demo: Any) -> None:
    log = play(demo)
    core2 = [r.rule for r in log if r.rule.startswith("oracle-core-2")]
    assert core2 == ["oracle-core-2-rejects", "oracle-core-2"]


# --- a run: the code the scripted model writes ---------------------------------------------------


def test_demo_builds_a_working_slugify(built: Project, demo: Any) -> None:
    rules = {rule.name: rule for rule in demo.rules}
    # Each test run passes (checked as it ran), and the next turn reports the right count.
    assert [(rule, n) for rule, _, n in built.test_runs] == [
        ("task-core-1", 5),
        ("task-core-2", 15),
        ("task-core-2", 16),
        ("task-cli-1", 21),
    ]
    for rule, turn, n in built.test_runs:
        assert f"All {n} tests pass" in rules[rule].turns[turn + 1].text
    final = built.run(f"{sys.executable} -m pytest -q")
    assert final.returncode == 0 and passed_count(final.stdout) == 21, final.stdout
    cli = built.run(f'{sys.executable} -m slugify "Hello World" --separator _')
    assert (cli.returncode, cli.stdout) == (0, "hello_world\n")
    usage = built.run(f"{sys.executable} -m slugify")
    assert usage.returncode == 2 and usage.stdout == "" and "usage:" in usage.stderr
    assert sorted(p.relative_to(built.path).as_posix() for p in built.path.glob("*/*.py")) == [
        "slugify/__init__.py",
        "slugify/__main__.py",
        "slugify/core.py",
        "slugify/normalize.py",
        "tests/test_cli.py",
        "tests/test_core.py",
        "tests/test_normalize.py",
    ]


def test_the_oracle_finding_is_true(built: Project, demo: Any) -> None:
    """The core.py the oracle rejected really has the bug, and the test added with the fix catches it."""
    before = built.snapshots["core/2#1"]
    shutil.copy(built.path / "tests" / "test_core.py", before / "tests" / "test_core.py")
    result = built.run(f"{sys.executable} -m pytest -q tests/test_core.py", cwd=before)
    assert result.returncode == 1, result.stdout
    assert re.findall(r"^FAILED (\S+)", result.stdout, re.M) == [
        "tests/test_core.py::test_max_length_never_leaves_a_trailing_separator"
    ]
    # What the finding says, literally: the slugs and the line it points at.
    probe = "from slugify import slugify; print(*(slugify('hello big world', max_length=n) for n in (10, 9)))"
    assert built.run(f'{sys.executable} -c "{probe}"', cwd=before).stdout.split() == ["hello-big-", "hello-big-"]
    from lopen.workflow.oracle import parse_verdict

    (turn,) = next(rule for rule in demo.rules if rule.name == "oracle-core-2-rejects").turns
    (finding,) = parse_verdict(turn.text).findings
    path, line = finding.location.split(":")
    assert "+ separator" in (before / path).read_text().splitlines()[int(line) - 1]
    assert built.snapshots["core/2#2"].joinpath(path).read_text() == (built.path / path).read_text()


def test_built_code_is_lint_clean(built: Project) -> None:
    import ruff  # noqa: F401  (a dev dependency: the check below runs it)

    lint = built.run(
        f"{sys.executable} -m ruff check --isolated --line-length 110 --select E,F,W,I,UP,B,SIM slugify tests"
    )
    assert lint.returncode == 0, lint.stdout


# --- the false-claim variant -------------------------------------------------------------------


def test_false_claim_variant_differs_only_in_core_1(demo: Any) -> None:
    variant = load(FALSE_CLAIM)
    assert variant.name != demo.name
    assert [r.name for r in variant.rules] == [r.name for r in demo.rules]
    for ours, theirs in zip(variant.rules, demo.rules, strict=True):
        if ours.name != "task-core-1":
            assert msgspec.to_builtins(ours) == msgspec.to_builtins(theirs), f"{ours.name} differs from the demo's"
    (core1,) = [r for r in variant.rules if r.name == "task-core-1"]
    (demo_core1,) = [r for r in demo.rules if r.name == "task-core-1"]
    files = [(n, a) for _, n, a in calls(core1) if n in ("bash", "create")]
    assert files == [(n, a) for _, n, a in calls(demo_core1) if n in ("bash", "create")]
    gate = [(n, a.get("status")) for _, n, a in calls(core1) if n in ("update_task_status", "verify_task_completion")]
    assert gate == [
        ("update_task_status", "complete"),  # claimed without verification: Lopen refuses
        ("verify_task_completion", None),
        ("update_task_status", "complete"),
    ]


def test_false_claim_run() -> None:
    log = play(load(FALSE_CLAIM))
    assert collapsed(log) == DEMO_RULES
    assert totals(log) == FALSE_CLAIM_TOTALS
