"""BEIR corpus loader: `corpus.jsonl` (`_id`, `title`, `text`, `metadata`) -> documents.

Documents keep the file's order, so chunk and vector rows line up with BEIR's own
tooling. `Document.path` is the corpus file (absolute), so a sync's `--prune` knows which
stored documents this file yielded; chunk ids come from the document id alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import ComponentConfig, Document, Loader, LoadFailure, PlmUserError, document_from_record, hookimpl
from plm.documents import collect_records
from plm_plugins.loaders.files import (
    BadInput,
    docs_or_raise,
    failure,
    jsonl_records,
    read_text_file,
    shown,
    with_path,
)

if TYPE_CHECKING:
    from plm import Registry

CORPUS_FILE = "corpus.jsonl"


def corpus_path(data: str | Path) -> Path:
    """The corpus file itself, or `corpus.jsonl` inside a BEIR dataset folder.

    PlmUserError when there is none: the whole source is unusable, so an ingest stops.
    """
    path = Path(data)
    if path.is_dir():
        path = path / CORPUS_FILE
    if not path.is_file():
        raise PlmUserError(f"{shown(path)}: no such file; give a BEIR corpus.jsonl or the folder that holds it")
    return path


class BeirCorpusLoader(Loader):
    """A BEIR `corpus.jsonl` -> one document per line, in file order.

    `load` reports each bad line (not JSON, not an object, no `_id` or `text`, an id used
    before, anything `plm_index.documents` rejects: a blank text, a title or metadata of
    the wrong type, text that is not valid Unicode) and loads the rest; a file that is
    binary, not UTF-8 or over `max_file_mb` is one failure for the whole file.
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
            return [], [failure(path, str(err))]
        return with_path(collect_records(jsonl_records(path, text), "_id", self._document, failure, (BadInput,)), path)

    def _document(self, record: Mapping[str, Any]) -> Document:
        # An empty text with a title is kept when the title is indexed: BEIR corpora have
        # such documents (TREC-COVID), and BEIR's own tooling finds them by their title.
        return document_from_record(record, id_fields=("_id",), include_title=self.config.include_title)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(BeirCorpusLoader)
