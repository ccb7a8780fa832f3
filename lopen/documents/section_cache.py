"""The section cache (D5) under `<root>/.lopen/cache/sections/`.

Each Markdown file gets a folder named by the xxh64 of its absolute path, holding
- `document.msgpack`: the parsed document (source, front matter, sections), and
- `s-<xxh64 of the query>.msgpack`: one looked-up section's text,
each stamped with the file's path, modification time (ns) and size. An entry whose stamp differs
from the file's is stale: a stale document entry removes the whole folder (so every section entry
of the old file goes with it), a stale section entry is replaced. An entry that cannot be decoded
is corrupt and is silently rebuilt. The cache is an accelerator only: when it cannot be written
(read-only checkout, full disk) documents are parsed and nothing fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import msgspec
import xxhash

from lopen.documents.errors import DocumentError
from lopen.documents.paths import list_modules, spec_path
from lopen.documents.sections import Document, read_document

CACHE_DIR = Path(".lopen") / "cache" / "sections"
_FORMAT = 2
_DOCUMENT = "document.msgpack"


class _Stamp(msgspec.Struct, frozen=True):
    path: str
    mtime_ns: int
    size: int


class _DocumentEntry(msgspec.Struct):
    format: int
    stamp: _Stamp
    document: Document


class CachedSection(msgspec.Struct):
    """A looked-up section: its key, heading line and text (with subsections)."""

    key: str
    line: int
    text: str


class _SectionEntry(msgspec.Struct):
    format: int
    stamp: _Stamp
    query: str
    section: CachedSection


_ENCODER = msgspec.msgpack.Encoder()
_DOCUMENT_DECODER = msgspec.msgpack.Decoder(_DocumentEntry)
_SECTION_DECODER = msgspec.msgpack.Decoder(_SectionEntry)


def _stamp(path: Path) -> _Stamp:
    info = path.stat()
    return _Stamp(path=str(path), mtime_ns=info.st_mtime_ns, size=info.st_size)


class SectionCache:
    """Cached parsing and section lookup for the Markdown files of one project."""

    def __init__(self, root: Path) -> None:
        self.dir = root / CACHE_DIR

    def document(self, path: Path) -> Document:
        """The parsed document at ``path`` (OSError when it cannot be read)."""
        path = path.resolve()
        stamp = _stamp(path)
        folder = self._folder(path)
        entry = self._read(folder / _DOCUMENT, _DOCUMENT_DECODER)
        if entry is not None and entry.format == _FORMAT and entry.stamp == stamp:
            return entry.document
        if entry is not None:  # stale: every section entry of this folder is stale too
            shutil.rmtree(folder, ignore_errors=True)
        document = read_document(path)
        if _stamp(path) == stamp:  # not rewritten while we read it
            self._write(folder / _DOCUMENT, _DocumentEntry(format=_FORMAT, stamp=stamp, document=document))
        return document

    def section(self, path: Path, query: str, label: str = "the document") -> CachedSection:
        """The section ``query`` names in ``path`` (lookup rules: ``Document.find``)."""
        path = path.resolve()
        stamp = _stamp(path)
        wanted = " ".join(query.split()).casefold()
        file = self._folder(path) / f"s-{xxhash.xxh64_hexdigest(wanted.encode())}.msgpack"
        entry = self._read(file, _SECTION_DECODER)
        if entry is not None and entry.format == _FORMAT and entry.stamp == stamp and entry.query == wanted:
            return entry.section
        document = self.document(path)
        found = document.find(query, label)
        section = CachedSection(key=found.key, line=found.line, text=document.text(found))
        if _stamp(path) == stamp:
            self._write(file, _SectionEntry(format=_FORMAT, stamp=stamp, query=wanted, section=section))
        return section

    def _folder(self, path: Path) -> Path:
        return self.dir / xxhash.xxh64_hexdigest(str(path).encode())

    @staticmethod
    def _read(file: Path, decoder: msgspec.msgpack.Decoder) -> object | None:
        try:
            return decoder.decode(file.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, msgspec.DecodeError):  # corrupt or unreadable: drop it and rebuild
            with contextlib.suppress(OSError):
                file.unlink()
            return None

    @staticmethod
    def _write(file: Path, entry: msgspec.Struct) -> None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(_ENCODER.encode(entry))
                os.replace(tmp, file)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            pass  # the cache is an accelerator; failing to write it is not an error


def missing_spec(root: Path, module: str) -> DocumentError:
    """The error for a module without a specification, naming the modules that have one."""
    modules = ", ".join(list_modules(root)) or "none yet"
    return DocumentError(
        f"module {module!r} has no specification at {spec_path(root, module).relative_to(root).as_posix()}; "
        f"modules with a specification: {modules}"
    )


def load_spec(root: Path, module: str, cache: SectionCache | None = None) -> tuple[Path, Document]:
    """The path and parsed (cached) specification of ``module``; DocumentError when it has none."""
    path = spec_path(root, module)
    try:
        return path, (cache or SectionCache(root)).document(path)
    except FileNotFoundError:
        raise missing_spec(root, module) from None
    except OSError as exc:
        raise DocumentError(f"cannot read {path.relative_to(root).as_posix()}: {exc.strerror or exc}") from None
