"""An auditor's export (issue 22, item 5): ``lopen export <session>`` and ``lopen verify --bundle``.

The bundle is one zip file (docs/audit.md describes it for people)::

    manifest.json     format, session, project, module, when, by which Lopen; per stream the number
                      of events and its head (version, digest) at the session's end; the heads the store
                      recorded at export time; the approved specs included
    events.jsonl      every event of the session's module stream up to the session's last event, and of
                      every ``blob:…`` stream whose key those events name — one JSON object a line, in ``seq``
                      order: seq, stream, version, topic, ``state`` (the stored bytes, as text) and
                      ``sealed`` (the link of an event stored before the chain, else null)
    commits.jsonl     each commit those events record (CommitRecorded, a merge's ComponentMerged): its
                      sha, tree, parents, message and ``object`` — git's commit object, base64
    spec/<hash>.md    the text of each approved spec whose hash an approval in the events names

:func:`verify_bundle` needs nothing but the file: it hashes every stream's chain again from the stored
bytes (a link that does not fit names the event, as ``lopen verify`` does), checks each stream's head,
that each blob's text (unpacked) hashes to its key and that every blob an event names is bundled, that
each commit object hashes to its sha, that each recorded commit's ``Lopen-Chain`` trailer names the chain
as bundled (``lopen.app.witness``), and that each spec text hashes to its approval.
"""

from __future__ import annotations

import base64
import re
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from lopen.errors import LopenError

if TYPE_CHECKING:
    from events.backends import ChainRow
    from events.catalogue import Event
    from events.store import EventStore
    from lopen.app.context import Project

FORMAT = "lopen-audit-bundle/1"
# A blob's key as an event names it (``ToolCalled.result_blob``, each part of ``InvocationStarted.prompt``):
# any quoted 32-hex string, kept when the project has a blob of that key.
BLOB_KEY = re.compile(rb'"([0-9a-f]{32})"')
SPEC_SUBJECT = "the approved specification"


class BundleEvent(msgspec.Struct, kw_only=True):
    seq: int
    stream: str
    version: int
    topic: str
    state: str
    sealed: str | None = None


class BundleCommit(msgspec.Struct, kw_only=True):
    sha: str
    tree: str
    parents: list[str]
    message: str
    object: str  # base64 of git's commit object: what the sha is the hash of


@dataclass(frozen=True)
class _Row:
    seq: int
    stream: str
    version: int
    topic: str
    state: bytes
    sealed: bytes | None

    @property
    def type(self) -> str:
        return self.topic.partition("@")[0]

    def describe(self) -> str:
        return f"event #{self.seq} of {self.stream} (version {self.version}, {self.type})"


def export(project: Project, session: str, out: Path | None = None) -> dict[str, Any]:
    """Write the bundle of ``session`` to ``out`` (default ``<session>.lopen-audit.zip`` in the current
    folder); what it holds."""
    from events.chain import digest
    from events.recorded import blob_stream, module_stream
    from lopen import __version__
    from lopen.app import queries, witness
    from lopen.git import Repository
    from lopen.git.witness import read_commits

    store, project_id = project.opened or project.open()
    try:
        views = store.projections
        views.catch_up()
        row = queries.session_row(views, session)
        stream = module_stream(project_id, row.module)
        rows = [r for r in store.chain_rows(stream) if r[0] <= row.last_seq]
        heads = store.backend.events.chain_heads()
        named = {blob_stream(project_id, m.decode()) for r in rows for m in BLOB_KEY.findall(r[4])}
        for blob in sorted(named):  # a blob has no head (events.blobs): a quoted key of no blob reads nothing
            rows += list(store.chain_rows(blob))
        rows.sort(key=lambda r: r[0])
        decoded = [(r, store.codec.decode(r[3], r[4], r[0])) for r in rows if r[3].startswith(witness.TYPES)]
        facts = witness.facts(decoded)
        repo = Repository(project.root)
        commits = read_commits(project.root, [f.sha for f in facts]) if repo.is_repository() else {}
        specs = _spec_texts(project.root, row.module, store, decoded, rows)
    finally:
        if project.opened is None:
            store.close()
    out = out or Path.cwd() / f"{session}.lopen-audit.zip"
    streams: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = streams.setdefault(r[1], {"events": 0, "head": [0, ""]})
        entry["events"] += 1
        entry["head"] = [r[2], digest(r[3], r[4], r[5]).decode()]
    manifest = {
        "format": FORMAT,
        "session": session,
        "project": project_id,
        "module": row.module,
        "exported_at": time.time(),
        "lopen_version": __version__,
        "streams": streams,
        "recorded_heads": {s: [heads[s][0], heads[s][1].decode()] for s in streams if s in heads},
        "commits": len([c for c in commits.values() if c is not None]),
        "specs": sorted(specs),
    }
    encode = msgspec.json.encode
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("manifest.json", msgspec.json.format(encode(manifest), indent=2))
        bundle.writestr("events.jsonl", b"".join(encode(_event(r)) + b"\n" for r in rows))
        bundle.writestr(
            "commits.jsonl",
            b"".join(
                encode(
                    BundleCommit(
                        sha=c.sha,
                        tree=c.tree,
                        parents=c.parents,
                        message=c.message,
                        object=base64.b64encode(c.raw).decode(),
                    )
                )
                + b"\n"
                for c in commits.values()
                if c is not None
            ),
        )
        for spec_hash, text in sorted(specs.items()):
            bundle.writestr(f"spec/{spec_hash}.md", text)
    return {
        "out": str(out),
        "session": session,
        "events": len(rows),
        "streams": len(streams),
        "commits": manifest["commits"],
        "specs": len(specs),
        "bytes": out.stat().st_size,
    }


