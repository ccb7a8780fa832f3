"""Events: the only state Lopen has — event types, the store, projections, replay.

The bottom layer: imports neither ``lopen`` nor ``actors``. Import what you need from the
submodules (``events.catalogue``, ``events.store``, ``events.recorded``, ``events.fold`` (the one
fold of a module's plan and progress), ``events.journal`` (recording with it), ``events.locks``,
``events.errors``); the names below are also reachable here, loaded on first use so that
``import events.catalogue`` stays cheap. See ``events.store`` and docs/store.md, docs/events.md.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EventStore": "events.store",
    "Recorded": "events.recorded",
    "module_stream": "events.recorded",
    "Journal": "events.journal",
    "ModuleState": "events.fold",
    "parse_session_id": "events.recorded",
    "ModuleLock": "events.locks",
    "module_lock": "events.locks",
    "redact_text": "events.redaction",
    "Event": "events.catalogue",
    "EVENT_TYPES": "events.catalogue",
    "StoreError": "events.errors",
    "ConcurrencyConflict": "events.errors",
    "ModuleLocked": "events.errors",
    "ProjectionError": "events.errors",
    "StoreCorrupted": "events.errors",
    "StoreUnavailable": "events.errors",
    "StoreWriteError": "events.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'events' has no attribute {name!r}")
