"""The module and component trees (context pane): module → components → tasks → subtasks, each
with ✓ ▶ ○ ✗ (ASCII + > o x) from the one fold's W5 states. The selected component is expanded.

In parallel work each component also names the worker holding it with its lease, and its own branch
until it is merged: the components side by side, as ``lopen session show`` lists them."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text
from textual.widgets import Tree

from lopen.app.views.live import ModuleState
from lopen.tui.widgets import glyphs

# Tree labels are Rich text (the Tree widget's label type): ANSI colour names, not theme variables.
RICH_STYLE = {"complete": "green", "in-progress": "bold cyan", "failed": "red", "pending": "dim"}


def plan_signature(state: ModuleState) -> tuple:
    """Everything the tree shows: it is rebuilt only when this changes."""
    return (
        state.module,
        state.selected,
        state.complete,
        tuple((slug, c.name, state.component_state(slug), tuple(c.tasks)) for slug, c in state.components.items()),
        tuple((t.id, t.name, t.state, tuple(t.subtasks), t.added, t.removed) for t in state.tasks.values()),
        tuple((slug, c.worker, c.until) for slug, c in state.claims.items()),
        tuple((slug, lane.branch, state.merged(slug)) for slug, lane in state.lanes.items()),
    )


def at_work(state: ModuleState, slug: str) -> str:
    """``  · <worker>, lease to 09:12:03Z · <branch>``: who holds the component (while it is not done) and
    its own branch until merged; "" for a component built on the module branch by the run itself."""
    parts = []
    claim = state.claims.get(slug)
    if claim is not None and not state.component_done(slug):
        parts.append(f"{claim.worker}, lease to {datetime.fromtimestamp(claim.until, UTC).strftime('%H:%M:%SZ')}")
    lane = state.lanes.get(slug)
    if lane is not None:
        parts.append(lane.branch + (" (merged)" if state.merged(slug) else ""))
    return "".join(f"  · {part}" for part in parts)


def lines_of(added: int, removed: int, files: int) -> str:
    """``  +12 −3``: the lines a task's commit changed (a component's: its tasks' summed); "" before any
    commit changed a file (P2)."""
    return f"  +{added:,} −{removed:,}" if files else ""


class PlanTree(Tree[str]):
    DEFAULT_CSS = """
    PlanTree { height: 1fr; padding: 0 1; background: $surface; overflow-x: hidden; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("module", **kwargs)  # type: ignore[arg-type]
        self.border_title = "Plan"
        self.show_root = True
        self.guide_depth = 2
        self._signature: tuple | None = None

    def _label(self, state: str, text: str, extra: str = "") -> Text:
        mark = glyphs(self).task(state)
        return Text.assemble((f"{mark} ", RICH_STYLE.get(state, "")), text, (extra, "dim"))

    def show(self, state: ModuleState) -> None:
        signature = plan_signature(state)
        if signature == self._signature:
            return
        self._signature = signature
        module_state = "complete" if state.complete else "in-progress" if state.planned else "pending"
        self.reset(self._label(module_state, state.module), "module")
        if not state.components:
            self.root.add_leaf(Text("no components yet", "dim"))
        for slug, component in state.components.items():
            cstate = state.component_state(slug)
            tasks = state.component_tasks(slug)
            done = sum(t.state == "complete" for t in tasks)
            node = self.root.add(
                self._label(
                    cstate,
                    component.name,
                    (f"  {done}/{len(tasks)}" if tasks else "") + lines_of(*state.changes(slug)) + at_work(state, slug),
                ),
                slug,
                expand=slug == state.selected or cstate in ("in-progress", "failed"),
            )
            for task in tasks:
                lines = lines_of(task.added, task.removed, task.files) if task.commit else ""
                if task.subtasks:
                    leaf = node.add(
                        self._label(task.state, task.name, lines), task.id, expand=task.state == "in-progress"
                    )
                    for sub in task.subtasks:
                        leaf.add_leaf(self._label("complete" if task.state == "complete" else "pending", sub))
                else:
                    node.add_leaf(self._label(task.state, task.name, lines), task.id)
        self.root.expand()