def _event(r: ChainRow) -> BundleEvent:
    return BundleEvent(
        seq=r[0],
        stream=r[1],
        version=r[2],
        topic=r[3],
        state=r[4].decode(),
        sealed=r[5].decode() if r[5] is not None else None,
    )


def _spec_texts(
    root: Path, module: str, store: EventStore, decoded: list[tuple[ChainRow, Event]], rows: list[ChainRow]
) -> dict[str, str]:
    """The text of each approved spec the events name: from the branch's spec commits (what Lopen built
    from), else the checkout's file — kept only when it hashes to the approval."""
    from events import catalogue as ev
    from lopen.documents.hashing import content_hash
    from lopen.git.witness import read_commits

    wanted = set()
    for r in rows:
        if r[3].startswith("SpecApproved@"):
            event = store.codec.decode(r[3], r[4], r[0])
            assert isinstance(event, ev.SpecApproved)
            wanted.add(event.spec_hash)
    relative = f"docs/requirements/{module}/SPECIFICATION.md"
    candidates: list[str] = []
    spec_commits = [e.sha for _, e in decoded if isinstance(e, ev.CommitRecorded) and e.message.endswith(SPEC_SUBJECT)]
    for commit in read_commits(root, spec_commits).values() if spec_commits else ():
        if commit is not None:
            text = _show(root, commit.sha, relative)
            if text is not None:
                candidates.append(text)
    checkout = root / relative
    if checkout.is_file():
        candidates.append(checkout.read_text(encoding="utf-8", errors="replace"))
    found: dict[str, str] = {}
    for text in candidates:
        h = content_hash(text)
        if h in wanted:
            found.setdefault(h, text)
    return found


def _show(root: Path, sha: str, relative: str) -> str | None:
    from lopen.git.repository import run_git

    done = run_git(root, "cat-file", "blob", f"{sha}:{relative}")
    return done.stdout if done.returncode == 0 else None


# -- checking a bundle ------------------------------------------------------------------------------------


def verify_bundle(path: Path) -> dict[str, Any]:
    """Check a bundle on its own; what was checked. The first thing that does not fit is a ``LopenError``
    naming it (an event by ``#seq``, stream, version and type; a commit by its sha)."""
    from events import catalogue as ev
    from events.blobs import mismatch, named
    from events.chain import digest, genesis, link_of
    from events.codec import Codec
    from events.recorded import BLOB_PREFIX
    from lopen.app import witness
    from lopen.documents.hashing import content_hash
    from lopen.git.witness import Commit, object_id

    started = time.perf_counter()
    manifest, events, commits, specs = _read(path)
    by_stream: dict[str, list[_Row]] = {}
    for e in events:
        by_stream.setdefault(e.stream, []).append(e)
    digests: dict[tuple[str, int], str] = {}
    for stream, chain in by_stream.items():
        expected = genesis(stream)
        for i, r in enumerate(chain):
            if r.version != i + 1:
                raise _bad(path, f"{r.describe()} follows version {i}", "events of the stream were left out")
            link = r.sealed if r.sealed is not None else link_of(r.state)
            own = digest(r.topic, r.state, r.sealed)
            if link != expected:
                raise _mismatch(path, chain, i, manifest)
            digests[(stream, r.version)] = own.decode()
            expected = own
        head = manifest["streams"].get(stream, {}).get("head", [0, ""])
        if [chain[-1].version, expected.decode()] != list(head):
            if head[0] == chain[-1].version:
                raise _bad(
                    path,
                    f"{chain[-1].describe()} does not match the hash chain",
                    f"the bundle's head of {stream} says it hashes to {str(head[1])[:16]}…, it hashes to "
                    f"{expected.decode()[:16]}…: its stored bytes were changed",
                )
            raise _bad(path, f"{stream} ends at version {chain[-1].version}", f"its head says version {head[0]}")
    for stream in manifest["streams"]:
        if stream not in by_stream:
            raise _bad(path, f"the events of {stream} are missing", "the manifest lists the stream")
    for stream, chain in by_stream.items():  # a blob's text (unpacked) must still hash to its key
        if stream.startswith(BLOB_PREFIX) and (why := mismatch(stream, chain[0].state)):
            raise _bad(path, f"{chain[0].describe()} is not the blob its key names", f"{why}: its text was rewritten")
    for r in events:  # and every blob an event names is bundled (a blob has no head to miss it by)
        for blob in named(r.stream, r.topic, r.state):
            if blob not in by_stream:
                key = blob.rpartition(":")[2]
                raise _bad(path, f"{r.describe()} names the blob {key}, which is not in the bundle", "it was removed")

    codec = Codec()
    decoded = [
        ((r.seq, r.stream, r.version, r.topic, r.state, r.sealed), codec.decode(r.topic, r.state, r.seq))
        for r in events
        if r.topic.startswith((*witness.TYPES, "SpecApproved"))
    ]
    found: dict[str, Commit | None] = {}
    for c in commits:
        raw = base64.b64decode(c.object)
        if object_id(raw, len(c.sha)) != c.sha:
            raise _bad(
                path,
                f"the bundled commit {c.sha[:12]} does not hash to its id",
                "its object was changed after the export (a rewritten message or trailer)",
            )
        found[c.sha] = Commit(c.sha, raw)
    result = witness.check(
        witness.facts((row, e) for row, e in decoded if not isinstance(e, ev.SpecApproved)),
        found,
        lambda stream, version: digests.get((stream, version)),
        f"the bundle {path}",
    )
    approved = {e.spec_hash for _, e in decoded if isinstance(e, ev.SpecApproved)}
    for name, text in specs.items():
        h = content_hash(text)
        if h != name or h not in approved:
            raise _bad(path, f"the spec text spec/{name}.md is not an approved one", f"it hashes to {h}")
    return {
        "bundle": str(path),
        "session": manifest.get("session", ""),
        "events": len(events),
        "streams": len(by_stream),
        "commits": result.commits,
        "witnessed": result.witnessed,
        "not_witnessed": result.unwitnessed,
        "specs": len(specs),
        "seconds": time.perf_counter() - started,
    }


