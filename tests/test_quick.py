"""`lopen do`: the module a quick request gets (``lopen.app.quick.module_for``), without a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from lopen.app.context import Project
from lopen.app.quick import module_for
from lopen.errors import LopenError


def test_the_module_is_named_from_the_requests_words_and_is_unique(tmp_path: Path) -> None:
    project = Project(tmp_path, env={})

    assert module_for(project, "Please fix the failing date-parser test!") == "do-fix-failing-date-parser"
    for taken in ("do-fix-failing-date-parser", "do-fix-failing-date-parser-2"):
        (tmp_path / "docs" / "requirements" / taken).mkdir(parents=True)
        (tmp_path / "docs" / "requirements" / taken / "SPECIFICATION.md").write_text("# x\n")
    assert module_for(project, "fix the failing date parser test") == "do-fix-failing-date-parser-3"
    assert len(module_for(project, "x" * 200)) <= 40


def test_a_request_with_no_words_is_refused_with_what_to_say(tmp_path: Path) -> None:
    with pytest.raises(LopenError) as raised:
        module_for(Project(tmp_path, env={}), "the … !")
    assert "lopen do" in raised.value.how
