"""Documents: specification sections, the spec-pattern check, acceptance criteria, drift hashes,
the section cache, research documents, context assembly and the document tool handlers.

See docs/specifications.md for the rules a specification follows and how Lopen reads it.
"""

from lopen.documents.context import KINDS, AssembledContext, assemble_context, estimate_tokens
from lopen.documents.criteria import Criterion, SkillHook, acceptance_criteria, skills_and_hooks
from lopen.documents.errors import DocumentError
from lopen.documents.front_matter import FrontMatter
from lopen.documents.hashing import Drift, compare, content_hash, normalize, section_hashes, spec_hash
from lopen.documents.paths import list_modules, plan_path, research_path, spec_path, validate_module
from lopen.documents.research import ResearchDoc, list_research, read_research, write_research
from lopen.documents.section_cache import SectionCache, load_spec
from lopen.documents.sections import Document, Section, parse_document, read_document
from lopen.documents.spec_check import Gap, SpecCheck, check_module, check_modules, check_spec
from lopen.documents.tools import DOCUMENT_TOOLS, DocumentTool

__all__ = [
    "DOCUMENT_TOOLS",
    "KINDS",
    "AssembledContext",
    "Criterion",
    "Document",
    "DocumentError",
    "DocumentTool",
    "Drift",
    "FrontMatter",
    "Gap",
    "ResearchDoc",
    "Section",
    "SectionCache",
    "SkillHook",
    "SpecCheck",
    "acceptance_criteria",
    "assemble_context",
    "check_module",
    "check_modules",
    "check_spec",
    "compare",
    "content_hash",
    "estimate_tokens",
    "list_modules",
    "list_research",
    "load_spec",
    "normalize",
    "parse_document",
    "plan_path",
    "read_document",
    "read_research",
    "research_path",
    "section_hashes",
    "skills_and_hooks",
    "spec_hash",
    "spec_path",
    "validate_module",
    "write_research",
]
