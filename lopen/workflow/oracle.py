"""The oracle (T8–T10): evidence Lopen collects itself, a prompt for a cheap model, its verdict.

The model never supplies the evidence: the tree judged is the worktree's content as git writes it,
the diff and changed files come from git between the scope's recorded base commit and that tree,
the test result from running the spec's verify commands on it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from lopen.process import run
from lopen.workflow.steps import Kind

OUTPUT_TAIL = 4_000


class CommandResult(msgspec.Struct, frozen=True):
    name: str
    command: str
    exit_code: int
    output_tail: str
    duration: float = 0.0

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


class Finding(msgspec.Struct, frozen=True):
    severity: str = "info"
    category: str = ""
    description: str = ""
    location: str = ""


class Verdict(msgspec.Struct, frozen=True):
    """``raw`` is the oracle's answer when it could not be read as a verdict (kept for the record)."""

    passed: bool
    confidence: float
    summary: str
    findings: list[Finding] = []
    raw: str = ""
    tree: str = ""  # the git tree judged (set by the Oracle from its evidence)


class Evidence(msgspec.Struct, frozen=True):
    module: str
    scope: str  # task | component | module
    target: str
    component: str
    task: str
    diff: str
    changed_files: list[str]
    acceptance: list[str]
    commands: list[CommandResult]
    notes: str = ""
    tree: str = ""  # the git tree judged
    base: str = ""  # the scope's base commit the diff starts from
    problems: list[str] = []  # what fails the verdict whatever the oracle says (e.g. the spec was edited)
    left_out: list[str] = []  # files the tree leaves out for their size (git.max_file_mb), as "path (N MB)"


Confine = Callable[[str], tuple[list[str], dict[str, str]]]  # shell command → (argv, env)


def run_command(
    name: str, command: str, root: Path, timeout: float = 900, confine: Confine | None = None
) -> CommandResult:
    """Run a spec hook command in ``root`` (the worktree); the command never outlives Lopen and never
    reads the user's terminal. It runs the model's code: ``confine`` (``Gateway.confined``) gives it the
    model's own sandbox and an environment without credentials. Without it (tests), Lopen's Python
    comes first on PATH."""
    if confine is not None:
        argv, env = confine(command)
    else:
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        argv = ["/bin/sh", "-c", command]
    started = time.monotonic()
    try:
        done = run(argv, root, timeout=timeout, env=env)
        output, code = (done.stdout + done.stderr), done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = f"timed out after {timeout:.0f} s: {exc}", 124
    return CommandResult(
        name=name,
        command=command,
        exit_code=code,
        output_tail=output[-OUTPUT_TAIL:],
        duration=time.monotonic() - started,
    )


def prompt(evidence: Evidence, step: int = 6) -> str:
    header = (
        f"[lopen] module={evidence.module} phase=building step={step} component={evidence.component or '-'} "
        f"task={evidence.task or '-'} kind={Kind.ORACLE.value} scope={evidence.scope} target={evidence.target}"
    )
    commands = (
        "\n\n".join(f"$ {c.command}  (exit {c.exit_code})\n{c.output_tail}" for c in evidence.commands)
        or "(the specification names no verify command)"
    )
    acceptance = "\n".join(f"- {item}" for item in evidence.acceptance) or "(none recorded)"
    files = "\n".join(f"- {f}" for f in evidence.changed_files) or "(none)"
    files += "".join(
        f"\n- {f}: too large, left out of the tree and the commit (git.max_file_mb)" for f in evidence.left_out
    )
    return (
        f"{header}\n\nYou are a strict reviewer. Decide whether the {evidence.scope} `{evidence.target}` of module "
        f"`{evidence.module}` is really complete: every acceptance item is met by the change, the tests pass "
        "and cover it, nothing is stubbed. Answer with ONE JSON object and nothing else:\n"
        '{"passed": true|false, "confidence": 0.0-1.0, "summary": "...", "findings": '
        '[{"severity": "error|warning|info", "category": "...", "description": "...", "location": "file:line"}]}'
        f"\n\n## Acceptance items\n{acceptance}\n\n## Changed files\n{files}\n\n## Verify commands\n{commands}"
        f"\n\n## Notes from the implementer\n{evidence.notes or '(none)'}\n\n## Diff\n```diff\n{evidence.diff}\n```"
    )


SYSTEM = "You review code changes for Lopen. You have no tools. Reply with exactly one JSON object."

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)
# The seeds' verdict shape says "confidence": "high" | "medium" | "low"; Lopen's prompt asks for 0.0-1.0.
CONFIDENCE_WORDS = {"high": 0.9, "medium": 0.6, "low": 0.3}


def _confidence(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return min(max(float(value), 0.0), 1.0)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in CONFIDENCE_WORDS:
            return CONFIDENCE_WORDS[word]
        try:
            return min(max(float(word.rstrip("%")) / (100 if word.endswith("%") else 1), 0.0), 1.0)
        except ValueError:
            return None
    return None


def parse_verdict(text: str) -> Verdict:
    """Read the oracle's JSON verdict; fenced or surrounded by prose is fine, ``confidence`` may be a
    number or high/medium/low. Anything else is a failed verdict that keeps the raw answer."""
    for candidate in _candidates(text):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if not (isinstance(data, dict) and isinstance(data.get("passed"), bool)):
            continue
        confidence = _confidence(data.get("confidence", 0.0))
        if confidence is None:
            continue
        try:
            findings = msgspec.convert(data.get("findings") or [], type=list[Finding], strict=False)
        except msgspec.ValidationError:
            findings = []
        return Verdict(
            passed=data["passed"],
            confidence=confidence,
            summary=str(data.get("summary", "")),
            findings=findings,
        )
    return Verdict(passed=False, confidence=0.0, summary="the oracle's answer was not a JSON verdict", raw=text)


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        found.append(text[start : end + 1])
    return found
