"""What Lopen tells the model (L2): a system message per invocation and a user prompt.

The user prompt's first line is a machine-readable header; scripted playbooks match on it:
``[lopen] module=<m> phase=<phase> step=<n> component=<c|-> task=<id|-> kind=<kind>``.
"""

from __future__ import annotations

import msgspec

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
    Kind.PLANNING: (
        "Planning (steps {steps}). {planning_steps} Record each result with Lopen's tools — the recorded "
        "plan is the only memory the next invocations get. Do not write code in this invocation."
    ),
    Kind.TASK: (
        "Step 6 — Iterate Through Tasks: implement task {task} of component {component}. Write the code and "
        "its tests, run the tests, then call verify_task_completion('{task}'). Only when it passes may you "
        "call update_task_status('{task}', 'complete'). If verification fails, fix what it found and verify "
        "again. If you cannot finish, call update_task_status('{task}', 'failed', reason). Do not commit: "
        "Lopen commits verified work."
    ),
    Kind.COMPONENT_VERIFICATION: (
        "All tasks of component {component} are complete. Call verify_component_completion('{component}'); "
        "if it fails, report what is missing with report_progress."
    ),
    Kind.MODULE_VERIFICATION: (
        "Every component is complete. Call verify_module_completion('{module}') to have the module's "
        "acceptance criteria verified."
    ),
}

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

TOOL_GUIDE: dict[str, str] = {
    "get_current_context": "where the workflow stands (phase, step, module, component, task)",
    "read_spec": "one section of the specification, by heading",
    "read_research": "a research note by topic",
    "read_plan": "the current plan with task states",
    "log_research": "save what you learned about an unknown as a research note",
    "report_progress": "tell the user what you are doing (shown live)",
    "record_dependencies": "record the module's dependencies",
    "record_components": "record the module's components and their status",
    "select_component": "choose the component to build next",
    "record_tasks": "record a component's tasks",
    "update_task_status": "mark a task in-progress, complete (only after a passing verification) or failed",
    "verify_task_completion": "have an independent reviewer check the task against diff, tests and criteria",
    "verify_component_completion": "have the component checked at its boundary",
    "verify_module_completion": "have the whole module checked against its acceptance criteria",
}


class PromptContext(msgspec.Struct, frozen=True):
    module: str
    kind: Kind
    step: int
    component: str = ""
    task: str = ""
    task_text: str = ""
    context_text: str = ""
    tools: tuple[str, ...] = ()
    budget_hint: str = ""
    notes: tuple[str, ...] = ()
    commit_convention: str = "feat({module}): <task> in <component>"
    parallel: int = 1  # components built at once (workflow.parallelism)


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
        + (f"; component {ctx.component}" if ctx.component else "")
        + (f"; task {ctx.task}" if ctx.task else "")
        + ".",
    ]
    if ctx.tools:
        parts.append("## Lopen's tools\n" + "\n".join(f"- {name}: {TOOL_GUIDE[name]}" for name in ctx.tools))
    constraints = [
        "Use only the tools offered; Lopen validates every call and tells you what was wrong.",
        f"Commits are made by Lopen with the message `{ctx.commit_convention.format(module=ctx.module)}`.",
    ]
    if ctx.budget_hint:
        constraints.append(ctx.budget_hint)
    parts.append("## Constraints\n" + "\n".join(f"- {c}" for c in constraints))
    if ctx.notes:
        parts.append("## Notes from Lopen\n" + "\n".join(f"- {n}" for n in ctx.notes))
    return "\n\n".join(parts)


def user_prompt(ctx: PromptContext) -> str:
    steps = "2–5" if ctx.step <= 3 else "4–5"
    instruction = INSTRUCTIONS[ctx.kind].format(
        module=ctx.module,
        component=ctx.component,
        task=ctx.task,
        steps=steps,
        planning_steps=PLANNING_STEPS[2 if ctx.step <= 3 else 4]
        + (PARALLEL_PLANNING.format(n=ctx.parallel) if ctx.parallel > 1 else ""),
    )
    parts = [header(ctx), instruction]
    if ctx.task_text:
        parts.append("## The task\n" + ctx.task_text)
    if ctx.context_text:
        parts.append("## From the specification\n" + ctx.context_text)
    return "\n\n".join(parts)
