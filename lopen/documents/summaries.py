"""Summaries of spec sections that do not fit a prompt's budget (L7), cached under
`<root>/.lopen/cache/summaries/<hash>.md`.

A summary is made once per section content: ``<hash>`` is the xxh3-128 of the section's text, so a
changed section gets a new summary and an unchanged one is never summarised twice — across
invocations, runs and modules. Who makes it is the caller's ``make`` (the workflow runs a tool-less
invocation on the cheap model); when it fails it raises ``SummaryFailed`` and the section is cut as it
would be without summaries. The cache is an accelerator only: a summary that cannot be written is
still used, one that cannot be read is made again. Deleting the folder is always safe.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import xxhash

SUMMARY_DIR = Path(".lopen") / "cache" / "summaries"
SUMMARY_WORDS = 120  # what the summary is asked to stay within


class SummaryFailed(Exception):
    """The summary could not be made (the model failed, a budget stopped it, it said nothing)."""


class SummaryWanted(msgspec.Struct, frozen=True):
    """One section to summarise: the module, its key (as ``read_spec`` takes it), its text and hash."""

    module: str
    key: str
    text: str
    digest: str


Make = Callable[[SummaryWanted], str]


def section_digest(text: str) -> str:
    return xxhash.xxh3_128_hexdigest(text.encode())


class Summaries:
    """The summaries of one project's spec sections: cached ones read, missing ones made by ``make``."""

    def __init__(self, root: Path, make: Make) -> None:
        self.dir = root / SUMMARY_DIR
        self.make = make

    def cached(self, text: str) -> str | None:
        try:
            found = (self.dir / f"{section_digest(text)}.md").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return found or None

    def get(self, module: str, key: str, text: str) -> str:
        """The summary of the section ``key`` whose text is ``text``; SummaryFailed when it cannot be made."""
        found = self.cached(text)
        if found is not None:
            return found
        digest = section_digest(text)
        made = self.make(SummaryWanted(module=module, key=key, text=text, digest=digest)).strip()
        if not made:
            raise SummaryFailed("the model answered with an empty summary")
        self._write(self.dir / f"{digest}.md", made + "\n")
        return made

    @staticmethod
    def _write(file: Path, text: str) -> None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(tmp, file)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            pass  # an accelerator: a summary that cannot be kept is made again next time
