"""Where a project's documents live, and the checks that keep names inside the project.

Module names and research topics come from users and from the model: a name containing a path
separator, `..`, a NUL byte or an absolute path is refused with a message saying what is allowed.
"""

from __future__ import annotations

import re
from pathlib import Path

from lopen.documents.errors import DocumentError

REQUIREMENTS_DIR = Path("docs") / "requirements"
SPEC_FILE = "SPECIFICATION.md"
RESEARCH_INDEX = "RESEARCH.md"
# also a git branch name (lopen/<module>): no "..", no trailing "." or ".lock"
_MODULE = re.compile(r"^(?!.*\.\.)(?!.*\.lock$)[A-Za-z0-9][A-Za-z0-9._-]{0,99}(?<!\.)$", re.IGNORECASE)
_MAX_TOPIC_SLUG = 80


def _refuse_escapes(kind: str, value: str) -> None:
    if "\x00" in value:
        raise DocumentError(f"{kind} {value!r} contains a NUL byte; use plain text")
    if value.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", value):
        raise DocumentError(f"{kind} {value!r} is an absolute path; give a name, not a path")
    if "/" in value or "\\" in value or value.strip() in (".", ".."):
        raise DocumentError(f"{kind} {value!r} contains a path ('/', '\\' or '..'); give a plain name")


def validate_module(module: str) -> str:
    """``module`` itself when it is a safe module folder name; DocumentError otherwise."""
    _refuse_escapes("module name", module)
    if not _MODULE.match(module):
        raise DocumentError(
            f"module name {module!r} is not valid (it also names the git branch lopen/<module>); use letters, "
            "digits, '.', '_' and '-', starting with a letter or digit and not ending in '.' or '.lock', "
            "e.g. 'auth' or 'token-service'"
        )
    return module


def topic_slug(topic: str) -> str:
    """The file-name form of a research topic: lower case, words joined by '-'."""
    _refuse_escapes("research topic", topic)
    slug = re.sub(r"[\W_]+", "-", topic.casefold()).strip("-")[:_MAX_TOPIC_SLUG].rstrip("-")
    if not slug:
        raise DocumentError(f"research topic {topic!r} has no letters or digits; name the topic in words")
    return slug


def module_dir(root: Path, module: str) -> Path:
    return root / REQUIREMENTS_DIR / validate_module(module)


def spec_path(root: Path, module: str) -> Path:
    return module_dir(root, module) / SPEC_FILE


def research_path(root: Path, module: str, topic: str) -> Path:
    return module_dir(root, module) / f"RESEARCH-{topic_slug(topic)}.md"


def plan_path(root: Path, module: str) -> Path:
    return root / ".lopen" / "modules" / validate_module(module) / "plan.md"


def list_modules(root: Path) -> list[str]:
    """Names of the folders under docs/requirements/ that hold a SPECIFICATION.md, sorted."""
    base = root / REQUIREMENTS_DIR
    if not base.is_dir():
        return []
    return sorted(p.parent.name for p in base.glob(f"*/{SPEC_FILE}") if _MODULE.match(p.parent.name))
