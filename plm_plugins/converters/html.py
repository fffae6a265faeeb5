"""HTML (`.html`, `.htm`, `.xhtml`): the main content as Markdown, with the standard
library's parser (no dependency; BENCHMARKS.md 34 measures it against selectolax).

Script, style, templates, SVG, form controls and the page's frame (`nav`, `header`, `footer`,
`aside`) are left out; when the page marks its main content (`<main>`, `<article>`,
`role="main"`) only that is kept. Headings become `#` lines, `<pre>` fenced code, list items
`- ` lines. The title is the first `<h1>` of the content, else `<title>`; `author` and
`date` come from the page's `<meta>` tags. The bytes are read in the encoding of their byte
order mark, else as UTF-8, else in the charset the page declares (a declaration browsers
ignore, UTF-16 or a Python-only codec, is ignored), else as Windows-1252.

A page is hostile input. Before it is parsed, each `<` that cannot begin a tag (none follows
`>`, a `<!--` no `-->` closes, a `<` before a space) is set aside as text: the parser would
make text of it too, but one character at a time, searching the rest of the page again for
each (a 60 KB page of `<a ` took minutes, 10 MB of `<` half a minute). `<![` (CDATA, a
conditional comment) becomes a bogus comment ending at the next `>`, as browsers read it.
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
# (not `form`: ASP.NET pages wrap their whole body in one.)
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select",
                   "button", "head", "title"})  # fmt: skip
_HEAD = frozenset({"title", "meta", "link", "style", "script", "noscript", "base", "template", "head"})
_FRAME = frozenset({"nav", "header", "footer", "aside"})
_MAIN = frozenset({"main", "article"})
_BLOCK = frozenset({"p", "div", "section", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "blockquote", "br",
                    "hr", "figure", "figcaption", "details", "summary", "body", "html", "h1", "h2", "h3", "h4",
                    "h5", "h6", "pre", "main", "article", "caption", "td", "th"})  # fmt: skip
_VOID = frozenset(
    {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
)
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)
# Declared charsets never honoured: browsers read a page declaring UTF-16 as UTF-8 (its bytes
# are ASCII, or it could not declare it), and the rest are Python codecs no page is written in
# (`unicode_escape` would turn `\0` in the text into a NUL).
_IGNORED_CHARSETS = frozenset({"utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "utf-7",
                               "idna", "punycode", "unicode-escape", "raw-unicode-escape"})  # fmt: skip
_NOT_A_TAG = re.compile(r"<(?![A-Za-z/!?])")
_LT = "\ufdd0"  # a `<` set aside as text (a noncharacter: dropped from the page first), `<` again in the result
_COMMENT_END = re.compile(r"--\s*>")  # where html.parser ends a comment
_DATE_META = ("date", "article:published_time", "dcterms.date", "dc.date", "citation_publication_date", "pubdate")


def decode_html(data: bytes) -> str:
    """The encoding of a byte order mark, else UTF-8, else the charset the page declares, else
    Windows-1252 (what browsers assume); no NUL (browsers drop them, a store refuses them)."""
    return _decoded(data).replace("\x00", "").replace(_LT, "")


def _decoded(data: bytes) -> str:
    for bom, name in (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"):
        if data.startswith(bom):
            return data[len(bom) :].decode(name, "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        declared = _CHARSET.search(data[:4096])
        for name in ([declared.group(1).decode("ascii", "replace")] if declared else []) + ["cp1252", "latin-1"]:
            try:
                if codecs.lookup(name).name in _IGNORED_CHARSETS:
                    continue
                return data.decode(name)
            except (LookupError, ValueError):  # UnicodeDecodeError, and idna's UnicodeError
                continue
    return data.decode("latin-1")


def tags_only(text: str) -> str:
    """`text` with each `<` that cannot start a tag, comment or declaration set aside as text
    (`_LT`), and `<![` a bogus comment (`<?[`), as the module's docstring says."""
    text = text.replace("<![", "<?[")
    last_gt = text.rfind(">")  # a tag, end tag, declaration or `<?` ends at a `>`
    if "<" in text[last_gt + 1 :]:
        text = text[: last_gt + 1] + text[last_gt + 1 :].replace("<", _LT)
    if "<!--" in text:  # a comment ends at a `-->` starting 4 characters after it, at the soonest
        last_end = max((m.start() for m in _COMMENT_END.finditer(text)), default=-1)
        cut = max(last_end - 3, 0)
        text = text[:cut] + text[cut:].replace("<!--", _LT + "!--")
    return _NOT_A_TAG.sub(_LT, text)


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
        self.closing = False

    def close(self) -> None:
        self.closing = True
        super().close()

    def check_for_whole_start_tag(self, i: int) -> int:
        # A start tag no `>` ends (a quote left open) runs to the end of the page, in browsers
        # (which show none of it) as here (as text): html.parser would give up on it at the
        # end, make text of it up to the next `>`, and try the next `<`, rescanning the rest of
        # the page for each.
        end = super().check_for_whole_start_tag(i)
        return len(self.rawdata) if end < 0 and self.closing else end

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
        if tag not in _HEAD and self.open.get("head"):  # a page's first body tag ends a head left open
            self.handle_endtag("head")
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

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag in self.CDATA_CONTENT_ELEMENTS:  # `<script/>` opens a script in HTML, as `<script>` does
            self.set_cdata_mode(tag)
        else:
            self.handle_endtag(tag)

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
        if self.in_title and len(self.title) < 4000:  # a title left open gathers the page: cut it
            self.title += data[:4000]
        if not self.skip and not (self.frame and not self.main):
            self.line.append(data)


class HtmlConverter(Converter):
    """HTML pages: the main content's text and headings, no script, style or navigation."""

    name = "html"
    extensions = (".html", ".htm", ".xhtml")

    def convert(self, data: bytes, path: str) -> Converted:
        parser = _Extractor()
        parser.feed(tags_only(decode_html(data)))
        parser.close()
        parser.flush()
        in_main = [text for main, text in parser.blocks if main]
        blocks = in_main or [text for _, text in parser.blocks]
        text = "\n\n".join(blocks).replace(_LT, "<")
        h1 = next((b[2:] for b in blocks if b.startswith("# ")), "")
        title = (h1 or " ".join(parser.title.split())).replace(_LT, "<")
        metadata: dict[str, Any] = {}
        if parser.meta.get("author"):
            metadata["author"] = parser.meta["author"].replace(_LT, "<")[:500]
        date = next((parser.meta[k] for k in _DATE_META if parser.meta.get(k)), "")
        if date:
            metadata["date"] = date.replace(_LT, "<")[:40]
        return Converted(text, title[:1000], metadata)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(HtmlConverter)
