"""JSON records loader: a `.json` list of objects or a `.jsonl` file -> documents.

Which keys hold the id, text and title is configurable, so an export from another
system loads without reshaping; the remaining keys (or the ones named) become metadata
that filters can use, and the keys of a `metadata` object join them (`{"metadata":
{"team": "a"}}` is `team: a`; the same key twice with two values is an error). Records
keep the file's order.

`load` reports each bad record (`file:line` in a .jsonl, `file: record N` in a .json
list) and loads the rest; a file that is binary, not UTF-8, over `max_file_mb` or (for
.json) not a JSON list is one failure for the whole file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import ComponentConfig, Document, Loader, LoadFailure, PlmUserError, document_from_record, hookimpl
from plm.documents import MissingFieldError, collect_records, merge_metadata_field
from plm_plugins.loaders.files import (
    BadInput,
    Record,
    docs_or_raise,
    failure,
    jsonl_records,
    parse_json,
    read_text_file,
    shown,
    with_path,
)

if TYPE_CHECKING:
    from plm import Registry

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
            raise PlmUserError(f"{shown(path)}: no such file; give a .json (list of objects) or .jsonl file")
        jsonl = path.suffix.lower() in JSONL_SUFFIXES
        if not jsonl and path.suffix.lower() != ".json":
            raise PlmUserError(f"{shown(path)}: unknown suffix {path.suffix!r}; name it .json (a list) or .jsonl")
        try:
            text = read_text_file(path, self.config.max_file_mb, skip="give a UTF-8 .json or .jsonl file")
            records = jsonl_records(path, text) if jsonl else _array_records(path, text)
        except BadInput as err:
            return [], [failure(path, str(err))]
        return with_path(
            collect_records(records, self.config.id_field, self.record_document, failure, (BadInput,)), path
        )

    def record_document(self, record: Mapping[str, Any]) -> Document:
        cfg = self.config
        if cfg.metadata_fields is None:
            taken = {cfg.id_field, cfg.text_field, cfg.title_field}
            metadata = {k: v for k, v in record.items() if k not in taken}
        else:
            # A named field absent from one record is simply not set for that record.
            metadata = {k: record[k] for k in cfg.metadata_fields if k in record}
        try:
            metadata = merge_metadata_field(metadata)  # {"metadata": {"team": "a"}} is metadata team=a
            return document_from_record(
                record,
                text_field=cfg.text_field,
                id_fields=(cfg.id_field,),
                title_field=cfg.title_field,
                include_title=cfg.include_title,
                metadata=metadata,
            )
        except MissingFieldError as err:
            # The usual cause is an export that names the field differently.
            setting = "id_field" if err.field == cfg.id_field else "text_field"
            raise BadInput(f"{err}, or set the loader's {setting} to the key that holds it") from None


def _array_records(path: Path, text: str) -> Iterator[Record]:
    """One record per item of a JSON list, named `file: record N`; BadInput (for the whole
    file) when the text is not JSON or not a list."""
    records = parse_json(text, "fix the file")
    if not isinstance(records, list):
        raise BadInput(f"expected a JSON list of objects, got {type(records).__name__}; wrap the records in [...]")
    return _items(path, records)


def _items(path: Path, records: list[Any]) -> Iterator[Record]:
    where = shown(path)
    for n, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            record = BadInput(f"expected a JSON object, got {type(record).__name__}; fix or remove the record")
        yield f"{where}: record {n}", f"record {n}", record


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(JsonRecordsLoader)
