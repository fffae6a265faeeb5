"""Records -> documents, and the one check every document passes before it is stored.

Loaders and the Python API (`job.ingest([Document(...), {"id": ..., "text": ...}])`) go
through `check_document`, so a bad record becomes one `failed:` line naming what is wrong
while every other record lands, never a batch lost to a UnicodeEncodeError in the store or
a document stored with nothing to find it by.

Errors are `DocumentError`s with a one-line message: what is wrong and how to fix it. The
caller puts where next to it (`file:line`, `record 3`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from plm_core.component import BaseComponent
from plm_core.errors import PlmUserError, TypeValidationError
from plm_core.pipeline import check_output, stage_name
from plm_core.records import Chunk, Document, LoadFailure

MAX_ID_CHARS = 512
MAX_METADATA_DEPTH = 20
# SQLite's INTEGER, and what most JSON readers keep exactly; larger numbers belong in strings.
MAX_METADATA_INT = 2**63 - 1
_MAX_INT_ID = 10**MAX_ID_CHARS
# Characters that show nothing and give no search term: a text of only these is blank.
_INVISIBLE = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc


class DocumentError(PlmUserError):
    """A record or Document that cannot be indexed as given (a one-line reason)."""


class MissingFieldError(DocumentError):
    """A record lacks a field it needs; `field` names it, so a loader can say which
    setting points at it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def searchable_text(title: str, text: str, include_title: bool) -> str:
    """The text to index: with `include_title` and a non-blank title, the title, a blank
    line, then the text (BEIR's convention, so a word only in the title is found);
    otherwise the text alone. The one place loaders and records join the two."""
    return f"{title}\n\n{text}" if include_title and title.strip() else text


def is_blank(text: str) -> bool:
    """True when `text` has no visible character: empty, whitespace, control and format
    characters (zero-width spaces, a BOM) only. Such a document would get no chunk."""
    first = text.lstrip()[:1]
    if first.isalnum():  # a letter or digit is visible: most texts are answered here
        return False
    return not any(unicodedata.category(ch) not in _INVISIBLE for ch in text if not ch.isspace())


def _kind(value: Any) -> str:
    """A value's type name for messages (never its repr: it may be huge or deeply nested)."""
    return "null" if value is None else type(value).__name__


def _short(value: str) -> str:
    """A string for a message: quoted, escaped (a lone surrogate prints as \\udXXX), cut."""
    return repr(value[:60]) + ("..." if len(value) > 60 else "")


def _shown(value: Any) -> str:
    """A metadata value for a message: a string or number as is (cut), anything else its type."""
    if isinstance(value, str):
        return _short(value)
    return str(value)[:60] if isinstance(value, (int, float)) else _kind(value)