def _read(path: Path) -> tuple[dict[str, Any], list[_Row], list[BundleCommit], dict[str, str]]:
    try:
        with zipfile.ZipFile(path) as bundle:
            names = set(bundle.namelist())
            missing = {"manifest.json", "events.jsonl", "commits.jsonl"} - names
            if missing:
                raise _bad(path, "it is not a Lopen audit bundle", f"it lacks {', '.join(sorted(missing))}")
            manifest = msgspec.json.decode(bundle.read("manifest.json"))
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise _bad(path, "it is not a Lopen audit bundle this Lopen reads", f"its format is not {FORMAT}")
            events = [_row(line) for line in _lines(bundle.read("events.jsonl"), BundleEvent)]
            commits = list(_lines(bundle.read("commits.jsonl"), BundleCommit))
            specs = {
                n.removeprefix("spec/").removesuffix(".md"): bundle.read(n).decode()
                for n in names
                if n.startswith("spec/")
            }
    except FileNotFoundError:
        raise LopenError(f"no bundle {path}", "the file does not exist", "give the path `lopen export` wrote") from None
    except (zipfile.BadZipFile, msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise _bad(path, "it cannot be read", str(exc)) from None
    return manifest, events, commits, specs


def _lines(data: bytes, kind: type) -> Iterator[Any]:
    decoder = msgspec.json.Decoder(kind)
    for line in data.splitlines():
        if line.strip():
            yield decoder.decode(line)


def _row(e: BundleEvent) -> _Row:
    return _Row(
        e.seq, e.stream, e.version, e.topic, e.state.encode(), e.sealed.encode() if e.sealed is not None else None
    )


def _mismatch(
    path: Path,
    chain: list[_Row],
    i: int,
    manifest: dict[str, Any],
) -> LopenError:
    """Event ``i``'s link does not fit the event before it: the event after decides which one changed
    (as ``events.verify``): if it still fits event ``i``, the one before was rewritten."""
    from events.chain import digest, link_of

    r = chain[i]
    own = digest(r.topic, r.state, r.sealed)
    if i + 1 < len(chain):
        after = chain[i + 1]
        intact = (after.sealed if after.sealed is not None else link_of(after.state)) == own
    else:
        intact = list(manifest["streams"].get(r.stream, {}).get("head", [])) == [r.version, own.decode()]
    changed = chain[i - 1] if intact and i > 0 else r
    return _bad(
        path,
        f"{changed.describe()} does not match the hash chain",
        "its stored bytes were changed after the export: the event after it no longer fits it"
        if changed is not r
        else "its link to the event before it, or its own bytes, were changed after the export",
    )


def _bad(path: Path, what: str, why: str) -> LopenError:
    return LopenError(
        f"the bundle {path.name}: {what}",
        why,
        "the bundle is not what `lopen export` wrote: ask for it again, or compare it with the copy it was sent as",
    )
