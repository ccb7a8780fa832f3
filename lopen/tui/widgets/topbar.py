"""The top bar (U1): who and where on the first line, progress and spending on the second.

    ◆ Lopen 0.1.0 │ slugify │ scripted-opus │ openai · BYOK │ ⎇ lopen/slugify
    Building ●●●●●●○ Step 6/7 │ running │ ctx 12k/128k ██░░ │ tok 45k/∞ │ premium 3/∞ │ $0.42

The cost is the module's, priced as each call was recorded (``lopen.workflow.prices``): ``$0.42``,
``$0.42/$5.00`` under a money budget, ``unpriced`` when no call's model had a price.

Each segment has a priority: when the terminal is narrow, the least important segments go first
(graceful narrowing down to 80 columns and below), never the step indicator.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.widget import Widget

import lopen
from lopen.app.views.live import dollars
from lopen.tui.state import PHASES, ScreenState
from lopen.tui.symbols import Symbols
from lopen.tui.widgets import glyphs
from lopen.tui.widgets.gauge import gauge
from lopen.tui.widgets.step_dots import step_dots

RUN_STATE_STYLE = {
    "running": "$success",
    "paused": "$warning",
    "stopping": "$warning",
    "failed": "$error",
    "complete": "$success",
}


@dataclass(frozen=True)
class TopBarData:
    """What the top bar shows, read off a ``ScreenState`` by :meth:`of`."""

    version: str = lopen.__version__
    module: str = ""
    model: str = ""
    provider: str = ""
    auth: str = ""
    branch: str = ""
    worktree: str = ""
    step: int = 0
    phase: str = ""
    run_state: str = "idle"
    pause_requested: str = ""
    context_used: int = 0
    context_limit: int = 0
    tokens: int = 0
    token_budget: int = 0
    premium: float = 0.0
    premium_budget: int = 0
    money: str = ""  # the module's cost as shown ("" before any model call)
    money_budget: float = 0.0
    watching: bool = False

    @classmethod
    def of(cls, state: ScreenState, watching: bool = False) -> TopBarData:
        module_tokens = state.tokens("module")
        model = state.model or state.models.get("building") or state.models.get("planning", "")
        return cls(
            module=state.module,
            model=model,
            provider=state.info.provider,
            auth=state.info.auth,
            branch=state.fold.branch,
            worktree=state.fold.worktree,
            step=state.step,
            phase=PHASES.get(state.step, state.phase.replace("_", " ").title()),
            run_state=state.run_state,
            pause_requested=state.fold.pause_requested,
            context_used=state.context_used,
            context_limit=state.context_limit,
            tokens=module_tokens.total,
            token_budget=state.info.token_budget,
            premium=module_tokens.premium,
            premium_budget=state.info.premium_budget,
            money=module_tokens.money if module_tokens.calls else "",
            money_budget=state.info.money_budget,
            watching=watching,
        )


def fit(segments: list[tuple[int, Content]], width: int, sep: Content) -> Content:
    """Join ``(priority, content)`` segments with ``sep``; drop the highest priority numbers first
    until the line fits ``width`` (the last one left is cropped)."""
    kept = list(segments)
    while len(kept) > 1 and sum(c.cell_length for _, c in kept) + sep.cell_length * (len(kept) - 1) > width:
        worst = max(range(len(kept)), key=lambda i: (kept[i][0], i))
        kept.pop(worst)
    line = sep.join([c for _, c in kept])
    return line.truncate(width, ellipsis=True) if line.cell_length > width else line


def top_lines(data: TopBarData, symbols: Symbols, width: int) -> tuple[Content, Content]:
    sep = Content.styled(f" {symbols.sep} ", "dim")
    where = data.branch or ""
    if data.worktree and data.worktree.rstrip("/").rsplit("/", 1)[-1] not in where:
        where = f"{where} @ {data.worktree.rstrip('/').rsplit('/', 1)[-1]}" if where else data.worktree
    who = f" {symbols.mid} ".join(x for x in (data.provider, data.auth) if x)
    first: list[tuple[int, Content]] = [
        (0, Content.assemble((f"{symbols.logo} ", "$accent"), ("Lopen", "bold"), f" {data.version}")),
        (1, Content.styled(data.module or "-", "bold $accent")),
        (2, Content.assemble(("model ", "dim"), data.model or "-")),
        (4, Content.styled(who or "-", "")),
        (3, Content.assemble((f"{symbols.branch} ", "dim"), where or "-")),
    ]
    state = data.run_state
    if data.pause_requested and state == "running":
        state = "pause requested"
    if data.watching:
        state = f"watching {symbols.mid} {state}"
    mark = f"{symbols.paused} " if state.startswith("pause") else ""
    second: list[tuple[int, Content]] = [
        (0, step_dots(data.step, symbols, data.phase)),
        (1, Content.styled(mark + state, RUN_STATE_STYLE.get(data.run_state, "dim"))),
        (2, gauge("ctx", data.context_used, data.context_limit, symbols, width=6)),
        (3, gauge("tok", data.tokens, data.token_budget, symbols, width=6)),
        (4, gauge("premium", round(data.premium, 2), data.premium_budget, symbols, width=6)),
    ]
    if data.money:
        shown = data.money + (f"/{dollars(data.money_budget)}" if data.money_budget else "")
        second.append((5, Content.styled(shown, "dim" if data.money == "unpriced" else "")))
    return fit(first, width, sep), fit(second, width, sep)


class TopBar(Widget):
    """Two lines, redrawn from a :class:`TopBarData` (``show``) at the widget's current width."""

    DEFAULT_CSS = """
    TopBar { height: 2; background: $panel; color: $foreground; padding: 0 1; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.data = TopBarData()

    def show(self, data: TopBarData) -> None:
        if data != self.data:
            self.data = data
            self.refresh()

    def render(self) -> Content:
        first, second = top_lines(self.data, glyphs(self), max(self.content_size.width, 20))
        return Content("\n").join([first, second])
