"""A best-effort reading of a shell command: which paths it reads and which it writes.

Used by the permission policy only when no kernel sandbox confines the Copilot CLI (the
"policy only" fallback). The CLI hands Lopen the command text (its own ``possible_paths`` is
empty in practice), so Lopen looks at it itself:

- every argument of every command (and the value of ``name=value``, and the file after ``<``)
  may name a file: each is resolved against the folder the command runs in and counts as a
  *read*; globs are expanded (a word that names nothing protected is harmless);
- ``cd`` moves the folder later words are resolved against;
- the target of an output redirection (``>``, ``>>``, ``&>``, ``>|``, ``2>``) is a *write*, and
  so are the path arguments of commands known to write (``touch``, ``rm``, ``mkdir``, ``tee``,
  ``cp``/``mv``/``ln``/``install`` — their last argument —, ``dd of=``, ``sed -i``, …).

- a nested shell's command (``bash -c '…'``, ``sh -c``, ``eval …``) is read the same way, from
  the same folder; a variable set in the command (``D=../..; echo x > $D/config.json``,
  ``export D=…``) is replaced where it is used;
- a path written inside a word — the code of ``python -c "open('../x', 'w')"``, a here-document's
  lines, ``--file=../x`` — counts as a *read*: every run of path characters in a word that starts
  with ``~``, ``.`` or ``/``, or holds a ``/``. Reads of Lopen's state and secrets are refused, so
  naming them anywhere in a command is.

This is a guard rail, not a sandbox: a program can open any file it likes, under a name it builds
at run time (``open(chr(46) + 'lopen/…')``), which only a kernel sandbox stops. ``lopen doctor``
and the gateway's warning say so.
"""

from __future__ import annotations

import glob
import re
import shlex

import msgspec

from lopen.sandbox.paths import resolve

_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "1>", "2>", "1>>", "2>>", ">&"})
_INPUTS = frozenset({"<", "<<<"})
_HEREDOCS = frozenset({"<<", "<<-"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", "(", ")", "\n"})
_WRAPPERS = frozenset({"sudo", "env", "command", "nice", "nohup", "time", "exec", "xargs", "timeout", "stdbuf"})
_ALL_ARGS_WRITE = frozenset(
    {"touch", "rm", "rmdir", "mkdir", "tee", "truncate", "shred", "unlink", "chmod", "chown", "chgrp", "mkfifo"}
)
_LAST_ARG_WRITE = frozenset({"cp", "mv", "ln", "install", "rsync", "scp"})
_IN_PLACE = frozenset({"sed", "perl"})
_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/full", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty"})
_PATHISH = re.compile(r"^(?:[~.]|.*/)")
_PATH_RUN = re.compile(r"[\w.~${}/+@%:-]+")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_NESTING = 8  # nested shells read at most this deep


class ShellAccess(msgspec.Struct, frozen=True):
    """The resolved paths a command appears to read and to write."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to plain splitting
        return command.split()


def _segments(tokens: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def _substitute(word: str, variables: dict[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced by the values set earlier in the command (others kept)."""
    return _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), word)


def _expand(word: str, cwd: str, home: str, variables: dict[str, str] | None = None) -> list[str]:
    if _harmless_device(word):
        return []
    for name, value in (("$HOME", home), ("${HOME}", home), ("$PWD", cwd), ("${PWD}", cwd)):
        word = word.replace(name, value)
    if variables:
        word = _substitute(word, variables)
    if glob.has_magic(word):
        pattern = resolve(word, cwd, home) if not word.startswith("/") else word
        matches = glob.glob(pattern)
        if matches:
            return [resolve(m, cwd, home) for m in matches]
    return [resolve(word, cwd, home)]


def _harmless_device(word: str) -> bool:
    """``/dev/null``, the standard streams and the terminal: writing them touches no file."""
    return word in _DEVICES or word.startswith("/dev/fd/")


def _pathish(word: str) -> bool:
    return bool(word) and not word.startswith("-") and bool(_PATHISH.match(word))


def _embedded(token: str) -> list[str]:
    """Paths written inside a word that is not one itself: ``open('../x','w')`` → ``../x``."""
    runs = _PATH_RUN.findall(token)
    if runs == [token]:
        return []
    return [run for run in runs if _pathish(run) and run not in {".", ".."}]


def inspect(command: str, cwd: str, home: str, *, _depth: int = 0) -> ShellAccess:
    """The paths ``command``, run in ``cwd``, appears to read and write (resolved)."""
    reads: list[str] = []
    writes: list[str] = []
    variables: dict[str, str] = {}

    def nested(text: str) -> None:
        if _depth < _NESTING:
            inner = inspect(_substitute(text, variables), cwd, home, _depth=_depth + 1)
            reads.extend(inner.reads)
            writes.extend(inner.writes)

    for segment in _segments(_tokens(command)):
        words: list[str] = []
        target: list[str] | None = None  # where the next word goes: a redirection's file
        for token in segment:
            if token in _REDIRECTS or (token.endswith(">") and token.rstrip(">").isdigit()):
                target = writes
            elif token in _INPUTS:
                target = reads
            elif token in _HEREDOCS:
                target = []  # the delimiter word names no file
            elif target is not None:
                if not (token.startswith("&") or token.isdigit()):
                    target += _expand(token, cwd, home, variables)
                target = None
            else:
                words.append(token)
            reads += [p for run in _embedded(token) for p in _expand(run, cwd, home, variables)]
        while words and (
            words[0] in _WRAPPERS or words[0] == "export" or ("=" in words[0] and not words[0].startswith("-"))
        ):
            name, sep, value = words[0].partition("=")
            if sep and name.isidentifier():  # D=../.. (alone, or before a command: either way, remembered)
                variables[name] = _substitute(value, variables)
            words = words[1:]
        if not words:
            continue
        name = words[0].rsplit("/", 1)[-1]
        arguments = words[1:]
        operands = [w for w in arguments if not w.startswith("-")]
        for word in arguments:  # any argument may name a file: `cat config.json`, `if=/etc/shadow`
            value = word.split("=", 1)[1] if "=" in word and not word.startswith("=") else word
            if value and (not value.startswith("-") or _pathish(value)):
                reads += _expand(value, cwd, home, variables)
        if name in _SHELLS and "-c" in arguments[:-1]:  # bash -c 'echo x > ../../config.json'
            nested(arguments[arguments.index("-c") + 1])
        elif name == "eval":
            nested(" ".join(arguments))
        if name in _ALL_ARGS_WRITE:
            writes += [p for w in operands for p in _expand(w, cwd, home, variables)]
        elif name in _LAST_ARG_WRITE and operands:
            writes += _expand(operands[-1], cwd, home, variables)
        elif name == "dd":
            writes += [p for w in arguments if w.startswith("of=") for p in _expand(w[3:], cwd, home, variables)]
        elif name in _IN_PLACE and any(w == "-i" or w.startswith(("-i", "--in-place")) for w in arguments):
            writes += [p for w in operands[1:] for p in _expand(w, cwd, home, variables)]
        elif name in {"cd", "pushd"}:  # later segments run from there
            cwd = (_expand(operands[0], cwd, home, variables) or [cwd])[0] if operands else home
    return ShellAccess(reads=tuple(dict.fromkeys(reads)), writes=tuple(dict.fromkeys(writes)))
