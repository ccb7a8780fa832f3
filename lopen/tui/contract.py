"""The TUI's side of a run's contract: defined by the application (``lopen.app.run_contract``), which
the faces depend on — never the other way round."""

from lopen.app.run_contract import (
    ApprovalRequest,
    HeaderInfo,
    RunCallbacks,
    RunHandle,
    RunOutcome,
    StartRun,
)

__all__ = ["ApprovalRequest", "HeaderInfo", "RunCallbacks", "RunHandle", "RunOutcome", "StartRun"]
