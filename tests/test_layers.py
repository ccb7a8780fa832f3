"""Imports run one way (docs/architecture): events ← domain ← actors ← application ← faces.

Every module of the three packages is parsed (never imported) and each of its imports — at the top,
inside a function, under ``TYPE_CHECKING`` — is checked against the layer it belongs to:

- ``events`` imports nothing of Lopen's (no ``lopen``, no ``actors``);
- the domain (the rest of ``lopen``) imports no actor, no application, no face; the observers among
  it (``lopen.telemetry``) say so explicitly: they follow the store, never an actor;
- ``actors`` import no application and no face; ``lopen.app`` imports no face;
- a face (``lopen.cli``, ``lopen.tui``, ``lopen.mcp``, ``lopen.__main__``) imports only the one door
  (``lopen.app``), event types and errors (``events.catalogue``, ``events.errors``), ``lopen.config``,
  ``lopen.errors``, the terminal helper ``lopen.term``, ``lopen.project`` (where the project is: a
  face finds its root before it can call anything) and its own package — never ``actors``,
  ``lopen.workflow``, ``lopen.git``, the store's internals, nor another face.

What cannot follow the rules yet is listed in ``ALLOWED_EDGES`` with the reason, so the count is
visible; an entry nothing needs any more fails the test (the list only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("events", "lopen", "actors")
FACES = ("lopen.cli", "lopen.tui", "lopen.mcp", "lopen.__main__")
APPLICATION = ("lopen.app",)
OBSERVERS = ("lopen.telemetry",)
FACE_MAY_IMPORT = (
    "lopen.app",
    "events.catalogue",
    "events.errors",
    "lopen.config",
    "lopen.errors",
    "lopen.term",
    "lopen.project",
)
FACE_MAY_IMPORT_EXACTLY = ("lopen", "lopen.__version__")  # the package itself, for its version
OWN = {"lopen.__main__": ("lopen.__main__", "lopen.cli")}  # `python -m lopen` is the command line

# (importer, imported) → why it is still there. Each is a debt with its reason; aim for none.
_DIAGNOSTICS = "machine diagnostics (credentials, sandbox, the Copilot CLI): no project state; next: lopen.app.health"
_LAUNCH = "the command line is the process's entry: it starts the other face (run_tui, serve_stdio/serve_http) only"
_FOLLOW = "the TUI reads the store it is handed (its run's, or a watched session's: polling, any machine); "
_FOLLOW += "next: a read-only follower in lopen.app, so the face holds no store handle"
_STATE = "the TUI's screen fold (tokens, status): being folded once in events by the fold work (#20 item 3)"
_STUB = "`lopen tui gallery` stays a product command; its stub stream is product data (bin/bench-tui uses it too)"
_STREAM = "the store's typed handle for `lopen replay/log/session list/projections rebuild`, which stream a "
_STREAM += "thousand sessions through lopen.app.views; next: row/line generators in lopen.app.queries"
ALLOWED_EDGES: dict[tuple[str, str], str] = {
    ("lopen.cli", "lopen.logs"): "process set-up before any command: the SDK's log lines go to .lopen/logs",
    ("lopen.cli.auth_cmd", "lopen.auth"): _DIAGNOSTICS,
    ("lopen.cli.doctor", "lopen.auth"): _DIAGNOSTICS,
    ("lopen.cli.doctor", "lopen.copilot.locate"): _DIAGNOSTICS,
    ("lopen.cli.doctor", "lopen.readiness"): _DIAGNOSTICS,
    ("lopen.cli.doctor", "lopen.sandbox.kernel"): _DIAGNOSTICS,
    ("lopen.cli.mcp_cmd", "lopen.mcp.server"): _LAUNCH,
    ("lopen.cli.tui_cmd", "lopen.tui"): _LAUNCH,
    ("lopen.cli.workflow", "lopen.tui"): _LAUNCH,
    ("lopen.cli.sessions", "events.projections"): _STREAM,
    ("lopen.cli.sessions", "events.store"): _STREAM,
    ("lopen.tui.app", "events.store"): _FOLLOW,
    ("lopen.tui.feed", "events.bus"): _FOLLOW,
    ("lopen.tui.feed", "events.recorded"): _FOLLOW,
    ("lopen.tui.feed", "events.store"): _FOLLOW,
    ("lopen.tui.feed", "lopen.copilot"): _FOLLOW + "; the model's streaming deltas (StreamEvent)",
    ("lopen.tui.state", "events.projections"): _STATE,
    ("lopen.tui.state", "events.recorded"): _STATE,
    ("lopen.tui.state", "lopen.copilot"): _STATE,
    ("lopen.tui.state", "lopen.text"): _STATE,
    ("lopen.tui.state", "lopen.workflow.steps"): _STATE + "; the step names",
    ("lopen.tui.stub", "events.recorded"): _STUB,
    ("lopen.tui.stub", "lopen.copilot"): _STUB,
}


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
    if _within(module, OBSERVERS):
        return "observers"
    if _within(module, ("lopen",)):
        return "domain"
    return "outside"


# What each layer below the faces may not import (the layers above it).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "events": ("lopen", "actors"),
    "domain": ("actors", *APPLICATION, *FACES),
    "observers": ("actors", *APPLICATION, *FACES),
    "actors": (*APPLICATION, *FACES),
    "application": FACES,
}


def _face_of(module: str) -> str:
    return next(face for face in FACES if _within(module, (face,)))


def forbidden(importer: str, target: str) -> bool:
    """Whether ``importer`` may not import ``target`` (anything outside Lopen's packages is free)."""
    if not _within(target, PACKAGES):
        return False
    if layer(importer) != "faces":
        return _within(target, FORBIDDEN.get(layer(importer), ()))
    face = _face_of(importer)
    own = OWN.get(face, (face,))
    return not (_within(target, (*FACE_MAY_IMPORT, *own)) or target in FACE_MAY_IMPORT_EXACTLY)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, relative ones resolved. For
    ``from a import b`` it is ``a.b`` (``b`` may be a submodule: ``from lopen import app``), or ``a``
    when ``a`` itself is forbidden and leads to nothing allowed."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
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
            children = [f"{target}.{alias.name}" for alias in node.names if alias.name != "*"]
            if forbidden(name, target) and all(forbidden(name, child) for child in children):
                found.append((node.lineno, target))
            else:
                found += [(node.lineno, child) for child in children]
    return found


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def edges(paths: list[Path], root: Path = ROOT) -> set[tuple[str, str, str]]:
    """(importer, imported, where) for every import against the layers."""
    found = set()
    for path in paths:
        importer = module_name(path, root)
        for line, target in imports(path, root):
            if forbidden(importer, target):
                found.add((importer, target, f"{path.relative_to(root)}:{line}"))
    return found


def _allowed(importer: str, target: str, allowed: dict[tuple[str, str], str]) -> tuple[str, str] | None:
    return next((key for key in allowed if importer == key[0] and _within(target, (key[1],))), None)


def violations(paths: list[Path], root: Path = ROOT, allowed: dict[tuple[str, str], str] | None = None) -> list[str]:
    allowed = ALLOWED_EDGES if allowed is None else allowed
    return sorted(
        f"{where}: {importer} ({layer(importer)}) imports {target} ({layer(target)})"
        for importer, target, where in edges(paths, root)
        if _allowed(importer, target, allowed) is None
    )


def test_every_package_is_scanned() -> None:
    names = {module_name(p) for p in sources()}
    assert {"events.fold", "events.journal", "lopen.workflow.decide", "actors.git", "lopen.app.engine"} <= names
    assert {"lopen.mcp.server", "lopen.cli.workflow", "lopen.tui.app", "lopen.__main__"} <= names
    assert {layer(n) for n in names} >= {"events", "domain", "observers", "actors", "application", "faces"}
    assert layer("lopen.mcp.server") == "faces" and layer("lopen.app.queries") == "application"


def test_imports_run_one_way() -> None:
    found = violations(sources())
    assert not found, "imports against the layers (events ← domain ← actors ← application ← faces):\n" + "\n".join(
        found
    )


def test_the_allowlist_only_shrinks() -> None:
    """Every allowed edge is still taken somewhere: one that is not must leave the list."""
    taken = {_allowed(importer, target, ALLOWED_EDGES) for importer, target, _ in edges(sources())}
    stale = sorted(set(ALLOWED_EDGES) - taken)
    assert not stale, f"allowed edges nothing takes any more (remove them from ALLOWED_EDGES): {stale}"


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
        ("lopen/telemetry/sneaky.py", "from actors.metrics import MetricsActor\n", "actors.metrics"),
        ("lopen/cli/sneaky.py", "from lopen.workflow.revert import revert_module\n", "lopen.workflow.revert"),
        ("lopen/cli/sneaky.py", "def f():\n    from lopen.git import require_ready\n", "lopen.git"),
        ("lopen/mcp/sneaky.py", "from actors import git\n", "actors"),
        ("lopen/tui/sneaky.py", "from lopen.cli.output import Console\n", "lopen.cli.output"),
        ("lopen/cli/sneaky.py", "from lopen.mcp.server import serve_stdio\n", "lopen.mcp.server"),
        ("lopen/mcp/sneaky.py", "from events.store import EventStore\n", "events.store"),
        ("lopen/tui/sneaky.py", "from events import journal\n", "events"),
        ("lopen/mcp/sneaky.py", "from lopen.documents import check_spec\n", "lopen.documents"),
    ],
)
def test_the_check_names_an_offending_import(tmp_path: Path, where: str, code: str, offender: str) -> None:
    """The checker itself: a wrong import anywhere in a file (here in a scratch copy of the layout) is
    reported with the file, the line and the module it imports."""
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text(code, encoding="utf-8")
    (found,) = violations([path], tmp_path, allowed={})
    assert found.startswith(where + ":") and f"imports {offender}" in found


def test_allowed_imports_are_not_reported(tmp_path: Path) -> None:
    allowed = {
        "lopen/workflow/ok.py": "from events.fold import ModuleState\nfrom lopen.git import Worktree\n",
        "actors/ok.py": "from lopen.workflow.decide import decide\nfrom . import messages\n",
        "lopen/app/ok.py": "def f():\n    from actors.git import GitActor\n",
        "lopen/cli/ok.py": "from lopen.app import engine\nfrom lopen import __version__\nfrom . import output\n",
        "lopen/mcp/ok.py": "import lopen\nfrom events import catalogue as ev\nfrom events.errors import Problem\n",
        "lopen/tui/ok.py": "from lopen.term import SYMBOLS\nfrom lopen.config import Settings\nfrom . import app\n",
        "lopen/__main__.py": "from lopen.cli import main\n",
        "lopen/telemetry/ok.py": "from events.fold import ModuleState\n",
    }
    paths = []
    for where, code in allowed.items():
        path = tmp_path / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
        paths.append(path)
    assert violations(paths, tmp_path, allowed={}) == []
