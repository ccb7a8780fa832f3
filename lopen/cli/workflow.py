"""The workflow commands: `spec approve`, `run`, `plan`, `build`, `demo`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from lopen.app.commands import Start

MODULE = typer.Argument(..., help="The module, as named under docs/requirements/.")
HEADLESS = typer.Option(False, "--headless", "-q", help="Plain line output; never wait for input.")
PROMPT = typer.Option(
    None,
    "--prompt",
    "-p",
    help="A message for the model, delivered in the next invocation (queued, never injected mid-run).",
)
MODEL = typer.Option(None, "--model", help="Model for every phase (overrides models.*).")
UNATTENDED = typer.Option(False, "--unattended", help="Do not stop for confirmations that can be skipped.")
RESUME = typer.Option(None, "--resume", help="Resume this session id.")
NO_RESUME = typer.Option(False, "--no-resume", help="Start a new session even when one is unfinished.")
DEMO_DIR = typer.Option(None, "--dir", help="Build the example here instead of a temporary folder.")
MAX_ITERATIONS = typer.Option(None, "--max-iterations", help="Pause after this many invocations in this run.", min=1)
PARALLEL = typer.Option(
    None, "--parallel", min=1, help="Build up to N components at once (workflow.parallelism; 1 = one after another)."
)
PLAYBOOK = typer.Option(
    None,
    "--playbook",
    help="Run on the scripted model playing this TOML playbook, started for this run and stopped after it "
    "(its first model for the work, its second for the oracle); no credentials needed.",
)
REPLAN = typer.Option(
    False, "--replan", help="Plan the module again (into the same history: work that is done stays done)."
)


def approve(module: str = MODULE) -> None:
    """Approve a module's specification: the human gate between requirements and planning."""
    from lopen.app import commands
    from lopen.app.context import Project

    approved = commands.approve(Project.here(), module, commands.cli_actor())
    hashed = len(approved.section_hashes)
    typer.echo(
        f"✓ approved the specification of {module} by {approved.approver} "
        f"({hashed} section{'s' * (hashed != 1)} hashed)"
    )
    for gap in approved.notes:
        typer.echo(f"  note: {gap}")
    typer.echo(f"next: lopen run {module}")


def _start(
    module: str,
    *,
    prompt: str | None,
    model: str | None,
    resume: str | None,
    no_resume: bool,
    max_iterations: int | None,
    unattended: bool,
    stop_before: str = "",
    headless: bool = False,
    replan: bool = False,
    parallel: int | None = None,
    playbook: Path | None = None,
) -> None:
    """What `lopen run` means is the app's to say (``lopen.app.commands.start_run``); this carries it out
    (and stops, at the end, what the run was given for its life: the scripted model of ``--playbook``)."""
    from lopen.app import commands
    from lopen.app.context import Project

    flags = {"model": model, "max_iterations": max_iterations, "unattended": unattended, "parallel": parallel}
    start = commands.start_run(
        Project.here(), module, prompt=prompt, replan=replan, headless=headless, playbook=playbook, **flags
    )
    try:
        go_on = f"lopen run {module}" + (f" --playbook {playbook}" if playbook else "")
        _carry_out(start, module, prompt, resume, no_resume, stop_before, headless, unattended, replan, go_on)
    finally:
        start.close()


def _carry_out(
    start: Start,
    module: str,
    prompt: str | None,
    resume: str | None,
    no_resume: bool,
    stop_before: str,
    headless: bool,
    unattended: bool,
    replan: bool,
    go_on: str,
) -> None:
    import sys

    for warning in start.warnings:
        typer.echo(f"warning: {warning}", err=True)
    root, settings = start.root, start.settings
    if start.kind == "converse":  # step 1 as a conversation in the TUI (the model asks, you answer)
        raise typer.Exit(_converse(root, module, settings))
    if start.kind == "complete":
        assert start.outcome is not None
        _finish(*start.outcome)
    if start.kind == "draft":
        from lopen.app.drafting import draft_spec

        code, session_id, detail = draft_spec(root, module, settings, typer.echo, prompt or "")
        _finish(code, session_id, detail)
    if start.tui:
        from lopen.app.run_process import start_run_for
        from lopen.tui import run_tui

        options = {"no_resume": no_resume, "replan": replan, "stop_before": stop_before, "message": prompt}
        run = start_run_for(root, module, settings, **options)
        raise typer.Exit(run_tui(root, module, run, settings=settings, resume=resume, new_session=no_resume))
    from lopen.app.engine import run_module

    code, session_id, detail = run_module(
        root,
        module,
        settings,
        typer.echo,
        resume=resume,
        no_resume=no_resume,
        stop_before=stop_before,
        message=prompt,
        replan=replan,
        ask=None if headless or unattended or not sys.stdin.isatty() else _confirm,
    )
    _finish(code, session_id, detail, go_on=go_on)


def _converse(root: Path, module: str, settings: object) -> int:
    """Draft the module's spec with the person in the TUI, up to the approval gate."""
    from lopen.app.drafting import draft_spec
    from lopen.app.run_contract import RunOutcome
    from lopen.tui import run_conversation

    def draft(conversation):  # type: ignore[no-untyped-def]
        return RunOutcome(*draft_spec(root, module, settings, conversation.say, "", conversation=conversation))  # type: ignore[arg-type]

    return run_conversation(root, module, draft, settings=settings)  # type: ignore[arg-type]


