"""Tool discipline (B5): spot re-reads of unchanged files and re-runs of a failing command.

A pure analysis of one invocation's tool calls, in the order they finished. It never blocks
anything: it returns findings, each carrying a short corrective instruction for the next
invocation's prompt; recording them (``CorrectiveInstructionIssued``) and sending them is the
workflow's job. Documented in ``docs/guardrails.md`` ("Tool discipline").

**File reads.** A read is a successful ``view`` call (argument ``path``) or a successful ``bash``
call that is one plain read command — ``cat F``, ``less F``, ``head [-n N] F``, ``tail [-n N] F``
or ``sed -n SCRIPT F`` with exactly one file and no pipe, redirection, ``;``/``&&``, substitution
or glob (see ``_read_target``). Each read is fingerprinted with xxhash (the result text, minus
the bash exit-code marker, so ``cat F`` and ``view F`` of the same content match). A read whose
fingerprint equals the previous read's of the same path adds one to that path's count; a
different fingerprint (new content, or another part of the file via ``view_range``/``head``)
starts the count at 1 again, and so does a successful ``create`` or ``edit`` of the path. A
finding is made when a path's count exceeds ``max_file_reads``.

Paths are compared after normalisation: surrounding whitespace and a leading ``./`` go, ``..``
and doubled slashes collapse (``posixpath.normpath``). Absolute paths under
``working_directory`` (when given) become relative to it. Without it, an absolute path and a
relative one name the same file when the absolute path ends with ``/`` + the relative one
(``/w/src/a.py`` ~ ``src/a.py``): the CLI's ``create``/``edit`` want absolute paths while
models often ``view`` relative ones. A wrong match merges two files whose reads then differ in
content (and so reset) unless they hold the same text, or makes an edit reset one file too many.

**Command retries.** A ``bash`` call failed when its result ends with the CLI's marker
``<shellId: N completed with exit code X>`` with X ≠ 0, or when ``success`` is false (the CLI
reports ``success=True`` for a non-zero exit: the marker is the real signal). Commands are
compared with their whitespace collapsed. Each failure of a command adds one to its count; the
count goes back to 0 when that command succeeds, on any successful ``create``/``edit``, and on
any other successful ``bash`` command that might have changed files (anything but the plain
read commands above and ``ls``, ``pwd``, ``grep``, ``rg``, ``wc``, ``tree``, ``git
status|diff|log|show``). Failed commands, reads and Lopen's own tools change nothing. A result
without the marker (a detached shell, a cut-off summary) is not a failure. A finding is made
when the re-runs — failures after the first — exceed ``max_command_retries``, i.e. when the
count exceeds ``max_command_retries + 1``; its ``count`` is the number of failures.

One finding per (category, subject), with the longest run seen, in the order the limits were
first exceeded.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import msgspec
import xxhash

from events.catalogue import ToolCalled
from lopen.copilot.results import ToolCallRecord

__all__ = ["Finding", "analyze", "content_hash", "exit_code", "from_events", "normalise_path"]

Category = Literal["file-reads", "command-retries"]

_MARKER = re.compile(r"<shellId: [^>\s]+ completed with exit code (-?\d+)>\s*\Z")
_WRITE_TOOLS = frozenset({"create", "edit"})
_OPERATOR = re.compile(r"[;&|<>()]+")  # shlex gives operators their own tokens
_EXPANSION = re.compile(r"[$`*?\[\]{}~]")  # a read target must be a literal path
_READ_ONLY = frozenset({"ls", "pwd", "grep", "rg", "wc", "tree"})
_READ_ONLY_GIT = frozenset({"status", "diff", "log", "show"})
_SHOWN_COMMAND = 120  # longest command quoted verbatim in an instruction


class Finding(msgspec.Struct, frozen=True):
    """One breach of tool discipline and the instruction for the next invocation's prompt."""

    category: Category
    subject: str  # the path (file-reads) or the whitespace-normalised command (command-retries)
    count: int  # reads of unchanged content, or consecutive failures without a change
    instruction: str


# -- small public helpers -------------------------------------------------------------------------


def exit_code(result: str) -> int | None:
    """The exit code in a CLI ``bash`` result's trailing marker, or None when there is none."""
    match = _MARKER.search(result)
    return int(match.group(1)) if match else None


