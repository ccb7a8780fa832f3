"""Imports run one way (docs/architecture): events ← domain ← actors ← application ← faces.

Every module of the three packages is parsed (never imported) and each of its imports — at the top,
inside a function, under ``TYPE_CHECKING`` — is checked against the layer it belongs to.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("events", "lopen", "actors")
FACES = ("lopen.cli", "lopen.tui", "lopen.mcp", "lopen.__main__")
APPLICATION = ("lopen.app",)


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer(module: str) -> str:
    if _within(module, ("events",)):
        return "events"
    if _within(module, ("actors",)):
        return "actors"
    if _within(module, FACES):
        return "faces"
    if _within(module, APPLICATION):
        return "application"
    if _within(module, ("lopen",)):
        return "domain"
    return "outside"


# What each layer may not import (the layers above it).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "events": ("lopen", "actors"),
    "domain": ("actors", *APPLICATION, *FACES),
    "actors": (*APPLICATION, *FACES),
    "application": FACES,
}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, relative ones resolved. For
    ``from a import b`` it is ``a``, or ``a.b`` when ``a`` itself is allowed (``b`` may be a submodule:
    ``from lopen import app``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    banned = FORBIDDEN.get(layer(name), ())
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if _within(target, banned):
                found.append((node.lineno, target))
            else:
                found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def violations(paths: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for path in paths:
        importer = module_name(path, root)
        banned = FORBIDDEN.get(layer(importer), ())
        for line, target in imports(path, root):
            if _within(target, banned):
                rel = path.relative_to(root)
                found.append(f"{rel}:{line}: {importer} ({layer(importer)}) imports {target} ({layer(target)})")
    return sorted(set(found))


def test_every_package_is_scanned() -> None:
    names = {module_name(p) for p in sources()}
    assert {"events.fold", "events.journal", "lopen.workflow.decide", "actors.git", "lopen.app.engine"} <= names
    assert {layer(n) for n in names} >= {"events", "domain", "actors", "application", "faces"}


def test_imports_run_one_way() -> None:
    found = violations(sources())
    assert not found, "imports against the layers (events ← domain ← actors ← application ← faces):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    ("where", "code", "offender"),
    [
        ("events/sneaky.py", "def f():\n    from lopen.git import Worktree\n", "lopen.git"),
        ("lopen/workflow/sneaky.py", "from actors import git\n", "actors"),
        ("lopen/git/sneaky.py", "from ..app import engine\n", "lopen.app"),
        ("actors/sneaky.py", "import typing\nif typing.TYPE_CHECKING:\n    import lopen.cli.output\n", "lopen.cli"),
        ("lopen/app/sneaky.py", "def g():\n    from lopen.cli import main\n", "lopen.cli"),
        ("lopen/documents/sneaky.py", "from lopen import app\n", "lopen.app"),
        ("actors/sneaky.py", "from lopen.app.engine import run_module\n", "lopen.app.engine"),
    ],
)
def test_the_check_names_an_offending_import(tmp_path: Path, where: str, code: str, offender: str) -> None:
    """The checker itself: a wrong import anywhere in a file (here in a scratch copy of the layout) is
    reported with the file, the line and the module it imports."""
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text(code, encoding="utf-8")
    (found,) = violations([path], tmp_path)
    assert found.startswith(where + ":") and f"imports {offender}" in found


def test_allowed_imports_are_not_reported(tmp_path: Path) -> None:
    allowed = {
        "lopen/workflow/ok.py": "from events.fold import ModuleState\nfrom lopen.git import Worktree\n",
        "actors/ok.py": "from lopen.workflow.decide import decide\nfrom . import messages\n",
        "lopen/app/ok.py": "def f():\n    from actors.git import GitActor\n",
        "lopen/cli/ok.py": "from lopen.app import engine\n",
    }
    paths = []
    for where, code in allowed.items():
        path = tmp_path / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
        paths.append(path)
    assert violations(paths, tmp_path) == []
