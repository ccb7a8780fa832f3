"""What Lopen tells the model (L2): a system message per invocation and a user prompt.

The user prompt's first line is a machine-readable header; scripted playbooks match on it:
``[lopen] module=<m> phase=<phase> step=<n> component=<c|-> task=<id|-> kind=<kind>``. A summary
request's header ends with ``kind=summary section=<hash>`` (the section's content hash).
"""

from __future__ import annotations

import msgspec

from lopen.documents.summaries import SUMMARY_WORDS, SummaryWanted
from lopen.workflow.steps import STEP_NAMES, Kind, phase_of

ROLE = (
    "You are working for Lopen, an orchestrator that builds a software module from its specification. "
    "Lopen decides what happens next, keeps the plan and the history, verifies your claims with an "
    "independent reviewer and makes the git commits itself. This session is fresh: what you need is "
    "below or can be read with Lopen's tools. Do only what this invocation asks."
)

INSTRUCTIONS: dict[Kind, str] = {
    Kind.SPEC: (
        "Step 1 — Draft Specification. Write docs/requirements/{module}/SPECIFICATION.md following the "
        "specification pattern: front matter (name, description), H1, Overview, Acceptance Criteria as a "
        "checkbox list with ids like [MOD-01], Dependencies, Skills & Hooks (verify-tests etc.), Notes, "
        "References. Record anything you had to research with log_research. Do not write code."
    ),
    Kind.RESEARCH: (
        "Research, before planning (step 2). The specification's References name the topics below. For "
        "each one, find out what building {module} needs to know — read the specification, the project's "
        "code and what the reference says; fetch a URL only if your tools allow it — and record your "
        "findings with log_research(module, topic, content): a '# ' title, then the facts, decisions and "
        "pitfalls that matter here, with their sources. One note per topic (closely related topics may "
        "share one). Planning and every task get the list of your notes by topic and title and read them "
        "with read_research. Do not write code and do not plan in this invocation."
    ),
    Kind.PLANNING: (
        "Planning (steps {steps}). {planning_steps} Every task's acceptance items cite the ids of the "
        'specification\'s criteria they prove, e.g. "[MOD-03] an expired token is refused": the reviewer '
        "judges each task against the criteria it cites. Record each result with Lopen's tools — the recorded "
        "plan is the only memory the next invocations get. Do not write code in this invocation."
    ),
    Kind.TASK: (
        "Step 6 — Iterate Through Tasks: implement task {task} of component {component}. Write the code and "
        "its tests, run {verify}, then call verify_task_completion: an independent reviewer judges your "
        "change against the criteria the task cites, and Lopen runs {verify} on exactly your files. Only when "
        "it passes call update_task_status with status complete. If it fails, fix what it found and verify "
        "again. If you cannot finish, call update_task_status with status failed and the reason."
    ),
    Kind.COMPONENT_VERIFICATION: "Component {component} is verified by Lopen itself.",
    Kind.MODULE_VERIFICATION: "The module {module} is verified by Lopen itself.",
}

LAST_TASK = (
    " This is the last open task of {component}: once it is complete, Lopen has the whole component "
    "verified against its criteria; anything that fails there comes back as a new task."
)

PARALLEL_PLANNING = (
    " Up to {n} components are built at the same time, each in a worktree of its own: in step 4 select "
    "every component that is ready now (all its depends_on complete), up to {n}, and in step 5 record the "
    "tasks of each one you selected."
)

PLANNING_STEPS = {
    2: "Step 2: record the module's dependencies (record_dependencies). Step 3: identify its components "
    "and their status (record_components). Step 4: select the next component to build "
    "(select_component). Step 5: break it into tasks with subtasks and acceptance items (record_tasks).",
    4: "Step 4: select the next component to build (select_component). Step 5: break it into tasks with "
    "subtasks and acceptance items (record_tasks).",
}

# What replaces the CLI's interactive guidelines and code-change rules (copilot.builder_prompt).
GUIDANCE = (
    "You work headless, for Lopen: no person reads or answers you during this invocation. Never ask a "
    "question or wait for confirmation — decide, act, and say what you decided with report_progress. When "
    "you cannot finish, end with Lopen's tools and a reason (a task: update_task_status failed). Lopen keeps "
    "the plan and the history: do not track todos or write planning notes in files. Make complete, focused "
    "changes for this invocation only, in the project's style; view and edit existing files, create new ones."
)


class PromptContext(msgspec.Struct, frozen=True):
    module: str
    kind: Kind
    step: int
    component: str = ""
    task: str = ""
    task_text: str = ""  # sent only when the context does not carry it already
    context_text: str = ""
    tools: tuple[str, ...] = ()
    budget_hint: str = ""
    notes: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()  # research: the topics the spec's References name, not researched yet
    commit_convention: str = "feat({module}): <task> in <component>"
    parallel: int = 1  # components built at once (workflow.parallelism)
    workdir: str = ""  # the worktree the model works in (its cwd)
    branch: str = ""  # the branch Lopen commits to (lopen/<module>, or a component's own)
    verify: str = ""  # the spec's verify-tests command, which Lopen re-runs
    last_task: bool = False  # the component's last open task: its verification follows
    conventions: str = ""  # the repository's agent instructions, rendered
    standards: str = ""  # the project's coding standards (lopen.documents.standards), rendered; tasks only