def _storable(value: Any) -> bool:
    """What `check_text` accepts, answered without building its message."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def front_matter_lines(lines: list[str]) -> int:
    """How many leading lines are YAML front matter (both `---` lines included), else 0: a
    first line `---` (after a BOM) up to the next `---` line. The one rule for the Markdown
    loader's metadata, its front-matter warning, setext headings and `plm serve`'s document page."""
    if not lines or lines[0].lstrip("\ufeff").rstrip() != "---":
        return 0
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    return 0 if end is None else end + 1


def check_text(value: Any, what: str) -> str:
    """`value` itself when it is a string every store can hold: valid UTF-8 (no lone
    surrogates) and no NUL character (Postgres text and jsonb refuse it; checked here so
    that it fails one document on every store, never a whole batch on one of them)."""
    if not isinstance(value, str):
        raise DocumentError(f"{what} must be a string, got {_kind(value)}")
    nul = value.find("\x00")
    if nul >= 0:
        raise DocumentError(f"{what} holds a NUL character (\\x00) at character {nul}; remove it from the source")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise DocumentError(
            f"{what} is not valid Unicode (a lone surrogate, {value[err.start]!r}, at character {err.start}); "
            "fix the source's encoding or escapes"
        ) from None
    return value


def _check_metadata(value: Any, where: str, depth: int = 0) -> None:
    """JSON data only: strings, finite numbers, 64-bit integers, booleans, null, lists and
    tables with string keys, at most MAX_METADATA_DEPTH levels deep."""
    if depth > MAX_METADATA_DEPTH:
        raise DocumentError(f"{where} is nested more than {MAX_METADATA_DEPTH} levels deep; flatten it")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, int):
        if abs(value) > MAX_METADATA_INT:
            raise DocumentError(f"{where} is an integer beyond 64 bits; store it as a string")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise DocumentError(f"{where} is {value}, not a finite number; use null or a string")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise DocumentError(f"{where} has a key of type {_kind(key)}; metadata keys must be strings")
            check_text(key, f"a key in {where}")
            _check_metadata(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_metadata(item, f"{where}[{i}]", depth + 1)
    else:
        raise DocumentError(
            f"{where} has type {_kind(value)}; metadata holds strings, numbers, booleans, null, lists and "
            "tables only: convert it (a date to its ISO string, for example)"
        )


def check_id(doc_id: Any) -> None:
    """Raise DocumentError unless `doc_id` can name a document: a non-blank, valid-Unicode
    string of at most MAX_ID_CHARS characters with no control character (an id is typed
    back, as in `plm delete ID`, and printed on one line)."""
    if not isinstance(doc_id, str) or not doc_id.strip():
        got = _short(doc_id) if isinstance(doc_id, str) else _kind(doc_id)
        raise DocumentError(f"document id must be a non-empty string, got {got}; give every document an id")
    if not _storable(doc_id):
        check_text(doc_id, f"document id {_short(doc_id)}")
    if len(doc_id) > MAX_ID_CHARS:
        raise DocumentError(f"document id {_short(doc_id)} has {len(doc_id)} characters, over {MAX_ID_CHARS}")
    if _CONTROL.search(doc_id):
        raise DocumentError(f"document id {_short(doc_id)} holds a control character (a newline, a tab...)")


def check_document(doc: Document) -> None:
    """Raise DocumentError when `doc` cannot be stored and found as given: an id that is
    not a non-blank string (or is too long, or holds a control character), a text that is
    not a string or has nothing visible in it, a title or path that is not a string, any
    string that is not valid Unicode, or metadata that is not JSON-like data."""
    if not isinstance(doc, Document):
        raise DocumentError(f"expected a Document, got {_kind(doc)}")
    check_id(doc.id)
    where = f"document {_short(doc.id)}"
    for name in ("title", "path", "text"):
        value = getattr(doc, name)
        if not _storable(value):  # the message is made only for a value that fails
            check_text(value, f"{where}: {name}")
    if is_blank(doc.text):
        raise DocumentError(f"{where}: text is {'empty' if not doc.text else 'blank'}: nothing to index; add text")
    if not isinstance(doc.metadata, Mapping):
        raise DocumentError(f"{where}: metadata must be a table (a dict), got {_kind(doc.metadata)}")
    _check_metadata(doc.metadata, f"{where}: metadata")


def record_id(rec: Mapping[str, Any], id_fields: tuple[str, ...] = ("id", "_id")) -> str:
    """A record's id from the first of `id_fields` it has: a non-blank string, or an
    integer written as text. MissingFieldError when it has none of them (or it is null)."""
    field = next((f for f in id_fields if f in rec and rec[f] is not None), None)
    if field is None:
        names = " or ".join(repr(f) for f in id_fields)
        null = [f for f in id_fields if f in rec]
        what = f"field {null[0]!r} is null" if null else f"missing field {names}"
        raise MissingFieldError(f"{what}; every record needs a unique id: add one or remove the record", id_fields[0])
    value = rec[field]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DocumentError(
            f"id field {field!r} must be a non-empty string or an integer, got {_kind(value)}; fix the record"
        )
    if isinstance(value, int) and abs(value) >= _MAX_INT_ID:
        raise DocumentError(f"id field {field!r} is an integer over {MAX_ID_CHARS} digits; use a shorter id")
    text = str(value)
    if not text.strip():
        raise DocumentError(f"id field {field!r} is {'empty' if not text else 'blank'}; give every record a unique id")
    return text


def merge_metadata_field(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A record's metadata as a loader of top-level keys reads it: `fields` (the keys that
    are not id, text or title), with a `metadata` object's keys put beside the others, since
    that is the shape a client that sends `{"metadata": {"team": "a"}}` means (stored as
    `metadata.metadata.team`, a filter on `team` found nothing). A key both at the top level
    and in `metadata` with another value is a DocumentError; `metadata: null` is no metadata;
    a `metadata` that is not an object is a DocumentError."""
    merged = {k: v for k, v in fields.items() if k != "metadata"}
    inner = fields.get("metadata")
    if inner is None:
        return merged
    if not isinstance(inner, Mapping):
        raise DocumentError(
            f"field 'metadata' must be a JSON object (its keys become the document's metadata) or null, got "
            f"{_kind(inner)}; fix the record, or put the value under another key"
        )
    for key, value in inner.items():
        # NaN == NaN is false: the same NaN twice is one value, refused as such further on.
        same = key in merged and (merged[key] == value or (merged[key] != merged[key] and value != value))
        if key in merged and not same:
            raise DocumentError(
                f"metadata key {_short(str(key))} is given twice with two values, at the top level "
                f"({_shown(merged[key])}) and in 'metadata' ({_shown(value)}); keep one"
            )
        merged[key] = value
    return merged