def _confirm(question: str) -> bool:
    """Ask on the terminal; only an explicit yes goes on (anything else, or end of input, is no)."""
    import sys

    typer.echo(f"{question} [y/N]: ", nl=False)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _finish(code: int, session_id: str, detail: str, go_on: str = "") -> None:
    """The run's last lines: how it ended, its session, and — paused or interrupted — how to go on."""
    typer.echo(("✓ " if code == 0 else "✗ " if code == 1 else "! ") + detail)
    if session_id:
        typer.echo(f"session {session_id}: lopen replay {session_id}")
    if go_on and code in (130, 143):  # a pause says how to go on in its own reason
        typer.echo(f"to go on where it stopped: {go_on}")
    raise typer.Exit(code)


def run(
    module: str = MODULE,
    headless: bool = HEADLESS,
    prompt: str | None = PROMPT,
    model: str | None = MODEL,
    unattended: bool = UNATTENDED,
    resume: str | None = RESUME,
    no_resume: bool = NO_RESUME,
    max_iterations: int | None = MAX_ITERATIONS,
    replan: bool = REPLAN,
    parallel: int | None = PARALLEL,
    playbook: Path | None = PLAYBOOK,
) -> None:
    """Run the whole workflow for a module: plan, build, verify, commit — resuming where it stands."""
    _start(
        module,
        playbook=playbook,
        headless=headless,
        prompt=prompt,
        model=model,
        resume=resume,
        no_resume=no_resume,
        max_iterations=max_iterations,
        unattended=unattended,
        replan=replan,
        parallel=parallel,
    )


def plan(
    module: str = MODULE,
    headless: bool = HEADLESS,
    model: str | None = MODEL,
    resume: str | None = RESUME,
    no_resume: bool = NO_RESUME,
) -> None:
    """Run the planning phase only (steps 2–5) of an approved specification."""
    _start(
        module,
        headless=headless,
        prompt=None,
        model=model,
        resume=resume,
        no_resume=no_resume,
        max_iterations=None,
        unattended=False,
        stop_before="building",
    )


def build(
    module: str = MODULE,
    headless: bool = HEADLESS,
    model: str | None = MODEL,
    unattended: bool = UNATTENDED,
    resume: str | None = RESUME,
    max_iterations: int | None = MAX_ITERATIONS,
    parallel: int | None = PARALLEL,
) -> None:
    """Run the building phase (steps 6–7) of a planned module."""
    from lopen.app import commands
    from lopen.app.context import Project

    commands.require_plan(Project.here(), module)
    _start(
        module,
        headless=headless,
        prompt=None,
        model=model,
        resume=resume,
        no_resume=False,
        max_iterations=max_iterations,
        unattended=unattended,
        parallel=parallel,
    )


def demo(directory: Path | None = DEMO_DIR, headless: bool = HEADLESS) -> None:
    """Build the bundled example module offline, against the bundled SCRIPTED model, through the real CLI."""
    from lopen.app.demo import run_demo
    from lopen.config import load_settings
    from lopen.errors import LopenError
    from lopen.term import use_tui

    try:
        tui = use_tui(headless=headless, setting=load_settings(None).display.tui)
    except LopenError:
        tui = use_tui(headless=headless)
    raise typer.Exit(run_demo(directory, typer.echo, show=_demo_in_the_tui if tui else None))


def _demo_in_the_tui(root: Path, settings: object) -> tuple[int, str, str]:
    """The demo's run in the terminal UI: a new session, then `r` resumes it."""
    from lopen.app.demo import MODULE
    from lopen.app.run_process import ProcessRun, start_run_for
    from lopen.tui import run_tui

    runs: list[ProcessRun] = []
    first = start_run_for(root, MODULE, settings, no_resume=True)  # type: ignore[arg-type]  # its process starts now

    def start(callbacks):  # type: ignore[no-untyped-def]
        starter = first if not runs else start_run_for(root, MODULE, settings)  # type: ignore[arg-type]
        runs.append(starter(callbacks))  # type: ignore[arg-type]
        return runs[-1]

    code = run_tui(root, MODULE, start, settings=settings, new_session=True)  # type: ignore[arg-type]
    session_id = runs[-1].session_id if runs else ""
    return code, session_id, "the demo ran in the terminal UI" + (f" (exit code {code})" if code else "")


def resume_session(
    session_id: str = typer.Argument(..., help="The session to resume, e.g. auth-20261126-1."),
    headless: bool = HEADLESS,
    prompt: str | None = PROMPT,
    max_iterations: int | None = MAX_ITERATIONS,
) -> None:
    """Resume a paused or interrupted session where its module really stands."""
    from lopen.app.queries import module_of_session

    module = module_of_session(session_id)
    _start(
        module,
        headless=headless,
        prompt=prompt,
        model=None,
        resume=session_id,
        no_resume=False,
        max_iterations=max_iterations,
        unattended=False,
    )


def draft(
    module: str = MODULE,
    prompt: str = typer.Option(..., "--prompt", "-p", help="What the module should do."),
    headless: bool = HEADLESS,
    model: str | None = MODEL,
) -> None:
    """Step 1: have the model draft a module's specification from a prompt, for you to review and approve."""
    from lopen.app import commands
    from lopen.app.context import Project

    commands.refuse_existing_spec(Project.here(), module)
    _start(
        module,
        headless=headless,
        prompt=prompt,
        model=model,
        resume=None,
        no_resume=True,
        max_iterations=None,
        unattended=False,
    )
