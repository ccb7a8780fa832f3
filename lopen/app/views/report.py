"""``lopen session show``: one session's state as a dict, markdown or YAML.

The dict's keys are fixed: ``id, module, phase, step, status, components[…tasks[…, tokens,
premium_requests, seconds, lines_added, lines_removed, files_changed], changes, branch, worker,
lease_until], tokens{input, output, total, premium_requests, invocations, cost_usd, unpriced_calls, cost},
changes{lines_added, lines_removed, files_changed}, resume{step, component, task, last_good_commit}``.
A task's figures are its module's (every session, its oracle checks included); ``changes`` sums the
task commits' (P2). The plan and the resume point come from the
one fold (the module's plan row): a session is a view of its module's history. In parallel work each
component shows its own branch and the worker holding it with its lease (side by side in markdown).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import msgspec

from events.fold import MODULE_ITEM, PLAN_ITEM, ModuleState, TaskNode, render_plan
from events.folds.tokens import TokenTotals
from events.projections import Projections
from lopen.text import duration, lines_changed, number


def session_report(p: Projections, session_id: str) -> dict[str, Any] | None:
    session = p.sessions.get(session_id)
    if session is None:
        return None
    plan = p.plan.get(session.module) or ModuleState(project=session.project, module=session.module)
    tokens = p.tokens.session(session_id)
    spent = p.tokens.tasks(session.module, session.project)
    current = next((t for t in plan.ordered_tasks() if t.state in ("in-progress", "failed")), None)
    return {
        "id": session.id,
        "module": session.module,
        "phase": session.phase,
        "step": session.step,
        "status": session.status,
        "protection": session.protection,
        "worktree": session.worktree,
        "components": [
            {
                "name": c.name,
                "slug": slug,
                "state": plan.component_state(slug),
                "depends_on": list(c.depends_on),
                "tasks": [
                    {
                        "id": t.id,
                        "name": t.name,
                        "state": t.state,
                        "commit": t.commit,
                        "subtasks": [{"name": s, "state": t.state} for s in t.subtasks],
                        **_task_figures(t, spent.get(t.id)),
                    }
                    for t in plan.component_tasks(slug)
                ],
                "changes": _changes(*plan.changes(slug)),
                "branch": plan.lanes[slug].branch if slug in plan.lanes else "",
                "worker": plan.claims[slug].worker if slug in plan.claims else "",
                "lease_until": plan.claims[slug].until if slug in plan.claims else 0.0,
            }
            for slug, c in plan.components.items()
        ],
        "tokens": {
            "input": tokens.input if tokens else 0,
            "output": tokens.output if tokens else 0,
            "total": tokens.total if tokens else 0,
            "premium_requests": tokens.premium if tokens else 0.0,
            "invocations": tokens.invocations if tokens else 0,
            "cost_usd": round(tokens.cost, 6) if tokens else 0.0,
            "unpriced_calls": tokens.unpriced if tokens else 0,
            "cost": tokens.money if tokens else "$0.00",
        },
        "changes": _changes(*plan.changes()),
        "resume": {
            "step": session.step,
            "component": plan.selected,
            "task": current.id if current else "",
            "last_good_commit": plan.tip if plan.tip != plan.branch_base else "",
        },
        "problems": list(plan.problems),
    }


def _changes(added: int, removed: int, files: int) -> dict[str, int]:
    return {"lines_added": added, "lines_removed": removed, "files_changed": files}


def _task_figures(task: TaskNode, spent: TokenTotals | None) -> dict[str, Any]:
    """P2: what a task cost across every session of its module (its oracle checks included), the wall
    time of its invocations, and what its commit changed (``git diff --numstat`` of its verified tree)."""
    return {
        "tokens": spent.total if spent else 0,
        "premium_requests": spent.premium if spent else 0.0,
        "seconds": round(task.seconds, 3),
        **_changes(*((task.added, task.removed, task.files) if task.commit else (0, 0, 0))),
    }


def _task_table(report: dict[str, Any]) -> list[str]:
    """One row per task — tokens, premium requests, time, lines changed — and the module's total."""
    tasks = [t for c in report["components"] for t in c["tasks"]]
    if not tasks:
        return []
    lines = [
        "",
        "## Tasks",
        "",
        "| task | state | tokens | premium requests | time | lines changed |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]

    def row(name: str, state: str, f: dict[str, Any]) -> str:
        lines = lines_changed(f["lines_added"], f["lines_removed"], f["files_changed"]) if f["files_changed"] else "-"
        return (
            f"| {name} | {state} | {number(f['tokens'])} | {number(round(f['premium_requests'], 2))} "
            f"| {duration(f['seconds'])} | {lines} |"
        )

    lines += [row(t["id"], t["state"], t) for t in tasks]
    total = {
        "tokens": sum(t["tokens"] for t in tasks),
        "premium_requests": sum(t["premium_requests"] for t in tasks),
        "seconds": sum(t["seconds"] for t in tasks),
        **report["changes"],
    }
    lines.append(row("**all tasks**", "", total))
    return lines


def to_markdown(report: dict[str, Any], plan: ModuleState) -> str:
    t, r = report["tokens"], report["resume"]
    premium = f"{t['premium_requests']:g}"
    resume = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in r.items() if value)
    lines = [
        f"# Session {report['id']}",
        "",
        f"- module: {report['module']} ({plan.state})",
        f"- status: {report['status']}",
        f"- phase: {report['phase'] or '-'} (step {report['step']})",
        f"- tokens: {t['input']:,} in, {t['output']:,} out, {t['total']:,} total; "
        f"{premium} premium requests; {_plural(t['invocations'], 'invocation')}",
        f"- cost: {t['cost']} (priced per model: budget.prices)",
        f"- lines changed: {lines_changed(*report['changes'].values())} (the module's task commits)",
        f"- resume: {resume or 'from the start'}",
    ]
    if report.get("worktree"):
        lines.append(f"- worktree: {report['worktree']} (branch {plan.branch or 'lopen/' + plan.module})")
    if report.get("protection"):
        lines.append(f"- sandbox: {report['protection']}")
    lines += _at_work(report, plan)
    lines += _task_table(report)
    lines += ["", "## Plan", ""]
    tree = render_plan(plan).split("## Components\n\n", 1)[-1]
    text = "\n".join(lines) + "\n" + tree
    if report.get("problems"):
        text += "\n## Problems in the history\n\n" + "\n".join(f"- {p}" for p in report["problems"]) + "\n"
    return text


