"""The exact prompt of each invocation kind, rendered from a fixed example: what a model receives from
Lopen (its system message, the user prompt, the SDK session options and every tool's schema).

``tests/test_prompt_golden.py`` compares them with ``tests/golden/prompts/<kind>.txt``; a changed
prompt is a reviewed diff. ``bin/refresh-golden`` writes them again (never inside the test session).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from lopen.copilot.results import InvocationRequest
from lopen.copilot.session_options import session_options
from lopen.copilot.tools import LopenTool
from lopen.workflow import oracle
from lopen.workflow.prompts import GUIDANCE, PromptContext, system_message, user_prompt
from lopen.workflow.rubric import CriterionCheck, Rubric
from lopen.workflow.steps import CLI_TOOLS, Kind, toolset
from lopen.workflow.toolbox import Toolbox

GOLDEN = Path(__file__).parent / "golden" / "prompts"
MODULE = "slugify"
CONTEXT = "==== task ====\nTask core/2: Join words\n\n(the document context lopen.documents.context assembles)"
EXAMPLES: dict[Kind, PromptContext] = {
    Kind.PLANNING: PromptContext(module=MODULE, kind=Kind.PLANNING, step=2, context_text="(the spec's sections)"),
    Kind.TASK: PromptContext(
        module=MODULE,
        kind=Kind.TASK,
        step=6,
        component="core",
        task="core/2",
        context_text=CONTEXT,
        workdir="/project/.lopen/worktrees/slugify",
        verify="python -m pytest -q",
        last_task=True,
        conventions="### AGENTS.md\nRun ./check.sh before you commit.",
        budget_hint="Budget so far for this module: 74,138 tokens, 1 premium request.",
    ),
    Kind.SPEC: PromptContext(module=MODULE, kind=Kind.SPEC, step=1, context_text="(the specification pattern)"),
    Kind.RESEARCH: PromptContext(
        module=MODULE,
        kind=Kind.RESEARCH,
        step=2,
        topics=(
            "[Unicode Standard Annex #15](https://unicode.org/reports/tr15/) — what NFKD does",
            "Python's `unicodedata` module",
        ),
        context_text="(the References, Overview, the notes so far, Dependencies, Notes)",
        workdir="/project/.lopen/worktrees/slugify",
    ),
}


def _tools(kind: Kind) -> list[LopenTool]:
    journal = SimpleNamespace(module=MODULE)  # the schemas need no store
    box = Toolbox(journal, invocation_id="x", step=6, documents_root=Path("."))  # type: ignore[arg-type]
    return box.tools(toolset(kind))


def _options(kind: Kind) -> dict[str, object]:
    request = InvocationRequest(
        models=["m"],
        prompt="",
        system_message="(Lopen's system message, above)",
        cli_tools=CLI_TOOLS[kind],
        builder=True,
        guidance=GUIDANCE,
    )
    return session_options(request, [t.name for t in _tools(kind)])


def render(kind: Kind) -> str:
    if kind is Kind.ORACLE:
        return _oracle()
    ctx = EXAMPLES[kind]
    system = system_message(ctx)
    parts = [
        "# system message (appended to the CLI's own, whose guidelines it replaces)",
        system,
        "# user prompt",
        user_prompt(ctx),
        "# session options",
        json.dumps(_options(kind), indent=2, sort_keys=True),
        "# Lopen's tools",
        json.dumps(
            [{"name": t.name, "description": t.description, "parameters": t.schema()} for t in _tools(kind)],
            indent=2,
            sort_keys=True,
            ensure_ascii=False,
        ),
    ]
    return "\n\n".join(parts) + "\n"


def _oracle() -> str:
    evidence = oracle.Evidence(
        module=MODULE,
        scope="component",
        target="core",
        component="core",
        task="",
        diff="diff --git a/slugify/core.py b/slugify/core.py\n+def slugify(text): ...",
        changed_files=["slugify/core.py", "tests/test_core.py"],
        rubric=Rubric(
            criteria=(
                CriterionCheck(id="SLUG-05", text="a cut slug ends at a word", checks=("[SLUG-05] no trailing -",)),
            ),
            checks=("python -m pytest -q passes",),
            others=("[SLUG-07] python -m slugify prints the slug — component cli",),
        ),
        commands=[
            oracle.CommandResult(
                name="verify-tests", command="python -m pytest -q", exit_code=0, output_tail="16 passed"
            )
        ],
        conventions="### AGENTS.md\nRun ./check.sh before you commit.",
    )
    return _oracle_text(evidence)


def _oracle_text(evidence: oracle.Evidence) -> str:
    return (
        "\n\n".join(["# system message (replaces the CLI's)", oracle.SYSTEM, "# user prompt", oracle.prompt(evidence)])
        + "\n"
    )


# A second oracle example, the other shape of the prompt: the module judged on a spec without criterion
# ids (the planner's checks are numbered and listed once, as the criteria to judge), two other
# components' criteria, two verify commands, no changed file but two left out of the tree for their size.
ORACLE_MODULE = "oracle-module"


def render_oracle_module() -> str:
    evidence = oracle.Evidence(
        module=MODULE,
        scope="module",
        target=MODULE,
        component="",
        task="",
        diff="diff --git a/data/big.bin b/data/big.bin\n… diff cut at 60000 characters",
        changed_files=[],
        rubric=Rubric(
            checks=("slugify('Hello World') is 'hello-world'", "the cli prints the slug of its argument"),
            others=(
                "[SLUG-07] python -m slugify prints the slug — component cli",
                "[SLUG-08] a slug is at most 80 characters — not planned yet",
            ),
        ),
        commands=[
            oracle.CommandResult(
                name="verify-tests", command="python -m pytest -q", exit_code=1, output_tail="1 failed, 15 passed"
            ),
            oracle.CommandResult(
                name="verify-lint", command="ruff check .", exit_code=0, output_tail="All checks passed!"
            ),
        ],
        notes="The cli is in slugify/__main__.py.",
        left_out=["data/big.bin (120 MB)", "data/huge.bin (300 MB)"],
    )
    return _oracle_text(evidence)


def oracle_module_path() -> Path:
    return GOLDEN / f"{ORACLE_MODULE}.txt"


KINDS = (Kind.PLANNING, Kind.TASK, Kind.SPEC, Kind.RESEARCH, Kind.ORACLE)


def path(kind: Kind) -> Path:
    return GOLDEN / f"{kind.value}.txt"


def refresh() -> list[Path]:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in KINDS:
        path(kind).write_text(render(kind), encoding="utf-8")
        written.append(path(kind))
    oracle_module_path().write_text(render_oracle_module(), encoding="utf-8")
    written.append(oracle_module_path())
    return written