def document_from_record(
    rec: Mapping[str, Any],
    *,
    text_field: str = "text",
    id_fields: tuple[str, ...] = ("id", "_id"),
    title_field: str | None = "title",
    include_title: bool = False,
    metadata: Mapping[str, Any] | None = None,
    path: str = "",
) -> Document:
    """A checked document from a JSON-like record, or DocumentError saying what is wrong.

    The id comes from the first of `id_fields` the record has (`record_id`), the text from
    `text_field` (a string with something visible in it; null is an error, never "None"),
    the title from `title_field` (a string; absent or null: no title). `metadata` is what
    the document carries; None takes the record's `metadata` field (a table; absent or
    null: none). With `include_title` the title is searched too (`searchable_text`).
    """
    if not isinstance(rec, Mapping):
        raise DocumentError(f"a record must be a JSON object (a dict), got {_kind(rec)}")
    doc_id = record_id(rec, id_fields)
    if rec.get(text_field) is None:
        what = f"field {text_field!r} is null" if text_field in rec else f"missing field {text_field!r}"
        raise MissingFieldError(f"{what}; every record needs its text: add it or remove the record", text_field)
    text = rec[text_field]
    if not isinstance(text, str):
        raise DocumentError(f"field {text_field!r} must be a string, got {_kind(text)}; fix the record")
    title = rec.get(title_field) if title_field else None
    if title is None:
        title = ""
    elif not isinstance(title, str):
        raise DocumentError(f"field {title_field!r} must be a string or null, got {_kind(title)}; fix the record")
    if metadata is None:
        metadata = rec.get("metadata")
        if metadata is None:
            metadata = {}
        elif not isinstance(metadata, Mapping):
            raise DocumentError(
                f"field 'metadata' must be a JSON object or null, got {_kind(metadata)}; fix the record"
            )
    doc = Document(
        id=doc_id,
        text=searchable_text(title, text, include_title),
        title=title,
        path=path,
        metadata=dict(metadata),
    )
    check_document(doc)
    return doc


def _failure(where: str, message: str, doc_id: str = "") -> LoadFailure:
    if doc_id:
        try:
            check_id(doc_id)
        except PlmUserError:
            doc_id = ""  # an id no stored version can have names no document
    return LoadFailure(where, message, doc_id)


def collect_records(
    records: Iterable[tuple[str, str, Any]],
    id_field: str,
    make: Callable[[Mapping[str, Any]], Document],
    failure: Callable[[str, str, str], LoadFailure] = _failure,
    errors: tuple[type[Exception], ...] = (),
) -> tuple[list[Document], list[LoadFailure]]:
    """Documents from parsed records `(where, ref, record)`, one LoadFailure per record that
    `make` rejects (raising PlmUserError or one of `errors`), so every other record still
    loads; a record given as an exception is that record's failure. `make` returns checked
    documents (`document_from_record`); `failure(where, message, doc_id)` makes each failure.

    The first record with an id owns it, even when it fails, so a later duplicate fails
    and the failure's doc_id only ever names an id no loaded document has. A record whose
    id is absent or null is left to `make`, which says which setting names the field.
    """
    docs: list[Document] = []
    failures: list[LoadFailure] = []
    owner: dict[str, str] = {}
    caught: tuple[type[Exception], ...] = (PlmUserError, *errors)
    for where, ref, record in records:
        if isinstance(record, BaseException):
            failures.append(failure(where, str(record), ""))
            continue
        doc_id = ""
        try:
            if record.get(id_field) is not None:
                doc_id = record_id(record, (id_field,))
                if doc_id in owner:
                    raise DocumentError(
                        f"id {doc_id[:80]!r} is already used by {owner[doc_id]}, which keeps it; "
                        "ids must be unique, so change or remove this record"
                    )
                owner[doc_id] = ref
            docs.append(make(record))
        except caught as err:
            failures.append(failure(where, str(err), doc_id))
    return docs, failures