def _at_work(report: dict[str, Any], plan: ModuleState, now: float | None = None) -> list[str]:
    """Parallel work: the components side by side — state, the worker holding each and its lease, its branch."""
    if not plan.lanes and not plan.claims:
        return []
    now = time.time() if now is None else now
    lines = [
        "",
        "## Components at work",
        "",
        "| component | state | worker | lease | branch | lines changed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in report["components"]:
        until = c["lease_until"]
        lease = ""
        if c["worker"]:
            clock = datetime.fromtimestamp(until, UTC).strftime("%H:%M:%SZ")
            lease = f"until {clock}" + (" (live)" if until > now else " (ran out)")
        branch = c["branch"] + (" (merged)" if c["branch"] and plan.merged(c["slug"]) else "")
        ch = c["changes"]
        changed = lines_changed(*ch.values()) if ch["files_changed"] else "-"
        lines.append(
            f"| {c['slug']} | {c['state']} | {c['worker'] or '-'} | {lease or '-'} | {branch or '(module branch)'} "
            f"| {changed} |"
        )
    for item in (PLAN_ITEM, MODULE_ITEM):
        claim = plan.claims.get(item)
        if claim is not None:
            what = "planning" if item == PLAN_ITEM else "module verification"
            live = "live" if claim.until > now else "ran out"
            clock = datetime.fromtimestamp(claim.until, UTC).strftime("%H:%M:%SZ")
            lines.append(f"| ({what}) | - | {claim.worker} | until {clock} ({live}) | - | - |")
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def to_yaml(value: Any, indent: int = 0) -> str:
    """A small YAML emitter for plain data (dicts, lists, scalars); strings are JSON-quoted."""
    return "\n".join(_yaml(value, indent)) + "\n"


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return msgspec.json.encode(str(value)).decode()


def _yaml(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict) and value:
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:")
                lines += _yaml(item, indent + 2)
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
    elif isinstance(value, list) and value:
        for item in value:
            sub = _yaml(item, indent + 2)
            sub[0] = f"{pad}- {sub[0][indent + 2 :]}"
            lines += sub
    else:
        lines.append(f"{pad}{_scalar(value)}")
    return lines
