"""The topics a specification asks to have researched: the entries of its ``## References`` section.

Each top-level list item of the section is one topic, in its own words — a link
(`[RFC 6749](https://www.rfc-editor.org/rfc/rfc6749) — token grants`), a bare URL or a phrase
(`JWT signing key rotation`) — with its whitespace collapsed. A section without a list gives one
topic per paragraph. An entry that says there is nothing ("None", "n/a", "nothing yet", "-") or is
still the scaffold's placeholder ("[TODO: …]") is no topic, so `## References` / `None.` asks for
no research at all.

Lopen runs one research invocation before planning when the approved spec names topics that no
research recorded yet (``lopen.workflow.decide.assess``).
"""

from __future__ import annotations

import re

from lopen.documents.sections import Document, block_tokens

REFERENCES = "References"
_NOTHING = re.compile(r"(?i)^\W*(none|n/?a|nothing|no references|todo)\b|^\W*$")


def research_topics(doc: Document) -> tuple[str, ...]:
    """The topics the top-level References section of ``doc`` names (none when it has no such section)."""
    section = doc.named(REFERENCES, top_level_only=True)
    if section is None:
        return ()
    tokens = block_tokens(doc.source[section.body : section.end])
    items: list[str] = []
    paragraphs: list[str] = []
    depth = 0  # list nesting: only the outermost items are topics (sub-items belong to theirs)
    item_text: list[str] | None = None
    for i, token in enumerate(tokens):
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif token.type == "list_item_open" and depth == 1:
            item_text = []
        elif token.type == "list_item_close" and depth == 1 and item_text is not None:
            items.append(" ".join(item_text))
            item_text = None
        elif token.type == "inline":
            if item_text is not None:
                item_text.append(token.content)
            elif depth == 0 and i > 0 and tokens[i - 1].type == "paragraph_open":
                paragraphs.append(token.content)
    entries = items or paragraphs
    topics = (" ".join(entry.split()) for entry in entries)
    return tuple(dict.fromkeys(t for t in topics if not _NOTHING.search(t)))