def documents_from_values(records: Sequence[Any]) -> tuple[list[Document], list[LoadFailure]]:
    """Records given as values (`POST /documents`): `id`, `text`, `title` (searched with the
    text) and every other key as metadata (a `metadata` table merged in), checked as a
    loader checks a file's records; each bad record is one failure, `record N`."""

    def make(record: Mapping[str, Any]) -> Document:
        metadata = merge_metadata_field({k: v for k, v in record.items() if k not in ("id", "text", "title")})
        return document_from_record(record, id_fields=("id",), include_title=True, metadata=metadata)

    items = (
        (
            f"record {n}",
            f"record {n}",
            rec if isinstance(rec, Mapping) else DocumentError(f"expected a JSON object, got {_kind(rec)}"),
        )
        for n, rec in enumerate(records, start=1)
    )
    return collect_records(items, "id", make)


def with_document_fields(chunks: Sequence[Chunk], docs: Sequence[Document]) -> list[Chunk]:
    """Each chunk with its document's metadata and `title` under its own (a key the chunk
    sets wins): what filters and hits read, whichever chunker made it. The built-in chunker
    copies them itself, so its chunks come back as they are."""
    by_id = {d.id: d for d in docs}
    out = []
    for chunk in chunks:
        doc = by_id.get(chunk.doc_id)
        meta = chunk.metadata
        if doc is not None and ("title" not in meta or any(k not in meta for k in doc.metadata)):
            chunk = replace(chunk, metadata={**doc.metadata, "title": doc.title, **meta})
        out.append(chunk)
    return out


class DocumentFields(BaseComponent[list[Document], list[Chunk]]):
    """Wraps the chunker of an [index] pipeline: its chunks get their document's metadata
    and title (`with_document_fields`) before the enrichers after it read them."""

    input_type = list[Document]
    output_type = list[Chunk]

    def __init__(self, stage: Any) -> None:
        super().__init__(stage.config, label=stage.label)
        self.stage = stage
        self.input_type, self.output_type = stage.input_type, stage.output_type  # the chunker's own

    def warm_up(self) -> None:
        self.stage.ensure_warm()

    def run(self, data: list[Document]) -> list[Chunk]:
        chunks = self.stage.run(data)
        check_output(self.stage, chunks)
        check_chunk_ids(self.stage, chunks, data)
        return with_document_fields(chunks, data)


def check_chunk_ids(stage: Any, chunks: Sequence[Chunk], docs: Sequence[Document]) -> None:
    """Raise TypeValidationError naming the chunker when two of its chunks share an id or a
    chunk names a document it was not given: the store would refuse the batch with a
    database error, and a clash with a stored chunk is found by `explain_refused`."""
    given = {d.id for d in docs}
    seen: dict[str, str] = {}
    for chunk in chunks:
        if chunk.doc_id not in given:
            raise TypeValidationError(
                f"{stage_name(stage)} made chunk {chunk.id!r} for document {chunk.doc_id!r}, "
                "which is not one of the documents it was given: a chunk's doc_id is its document's id"
            )
        if chunk.id in seen:
            raise TypeValidationError(
                f"{stage_name(stage)} gave the id {chunk.id!r} to two chunks (of documents "
                f"{seen[chunk.id]!r} and {chunk.doc_id!r}): {UNIQUE_IDS}"
            )
        seen[chunk.id] = chunk.doc_id


UNIQUE_IDS = 'a chunk id must be unique in the whole index; make it from the document\'s id (f"{doc.id}_{n}")'


def explain_refused(exc: Exception, store: Any, docs: Sequence[Document], chunks: Sequence[Chunk]) -> None:
    """Raise TypeValidationError from `exc`, a store's refusal of a batch, when the reason is
    a chunk id that a stored chunk of another document already has (a chunker's ids that
    clash across batches; `check_chunk_ids` finds a clash inside one). Asked only after a
    write failed: it costs a read."""
    if isinstance(exc, PlmUserError):
        return
    ids = {d.id for d in docs}
    try:
        stored = store.get_chunks([c.id for c in chunks])
    except Exception:  # noqa: BLE001 - the store's own error is the one to see
        return
    for chunk in chunks:
        other = stored.get(chunk.id)
        if other is not None and other.doc_id not in ids:
            raise TypeValidationError(
                f"chunk {chunk.id!r} of document {chunk.doc_id!r}: document {other.doc_id!r} "
                f"already has a chunk with that id; {UNIQUE_IDS}"
            ) from exc
