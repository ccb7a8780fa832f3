"""Protected and writable paths (lopen/sandbox/paths.py), one rule at a time.

What a user would notice when one of these breaks: a secret in their home left readable to the model,
a write inside the worktree judged against the wrong root, a `~` path judged somewhere else, the
kernel sandbox opening the wrong git folders of a linked worktree.
"""

from __future__ import annotations

from lopen.sandbox import paths


def test_a_home_whose_name_looks_like_a_pattern_keeps_its_secrets(tmp_path):
    home = tmp_path / "h[x]"
    (home / ".ssh").mkdir(parents=True)
    (tmp_path / "hx" / ".aws").mkdir(parents=True)  # what the pattern h[x] would match instead
    found = set(paths.secret_paths(str(home)))
    assert str(home / ".ssh") in found
    assert str(tmp_path / "hx" / ".aws") not in found
