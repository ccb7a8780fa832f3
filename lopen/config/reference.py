"""The settings reference in docs/configuration.md, rendered from the model (`bin/gen-config-docs`)."""

from __future__ import annotations

from lopen.config.schema import FIELDS, SECTIONS

BEGIN = "<!-- BEGIN GENERATED SETTINGS (bin/gen-config-docs) -->"
END = "<!-- END GENERATED SETTINGS -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference() -> str:
    """One table per section: key, type, default, env var, allowed values, meaning."""
    lines: list[str] = [BEGIN, ""]
    for section in SECTIONS:
        lines += [f"### `{section}`", ""]
        lines += ["| Key | Type | Default | Env var | Allowed | Meaning |", "| --- | --- | --- | --- | --- | --- |"]
        for spec in FIELDS.values():
            if spec.section != section:
                continue
            meaning = spec.description + (" **Secret**: shown masked." if spec.secret else "")
            cells = [
                f"`{spec.key}`",
                spec.type_name,
                f"`{spec.format(spec.default)}`",
                f"`{spec.env_var}`",
                spec.allowed,
                meaning,
            ]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def update_document(text: str) -> str:
    """`text` with the generated block between the markers replaced (appended when absent)."""
    block = render_reference()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    return text.rstrip("\n") + "\n\n" + block + "\n"
