"""Where a use case works: one project (its root, its settings) and its event store.

Every query and command of :mod:`lopen.app.queries` and :mod:`lopen.app.commands` takes a
:class:`Project`. A face makes one from where it stands — the CLI from the current folder
(``Project.here()``), the MCP server from its ``--project`` and its environment, the TUI from the
store it already holds open (``Project.on(store, project_id, root)``) — and never opens a store
itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from events.store import EventStore
    from lopen.config import Settings


@dataclass
class Project:
    """A project at ``root``, with ``env`` as its environment (None: this process's) and
    ``configured`` its settings when the face already read them.

    ``opened`` is a store some caller holds open (and its project id): the use cases work on it and
    leave it open. Otherwise each ``store()`` opens the project's store and closes it after."""

    root: Path
    env: Mapping[str, str] | None = None
    opened: tuple[EventStore, str] | None = None
    configured: Settings | None = field(default=None, repr=False)

    @classmethod
    def here(cls) -> Project:
        """The project around the current folder (``LopenError`` outside one)."""
        from lopen.project import find_root

        return cls(find_root())

    @classmethod
    def on(cls, store: EventStore, project_id: str, root: Path | None = None) -> Project:
        """A project whose store the caller holds open (the TUI follows its bus)."""
        return cls(root or store.root, opened=(store, project_id))

    def settings(self) -> Settings:
        """The project's settings (read once)."""
        if self.configured is None:
            from lopen.config import load_settings

            self.configured = load_settings(self.root, env=self.env)
        return self.configured

    def has_store(self) -> bool:
        """Whether anything was ever recorded here (a store URL, or the SQLite file): a plain listing
        in a fresh project creates nothing."""
        if self.opened is not None:
            return True
        return bool(self.settings().store.url) or (self.root / ".lopen" / "store.sqlite").exists()

    def open(self, *, read_only: bool = False) -> tuple[EventStore, str]:
        """The project's store and id, for a caller that keeps it open (and closes it); ``read_only``
        for a caller that only reads (a read-only ``.lopen`` is read from a private copy)."""
        from lopen.app.tracing import observe
        from lopen.project import open_store

        settings = self.settings()
        store, project = open_store(self.root, settings.store.url, settings.project.id, read_only=read_only)
        observe(store, project)  # a traced command's appends are spans of its trace
        return store, project

    @contextlib.contextmanager
    def store(self, *, read_only: bool = False) -> Iterator[tuple[EventStore, str]]:
        """The project's store with its projections caught up, and the project id; ``read_only`` for
        queries (see :meth:`open`)."""
        if self.opened is not None:
            from lopen.app.tracing import observe

            store, project = self.opened
            store.projections.catch_up()
            stop = observe(store, project)
            try:
                yield store, project
            finally:
                if stop is not None:
                    stop()
            return
        store, project = self.open(read_only=read_only)
        with store:
            store.projections.catch_up()
            yield store, project
