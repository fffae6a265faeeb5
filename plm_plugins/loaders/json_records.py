"""JSON records loader: a `.json` list of objects or a `.jsonl` file -> documents.

Which keys hold the id, text and title is configurable, so an export from another
system loads without reshaping; the remaining keys (or the ones named) become metadata
that filters can use. Records keep the file's order.

`load` reports each bad record (`file:line` in a .jsonl, `file: record N` in a .json
list) and loads the rest; a file that is binary, not UTF-8, over `max_file_mb` or (for
.json) not a JSON list is one failure for the whole file.
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
from plm_plugins.loaders.beir_corpus import jsonl_records
from plm_plugins.loaders.files import BadInput, Record, collect_records, docs_or_raise, read_text_file, with_path

if TYPE_CHECKING:
    from plm_core.registry import Registry

JSONL_SUFFIXES = (".jsonl", ".ndjson")


class JsonRecordsLoader(Loader):
    """A `.json` array or `.jsonl` file of objects -> one document per object, in order."""

    name = "json_records"

    class Config(ComponentConfig):
        id_field: str = Field("id", min_length=1, description="the record key holding the document id")
        text_field: str = Field("text", min_length=1, description="the record key holding the text to index")
        title_field: str | None = Field("title", description="None: documents get no title")
        metadata_fields: list[str] | None = Field(
            None, description="keys copied into metadata; None: every key but id, text and title"
        )
        max_file_mb: float = Field(4096, gt=0, description="a larger file is reported, never read")
        include_title: bool = Field(
            True, description="index `title + '\\n\\n' + text`, so a word only in the title is found"
        )

    config: Config

    def run(self, data: str | Path) -> list[Document]:
        return docs_or_raise(self.load(str(data)))

    def load(self, source: str) -> tuple[list[Document], list[LoadFailure]]:
        path = Path(source)
        if not path.is_file():
            raise PlmUserError(f"{path}: no such file; give a .json (list of objects) or .jsonl file")
        jsonl = path.suffix.lower() in JSONL_SUFFIXES
        if not jsonl and path.suffix.lower() != ".json":
            raise PlmUserError(f"{path}: unknown suffix {path.suffix!r}; name it .json (a list) or .jsonl")
        try:
            text = read_text_file(path, self.config.max_file_mb, skip="give a UTF-8 .json or .jsonl file")
        except BadInput as err:
            return [], [LoadFailure(path.as_posix(), str(err))]
        if jsonl:
            return with_path(collect_records(jsonl_records(path, text), self.config.id_field, self._document), path)
        try:
            records = json.loads(text)
        except json.JSONDecodeError as err:
            return [], [LoadFailure(f"{path.as_posix()}:{err.lineno}", f"not valid JSON ({err.msg}); fix the file")]
        except RecursionError:
            return [], [LoadFailure(path.as_posix(), "JSON nested too deeply to read; fix the file")]
        if not isinstance(records, list):
            error = f"expected a JSON list of objects, got {type(records).__name__}; wrap the records in [...]"
            return [], [LoadFailure(path.as_posix(), error)]
        return with_path(collect_records(_array_records(path, records), self.config.id_field, self._document), path)

    def _document(self, record: Mapping[str, Any]) -> Document:
        cfg = self.config
        for field in (cfg.id_field, cfg.text_field):
            if record.get(field) is None:
                raise BadInput(
                    f"missing field {field!r}; add it to every record or set the loader's "
                    f"{'id_field' if field == cfg.id_field else 'text_field'}"
                )
        text = record[cfg.text_field]
        if not isinstance(text, str):
            raise BadInput(f"field {cfg.text_field!r} must be a string, not {type(text).__name__}; fix the record")
        title = record.get(cfg.title_field) if cfg.title_field else None
        if title is not None and not isinstance(title, str):
            raise BadInput(f"field {cfg.title_field!r} must be a string, not {type(title).__name__}; fix the record")
        if cfg.metadata_fields is None:
            taken = {cfg.id_field, cfg.text_field, cfg.title_field}
            metadata = {k: v for k, v in record.items() if k not in taken}
        else:
            # A named field absent from one record is simply not set for that record.
            metadata = {k: record[k] for k in cfg.metadata_fields if k in record}
        title = title or ""
        if cfg.include_title and title.strip():  # a word only in the title is found too
            text = f"{title}\n\n{text}"
        return Document(id=str(record[cfg.id_field]), text=text, title=title, metadata=metadata)


def _array_records(path: Path, records: list[Any]) -> Iterator[Record]:
    for n, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            record = BadInput(f"expected a JSON object, got {type(record).__name__}; fix or remove the record")
        yield f"{path.as_posix()}: record {n}", f"record {n}", record


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(JsonRecordsLoader)