def content_hash(result: str) -> str:
    """xxh3-64 of a tool result without the bash marker (whose shell id changes every call)."""
    return xxhash.xxh3_64_hexdigest(_MARKER.sub("", result).encode("utf-8", "surrogatepass"))


def normalise_path(path: str, working_directory: str = "") -> str:
    """``./a/../b.py`` → ``b.py``; absolute paths under ``working_directory`` become relative."""
    text = path.strip()
    if not text:
        return ""
    text = posixpath.normpath(text)
    if working_directory and text.startswith("/"):
        root = posixpath.normpath(working_directory.strip())
        if text == root:
            return "."
        if text.startswith(root.rstrip("/") + "/"):
            return text[len(root.rstrip("/")) + 1 :]
    return text


# -- the analysis -------------------------------------------------------------------------------


def analyze(
    calls: Sequence[ToolCallRecord],
    max_file_reads: int,
    max_command_retries: int,
    *,
    working_directory: str = "",
) -> list[Finding]:
    """Findings for one invocation's tool calls (oldest first); empty when all is well."""
    if max_file_reads < 1:
        raise ValueError(f"max_file_reads must be 1 or more, not {max_file_reads}")
    if max_command_retries < 0:
        raise ValueError(f"max_command_retries must be 0 or more, not {max_command_retries}")
    found = _Found()
    reads = _Reads(max_file_reads, found)
    commands = _Commands(max_command_retries, found)
    for call in calls:
        arguments = _arguments(call.arguments)
        if call.name == "view":
            path = normalise_path(str(arguments.get("path") or ""), working_directory)
            if call.success and path:
                reads.read(path, content_hash(call.result))
        elif call.name in _WRITE_TOOLS:
            if call.success:
                reads.changed(normalise_path(str(arguments.get("path") or ""), working_directory))
                commands.changed()
        elif call.name == "bash":
            command = arguments.get("command")
            if not isinstance(command, str) or not command.strip():
                continue
            code = exit_code(call.result)
            if not call.success or (code is not None and code != 0):
                commands.failed(command)
                continue
            tokens = _simple_tokens(command)
            target = _read_target(tokens)
            commands.succeeded(command, read_only=target is not None or _is_read_only(tokens))
            if target:
                reads.read(normalise_path(target, working_directory), content_hash(call.result))
    return found.list()


class _Found:
    """One finding per (category, subject): the longest run, in order of first breach."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Finding] = {}

    def note(self, key: str, finding: Finding) -> None:
        previous = self.items.get((finding.category, key))
        if previous is None or finding.count > previous.count:
            self.items[(finding.category, key)] = finding  # an update keeps its place in the dict

    def list(self) -> list[Finding]:
        return list(self.items.values())


class _Streak(msgspec.Struct):
    display: str
    fingerprint: str
    count: int


class _Reads:
    def __init__(self, limit: int, found: _Found) -> None:
        self.limit = limit
        self.found = found
        self.streaks: dict[str, _Streak] = {}

    def _key(self, path: str) -> str:
        if path in self.streaks:
            return path
        return next((key for key in self.streaks if _same_file(key, path)), path)

    def read(self, path: str, fingerprint: str) -> None:
        key = self._key(path)
        streak = self.streaks.get(key)
        if streak is None or streak.fingerprint != fingerprint:
            streak = self.streaks[key] = _Streak(display=path, fingerprint=fingerprint, count=0)
        streak.count += 1
        if not path.startswith("/"):
            streak.display = path  # prefer the relative spelling in the instruction
        if streak.count > self.limit:
            self.found.note(key, _read_finding(streak.display, streak.count))

    def changed(self, path: str) -> None:
        if path:
            for key in [key for key in self.streaks if _same_file(key, path)]:
                del self.streaks[key]


class _Commands:
    def __init__(self, limit: int, found: _Found) -> None:
        self.limit = limit
        self.found = found
        self.failures: dict[str, int] = {}

    def failed(self, command: str) -> None:
        key = " ".join(command.split())
        count = self.failures[key] = self.failures.get(key, 0) + 1
        if count - 1 > self.limit:  # re-runs are the failures after the first
            self.found.note(key, _command_finding(key, count))

    def succeeded(self, command: str, read_only: bool) -> None:
        if read_only:
            self.failures.pop(" ".join(command.split()), None)
        else:
            self.changed()  # it may have changed files (sed -i, pip install, a formatter…)

    def changed(self) -> None:
        self.failures.clear()


def _read_finding(path: str, count: int) -> Finding:
    return Finding(
        category="file-reads",
        subject=path,
        count=count,
        instruction=f"You read {path} {count} times without it changing; its content is unchanged — "
        "keep what you need from the first read instead of reading it again.",
    )


def _command_finding(command: str, count: int) -> Finding:
    shown = command if len(command) <= _SHOWN_COMMAND else command[: _SHOWN_COMMAND - 1] + "…"
    return Finding(
        category="command-retries",
        subject=command,
        count=count,
        instruction=f"`{shown}` failed {count} times in a row with no file changed in between; "
        "read the failure, change the code, then re-run it.",
    )


# -- parsing the calls --------------------------------------------------------------------------


def _arguments(arguments: dict | str | None) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return {}


def _same_file(a: str, b: str) -> bool:
    if a == b:
        return True
    if a.startswith("/") == b.startswith("/"):
        return False
    absolute, relative = (a, b) if a.startswith("/") else (b, a)
    return relative not in (".", "..") and not relative.startswith("../") and absolute.endswith("/" + relative)


def _simple_tokens(command: str) -> list[str] | None:
    """The words of a single plain command, or None (pipes, redirections, lists, substitutions)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    if not tokens or any(_OPERATOR.fullmatch(token) or "`" in token or "$(" in token for token in tokens):
        return None
    return tokens


