"""Markdown as people write it: CommonMark's ATX headings, and the dialects docs sites use.

The POC read any line starting with `#` as a heading, inside fenced code too, so a shell
comment (`# install the package`) or a Material annotation (`# (1)!`) started a section
and cut the code block in two. `configs/poc_parity.toml` keeps that (the chunker's default,
`headings = "poc"`); the recipes we recommend read headings here:

- An ATX heading is 1-6 `#` after at most 3 spaces, then a space or the line's end; a
  closing run of `#` is dropped. Never inside a fenced block (``` or ~~~, at any indent, as
  in a list item; closed by a like fence at least as long, or open to the end of the text),
  never in YAML front matter. Indented code cannot hold one (4 spaces is too many).
- A trailing attribute list (`## Configure { #configure .wide }`, MkDocs' `{: #id }`) is
  not part of the title: `heading_attributes` splits it off, and its `#id` is the anchor.

`clean` turns the dialects into plain Markdown before anything reads the text (the
`folder` loader's Markdown converter): attribute lists leave headings; MkDocs/Material
admonitions (`!!! note "Title"`, `??? tip`) and content tabs (`=== "Tab"`) become a bold
line with their body un-indented; a Hugo shortcode becomes the text it shows (`{{<
glossary_tooltip text="Pods" ... >}}` is `Pods`; a heading that is one shortcode keeps its
quoted argument) and otherwise goes (`{{< highlight yaml >}}`); MDX `import`/`export` lines
are removed; Obsidian `[[Page|text]]` becomes `[text](Page)` and
an embed `![[file]]` its name. Code (fenced or indented) is never changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from plm.documents import front_matter_lines

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_ATTR = r"(?:[#.][\w:-]+|[\w-]+=(?:\"[^\"]*\"|'[^']*'|[^\s}]+))"
_ATTRIBUTES = re.compile(rf"[ \t]*\{{:?[ \t]*{_ATTR}(?:[ \t]+{_ATTR})*[ \t]*\}}[ \t]*$")
_ANCHOR = re.compile(r"(?:^|\s)#([\w:-]+)")
_ADMONITION = re.compile(r"( *)(?:!!!|\?\?\?\+?)[ \t]*([\w-]*)(?:[ \t]+(?:\"([^\"]*)\"|'([^']*)'))?[ \t]*$")
_TAB = re.compile(r"( *)===[ \t]+(?:\"([^\"]*)\"|'([^']*)')[ \t]*$")
# Bounded: a shortcode or a wikilink is short, and an opener left unclosed must not send
# each later one to the end of the line (10 KB of `[[` took 7 s, 40 KB two minutes).
_SHORTCODE = re.compile(r"\{\{[<%].{0,2000}?[%>]\}\}")
_TEXT_PARAM = re.compile(r"\btext=\"([^\"]*)\"")
_QUOTED = re.compile(r"\"([^\"]*)\"")
_MDX = re.compile(
    r"(?:import\s+(?:[\w*{}\s,]+\s+from\s+)?[\"'][^\"']+[\"'];?|export\s+(?:default|const|let|function)\b.*)\s*$"
)
_WIKILINK = re.compile(r"(!?)\[\[([^\]|#\n]{0,500})(#[^\]|\n]{0,500})?(?:\|([^\]\n]{0,500}))?\]\]")


class Heading(NamedTuple):
    """One ATX heading: `start`/`end` of its line, `level`, `title` (attributes dropped) and
    `anchor` (its `{#id}`, else "")."""

    start: int
    end: int
    level: int
    title: str
    anchor: str


def heading_attributes(title: str) -> tuple[str, str]:
    """(title, anchor): a trailing `{ #id .class key=value }` split off a heading's text."""
    m = _ATTRIBUTES.search(title)
    if m is None:
        return title, ""
    anchor = _ANCHOR.search(m.group(0))
    return title[: m.start()].rstrip(), anchor.group(1) if anchor else ""


