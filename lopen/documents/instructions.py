"""The repository's own agent instructions: what a project tells coding agents about itself.

``AGENTS.md``, ``CLAUDE.md`` and ``.github/copilot-instructions.md`` often hold the project's
conventions ("run ./check.sh", "tests live beside the code"). The Copilot CLI would inject them
into its system prompt unseen; Lopen reads them itself, from the user's checkout (where the model
cannot write, so a model cannot instruct its own reviewer), and puts them into its own system
message and the oracle's prompt, recorded with each invocation (``copilot.repository_instructions``
turns this off). Where they contradict Lopen (commit, ask a person), Lopen's rules say which wins.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import xxhash

FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
MAX_CHARS = 12_000  # per file; a longer file is cut (and says so)


class Instructions(msgspec.Struct, frozen=True):
    """One instruction file: its path in the repository, its (possibly cut) text and a content hash."""

    path: str
    text: str
    digest: str
    cut: bool = False

    @property
    def label(self) -> str:
        """How the record names it: ``AGENTS.md@<first 12 hex of xxh3-128>``."""
        return f"{self.path}@{self.digest[:12]}"


def repository_instructions(root: Path) -> list[Instructions]:
    """The instruction files present in ``root`` (the user's checkout), in a fixed order."""
    found: list[Instructions] = []
    for name in FILES:
        path = root / name
        try:
            if not path.is_file() or path.is_symlink():
                continue
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if not text:
            continue
        cut = len(text) > MAX_CHARS
        found.append(
            Instructions(
                path=name,
                text=text[:MAX_CHARS] + ("\n[… cut: the file is longer]" if cut else ""),
                digest=xxhash.xxh3_128_hexdigest(text.encode()),
                cut=cut,
            )
        )
    return found


def render(instructions: list[Instructions]) -> str:
    """The files as one block for a prompt ("" when there are none)."""
    return "\n\n".join(f"### {i.path}\n{i.text}" for i in instructions)
