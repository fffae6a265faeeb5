"""HTML (`.html`, `.htm`, `.xhtml`): the main content as Markdown, with the standard
library's parser (no dependency; BENCHMARKS.md 34 measures it against selectolax).

Script, style, templates, SVG, forms and the page's frame (`nav`, `header`, `footer`,
`aside`) are left out; when the page marks its main content (`<main>`, `<article>`,
`role="main"`) only that is kept. Headings become `#` lines, `<pre>` fenced code, list items
`- ` lines. The title is the first `<h1>` of the content, else `<title>`; `author` and
`date` come from the page's `<meta>` tags. The bytes are read as UTF-8, else in the
charset the page declares, else as Windows-1252.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from plm import Converted, Converter, hookimpl
from plm_plugins.converters.text import fenced

if TYPE_CHECKING:
    from plm import Registry

# Content inside these is never text; `_FRAME` is the page's furniture around its content.
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select",
                   "button", "form", "head"})  # fmt: skip
_FRAME = frozenset({"nav", "header", "footer", "aside"})
_MAIN = frozenset({"main", "article"})
_BLOCK = frozenset({"p", "div", "section", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "blockquote", "br",
                    "hr", "figure", "figcaption", "details", "summary", "body", "html", "h1", "h2", "h3", "h4",
                    "h5", "h6", "pre", "main", "article", "caption", "td", "th"})  # fmt: skip
_VOID = frozenset(
    {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
)
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)
_DATE_META = ("date", "article:published_time", "dcterms.date", "dc.date", "citation_publication_date", "pubdate")


def decode_html(data: bytes) -> str:
    """UTF-8, else the charset the page declares, else Windows-1252 (what browsers assume)."""
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        declared = _CHARSET.search(data[:4096])
        for name in ([declared.group(1).decode("ascii", "replace")] if declared else []) + ["cp1252", "latin-1"]:
            try:
                return data.decode(name)
            except (LookupError, UnicodeDecodeError):
                continue
    return data.decode("latin-1")


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip = 0  # depth inside a skipped element
        self.frame = 0
        self.main = 0
        self.pre = 0
        self.blocks: list[tuple[bool, str]] = []  # (inside main content, block text)
        self.line: list[str] = []
        self.prefix = ""
        self.title = ""
        self.in_title = False
        self.meta: dict[str, str] = {}
        self.stack: list[tuple[str, bool]] = []  # (tag, whether it marks the main content)
        self.open: dict[str, int] = {}  # tags on the stack, counted: an end tag is matched in O(1)

    def flush(self) -> None:
        if not self.line:  # most block boundaries close nothing
            self.prefix = ""
            return
        text = "".join(self.line)
        text = text.strip("\n") if self.pre else " ".join(text.split())
        if text:
            self.blocks.append((self.main > 0, self.prefix + text))
        self.line, self.prefix = [], ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "meta":
            found = dict(attrs)
            key = (found.get("name") or found.get("property") or "").lower()
            if key and found.get("content"):
                self.meta.setdefault(key, str(found["content"]))
            return
        if tag == "title":
            self.in_title = True
        if tag in _VOID:
            if tag in ("br", "hr") and not self.skip:
                self.flush()
            return
        main = tag in _MAIN or ("role", "main") in attrs
        self.stack.append((tag, main))
        self.open[tag] = self.open.get(tag, 0) + 1
        if tag in _SKIP:
            self.skip += 1
        elif tag in _FRAME:
            self.frame += 1
        if main:
            self.main += 1
        if self.skip:
            return
        if tag in _BLOCK:
            self.flush()
        if tag == "pre":
            self.pre += 1
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.prefix = "#" * int(tag[1]) + " "
        elif tag == "li":
            self.prefix = "- "

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if not self.open.get(tag):  # a void tag is never on the stack
            return  # a stray end tag
        while self.stack:  # each tag is pushed once and popped once: linear in all
            name, main = self.stack.pop()
            self.open[name] -= 1
            if not self.skip and name in _BLOCK:
                self._close_block(name)
            if name in _SKIP:
                self.skip -= 1
            elif name in _FRAME:
                self.frame -= 1
            if main:
                self.main -= 1
            if name == tag:
                break

    def _close_block(self, name: str) -> None:
        if name == "pre":
            code = "".join(self.line).strip("\n")
            self.line = []
            if code.strip():
                self.blocks.append((self.main > 0, fenced(code)))
            self.pre -= 1
        else:
            self.flush()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        if not self.skip and not (self.frame and not self.main):
            self.line.append(data)


class HtmlConverter(Converter):
    """HTML pages: the main content's text and headings, no script, style or navigation."""

    name = "html"
    extensions = (".html", ".htm", ".xhtml")

    def convert(self, data: bytes, path: str) -> Converted:
        parser = _Extractor()
        parser.feed(decode_html(data))
        parser.close()
        parser.flush()
        in_main = [text for main, text in parser.blocks if main]
        blocks = in_main or [text for _, text in parser.blocks]
        text = "\n\n".join(blocks)
        h1 = next((b[2:] for b in blocks if b.startswith("# ")), "")
        title = h1 or " ".join(parser.title.split())
        metadata: dict[str, Any] = {}
        if parser.meta.get("author"):
            metadata["author"] = parser.meta["author"][:500]
        date = next((parser.meta[k] for k in _DATE_META if parser.meta.get(k)), "")
        if date:
            metadata["date"] = date[:40]
        return Converted(text, title[:1000], metadata)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(HtmlConverter)
