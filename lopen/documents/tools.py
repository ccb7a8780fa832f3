"""Handlers for Lopen's document tools: T1 read_spec, T2 read_research, T3 read_plan, T6 log_research.

Each handler is a plain function ``handler(args, ctx) -> str``: ``args`` is its msgspec arguments
struct (already validated by the gateway), ``ctx`` anything with a ``root`` (the project root).
Errors are DocumentError with a message the model can act on; the gateway turns them into failed
tool results. ``DOCUMENT_TOOLS`` lists them with their descriptions for registration.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Protocol

import msgspec

from lopen.documents.errors import DocumentError
from lopen.documents.paths import plan_path, spec_path, validate_module
from lopen.documents.research import read_research as _read_research
from lopen.documents.research import write_research
from lopen.documents.section_cache import SectionCache, missing_spec

ModuleName = Annotated[
    str, msgspec.Meta(description="The module, as named under docs/requirements/; default: the module this run builds")
]


class ToolContext(Protocol):
    @property
    def root(self) -> Path: ...


class ReadSpecArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: ModuleName = ""
    section: Annotated[
        str,
        msgspec.Meta(
            description="Heading text (case-insensitive), a path like 'Components > Token Service', "
            "or a slug like 'token-service'"
        ),
    ]


class ReadResearchArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: ModuleName = ""
    topic: Annotated[str, msgspec.Meta(description="The research topic, e.g. 'jwt signing' or 'jwt-signing'")]


class ReadPlanArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: ModuleName = ""


class LogResearchArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: ModuleName = ""
    topic: Annotated[str, msgspec.Meta(description="A short topic name; it becomes RESEARCH-<topic>.md")]
    content: Annotated[
        str, msgspec.Meta(description="The whole note in Markdown; it replaces any earlier note on the topic")
    ]


def read_spec(args: ReadSpecArgs, ctx: ToolContext) -> str:
    """T1: one section of the module's specification, with its subsections, as written."""
    path = spec_path(ctx.root, args.module)
    try:
        found = SectionCache(ctx.root).section(path, args.section, label=args.module)
    except FileNotFoundError:
        raise missing_spec(ctx.root, args.module) from None
    except OSError as exc:
        raise DocumentError(f"cannot read the specification of {args.module!r}: {exc.strerror or exc}") from None
    return found.text.strip("\n") + "\n"


def read_research(args: ReadResearchArgs, ctx: ToolContext) -> str:
    """T2: the research document on a topic."""
    return _read_research(ctx.root, args.module, args.topic)


def read_plan(args: ReadPlanArgs, ctx: ToolContext) -> str:
    """T3: the module's plan, or a note that planning has not happened yet."""
    path = plan_path(ctx.root, args.module)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        spec = "" if spec_path(ctx.root, args.module).is_file() else " (and it has no specification yet)"
        return (
            f"No plan for module {args.module!r} yet: planning (steps 2-5) has not happened{spec}. "
            f"Lopen writes the plan to .lopen/modules/{args.module}/plan.md once components and tasks are recorded."
        )


def log_research(args: LogResearchArgs, ctx: ToolContext) -> str:
    """T6: save research findings and index them in RESEARCH.md."""
    validate_module(args.module)
    path = write_research(ctx.root, args.module, args.topic, args.content)
    slug = path.stem.removeprefix("RESEARCH-")
    return (
        f"Saved research on {args.topic!r} to {path.relative_to(ctx.root).as_posix()} "
        f"and listed it in RESEARCH.md; read it back with read_research({args.module!r}, {slug!r})."
    )


class DocumentTool(msgspec.Struct, frozen=True):
    name: str
    description: str
    arguments: type[msgspec.Struct]
    handler: Callable[[Any, ToolContext], str]


DOCUMENT_TOOLS: tuple[DocumentTool, ...] = (
    DocumentTool(
        "read_spec",
        "Read one section of a module's specification (with its subsections). Use it instead of asking "
        "for the whole spec; an unknown section's error lists the sections there are.",
        ReadSpecArgs,
        read_spec,
    ),
    DocumentTool(
        "read_research", "Read the research document a module has on a topic.", ReadResearchArgs, read_research
    ),
    DocumentTool("read_plan", "Read a module's plan: components and tasks with their status.", ReadPlanArgs, read_plan),
    DocumentTool(
        "log_research",
        "Save research findings on a topic for a module (docs/requirements/<module>/RESEARCH-<topic>.md); "
        "replaces earlier findings on the same topic.",
        LogResearchArgs,
        log_research,
    ),
)
