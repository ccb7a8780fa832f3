"""Console output: colour decisions, NO_COLOR, ASCII fallback, errors on stderr."""

from __future__ import annotations

import io

import pytest

from lopen.cli.output import Console, color_enabled, unicode_ok
from lopen.config import Display, Settings
from lopen.errors import LopenError


class Stream(io.StringIO):
    def __init__(self, tty: bool, encoding: str = "utf-8") -> None:
        super().__init__()
        self._tty = tty
        self._encoding = encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


@pytest.mark.parametrize(
    ("mode", "tty", "env", "expected"),
    [
        ("auto", True, {}, True),
        ("auto", False, {}, False),
        ("auto", True, {"TERM": "dumb"}, False),
        ("auto", True, {"NO_COLOR": "1"}, False),
        ("always", False, {}, True),
        ("always", True, {"NO_COLOR": "yes"}, False),
        ("always", True, {"NO_COLOR": ""}, True),  # no-color.org: only a non-empty value counts
        ("never", True, {}, False),
    ],
)
def test_color_enabled(mode: str, tty: bool, env: dict[str, str], expected: bool) -> None:
    assert color_enabled(mode, Stream(tty), env) is expected


@pytest.mark.parametrize(("encoding", "ok"), [("utf-8", True), ("UTF8", True), ("ascii", False), ("cp1252", False)])
def test_unicode_ok(encoding: str, ok: bool) -> None:
    assert unicode_ok(Stream(False, encoding)) is ok


def test_symbols_and_ascii_fallback(capsys: pytest.CaptureFixture[str]) -> None:
    Console(ascii=False).ok("done")
    Console(ascii=True).ok("done")
    Console(ascii=True).fail("broken")
    assert capsys.readouterr().out == "✓ done\n+ done\nx broken\n"


def test_display_ascii_setting_is_honoured() -> None:
    console = Console.for_settings(Settings(display=Display(ascii=True, color="never")), env={})
    assert (console.ascii, console.color, console.symbol("current")) == (True, False, ">")


def test_colour_is_added_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    Console(color=True).ok("x")
    Console(color=False).ok("y")
    out = capsys.readouterr().out.splitlines()
    assert "\x1b[" in out[0] and out[1] == "✓ y"


def test_errors_and_warnings_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    console = Console()
    error = LopenError("it broke", "because", "do this")
    console.error(error)
    console.warn("careful")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == error.render() + "\nwarning: careful\n"
