"""Research (W9): the topics of the spec's References that a research invocation was given.

``ModuleState`` field: ``researched``. A topic researched once is never researched again for the
module (``lopen.workflow.decide.assess`` asks for research only for the spec's other topics), so a
resumed run — or a second worker — does not repeat it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import catalogue as ev
from events.folds.rules import Rule

if TYPE_CHECKING:
    from events.fold import ModuleState


def _completed(s: ModuleState, e: ev.ResearchCompleted) -> None:
    s.researched = list(dict.fromkeys([*s.researched, *e.topics]))


RULES: dict[type, Rule] = {
    ev.ResearchCompleted: Rule(None, _completed),
}
