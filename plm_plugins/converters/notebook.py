"""Jupyter notebooks (`.ipynb`, nbformat 3 and 4): Markdown cells as text, code cells as
fenced code in the notebook's language, outputs left out (they are results, often large,
and rarely what a search is for). Read with the standard library's JSON parser."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from plm import Converted, Converter, PlmUserError, hookimpl
from plm_plugins.commonmark import clean, first_heading
from plm_plugins.converters.text import fenced, text_of
from plm_plugins.loaders.files import BadInput, parse_json

if TYPE_CHECKING:
    from plm import Registry

_LANGUAGE = re.compile(r"[\w+#.-]{1,40}")  # a language name as a code fence's info string may hold it


def _name(value: Any) -> str:
    """A name from the notebook's metadata (a title, an author) as one line; "" for anything
    but a string."""
    return " ".join(value.replace("\x00", " ").split()) if isinstance(value, str) else ""


def _source(cell: dict[str, Any], key: str) -> str:
    value = cell.get(key, "")
    if isinstance(value, list):
        return "".join(part for part in value if isinstance(part, str))
    return value if isinstance(value, str) else ""


class NotebookConverter(Converter):
    """Jupyter notebooks: Markdown and code cells, no outputs."""

    name = "notebook"
    extensions = (".ipynb",)

    def convert(self, data: bytes, path: str) -> Converted:
        fix = "re-save it from Jupyter or move it out of the folder"
        try:
            nb = parse_json(text_of(data), fix)
        except BadInput as err:
            raise PlmUserError(f"not a readable notebook: {err}") from None
        if not isinstance(nb, dict):
            raise PlmUserError(f"not a notebook (its JSON is a {type(nb).__name__}, not an object); {fix}")
        cells = nb.get("cells")
        if cells is None and isinstance(nb.get("worksheets"), list):  # nbformat 3
            sheets = [ws.get("cells") for ws in nb["worksheets"] if isinstance(ws, dict)]
            cells = [c for sheet in sheets if isinstance(sheet, list) for c in sheet]
        if not isinstance(cells, list):
            raise PlmUserError(f"not a notebook (no list of `cells`); {fix}")
        meta: dict[str, Any] = nb["metadata"] if isinstance(nb.get("metadata"), dict) else {}
        info: dict[str, Any] = meta["language_info"] if isinstance(meta.get("language_info"), dict) else {}
        kernel: dict[str, Any] = meta["kernelspec"] if isinstance(meta.get("kernelspec"), dict) else {}
        # Only a name: the language is written after a code fence's backticks, where "py```\n# X"
        # would close the fence and make a heading (and the title) of the next line.
        named = _LANGUAGE.match(_name(info.get("name")) or _name(kernel.get("language")))
        language = named.group() if named else ""
        parts: list[str] = []
        for cell in cells:
            if not isinstance(cell, dict):
                continue
            kind = cell.get("cell_type")
            if kind == "markdown":
                parts.append(clean(_source(cell, "source")).strip())
            elif kind == "code":
                code = (_source(cell, "source") or _source(cell, "input")).strip("\n")
                if code.strip():
                    parts.append(fenced(code, language))
            elif kind in ("raw", "heading"):  # nbformat 3's heading cells
                text = _source(cell, "source").strip()
                level = cell.get("level")
                parts.append(f"{'#' * level} {text}" if isinstance(level, int) and 1 <= level <= 6 else text)
        text = "\n\n".join(p for p in parts if p)
        metadata: dict[str, Any] = {"language": language} if language else {}
        title = _name(meta.get("title"))
        authors = meta.get("authors")
        if isinstance(authors, list) and authors and isinstance(authors[0], dict) and _name(authors[0].get("name")):
            metadata["author"] = _name(authors[0]["name"])[:500]
        return Converted(text, title or first_heading(text), metadata)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(NotebookConverter)
