"""reStructuredText (`.rst`): parsed by docutils (public domain/BSD), written as Markdown.

Sections become `#` headings by depth, literal blocks fenced code, list items `- ` lines,
admonitions (`.. note::`) a bold label and their text. Nothing runs or is read from
elsewhere: file inclusion and raw output are off, and a directive or role docutils does not
know (Sphinx's `toctree`, `:ref:`) is left out or kept as its text, silently (reports off).
The title is the first section's; `:author:` and `:date:` fields become metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plm import Converted, Converter, PlmUserError, hookimpl
from plm_plugins.converters.text import fenced, library, library_version, text_of

if TYPE_CHECKING:
    from plm import Registry

_SETTINGS = {
    "report_level": 5,  # nothing printed
    "halt_level": 5,  # never stops
    "file_insertion_enabled": False,  # `.. include::` reads no other file
    "raw_enabled": False,
    "doctitle_xform": False,  # the first section stays a section: the title is its heading
    "docinfo_xform": True,
    "input_encoding": "unicode",
    "warning_stream": False,
    "syntax_highlight": "none",
}


class RstConverter(Converter):
    """reStructuredText files: sections, paragraphs, lists, code and admonitions."""

    name = "rst"
    extensions = (".rst", ".rest")

    def version(self) -> str:
        return library_version("docutils")

    def convert(self, data: bytes, path: str) -> Converted:
        docutils = library("docutils", "rst", "docutils")
        from docutils.core import publish_doctree

        text = text_of(data)
        try:
            tree = publish_doctree(text, source_path=path or None, settings_overrides=dict(_SETTINGS))
        except Exception as err:  # a docutils bug on odd input; reports are off, so not a syntax error
            raise PlmUserError(f"not readable as reStructuredText ({type(err).__name__}: {err})") from None
        blocks: list[str] = []
        metadata: dict[str, Any] = {}
        _walk(tree, 0, blocks, metadata, docutils.nodes)
        body = "\n\n".join(b for b in blocks if b.strip())
        title = next((b.lstrip("# ") for b in blocks if b.startswith("#")), "")
        return Converted(body, title[:1000], metadata)


def _walk(node: Any, depth: int, out: list[str], meta: dict[str, Any], nodes: Any) -> None:
    for child in node.children:
        if isinstance(child, (nodes.system_message, nodes.comment, nodes.substitution_definition, nodes.target)):
            continue
        if isinstance(child, nodes.section):
            _walk(child, depth + 1, out, meta, nodes)
        elif isinstance(child, nodes.title):
            out.append(f"{'#' * min(max(depth, 1), 6)} {' '.join(child.astext().split())}")
        elif isinstance(child, nodes.literal_block):
            out.append(fenced(child.astext()))
        elif isinstance(child, nodes.docinfo):
            for field in child.children:
                name = field.tagname if field.tagname != "field" else field.children[0].astext().lower()
                if name in ("author", "date"):
                    meta[name] = " ".join(field.astext().split())[:500]
        elif isinstance(child, nodes.list_item):
            out.append("- " + " ".join(child.astext().split()))
        elif isinstance(child, nodes.Admonition):
            label = child.tagname.capitalize() if child.tagname != "admonition" else ""
            out.append(f"**{label}**" if label else "")
            _walk(child, depth, out, meta, nodes)
        elif isinstance(child, nodes.field):  # `:author: Ann` where docutils keeps it a field
            name, value = child.children[0].astext(), " ".join(child.children[-1].astext().split())
            if name.lower() in ("author", "date"):
                meta.setdefault(name.lower(), value[:500])
            out.append(f"{name}: {value}")
        elif isinstance(child, (nodes.paragraph, nodes.line_block, nodes.table, nodes.term)):
            out.append(" ".join(child.astext().split()))
        elif isinstance(child, nodes.Element):
            _walk(child, depth, out, meta, nodes)
        elif isinstance(child, nodes.Text) and child.astext().strip():
            out.append(" ".join(child.astext().split()))


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(RstConverter)
