"""reStructuredText (`.rst`): parsed by docutils (public domain/BSD), written as Markdown.

Sections become `#` headings by depth, literal blocks fenced code, list items `- ` lines,
admonitions (`.. note::`) a bold label and their text. Nothing runs or is read from
elsewhere: file inclusion and raw output are off, and a directive or role docutils does not
know (Sphinx's `toctree`, `:ref:`) is left out or kept as its text, silently (reports off).
The title is the first section's; `:author:` and `:date:` fields become metadata.

Two limits keep a hostile file from holding the ingest: a paragraph whose inline markup would
cost docutils too much (it rescans the rest of a paragraph for each `*` left open: 30 KB of
`*a ` took 5 s, 90 KB a minute) is kept as plain text, as is one deep enough to exhaust
Python's stack (1,500 bare URLs in a row), and substitutions nested into one another (each
`|a|` four `|b|`, each `|b|` four `|c|`...) may bring in at most `MAX_NESTED_SUBSTITUTIONS`,
else the file fails, saying so. A line longer than docutils reads (`line_length_limit`, which
guards its own parsing) fails the file too, saying which, where docutils alone read nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plm import Converted, Converter, PlmUserError, hookimpl
from plm_plugins.converters.text import fenced, library, library_version, text_of

if TYPE_CHECKING:
    from plm import Registry

MAX_NESTED_SUBSTITUTIONS = 10_000
_INLINE_BUDGET = 20_000_000  # a paragraph's characters times its markup characters
_LINE_LIMIT = 10_000  # docutils' default line_length_limit
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
    "line_length_limit": _LINE_LIMIT,
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
        lines = enumerate(text.split("\n"), 1)  # as docutils measures them: tabs expanded
        long = next((i for i, line in lines if len(line) > _LINE_LIMIT or len(line.expandtabs(8)) > _LINE_LIMIT), None)
        if long is not None:
            raise PlmUserError(
                f"line {long:,} is over {_LINE_LIMIT:,} characters, more than docutils reads (it reads nothing of "
                "such a file); break the line"
            )
        reader, parser = _guarded(docutils)
        try:
            tree = publish_doctree(
                text, source_path=path or None, settings_overrides=dict(_SETTINGS), reader=reader, parser=parser
            )
        except PlmUserError:
            raise
        except Exception as err:  # a docutils bug on odd input; reports are off, so not a syntax error
            raise PlmUserError(f"not readable as reStructuredText ({type(err).__name__}: {err})") from None
        blocks: list[str] = []
        metadata: dict[str, Any] = {}
        _walk(tree, 0, blocks, metadata, docutils.nodes)
        body = "\n\n".join(b for b in blocks if b.strip())
        title = next((b.lstrip("# ") for b in blocks if b.startswith("#")), "")
        return Converted(body, title[:1000], metadata)


def _guarded(docutils: Any) -> tuple[Any, Any]:
    """A docutils reader and parser with the module docstring's limits."""
    from docutils.parsers.rst import Parser
    from docutils.parsers.rst.states import Inliner
    from docutils.readers.standalone import Reader
    from docutils.transforms import Transform

    nodes = docutils.nodes

    inliner = Inliner()  # (not a subclass: docutils builds its patterns from the class's own attributes)

    def parse(text: str, lineno: int, memo: Any, parent: Any) -> Any:
        if len(text) * sum(map(text.count, "*`|_[:")) > _INLINE_BUDGET:
            return [nodes.Text(text)], []
        try:
            return Inliner.parse(inliner, text, lineno, memo, parent)
        except RecursionError:
            return [nodes.Text(text)], []

    inliner.parse = parse

    class NestedSubstitutions(Transform):  # type: ignore[misc]
        default_priority = 219  # before docutils' Substitutions (220) expands them

        def apply(self) -> None:
            defs, names = self.document.substitution_defs, self.document.substitution_names
            brought: dict[str, int] = {}  # substitution -> how many one use of it brings in, nested

            def count(name: str, seen: frozenset[str]) -> int:
                if name not in brought:
                    brought[name] = 0  # a loop counts once: docutils reports it
                    total = 0
                    for ref in defs[name].findall(nodes.substitution_reference):
                        inner = names.get(ref["refname"].lower())
                        if inner in defs and inner not in seen:
                            total += 1 + count(inner, seen | {inner})
                        if total > MAX_NESTED_SUBSTITUTIONS:
                            break
                    brought[name] = total
                return brought[name]

            total = 0
            for ref in self.document.findall(nodes.substitution_reference):
                name = names.get(ref["refname"].lower())
                total += count(name, frozenset([name])) if name in defs else 0
                if total > MAX_NESTED_SUBSTITUTIONS:
                    raise PlmUserError(
                        f"its substitutions, nested in one another, bring in over {MAX_NESTED_SUBSTITUTIONS:,} "
                        "more (a substitution bomb?); nest fewer"
                    )

    class GuardedReader(Reader):  # type: ignore[misc]
        def get_transforms(self) -> list[Any]:
            return [*super().get_transforms(), NestedSubstitutions]

    return GuardedReader(), Parser(inliner=inliner)


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
