"""The numbered resources of the context pane (keys 1–9): the plan, the spec, the sections the
current invocation was given, and the module's research — each opened in a viewer.

The plan is rendered from the fold (``events.fold.render_plan``); the others are read from the
project's files when opened (a watcher on another machine may not have them: the viewer says so).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from events.fold import render_plan
from lopen.tui.state import ScreenState

LIMIT = 9


@dataclass(frozen=True)
class Resource:
    """``kind`` is plan | spec | section | research; ``ref`` the section name or research topic."""

    kind: str
    label: str
    ref: str = ""


def resources_of(state: ScreenState, root: Path | None) -> list[Resource]:
    found = [Resource("plan", "Plan"), Resource("spec", "Specification")]
    found += [Resource("section", f"§ {name}", name) for name in state.sections_sent()]
    if root is not None:
        from lopen.documents import list_research

        with contextlib.suppress(OSError):
            found += [
                Resource("research", f"Research: {d.title or d.slug}", d.slug)
                for d in list_research(root, state.module)
            ]
    return found[:LIMIT]


def load_resource(resource: Resource, state: ScreenState, root: Path | None) -> str:
    """The resource's markdown; a sentence saying why when it cannot be read here."""
    if resource.kind == "plan":
        return render_plan(state.fold)
    if root is None:
        return f"_{resource.label} is a file of the project, which is not on this machine._"
    from lopen.documents import DocumentError, load_spec, read_research

    try:
        if resource.kind == "research":
            return read_research(root, state.module, resource.ref)
        _, doc = load_spec(root, state.module)
        if resource.kind == "spec":
            return doc.source
        return doc.text(doc.find(resource.ref, "the specification"))
    except (DocumentError, OSError) as exc:
        return f"_Cannot show {resource.label}: {exc}_"