def code_lines(lines: list[str]) -> Iterator[tuple[int, int, str, bool]]:
    """(index, offset, line, in code) for each line: in code means front matter, a fence
    line or a line inside a fenced block. Indented code needs no mark: no rule here reads a
    line indented 4 spaces or more."""
    fence = ""
    offset = 0
    skip = front_matter_lines(lines)
    for i, line in enumerate(lines):
        start, offset = offset, offset + len(line) + 1
        if i < skip:
            yield i, start, line, True
            continue
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end() :].strip():
                fence = ""
            yield i, start, line, True
            continue
        if m and not (m.group(1)[0] == "`" and "`" in line[m.end() :]):  # a backtick fence's info has none
            fence = m.group(1)
            yield i, start, line, True
            continue
        yield i, start, line, False


def atx_headings(text: str, max_level: int = 6) -> list[Heading]:
    """The ATX headings of `text` up to `max_level`, by CommonMark's rules (module doc)."""
    if "#" not in text:
        return []
    found: list[Heading] = []
    for _, start, line, code in code_lines(text.split("\n")):
        if code or "#" not in line[:4]:
            continue
        m = _ATX.match(line)
        if m is None or len(m.group(1)) > max_level:
            continue
        raw = _CLOSING_HASHES.sub("", line[m.end() :].rstrip("\r")).strip()
        title, anchor = heading_attributes(raw)
        found.append(Heading(start, start + len(line), len(m.group(1)), title, anchor))
    return found


def first_heading(text: str) -> str:
    """The title of the first level-1 ATX heading, or ""."""
    return next((h.title for h in atx_headings(text, 1) if h.title), "")


def clean(text: str) -> str:
    """`text` with the dialects (module doc) turned into plain Markdown; code untouched."""
    out: list[str] = []
    indent = -1  # the body indent of the admonition or tab being un-indented, -1 outside one
    for _, _, line, code in code_lines(text.split("\n")):
        if indent >= 0:
            if not line.strip():
                out.append(line)
                continue
            if len(line) - len(line.lstrip(" ")) >= indent:
                line = line[indent:]
            else:
                indent = -1
        if code:
            out.append(line)
            continue
        admonition, tab = _ADMONITION.fullmatch(line), _TAB.fullmatch(line)
        if admonition is not None or tab is not None:
            if admonition is not None:  # its title, else its kind: `!!! warning` -> **Warning**
                pad, kind, title = admonition.group(1), admonition.group(2), admonition.group(3) or admonition.group(4)
                label = title if title is not None else kind.replace("-", " ").capitalize()
            elif tab is not None:
                pad, label = tab.group(1), tab.group(2) or tab.group(3) or ""
            out.append(f"{pad}**{label}**" if label.strip() else "")
            indent = len(pad) + 4
            continue
        m = _ATX.match(line)
        if m is not None:
            title, _ = heading_attributes(line[m.end() :])
            line = line[: m.end()] + title
        if "{{" in line:
            whole = _SHORTCODE.fullmatch(line[m.end() :].strip()) if m is not None else None
            if m is not None and whole is not None:
                line = line[: m.end()] + _argument(whole)
            else:
                line = _SHORTCODE.sub(_shortcode_text, line)
            if not line.strip():
                continue
        if line[:6] in ("import", "export") and _MDX.match(line):
            continue
        if "[[" in line:
            line = _WIKILINK.sub(_wikilink, line)
        out.append(line)
    return "\n".join(out)


def _shortcode_text(m: re.Match[str]) -> str:
    """What a Hugo shortcode shows as text: its `text="..."` (`glossary_tooltip`), else nothing."""
    found = _TEXT_PARAM.search(m.group(0))
    return found.group(1) if found else ""


def _argument(m: re.Match[str]) -> str:
    """A heading that is one shortcode (`## {{% heading "prerequisites" %}}`): its first quoted
    argument, or its `text=`, as the heading's text."""
    found = _TEXT_PARAM.search(m.group(0)) or _QUOTED.search(m.group(0))
    return found.group(1) if found else ""


def _wikilink(m: re.Match[str]) -> str:
    embed, target, section, alias = m.groups()
    target = target.strip()
    shown = (alias or "").strip() or (target + (f" > {section[1:].strip()}" if section else "")).strip(" >")
    if embed:
        return shown
    return f"[{shown}]({(target + (section or '')).replace(' ', '%20')})" if target or section else shown
