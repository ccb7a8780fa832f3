"""Prompts under review: the exact prompt and tool schemas of each invocation kind are golden files.

A change to what a model receives fails here until ``bin/refresh-golden`` writes the files again and
the diff is reviewed with the change."""

from __future__ import annotations

import pytest

from lopen.workflow.steps import Kind
from tests.prompt_golden import KINDS, path, render


@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
def test_the_prompt_of_each_kind_is_the_reviewed_one(kind: Kind) -> None:
    golden = path(kind)
    assert golden.is_file(), f"{golden} is missing: run bin/refresh-golden and review it"
    assert render(kind) == golden.read_text(encoding="utf-8"), (
        f"the {kind.value} prompt changed: run bin/refresh-golden and review the diff of {golden.name}"
    )
