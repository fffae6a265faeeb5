"""A folder of documents in any format some converter reads: Markdown, PDF, Word, HTML,
notebooks, reStructuredText, plain text, and whatever format a plugin adds.

Listing, exclusions, symlinks, failures and sync are `markdown_dir`'s; each file goes to the
converter of its extension (`plm.Converter`; a third party's wins over a built-in), whose
Markdown text, title and metadata become the document. A file no converter reads is counted
by extension (`skipped 183 .png: no converter`), never read. A Markdown file's id is its path
without the extension, as `markdown_dir`'s; any other keeps it (`papers/attention.pdf`), so
`guide.md` and `guide.pdf` never collide. Every document also has `format` (`pdf`) and
`folder` (each folder above it: `["deployment", "deployment/helm"]`) in its metadata, so
`--filter folder=deployment` searches one folder, subfolders included.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError

from plm import (
    ConfigError,
    Converted,
    Converter,
    Document,
    LoadFailure,
    PlmUserError,
    default_registry,
    hookimpl,
)
from plm.languages import document_language
from plm_plugins.converters.markdown import MarkdownConverter
from plm_plugins.loaders.files import BadInput, EmptyInput, read_file, shown
from plm_plugins.loaders.markdown_dir import _SKIP, FilesConfig, MarkdownLoader

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from plm import Registry


class FolderLoader(MarkdownLoader):
    """A folder (or one file) of documents in any format a converter reads -> one document
    per file, sorted by path; files no converter reads are counted, not read."""

    name = "folder"
    needs = ("settings", "converters")  # type: ignore[assignment]
    converters: Any  # name -> Registration (plm_index.assembly gives every installed converter)

    class Config(FilesConfig):
        pattern: str = Field("**/*", min_length=1, description="glob inside the folder; `*`: the top folder only")
        ids: Literal["path", "stem"] = Field(
            "path",
            description="document id: the path from the folder (a Markdown file's without its extension), "
            "or the file stem",
        )
        max_file_mb: float = Field(50, gt=0, description="larger files are reported and skipped, never read")
        language: str = Field(
            "none",
            pattern=r"^(auto|none|[a-z]{2})$",
            description='each document\'s `language` (filter on it: `language=zh`): "auto" detects it from '
            'the text (py3langid; `plm[languages]`), "none" leaves it out, an ISO 639-1 code ("de") sets it; '
            "a `language` or `lang` in the file's own metadata (front matter) wins",
        )
        converters: dict[str, dict[str, Any]] = Field(
            default_factory=dict,
            description="settings for converters, by name: `{ pdf = { max_pages = 3000 } }`",
        )

    config: Config  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._table: dict[str, Converter] | None = None
        self._unread: dict[str, list[str]] = {}
        self._listing: Path | None = None

    # ------------------------------------------------------------ converters
    def _registrations(self) -> Mapping[str, Any]:
        if self.converters is None:  # built in Python, not by a config's assembly
            self.converters = {r.name: r for r in default_registry().all() if issubclass(r.cls, Converter)}
        return self.converters  # type: ignore[no-any-return]

    def _by_extension(self) -> dict[str, Converter]:
        """Extension -> converter: built-ins first, so a third party's replaces one."""
        if self._table is None:
            regs = sorted(self._registrations().values(), key=lambda r: (_third_party(r.cls), r.name))
            table: dict[str, Converter] = {}
            for reg in regs:
                try:
                    converter = reg.cls(**self.config.converters.get(reg.name, {}))
                except ValidationError as err:
                    raise ConfigError(f"[index.load] converters.{reg.name}: {_first_error(err)}") from None
                table.update(dict.fromkeys((ext.lower() for ext in reg.cls.extensions), converter))
            self._table = table
        return self._table

    def check(self) -> None:
        known = self._registrations()
        unknown = sorted(set(self.config.converters) - set(known))
        if unknown:
            raise ConfigError(
                f"[index.load] converters: no converter named {', '.join(map(repr, unknown))}; "
                f"installed: {', '.join(sorted(known))}"
            )
        self._by_extension()

    def reads_with(self) -> dict[str, str]:
        regs = self._registrations()
        return {c.label: f"{regs[c.label].package} {regs[c.label].version} {c.version()}".strip()
                for c in sorted(set(self._by_extension().values()), key=lambda c: c.label)}  # fmt: skip

    def _converter_for(self, name: str) -> Converter | None:
        suffix = os.path.splitext(name)[1].lower()
        return self._by_extension().get(suffix) if suffix else None

    # --------------------------------------------------------------- listing
    def unread(self) -> dict[str, list[str]]:
        return self._unread

    def _listed(self, root: Path) -> tuple[list[str], list[LoadFailure]]:
        self._unread, self._listing = {}, Path(os.path.abspath(root))
        try:
            return super()._listed(root)
        except PlmUserError as err:
            if not self._unread:
                raise
            counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(self._unread.items(), key=lambda kv: -len(kv[1])))
            raise PlmUserError(
                f"{shown(root)}: no file here has a converter ({counts}); `plm plugins` lists the converters"
            ) from err
        finally:
            self._listing = None

    def _matcher(self) -> Callable[[tuple[str, ...]], bool]:
        matches = super()._matcher()

        def wanted(parts: tuple[str, ...]) -> bool:
            if not matches(parts):
                return False
            if self._converter_for(parts[-1]) is not None:
                return True
            if self._listing is not None and not self._excluded(parts):
                ext = shown(os.path.splitext(parts[-1])[1].lower()) or "(no extension)"
                if not ext.isprintable():  # a name may hold any byte: never a raw one in a summary line
                    ext = ext.encode("unicode_escape").decode("ascii")
                self._unread.setdefault(ext, []).append(shown("/".join(parts)))
            return False

        return wanted

    # -------------------------------------------------------------- reading
    def _id(self, path: Path, root: str) -> str:
        if self.config.ids == "path" and path.suffix.lower() not in MarkdownConverter.extensions:
            try:  # any other format keeps its extension: `guide.md` and `guide.pdf` never collide
                return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
            except ValueError:
                return path.name
        return super()._id(path, root)

    def _document(self, path: Path, doc_id: str) -> Document:
        converter = self._converter_for(path.name)
        if converter is None:
            known = ", ".join(sorted(self._by_extension()))
            raise BadInput(f"no converter reads {path.suffix or 'files without an extension'} (installed: {known})")
        data = read_file(path, self.config.max_file_mb, _SKIP)
        try:
            converted = converter.convert(data, shown(path))
        except PlmUserError as err:
            raise BadInput(str(err)) from None
        except Exception as err:  # a library's error on a hostile or odd file: this file only
            raise BadInput(
                f"the {converter.label} converter failed ({type(err).__name__}: {str(err)[:300]}); {_SKIP}"
            ) from None
        if not isinstance(converted, Converted):
            raise BadInput(f"the {converter.label} converter returned a {type(converted).__name__}, not plm.Converted")
        if not converted.text.strip():
            raise EmptyInput(f"empty (no text in it); add text or {_SKIP}")
        where = Path(os.path.abspath(path)).as_posix()
        metadata = dict(converted.metadata)
        # Set last, so the loader's own keys always say what and where the file is.
        metadata["format"] = path.suffix.lower().lstrip(".")
        parts = doc_id.split("/")[:-1] if self.config.ids == "path" else []
        if parts:
            metadata["folder"] = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        metadata["path"] = where
        language = document_language(converted.text, metadata, self.config.language)
        if language is not None:
            metadata["language"] = language
        return Document(
            id=doc_id, text=converted.text, title=converted.title or path.stem, path=where, metadata=metadata
        )


def _third_party(cls: type) -> bool:
    return cls.__module__.split(".")[0] != "plm_plugins"


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(FolderLoader)
