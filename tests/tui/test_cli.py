"""The TUI's place in the command line: when it opens, and that nothing else pays for Textual."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from lopen.cli import app
from lopen.tui.options import TuiOptions, use_tui


class Tty(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def test_the_tui_opens_only_in_an_interactive_terminal() -> None:
    tty = Tty()
    assert use_tui(env={}, stdin=tty, stdout=tty)
    assert not use_tui(headless=True, env={}, stdin=tty, stdout=tty)
    assert not use_tui(setting=False, env={}, stdin=tty, stdout=tty)
    assert not use_tui(env={"CI": "true"}, stdin=tty, stdout=tty)
    assert not use_tui(env={}, stdin=io.StringIO(), stdout=tty)
    assert not use_tui(env={}, stdin=tty, stdout=io.StringIO())


def test_options_follow_no_color_the_flag_and_the_settings() -> None:
    from lopen.config import load_settings

    settings = load_settings(None, {"display.ascii": True, "display.landing": False})
    options = TuiOptions.resolve(settings, env={}, stdout=Tty())
    assert (options.color, options.ascii, options.landing) == (True, True, False)
    assert not TuiOptions.resolve(None, env={"NO_COLOR": "1"}, stdout=Tty()).color
    assert not TuiOptions.resolve(None, no_color=True, env={}, stdout=Tty()).color
    assert TuiOptions.resolve(None, env={}, stdout=io.StringIO()).ascii  # not UTF-8: ASCII symbols


def test_help_and_plain_commands_never_import_textual() -> None:
    code = (
        "import sys; from lopen.cli import main; sys.argv = ['lopen', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'textual' not in sys.modules, 'textual was imported'\nprint('clean')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "clean" in done.stdout, done.stderr


def test_plain_lopen_without_a_terminal_prints_the_help() -> None:
    result = CliRunner().invoke(app, [])
    assert result.exit_code == 0 and "Commands" in result.output and "watch" in result.output


def test_watch_refuses_an_unknown_session(tmp_path: Path) -> None:
    (tmp_path / ".lopen").mkdir()
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(app, ["watch", "slugify-20260101-9"])
    finally:
        os.chdir(old)
    assert result.exit_code != 0
    assert "no session slugify-20260101-9" in str(result.exception or result.output)


def test_the_gallery_command_exists() -> None:
    result = CliRunner().invoke(app, ["tui", "gallery", "--help"])
    assert result.exit_code == 0 and "stub data" in result.output
