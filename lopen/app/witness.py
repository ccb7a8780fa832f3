"""Git witnesses the event log, the event log witnesses git (issue 22, item 3).

Each commit Lopen makes carries ``Lopen-Chain: <version> <digest>`` — its module stream's hash chain head
when it was made (``lopen.git.witness``) — and the event that records it (``CommitRecorded``, or
``ComponentMerged`` for a merge commit) keeps the same value. :func:`check` takes the facts (each such
event), the commits as git stores them, and a way to hash the stream's event at a version, and says
for each commit:

- **witnessed**: the commit exists, has the recorded tree, its trailer is the recorded one, names a
  version before the event's own, and the event at that version hashes to the trailer's digest;
- **not witnessed**: a commit made before Lopen wrote the trailer (neither the event nor the commit
  has one) — reported, not a failure;
- otherwise a :class:`WitnessFailed` naming the commit and the event: the commit is missing, its tree
  or trailer differs, or the history before it no longer hashes to what the commit says.

``lopen verify`` runs it on the store and the repository; ``lopen verify --bundle`` on an export's copies
of both (``lopen.app.export``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from events import catalogue as ev
from events.backends import ChainRow
from lopen.errors import LopenError
from lopen.git.witness import Commit, parse_chain

TYPES = ("CommitRecorded", "ComponentMerged")  # the events that name a commit Lopen made


class WitnessFailed(LopenError):
    """A commit and the event recording it do not vouch for each other."""

    def __init__(self, what: str, why: str, how: str, *, sha: str, seq: int) -> None:
        super().__init__(what, why, how)
        self.sha = sha
        self.seq = seq


@dataclass(frozen=True)
class Fact:
    """One event naming a commit Lopen made: where it is stored and what it says."""

    seq: int
    stream: str
    version: int
    type: str
    sha: str
    tree: str
    chain: str

    def describe(self) -> str:
        return f"event #{self.seq} of {self.stream} (version {self.version}, {self.type})"


@dataclass
class Witnessed:
    """What :func:`check` found: ``witnessed`` commits vouch for the history before them;
    ``unwitnessed`` ones were made before the trailer existed (their shas)."""

    witnessed: int = 0
    unwitnessed: list[str] = field(default_factory=list)

    @property
    def commits(self) -> int:
        return self.witnessed + len(self.unwitnessed)


def facts(rows: Iterable[tuple[ChainRow, ev.Event]]) -> list[Fact]:
    """The facts among decoded events: every ``CommitRecorded``, every merge that made a commit."""
    found = []
    for row, event in rows:
        if isinstance(event, ev.CommitRecorded) or (isinstance(event, ev.ComponentMerged) and not event.fast_forward):
            found.append(Fact(row[0], row[1], row[2], type(event).__name__, event.sha, event.tree, event.chain))
    return found


def check(
    found: Iterable[Fact],
    commits: dict[str, Commit | None],
    digest_at: Callable[[str, int], str | None],
    where: str,
) -> Witnessed:
    """Check each fact against its commit (``commits``: as read from ``where``, None when absent) and the
    chain (``digest_at(stream, version)``: that event's digest, None when there is none); the first one
    that does not fit raises ``WitnessFailed``."""
    result = Witnessed()
    for fact in found:
        commit = commits.get(fact.sha)
        sha = fact.sha[:12]
        if commit is None:
            raise WitnessFailed(
                f"commit {sha} named by {fact.describe()} is not in {where}",
                "the history says Lopen made it; the commit is gone (rewritten or removed from git) or was never there",
                "fetch it if another clone made it (`git fetch`, a worker's remote), else compare the branch "
                "with a backup: git's history no longer matches the record",
                sha=fact.sha,
                seq=fact.seq,
            )
        if fact.tree and commit.tree != fact.tree:
            raise WitnessFailed(
                f"commit {sha} named by {fact.describe()} does not have the recorded tree",
                f"the event says tree {fact.tree[:12]}, the commit has {commit.tree[:12]}",
                "the commit was replaced by another with the same id, or the event was changed: compare both "
                "with a backup",
                sha=fact.sha,
                seq=fact.seq,
            )
        said = commit.chain
        if not fact.chain and not said:
            result.unwitnessed.append(fact.sha)  # made by a Lopen older than the trailer
            continue
        if not said:
            raise WitnessFailed(
                f"commit {sha} named by {fact.describe()} has no Lopen-Chain trailer",
                f"Lopen made it with `Lopen-Chain: {fact.chain}`, and the commit in {where} lacks it: the "
                "commit was rewritten (amended, rebased, filtered) after Lopen made it",
                "compare the branch with a backup or the remote; the record keeps the commit Lopen made",
                sha=fact.sha,
                seq=fact.seq,
            )
        if fact.chain and said != fact.chain:
            raise WitnessFailed(
                f"commit {sha}'s Lopen-Chain trailer does not match {fact.describe()}",
                f"the commit says `{said}`, the event says `{fact.chain}`: one of them was rewritten",
                "compare the commit and the event with a backup; `lopen replay` shows the event as stored",
                sha=fact.sha,
                seq=fact.seq,
            )
        parsed = parse_chain(said)
        if parsed is None or parsed[0] >= fact.version:
            raise WitnessFailed(
                f"commit {sha}'s Lopen-Chain trailer `{said}` cannot be the head before {fact.describe()}",
                "a trailer names a version before the event that records its commit, and a 64-digit digest",
                "the commit or the event was rewritten: compare them with a backup",
                sha=fact.sha,
                seq=fact.seq,
            )
        version, digest = parsed
        actual = digest_at(fact.stream, version)
        if actual != digest:
            now = f"it now hashes to {actual[:16]}…" if actual else "the history no longer has that event"
            raise WitnessFailed(
                f"the history before commit {sha} is not the one the commit witnessed",
                f"the commit's trailer says version {version} of {fact.stream} hashed to {digest[:16]}… when "
                f"{fact.describe()} made it; {now}: the event history was rewritten since",
                "stop here: restore the store from a backup; `lopen verify --full` names the rewritten event "
                "unless the whole history after it was rewritten too",
                sha=fact.sha,
                seq=fact.seq,
            )
        result.witnessed += 1
    return result
