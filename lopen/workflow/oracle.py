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
from lopen.workflow.rubric import CriterionCheck, Rubric
from lopen.workflow.steps import Kind

OUTPUT_TAIL = 4_000
SHOWN_TAIL = 1_500  # of a failing verify command's output, in the finding the implementer reads
DIFF_CUT = "… diff cut at"  # how lopen.git.Worktree.diff marks a cut diff


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


class CriterionVerdict(msgspec.Struct, frozen=True):
    """The reviewer's judgement of one criterion: met or not, with the evidence it saw."""

    id: str
    met: bool
    evidence: str = ""


class Verdict(msgspec.Struct, frozen=True):
    """``raw`` is the oracle's answer when it could not be read as a verdict (kept for the record);
    ``reviewer_failed`` marks a verdict that failed for the reviewer's fault, not the code's."""

    passed: bool
    confidence: float
    summary: str
    findings: list[Finding] = []
    criteria: list[CriterionVerdict] = []
    raw: str = ""
    tree: str = ""  # the git tree judged (set by the Oracle from its evidence)
    reviewer_failed: bool = False


class Evidence(msgspec.Struct, frozen=True):
    module: str
    scope: str  # task | component | module
    target: str
    component: str
    task: str
    diff: str
    changed_files: list[str]
    rubric: Rubric
    commands: list[CommandResult]
    notes: str = ""
    tree: str = ""  # the git tree judged
    base: str = ""  # the scope's base commit the diff starts from
    problems: list[str] = []  # what fails the verdict whatever the oracle says (e.g. the spec was edited)
    left_out: list[str] = []  # files the tree leaves out for their size (git.max_file_mb), as "path (N MB)"
    nested: list[str] = []  # nested git repositories the tree leaves out (their folders)
    conventions: str = ""  # the repository's agent instructions (lopen.documents.instructions)
    standards: str = ""  # the project's coding standards (lopen.documents.standards), rendered

    @property
    def diff_cut(self) -> bool:
        return DIFF_CUT in self.diff[-200:]

    def judged(self) -> list[CriterionCheck]:
        """What the reviewer calls met or not met: the criteria, or the planner's checks numbered when
        no criterion applies (a spec without ids)."""
        if self.rubric.criteria:
            return list(self.rubric.criteria)
        return [CriterionCheck(id=f"#{n}", text=check) for n, check in enumerate(self.rubric.checks, 1)]


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


VERDICT_SHAPE = (
    '{"passed": true|false, "summary": "one or two sentences", '
    '"criteria": [{"id": "<id>", "met": true|false, "evidence": "the file:line that implements it and the '
    'test that checks it, or what is missing"}], '
    '"findings": [{"severity": "error|warning|info", "description": "...", "location": "file:line"}]}'
)

RULES = (
    "Judge literally, from what is in front of you: the diff, the changed files and the verify commands' "
    "output. A criterion is met only when the diff shows code that implements it and a test that checks it. "
    "Anything missing, stubbed, untested, or that you cannot see (the diff is cut, the code is outside it) "
    "is not met: say what is missing. Judge only the criteria listed to judge; criteria listed as other "
    "components' are not expected in this change. `passed` is true only when every judged criterion is met, "
    "every verify command exited 0 and you report no error finding; every unmet criterion is also an error "
    "finding."
)


def prompt(evidence: Evidence, step: int = 6) -> str:
    """The oracle's prompt: Lopen's header line, the rules, the rubric, then the evidence."""
    header = (
        f"[lopen] module={evidence.module} phase=building step={step} component={evidence.component or '-'} "
        f"task={evidence.task or '-'} kind={Kind.ORACLE.value} scope={evidence.scope} target={evidence.target}"
    )
    parts = [
        header,
        f"Review the {evidence.scope} `{evidence.target}` of module `{evidence.module}`. {RULES}\n"
        f"Answer with ONE JSON object and nothing else:\n{VERDICT_SHAPE}",
    ]
    judged = []
    for item in evidence.judged():
        lines = [f"- [{item.id}] {item.text}"]
        lines += [f"  - the plan checks: {check}" for check in item.checks]
        judged.append("\n".join(lines))
    parts.append("## Criteria to judge\n" + ("\n".join(judged) or "(none: judge the change against its notes)"))
    if evidence.rubric.criteria and evidence.rubric.checks:
        parts.append("## Further checks from the plan\n" + "\n".join(f"- {c}" for c in evidence.rubric.checks))
    if evidence.rubric.others:
        parts.append(
            "## Other components' criteria (not expected in this change; do not judge them)\n"
            + "\n".join(f"- {o}" for o in evidence.rubric.others)
        )
    if evidence.standards:
        parts.append(
            "## Coding standards (a change that breaks one is a finding: an error when it must be fixed)\n"
            + evidence.standards
        )
    if evidence.conventions:
        parts.append("## The project's conventions (its agent instructions)\n" + evidence.conventions)
    files = "\n".join(f"- {f}" for f in evidence.changed_files) or "(none)"
    files += "".join(
        f"\n- {f}: too large, left out of the tree and the commit (git.max_file_mb)" for f in evidence.left_out
    )
    files += "".join(
        f"\n- {f}/: a git repository of its own, left out of the tree and the commit" for f in evidence.nested
    )
    parts.append("## Changed files\n" + files)
    commands = (
        "\n\n".join(f"$ {c.command}  (exit {c.exit_code})\n{c.output_tail}" for c in evidence.commands)
        or "(the specification names no verify command)"
    )
    parts.append("## Verify commands (run by Lopen on exactly this tree)\n" + commands)
    parts.append("## Notes from the implementer\n" + (evidence.notes or "(none)"))
    cut = " (cut: what is not shown cannot be judged met)" if evidence.diff_cut else ""
    parts.append(f"## Diff{cut}\n```diff\n{evidence.diff}\n```")
    return "\n\n".join(parts)


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