def header(ctx: PromptContext) -> str:
    return (
        f"[lopen] module={ctx.module} phase={phase_of(ctx.step).value} step={ctx.step} "
        f"component={ctx.component or '-'} task={ctx.task or '-'} kind={ctx.kind.value}"
    )


def system_message(ctx: PromptContext) -> str:
    parts = [
        ROLE,
        f"## Where the workflow stands\nModule {ctx.module}; phase {phase_of(ctx.step).value}; "
        f"step {ctx.step}/7 ({STEP_NAMES[ctx.step]})"
        + (
            "; researching what the specification's References name, before planning"
            if ctx.kind is Kind.RESEARCH
            else ""
        )
        + (f"; component {ctx.component}" if ctx.component else "")
        + (f"; task {ctx.task}" if ctx.task else "")
        + ".",
    ]
    spec = f"docs/requirements/{ctx.module}/SPECIFICATION.md"
    rules = []
    if ctx.workdir:
        rules.append(
            f"The working directory, {ctx.workdir}, is the project's root: a git worktree on the branch "
            f"{ctx.branch or 'lopen/' + ctx.module}. Paths are relative to it."
        )
    if ctx.kind is not Kind.SPEC:
        rules.append(
            f"The approved specification, {spec}, is not to be edited — not even its checkboxes: Lopen "
            "tracks progress in the plan, and an edited spec fails verification."
        )
    rules += [
        "There is no network: packages cannot be installed; use what the project and the standard library have.",
        "Do not commit, branch or change git's configuration: Lopen commits verified work as "
        f"`{ctx.commit_convention.format(module=ctx.module)}`.",
        "Lopen validates every tool call; a refusal says what was wrong and what to do instead.",
    ]
    if ctx.verify and ctx.kind is Kind.TASK:
        rules.append(f"Lopen's verify command for this module is `{ctx.verify}`, run from the working directory.")
    if ctx.budget_hint:
        rules.append(ctx.budget_hint)
    parts.append("## Rules\n" + "\n".join(f"- {r}" for r in rules))
    if ctx.standards and ctx.kind is Kind.TASK:
        parts.append(
            "## Coding standards (every change follows them; the reviewer judges yours against them too)\n"
            + ctx.standards
        )
    if ctx.conventions:
        parts.append(
            "## The project's conventions (its agent instructions; where they say to commit, push or ask a "
            "person, Lopen's rules above win)\n" + ctx.conventions
        )
    if ctx.notes:
        parts.append("## Notes from Lopen\n" + "\n".join(f"- {n}" for n in ctx.notes))
    return "\n\n".join(parts)


def user_prompt(ctx: PromptContext) -> str:
    steps = "2–5" if ctx.step <= 3 else "4–5"
    verify = f"`{ctx.verify}`" if ctx.verify else "the tests"
    instruction = INSTRUCTIONS[ctx.kind].format(
        module=ctx.module,
        component=ctx.component,
        task=ctx.task,
        steps=steps,
        verify=verify,
        planning_steps=PLANNING_STEPS[2 if ctx.step <= 3 else 4]
        + (PARALLEL_PLANNING.format(n=ctx.parallel) if ctx.parallel > 1 else ""),
    )
    if ctx.kind is Kind.TASK and ctx.last_task:
        instruction += LAST_TASK.format(component=ctx.component)
    parts = [header(ctx), instruction]
    if ctx.topics:
        parts.append("## Topics to research\n" + "\n".join(f"- {t}" for t in ctx.topics))
    if ctx.task_text:
        parts.append("## The task\n" + ctx.task_text)
    if ctx.context_text:
        parts.append("## From the specification\n" + ctx.context_text)
    return "\n\n".join(parts)


SUMMARY_SYSTEM = (
    "You summarise one section of a software module's specification for a model that builds the module "
    "and has no room in its prompt for the whole section. Keep every requirement, name, number, limit "
    "and example that decides what the code must do; drop the prose. Plain Markdown, no preamble, no "
    f"heading, at most {SUMMARY_WORDS} words. You have no tools: answer with the summary only."
)


def summary_prompt(ctx: PromptContext, wanted: SummaryWanted) -> str:
    """The request for a summary of one spec section, for the invocation ``ctx`` describes."""
    head = (
        f"[lopen] module={ctx.module} phase={phase_of(ctx.step).value} step={ctx.step} "
        f"component={ctx.component or '-'} task={ctx.task or '-'} kind={Kind.SUMMARY.value} section={wanted.digest}"
    )
    return (
        f"{head}\n\nSummarise the section § {wanted.key} of docs/requirements/{wanted.module}/SPECIFICATION.md "
        f"in at most {SUMMARY_WORDS} words.\n\n## The section\n{wanted.text.strip()}"
    )
