"""The numbered resources of the context pane (keys 1–9): the plan, the spec, the sections the
current invocation was given, and the module's research — each opened in a viewer.

The plan is rendered from the fold (``lopen.app.queries.render_plan``); the others are read from the
project's files when opened (``lopen.app.queries.document``; a watcher on another machine may not
have them: the viewer says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lopen.app import queries
from lopen.errors import LopenError
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
    sections = state.sections_sent()
    if root is not None:  # only what opens: a prompt's own parts (its task, a file's contents) are not the spec's
        sections = queries.openable_sections(root, state.module, sections)
    found += [Resource("section", f"§ {name}", name) for name in sections]
    if root is not None:
        found += [
            Resource("research", f"Research: {title}", slug) for slug, title in queries.research(root, state.module)
        ]
    return found[:LIMIT]


def load_resource(resource: Resource, state: ScreenState, root: Path | None) -> str:
    """The resource's markdown; a sentence saying why when it cannot be read here."""
    if resource.kind == "plan":
        return queries.render_plan(state.fold)
    if root is None:
        return f"_{resource.label} is a file of the project, which is not on this machine._"
    try:
        return queries.document(root, state.module, resource.kind, resource.ref)
    except LopenError as exc:
        return f"_Cannot show {resource.label}: {exc.why}_"
