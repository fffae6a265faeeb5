"""Markdown loader: one `Document` per `.md` file, the way the POC read its corpus.

POC_SPEC section 1: files sorted by path, id = file stem, the title taken from the first
`title:` or `# ` line, and the text kept whole (front matter included, because the POC
indexed it and its keywords and BM25 terms come partly from it). Front matter is also
parsed into `Document.metadata` for filtering; that parse never changes the text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm_core.component import ComponentConfig
from plm_core.errors import PlmUserError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Loader
from plm_core.records import Document

if TYPE_CHECKING:
    from plm_core.registry import Registry

# A top-level `key: value` line; the value may be empty (a nested map, a list follows).
_KEY_LINE = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:[ \t]+(.*?))?\s*$")
_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$")
_BLOCK_SCALAR = re.compile(r"^[|>][+-]?$")


def title_of(text: str, default: str) -> str:
    """The POC's title rule: the first line starting with `title:` or `# `, else `default`.

    Lines are tested raw (not stripped), so an indented `title:` inside a nested
    front-matter map does not count; this is what reproduces the corpus titles.
    """
    for line in text.split("\n"):
        if line.startswith("title:"):
            return line[len("title:") :].strip().strip("\"'")
        if line.startswith("# "):
            return line[2:].strip()
    return default


def parse_scalar(raw: str) -> Any:
    """A YAML-ish scalar: quoted strings unquoted, ints, floats, booleans, null.

    Dates (`2024-05-01`) and everything else stay strings, so metadata is always
    JSON-serialisable and compares the same way after a round trip through the store.
    """
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if " #" in value:  # a trailing comment on a plain scalar
        value = value.split(" #", 1)[0].rstrip()
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~", ""):
        return None
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1].strip()
        return [parse_scalar(part) for part in inner.split(",")] if inner else []
    return value


def parse_front_matter(text: str) -> dict[str, Any]:
    """Top-level `key: value` pairs between a leading `---` line and the next `---` line.

    Supports plain scalars, `key:` followed by `- item` lines (a list), and `>` / `|`
    block scalars. Nested maps are skipped: this is metadata for filters, not a YAML
    parser, and the project deliberately takes no YAML dependency.
    """
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].rstrip() != "---":
        return {}
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        return {}
    body = lines[1:end]
    meta: dict[str, Any] = {}
    i = 0
    while i < len(body):
        match = _KEY_LINE.match(body[i])
        i += 1
        if match is None:  # indented, comment, or something we do not read
            continue
        key, value = match.group(1), match.group(2) or ""
        # Lines that belong to this key: indented ones, or `- item` lines right under it.
        nested: list[str] = []
        while i < len(body) and (body[i][:1] in (" ", "\t", "-") or not body[i].strip()):
            nested.append(body[i])
            i += 1
        if _BLOCK_SCALAR.match(value):
            parts = [line.strip() for line in nested if line.strip()]
            meta[key] = (" " if value[0] == ">" else "\n").join(parts)
        elif value:
            meta[key] = parse_scalar(value)
        else:
            items = [line.strip()[1:].strip() for line in nested if line.strip().startswith("-")]
            if items and len(items) == len([line for line in nested if line.strip()]):
                meta[key] = [parse_scalar(item) for item in items]
    return meta


class MarkdownLoader(Loader):
    """A folder of Markdown files (or one file) -> one document per file, sorted by path."""

    name = "markdown_dir"

    class Config(ComponentConfig):
        pattern: str = Field("*.md", min_length=1, description="glob inside the folder; `**/*.md` recurses")
        front_matter: bool = Field(True, description="parse leading `---` front matter into metadata")

    config: Config

    def run(self, data: str | Path) -> list[Document]:
        root = Path(data)
        if root.is_file():
            files = [root]
        elif root.is_dir():
            files = sorted(p for p in root.glob(self.config.pattern) if p.is_file())
            if not files:
                raise PlmUserError(
                    f"{root}: no files match {self.config.pattern!r}; "
                    "check the folder or set the loader's `pattern` (e.g. '**/*.md' to recurse)"
                )
        else:
            raise PlmUserError(f"{root}: no such file or folder; give a Markdown file or a folder of them")
        docs: list[Document] = []
        seen: dict[str, Path] = {}
        for path in files:
            doc = self._load(path)
            if doc.id in seen:
                raise PlmUserError(
                    f"{path} and {seen[doc.id]} both give document id {doc.id!r} (the file stem); "
                    "rename one or narrow the loader's `pattern`"
                )
            seen[doc.id] = path
            docs.append(doc)
        return docs

    def _load(self, path: Path) -> Document:
        try:
            # read_text's universal newlines, as the POC read files: CRLF becomes LF.
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise PlmUserError(
                f"{path}: not valid UTF-8 (byte {err.start}); re-save the file as UTF-8 or exclude it"
            ) from err
        except OSError as err:
            raise PlmUserError(f"{path}: cannot be read ({err.strerror}); check its permissions") from err
        metadata = parse_front_matter(text) if self.config.front_matter else {}
        # Set last so the loader's own key always says where the document came from.
        metadata["path"] = path.as_posix()
        stem = path.stem
        return Document(id=stem, text=text, title=title_of(text, stem), path=path.as_posix(), metadata=metadata)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(MarkdownLoader)
