"""BEIR corpus loader: `corpus.jsonl` (`_id`, `title`, `text`, `metadata`) -> documents.

Documents keep the file's order, so chunk and vector rows line up with BEIR's own
tooling. `Document.path` stays empty: a corpus line is not a file, and chunkers then
derive stable ids from the document id alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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

CORPUS_FILE = "corpus.jsonl"


def corpus_path(data: str | Path) -> Path:
    """The corpus file itself, or `corpus.jsonl` inside a BEIR dataset folder."""
    path = Path(data)
    if path.is_dir():
        path = path / CORPUS_FILE
    if not path.is_file():
        raise PlmUserError(f"{path}: no such file; give a BEIR corpus.jsonl or the folder that holds it")
    return path


class BeirCorpusLoader(Loader):
    """A BEIR `corpus.jsonl` -> one document per line, in file order."""

    name = "beir_corpus"

    class Config(ComponentConfig):
        include_title: bool = Field(
            False, description="index `title + '\\n\\n' + text`, as BEIR evaluations usually do"
        )

    config: Config

    def run(self, data: str | Path) -> list[Document]:
        path = corpus_path(data)
        docs: list[Document] = []
        seen: dict[str, int] = {}
        for lineno, line in read_lines(path):
            doc = self._document(json_line(path, lineno, line), path, lineno)
            if doc.id in seen:
                raise PlmUserError(
                    f"{path}:{lineno}: document id {doc.id!r} already used on line {seen[doc.id]}; ids must be unique"
                )
            seen[doc.id] = lineno
            docs.append(doc)
        return docs

    def _document(self, record: Mapping[str, Any], path: Path, lineno: int) -> Document:
        for field in ("_id", "text"):
            if record.get(field) is None:
                raise PlmUserError(f"{path}:{lineno}: missing field {field!r}; every BEIR corpus line needs it")
        title = str(record.get("title") or "")
        text = str(record["text"])
        if self.config.include_title and title:
            # An empty title adds nothing rather than two leading newlines.
            text = f"{title}\n\n{text}"
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise PlmUserError(f"{path}:{lineno}: 'metadata' must be a JSON object, not {type(metadata).__name__}")
        return Document(id=str(record["_id"]), text=text, title=title, metadata=dict(metadata))


def read_lines(path: Path) -> list[tuple[int, str]]:
    """The non-blank lines of a UTF-8 text file with their 1-based numbers."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise PlmUserError(f"{path}: not valid UTF-8 (byte {err.start}); re-save the file as UTF-8") from err
    return [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


def json_line(path: Path, lineno: int, line: str) -> Mapping[str, Any]:
    """One JSON Lines record, or an error naming the file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise PlmUserError(f"{path}:{lineno}: not valid JSON ({err.msg}); fix or remove the line") from err
    if not isinstance(record, dict):
        raise PlmUserError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
    return record


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(BeirCorpusLoader)
