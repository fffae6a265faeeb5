"""JSON records loader: a `.json` list of objects or a `.jsonl` file -> documents.

Which keys hold the id, text and title is configurable, so an export from another
system loads without reshaping; the remaining keys (or the ones named) become metadata
that filters can use. Records keep the file's order.
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
from plm_core.records import Document
from plm_plugins.loaders.beir import json_line, read_lines

if TYPE_CHECKING:
    from plm_core.registry import Registry

JSONL_SUFFIXES = (".jsonl", ".ndjson")


class JsonRecordsLoader(Loader):
    """A `.json` array or `.jsonl` file of objects -> one document per object, in order."""

    name = "json_records"

    class Config(ComponentConfig):
        id_field: str = Field("id", min_length=1)
        text_field: str = Field("text", min_length=1)
        title_field: str | None = Field("title", description="None: documents get no title")
        metadata_fields: list[str] | None = Field(
            None, description="keys copied into metadata; None: every key but id, text and title"
        )

    config: Config

    def run(self, data: str | Path) -> list[Document]:
        path = Path(data)
        if not path.is_file():
            raise PlmUserError(f"{path}: no such file; give a .json (list of objects) or .jsonl file")
        docs: list[Document] = []
        seen: dict[str, str] = {}
        for where, record in self._records(path):
            doc = self._document(record, where)
            if doc.id in seen:
                raise PlmUserError(f"{where}: id {doc.id!r} already used at {seen[doc.id]}; ids must be unique")
            seen[doc.id] = where
            docs.append(doc)
        return docs

    def _records(self, path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """(location for error messages, record) pairs: `file:line` or `file: record N`."""
        if path.suffix.lower() in JSONL_SUFFIXES:
            for lineno, line in read_lines(path):
                yield f"{path}:{lineno}", json_line(path, lineno, line)
            return
        if path.suffix.lower() != ".json":
            raise PlmUserError(f"{path}: unknown suffix {path.suffix!r}; name it .json (a list) or .jsonl")
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as err:
            raise PlmUserError(f"{path}: not valid UTF-8 (byte {err.start}); re-save the file as UTF-8") from err
        except json.JSONDecodeError as err:
            raise PlmUserError(f"{path}:{err.lineno}: not valid JSON ({err.msg}); fix the file") from err
        if not isinstance(records, list):
            raise PlmUserError(f"{path}: expected a JSON list of objects, got {type(records).__name__}")
        for n, record in enumerate(records, start=1):
            if not isinstance(record, dict):
                raise PlmUserError(f"{path}: record {n} is a {type(record).__name__}, not a JSON object")
            yield f"{path}: record {n}", record

    def _document(self, record: Mapping[str, Any], where: str) -> Document:
        cfg = self.config
        for field in (cfg.id_field, cfg.text_field):
            if record.get(field) is None:
                raise PlmUserError(
                    f"{where}: missing field {field!r}; add it to every record or set the loader's "
                    f"{'id_field' if field == cfg.id_field else 'text_field'}"
                )
        text = record[cfg.text_field]
        if not isinstance(text, str):
            raise PlmUserError(f"{where}: field {cfg.text_field!r} must be a string, not {type(text).__name__}")
        title = record.get(cfg.title_field) if cfg.title_field else None
        if cfg.metadata_fields is None:
            taken = {cfg.id_field, cfg.text_field, cfg.title_field}
            metadata = {k: v for k, v in record.items() if k not in taken}
        else:
            # A named field absent from one record is simply not set for that record.
            metadata = {k: record[k] for k in cfg.metadata_fields if k in record}
        return Document(
            id=str(record[cfg.id_field]), text=text, title="" if title is None else str(title), metadata=metadata
        )


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(JsonRecordsLoader)
