"""BEIR corpus loader: `corpus.jsonl` (`_id`, `title`, `text`, `metadata`) -> documents.

Documents keep the file's order, so chunk and vector rows line up with BEIR's own
tooling. `Document.path` is the corpus file (absolute), so a sync's `--prune` knows which
stored documents this file yielded; chunk ids come from the document id alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm_core.component import ComponentConfig
from plm_core.errors import PlmUserError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Loader
from plm_core.records import Document, LoadFailure
from plm_plugins.loaders.files import BadInput, Record, collect_records, docs_or_raise, read_text_file, with_path

if TYPE_CHECKING:
    from plm_core.registry import Registry

CORPUS_FILE = "corpus.jsonl"


def corpus_path(data: str | Path) -> Path:
    """The corpus file itself, or `corpus.jsonl` inside a BEIR dataset folder.

    PlmUserError when there is none: the whole source is unusable, so an ingest stops.
    """
    path = Path(data)
    if path.is_dir():
        path = path / CORPUS_FILE
    if not path.is_file():
        raise PlmUserError(f"{path}: no such file; give a BEIR corpus.jsonl or the folder that holds it")
    return path


class BeirCorpusLoader(Loader):
    """A BEIR `corpus.jsonl` -> one document per line, in file order.

    `load` reports each bad line (not JSON, not an object, no `_id` or `text`, an id used
    before) and loads the rest; a file that is binary, not UTF-8 or over `max_file_mb`
    is one failure for the whole file.
    """

    name = "beir_corpus"

    class Config(ComponentConfig):
        include_title: bool = Field(
            False, description="index `title + '\\n\\n' + text`, as BEIR evaluations usually do"
        )
        max_file_mb: float = Field(
            4096, gt=0, description="a larger corpus file is reported, never read (MS MARCO's is about 3 GB)"
        )

    config: Config

    def run(self, data: str | Path) -> list[Document]:
        return docs_or_raise(self.load(str(data)))

    def load(self, source: str) -> tuple[list[Document], list[LoadFailure]]:
        path = corpus_path(source)
        try:
            text = read_text_file(path, self.config.max_file_mb, skip="give a UTF-8 BEIR corpus.jsonl")
        except BadInput as err:
            return [], [LoadFailure(path.as_posix(), str(err))]
        return with_path(collect_records(jsonl_records(path, text), "_id", self._document), path)

    def _document(self, record: Mapping[str, Any]) -> Document:
        for field in ("_id", "text"):
            if record.get(field) is None:
                raise BadInput(f"missing field {field!r}; every BEIR corpus line needs it: add it or remove the line")
        title, text = record.get("title") or "", record["text"]
        if not isinstance(title, str) or not isinstance(text, str):
            raise BadInput("'title' and 'text' must be strings; fix the line")
        if self.config.include_title and title:
            # An empty title adds nothing rather than two leading newlines.
            text = f"{title}\n\n{text}"
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise BadInput(f"'metadata' must be a JSON object, not {type(metadata).__name__}; fix or drop it")
        return Document(id=str(record["_id"]), text=text, title=title, metadata=dict(metadata))


def jsonl_records(path: Path, text: str) -> Iterator[Record]:
    """One record per non-blank line of a JSON Lines file, named `file:line`."""
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield f"{path.as_posix()}:{lineno}", f"line {lineno}", _json_object(line)


def _json_object(line: str) -> Mapping[str, Any] | BadInput:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        return BadInput(f"not valid JSON ({err.msg}); fix or remove the line")
    except RecursionError:
        return BadInput("JSON nested too deeply to read; fix or remove the line")
    if not isinstance(record, dict):
        return BadInput(f"expected a JSON object, got {type(record).__name__}; fix or remove the line")
    return record


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(BeirCorpusLoader)
