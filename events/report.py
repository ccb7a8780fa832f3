"""``lopen session show``: one session's state as a dict, markdown or YAML.

The dict's keys are fixed: ``id, module, phase, step, status, components[…tasks[…]],
tokens{input, output, total, premium_requests, invocations},
resume{step, component, task, last_good_commit}``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.projections import Projections
from events.projections.plan import PlanView, render


def session_report(p: Projections, session_id: str) -> dict[str, Any] | None:
    session = p.sessions.get(session_id)
    if session is None:
        return None
    plan = p.plan.get(session.module) or PlanView(module=session.module)
    tokens = p.tokens.session(session_id)
    point = p.resume.get(session_id)
    return {
        "id": session.id,
        "module": session.module,
        "phase": session.phase,
        "step": session.step,
        "status": session.status,
        "components": [
            {
                "name": c.name,
                "state": c.state,
                "tasks": [
                    {
                        "id": t.id,
                        "name": t.name,
                        "state": t.state,
                        "subtasks": [{"name": s, "state": t.state} for s in t.subtasks],
                    }
                    for t in c.tasks
                ],
            }
            for c in plan.components
        ],
        "tokens": {
            "input": tokens.input if tokens else 0,
            "output": tokens.output if tokens else 0,
            "total": tokens.total if tokens else 0,
            "premium_requests": tokens.premium if tokens else 0.0,
            "invocations": tokens.invocations if tokens else 0,
        },
        "resume": {
            "step": point.step if point else 0,
            "component": point.component if point else "",
            "task": point.task if point else "",
            "last_good_commit": point.last_good_commit if point else "",
        },
    }


def to_markdown(report: dict[str, Any], plan: PlanView) -> str:
    t, r = report["tokens"], report["resume"]
    premium = f"{t['premium_requests']:g}"
    resume = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in r.items() if value)
    lines = [
        f"# Session {report['id']}",
        "",
        f"- module: {report['module']}",
        f"- status: {report['status']}",
        f"- phase: {report['phase'] or '-'} (step {report['step']})",
        f"- tokens: {t['input']:,} in, {t['output']:,} out, {t['total']:,} total; "
        f"{premium} premium requests; {t['invocations']} invocations",
        f"- resume: {resume or 'from the start'}",
        "",
        "## Plan",
        "",
    ]
    tree = render(plan).split("## Components\n\n", 1)[-1]
    return "\n".join(lines) + "\n" + tree


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
