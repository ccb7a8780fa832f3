"""Events: the only state Lopen has — event types, the store, projections, replay.

The bottom layer: imports neither ``lopen`` nor ``actors``. See ``events.store`` for the
API the workflow uses and ``docs/store.md`` / ``docs/events.md`` for the design.
"""

from events.catalogue import EVENT_TYPES, Event
from events.errors import (
    ConcurrencyConflict,
    ModuleLocked,
    ProjectionError,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
    StoreWriteError,
)
from events.locks import ModuleLock
from events.recorded import Recorded, module_stream, parse_session_id, session_stream
from events.redaction import redact_text
from events.store import EventStore

__all__ = [
    "EVENT_TYPES",
    "ConcurrencyConflict",
    "Event",
    "EventStore",
    "ModuleLock",
    "ModuleLocked",
    "ProjectionError",
    "Recorded",
    "StoreCorrupted",
    "StoreError",
    "StoreUnavailable",
    "StoreWriteError",
    "module_stream",
    "parse_session_id",
    "redact_text",
    "session_stream",
]