UNREADABLE = (
    "the reviewer's answer could not be read as a verdict. This is not a fault in your code: call the "
    "verify tool again and Lopen asks a fresh reviewer"
)


def parse_verdict(text: str) -> Verdict:
    """Read the oracle's JSON verdict; fenced or surrounded by prose is fine, ``confidence`` (no longer
    asked for) may be a number or high/medium/low. ``passed`` must be a JSON boolean; ``criteria``
    entries need an ``id`` and a boolean ``met``. Anything else is a failed verdict, the reviewer's
    fault (``reviewer_failed``), that keeps the raw answer."""
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
        criteria = [
            CriterionVerdict(id=str(c["id"]).strip("[] "), met=c["met"], evidence=str(c.get("evidence", "")))
            for c in data.get("criteria") or []
            if isinstance(c, dict) and isinstance(c.get("met"), bool) and c.get("id") not in (None, "")
        ]
        return Verdict(
            passed=data["passed"],
            confidence=confidence,
            summary=str(data.get("summary", "")),
            findings=findings,
            criteria=criteria,
        )
    return Verdict(passed=False, confidence=0.0, summary=UNREADABLE, raw=text, reviewer_failed=True)


def judge(verdict: Verdict, evidence: Evidence) -> Verdict:
    """Lopen's rules over the reviewer's verdict: it passes only when every judged criterion is called
    met, every verify command exited 0 (a signal's negative code fails too) and no finding is an error.
    A failing command adds a finding with its output's tail (what the implementer needs to fix it); an
    unmet criterion is an error finding; a list that leaves criteria unjudged fails the verdict as the
    reviewer's fault (a verdict with no list at all stands on its ``passed``: the record shows no list)."""
    findings = list(verdict.findings)
    reasons: list[str] = []
    for command in evidence.commands:
        if not command.passed:
            reasons.append(f"`{command.command}` failed (exit {command.exit_code})")
            findings.append(
                Finding(
                    severity="error",
                    category="verify-command",
                    description=f"`{command.command}` exited {command.exit_code}; the end of its output:\n"
                    + command.output_tail[-SHOWN_TAIL:],
                    location=command.name,
                )
            )
    said = {c.id: c for c in verdict.criteria}
    for item in evidence.judged():
        judged = said.get(item.id)
        if judged is not None and not judged.met:
            described = any(item.id in f.description and f.severity == "error" for f in findings)
            if not described:
                findings.append(
                    Finding(
                        severity="error",
                        category="criterion",
                        description=f"[{item.id}] is not met: {judged.evidence or item.text}",
                    )
                )
    if not verdict.reviewer_failed and verdict.passed:
        unjudged = [item.id for item in evidence.judged() if item.id not in said]
        unmet = [c.id for c in verdict.criteria if not c.met]
        errors = [f for f in verdict.findings if f.severity == "error"]
        if unmet:
            reasons.append(f"the reviewer passed it with unmet criteria ({', '.join(unmet)})")
        elif errors:
            reasons.append("the reviewer passed it with an error finding")
        elif unjudged and verdict.criteria and evidence.rubric.criteria and not reasons:
            return msgspec.structs.replace(
                verdict,
                passed=False,
                findings=findings,
                reviewer_failed=True,
                summary=f"the reviewer did not judge {', '.join(unjudged)}. This is not a fault in your code: "
                "call the verify tool again and Lopen asks a fresh reviewer",
            )
    if reasons:
        summary = "; ".join(reasons) + (f". The reviewer said: {verdict.summary}" if verdict.summary else "")
        return msgspec.structs.replace(verdict, passed=False, findings=findings, summary=summary)
    return msgspec.structs.replace(verdict, findings=findings)


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        found.append(text[start : end + 1])
    return found
