"""The checks of what reads files: a converter (`check_converter`, one format -> Markdown
text) and a loader (`check_loader`, a path -> documents, with the file listing a sync reads
by)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plm.testing.corpus import MARKDOWN_DOCS
from plm.testing.rules import Rules, checking
from plm_core.errors import PlmUserError
from plm_core.interfaces import Converter, Loader
from plm_core.records import Converted, Document, LoadFailure


def check_converter(converter: Converter, data: bytes, path: str = "", unusable: bytes | None = None) -> None:
    """`data`: a file of the converter's format holding some text; `path` its name (default
    `sample` plus the first extension); `unusable`, if given, bytes of that format it cannot
    use (a damaged file). Checked: `extensions` (lower case, with the dot), a `plm.Converted`
    with text and JSON metadata, the same every time and whatever the path is, a string
    `version()`, and `unusable` refused with a PlmUserError that says why."""
    with checking("converters") as rules:
        exts = converter.extensions
        rules.expect(
            isinstance(exts, tuple) and exts and all(isinstance(e, str) and e.startswith(".") for e in exts),
            "`extensions` names the files it reads, with the dot: ('.pdf',) (none: no file reaches it)",
            f"got {exts!r}",
        )
        rules.expect(all(e == e.lower() for e in exts), "`extensions` are lower case", f"got {exts!r}")
        path = path or "sample" + (exts[0] if exts else "")
        converter.ensure_warm()
        first = converter.convert(data, path)
        rules.require(isinstance(first, Converted), "convert returns a plm.Converted", repr(type(first)))
        _check_converted(rules, first)
        with rules.part("converting again"):
            rules.expect(converter.convert(data, path) == first, "the same bytes give the same text and structure")
            elsewhere = converter.convert(data, f"elsewhere/other{Path(path).suffix}")
            rules.expect(elsewhere == first, "the result does not depend on `path` (it names the file in messages)")
            rules.expect(converter.run(data) == first, 'run(data) is convert(data, "")')
        with rules.part("version"):
            version = converter.version()
            rules.expect(isinstance(version, str), "version() is a string", repr(version))
            fresh = type(converter)(converter.config)
            rules.expect(fresh.version() == version, "a new instance with the same config has the same version()")
        if unusable is not None:
            _check_unusable(rules, converter, unusable, path)


def _check_converted(rules: Rules, out: Converted) -> None:
    rules.expect(isinstance(out.text, str) and out.text.strip(), "a file with text gives text", repr(out.text)[:80])
    rules.expect(isinstance(out.title, str), "`title` is a string ('': the loader's own rule)", repr(out.title))
    rules.expect(isinstance(out.metadata, Mapping), "`metadata` is a mapping", repr(type(out.metadata)))
    try:
        json.dumps(dict(out.metadata))
    except (TypeError, ValueError) as err:
        rules.expect(False, "`metadata` is JSON (filterable, as front matter is)", f"{err}")


def _check_unusable(rules: Rules, converter: Converter, data: bytes, path: str) -> None:
    try:
        got = converter.convert(data, path)
    except PlmUserError as err:
        rules.expect(str(err).strip(), "an unusable file's PlmUserError says why", repr(err))
        return
    except Exception as err:  # noqa: BLE001 - the rule is about which error
        rules.expect(
            False, "a file it cannot use raises PlmUserError saying why", f"raised {type(err).__name__}: {err}"
        )
        return
    rules.expect(False, "a file it cannot use raises PlmUserError saying why", f"converted it to {got!r}"[:200])


def _markdown_folder() -> Path:
    """MARKDOWN_DOCS as files, one in a subfolder, and a file no loader of Markdown reads."""
    folder = Path(tempfile.mkdtemp(prefix="plm-testing-"))
    for i, doc in enumerate(MARKDOWN_DOCS):
        path = folder / ("guide" if i == 2 else "") / f"{doc.id}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(doc.text, encoding="utf-8")
    (folder / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return folder


def check_loader(loader: Loader, source: str | Path | None = None) -> None:
    """`source`: what the loader reads (a folder or a file) holding a few documents
    (default: `MARKDOWN_DOCS` written as `.md` files into a temporary folder, one in a
    subfolder). Checked: documents a store can hold (`plm.documents.check_document`), ids unique, the
    same documents in the same order every time, a missing source refused with a
    PlmUserError, and, when `files()` lists, absolute paths whose `load_files` gives the
    documents `load` gives, a file alone giving its own."""
    made = source is None
    root = _markdown_folder() if source is None else Path(source)
    try:
        with checking("loaders") as rules:
            _check_loader(rules, loader, str(root))
    finally:
        if made:
            shutil.rmtree(root, ignore_errors=True)


def _loaded(rules: Rules, got: object, what: str) -> list[Document]:
    rules.require(
        isinstance(got, tuple) and len(got) == 2 and all(isinstance(x, list) for x in got),
        f"{what} returns (documents, failures), two lists",
        repr(got)[:200],
    )
    docs: list[Any] = got[0]  # type: ignore[index]
    failures: list[Any] = got[1]  # type: ignore[index]
    rules.require(all(isinstance(d, Document) for d in docs), f"{what} gives plm.Document records")
    rules.expect(all(isinstance(f, LoadFailure) for f in failures), f"{what} gives failures as plm.LoadFailure")
    return list(docs)


def _check_loader(rules: Rules, loader: Loader, source: str) -> None:
    from plm_index.documents import check_document

    bad = [f for f in loader.selection_fields if f not in type(loader.config).model_fields]
    rules.expect(not bad, "`selection_fields` names keys of the loader's Config", f"{bad}")
    loader.ensure_warm()
    docs = _loaded(rules, loader.load(source), "load(source)")
    rules.require(docs, "the source's documents are found", f"load({source!r}) gave none")
    for doc in docs:
        try:
            check_document(doc)
        except PlmUserError as err:
            rules.expect(False, "each document can be stored as given (plm.documents.check_document)", f"{err}")
    ids = [d.id for d in docs]
    rules.expect(len(set(ids)) == len(ids), "document ids are unique", f"{ids}")
    with rules.part("loading again"):
        again = _loaded(rules, loader.load(source), "load(source)")
        rules.expect(again == docs, "the same source gives the same documents, in the same order")
    with rules.part("a missing source"):
        try:
            loader.load(str(Path(source) / "plm-testing-missing"))
        except PlmUserError:
            pass
        else:
            rules.expect(False, "a missing source raises PlmUserError (an ingest stops before changing anything)")
    with rules.part("what else decides the documents"):
        rules.expect(isinstance(loader.unread(), Mapping), "unread() is a mapping: extension -> paths")
        with_ = loader.reads_with()
        rules.expect(
            isinstance(with_, Mapping) and all(isinstance(v, str) for v in with_.values()),
            "reads_with() is a mapping of strings (each converter's version)",
            repr(with_),
        )
    if Path(source).is_dir():
        with rules.part("files() and load_files()"):
            _check_listing(rules, loader, source, docs)


def _check_listing(rules: Rules, loader: Loader, source: str, docs: list[Document]) -> None:
    listed = loader.files(source)
    if listed is None:  # this loader reads the whole source every sync
        return
    rules.require(
        isinstance(listed, tuple) and len(listed) == 2 and all(isinstance(x, list) for x in listed),
        "files(folder) returns (paths, failures), two lists (or None)",
        repr(listed)[:200],
    )
    files, _ = listed
    rules.expect(all(Path(f).is_absolute() for f in files), "files(folder) lists absolute paths", f"{files[:3]}")
    rules.expect(loader.files(source) == listed, "files(folder) lists the same files every time")
    every = _loaded(rules, loader.load_files(source, files), "load_files(root, files)")
    rules.expect(
        every == docs,
        "load_files(root, files(root)) gives the documents load(root) gives (ids relative to root)",
        f"load_files ids {[d.id for d in every]}, load ids {[d.id for d in docs]}",
    )
    by_id = {d.id: d for d in docs}
    for path in files:
        alone = _loaded(rules, loader.load_files(source, [path]), "load_files(root, [file])")
        rules.expect(
            all(by_id.get(d.id) == d for d in alone),
            "a file read alone gives the document it gives in a whole load (a sync reads only changed files)",
            f"{path}: {[d.id for d in alone]}",
        )