def _read_target(tokens: list[str] | None) -> str | None:
    """The file a plain read command reads, or None."""
    if not tokens:
        return None
    name, args = tokens[0], tokens[1:]
    files: list[str] = []
    if name in ("cat", "less"):
        files = [arg for arg in args if not arg.startswith("-")]
    elif name in ("head", "tail"):
        skip = False
        for arg in args:
            if skip:
                skip = False
            elif arg in ("-n", "-c", "--lines", "--bytes"):
                skip = True
            elif not arg.startswith("-"):
                files.append(arg)
    elif name == "sed":
        quiet, script, skip = False, False, False
        for arg in args:
            if skip:
                skip, script = False, True
            elif arg in ("-n", "--quiet", "--silent"):
                quiet = True
            elif arg in ("-E", "-r"):
                continue
            elif arg == "-e":
                skip = True
            elif arg.startswith("-"):
                return None  # -i, --in-place, -f… are not a plain read
            elif not script:
                script = True
            else:
                files.append(arg)
        if not quiet:
            return None
    else:
        return None
    if len(files) != 1 or _EXPANSION.search(files[0]):
        return None
    return files[0]


def _is_read_only(tokens: list[str] | None) -> bool:
    if not tokens:
        return False
    if tokens[0] in _READ_ONLY:
        return True
    return tokens[0] == "git" and len(tokens) > 1 and tokens[1] in _READ_ONLY_GIT


# -- replaying recorded events ------------------------------------------------------------------


def from_events(events: Iterable[ToolCalled]) -> list[ToolCallRecord]:
    """Tool-call records rebuilt from one invocation's ``ToolCalled`` events, for ``analyze``.

    Pass the events of a single invocation, in recorded order; other event types are skipped.
    ``result_summary`` holds only the first 300 characters of a result; the event's ``exit_code`` and
    ``result_hash`` (``exit_code()`` and ``content_hash()`` of the full result) make the replay exact.
    Events recorded without them fall back to the summary, where a long bash output has lost its
    exit-code marker.
    """
    records: list[ToolCallRecord] = []
    for index, event in enumerate(events):
        if not isinstance(event, ToolCalled):
            continue
        arguments: dict | str | None = event.arguments
        if isinstance(arguments, dict) and set(arguments) == {"raw"}:
            arguments = arguments["raw"]  # the workflow wraps non-dict arguments this way
        result = event.result_summary
        code = event.exit_code
        digest = event.result_hash
        if digest or code is not None:
            code = exit_code(result) if code is None else code
            body = f"[lopen: result with content hash {digest}]" if digest else _MARKER.sub("", result)
            result = body if code is None else f"{body}<shellId: ? completed with exit code {code}>"
        records.append(
            ToolCallRecord(
                call_id=f"{event.invocation_id or 'invocation'}#{index}",
                name=event.tool,
                arguments=arguments,
                result=result,
                success=event.success,
                duration=event.duration,
            )
        )
    return records
