"""Git as a witness of the event log (issue 22, item 3): the ``Lopen-Chain`` trailer, and commits read
exactly as git stores them.

Every commit Lopen makes carries, next to ``Lopen-Session: <id>``, the head of its module's hash chain
at the moment it was made::

    Lopen-Chain: <version> <sha256 hex>

``<version>`` is the module stream's newest event then and ``<hex>`` that event's digest — what the
next event's ``@prev`` link is (``events.chain``). The event recording the commit (``CommitRecorded``,
``ComponentMerged``) keeps the same value in its ``chain`` field, so each side vouches for the other:
a rewritten history no longer hashes to what the commits say, and a rewritten commit no longer has the
sha the history says.

:func:`read_commits` reads commit objects as their raw bytes (``git cat-file --batch``), so the sha can
be computed again from them (:func:`object_id`) — what ``lopen export`` puts in a bundle and what
``lopen verify --bundle`` checks without the repository.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lopen.git.repository import GitError

CHAIN = "Lopen-Chain"
SESSION = "Lopen-Session"
HARDENED = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.sshCommand=false")


def chain_value(version: int, digest: str) -> str:
    """The trailer's value: ``<version> <digest>``."""
    return f"{version} {digest}"


def trailers(session_id: str, chain: str) -> str:
    """The trailer lines Lopen adds to a commit message it makes (each ends with a newline)."""
    lines = f"{SESSION}: {session_id or '-'}\n"
    if chain:
        lines += f"{CHAIN}: {chain}\n"
    return lines


def chain_of(message: str) -> str:
    """The ``Lopen-Chain`` trailer's value in a commit message ("" when it has none; the last one wins,
    as with git's own trailers)."""
    found = ""
    for line in message.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == CHAIN:
            found = value.strip()
    return found


def parse_chain(value: str) -> tuple[int, str] | None:
    """``(version, digest)`` of a trailer value, None when it is not one."""
    version, _, digest = value.partition(" ")
    if not version.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        return None
    return int(version), digest


@dataclass(frozen=True)
class Commit:
    """A commit object as git stores it: ``raw`` is its content (``git cat-file commit``)."""

    sha: str
    raw: bytes

    @property
    def headers(self) -> dict[str, list[str]]:
        head = self.raw.partition(b"\n\n")[0].decode(errors="replace")
        found: dict[str, list[str]] = {}
        for line in head.splitlines():
            if line.startswith(" "):  # a continued header (a signature)
                continue
            key, _, value = line.partition(" ")
            found.setdefault(key, []).append(value)
        return found

    @property
    def tree(self) -> str:
        return self.headers.get("tree", [""])[0]

    @property
    def parents(self) -> list[str]:
        return self.headers.get("parent", [])

    @property
    def message(self) -> str:
        return self.raw.partition(b"\n\n")[2].decode(errors="replace")

    @property
    def chain(self) -> str:
        return chain_of(self.message)


def object_id(raw: bytes, sha_length: int = 40) -> str:
    """The id git gives a commit object with content ``raw`` (SHA-1, or SHA-256 for a 64-digit id)."""
    algorithm = hashlib.sha256 if sha_length == 64 else hashlib.sha1
    return algorithm(b"commit %d\x00" % len(raw) + raw).hexdigest()


def read_commits(root: Path, shas: list[str]) -> dict[str, Commit | None]:
    """Each commit's object as stored in the repository at ``root`` (None: it has no such commit), read by
    one ``git cat-file --batch``."""
    wanted = list(dict.fromkeys(s for s in shas if s))
    if not wanted:
        return {}
    try:
        done = subprocess.run(
            ["git", *HARDENED, "cat-file", "--batch"],
            cwd=root,
            input="".join(f"{sha}\n" for sha in wanted).encode(),
            capture_output=True,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            timeout=120,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed", str(exc), "install git (apt-get install git)") from exc
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()
        raise GitError(f"git cat-file failed in {root}", said or f"exit {done.returncode}", "check the repository")
    out, found, at = done.stdout, {}, 0
    for sha in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].decode().split()
        at = end + 1
        if len(header) != 3:  # "<sha> missing" / "ambiguous"
            found[sha] = None
            continue
        size = int(header[2])
        body = out[at : at + size]
        at += size + 1
        found[sha] = Commit(header[0], body) if header[1] == "commit" else None
    return found
