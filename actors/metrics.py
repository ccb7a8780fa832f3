"""The Metrics actor (L5): token and premium totals, and the budget position."""

from __future__ import annotations

import pykka


class MetricsActor(pykka.ThreadingActor):
    def __init__(self, run) -> None:
        super().__init__()
        self.run = run

    def session_totals(self):
        return self.run.session_totals()

    def module_totals(self):
        return self.run.module_totals()
