"""The TUI's dialogs (U2), one module each. Each is a ``ModalScreen`` whose result is the answer:
push it with a callback (``app.push_screen(ConfirmDialog(q), on_answer)``) or await it in a worker
(``await app.push_screen_wait(...)``). Escape always means the safe answer (no, not now, cancel)."""

from lopen.tui.dialogs.approval import ApprovalDialog
from lopen.tui.dialogs.confirm import ConfirmDialog
from lopen.tui.dialogs.error import ErrorDialog
from lopen.tui.dialogs.keys import KeysDialog
from lopen.tui.dialogs.resume import ResumeDialog
from lopen.tui.dialogs.viewer import ViewerDialog

__all__ = ["ApprovalDialog", "ConfirmDialog", "ErrorDialog", "KeysDialog", "ResumeDialog", "ViewerDialog"]
